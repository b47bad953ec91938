"""`cellfabric`: the project's main command, one entry per subcommand (``COMMANDS``): its
module and function, and its line of the usage text.

    cellfabric run [TOPOLOGY] [...]   bring up an emulated fabric, run a workload, report
    cellfabric sim [TOPOLOGY] [...]   the same fabric and hosts in simulated time
    cellfabric host send|recv|collect ...   end-host programs (run inside Mininet hosts)
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import NamedTuple


class Command(NamedTuple):
    entry: str  # "module:function"; the function takes the remaining argv
    help: str


COMMANDS = {
    "run": Command("cellfabric.run_cli:run_main",
                   "bring up an emulated fabric, run traffic through it, print and save a report"),
    "sim": Command("cellfabric.sim.cli:sim_main",
                   "the same fabric.p4, controller and hosts on a discrete-event engine "
                   "(virtual time)"),
    "cli": Command("cellfabric.run_cli:cli_main", "bring up a fabric and open the Mininet CLI"),
    "topo": Command("cellfabric.topo_cli:main",
                    "write a generated topology (fat-tree, clos, leaf-spine) as YAML"),
    "sweep": Command("cellfabric.sweep.cli:sweep_main",
                     "a grid of experiments (SPEC.yaml) on local processes or a Dask cluster, "
                     "resumable"),
    "smoke": Command("cellfabric.emulation.smoke:main",
                     "two hosts through the harness's trivial forwarder, measured with ping"),
    "trace": Command("cellfabric.trace_cli:main",
                     "follow sampled cells hop by hop through a run's traces (sim "
                     "--trace-sample N)"),
    "report": Command("cellfabric.report_cli:main",
                      "write a run's (or a sweep's) results as one self-contained HTML page"),
    "host": Command("hosts.cli:main",
                    "end-host programs: send, recv, collect (started by the runner inside each "
                    "host)"),
}


# commands whose objects are left out of the garbage collector's pass at exit (see main)
FREEZE_AT_EXIT = {"sim"}


def usage() -> str:
    lines = [f"usage: cellfabric {{{','.join(COMMANDS)}}} ..."]
    lines += [f"  {name:<7} {cmd.help}" for name, cmd in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    cmd = COMMANDS.get(name)
    if cmd is None:
        print(f"cellfabric: error: unknown command '{name}' (expected "
              f"{', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module, _, function = cmd.entry.partition(":")
    run = getattr(importlib.import_module(module), function)
    code = int(run(rest) or 0)
    if argv is None and name in FREEZE_AT_EXIT:
        # The process ends here: the collection Python runs at exit would walk every object
        # the run built (a k=4 simulation: 1.3 CPU s) to free memory the OS takes back anyway.
        gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
