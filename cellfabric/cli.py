"""`cellfabric`: the project's main command.

    cellfabric run [TOPOLOGY] [...]   bring up an emulated fabric, run a workload, report
    cellfabric cli [TOPOLOGY]         the fabric up, with the Mininet CLI to explore it
    cellfabric sim [TOPOLOGY] [...]   the same fabric and hosts in simulated time
    cellfabric topo fat-tree|clos|leaf-spine ...   write a generated topology as YAML
    cellfabric sweep SPEC.yaml        a grid of experiments on local processes or a Dask cluster
    cellfabric smoke                  two hosts through the trivial forwarder (harness check)
    cellfabric host send|recv|collect ...   end-host programs (run inside Mininet hosts)
"""

from __future__ import annotations

import sys

USAGE = """usage: cellfabric {run,sim,cli,topo,sweep,host,smoke} ...
  run     bring up an emulated fabric, run traffic through it, print and save a report
  sim     the same fabric.p4, controller and hosts on a discrete-event engine (virtual time)
  cli     bring up a fabric and open the Mininet CLI
  topo    write a generated topology (fat-tree, clos, leaf-spine) as YAML
  sweep   a grid of experiments (SPEC.yaml) on local processes or a Dask cluster, resumable
  smoke   two hosts through the harness's trivial forwarder, measured with ping
  host    end-host programs: send, recv, collect (started by the runner inside each host)"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "run":
        from cellfabric.run_cli import run_main as run
    elif cmd == "sim":
        from cellfabric.sim.cli import sim_main as run
    elif cmd == "cli":
        from cellfabric.run_cli import cli_main as run
    elif cmd == "topo":
        from cellfabric.topo_cli import main as run
    elif cmd == "sweep":
        from cellfabric.sweep.cli import sweep_main as run
    elif cmd == "smoke":
        from cellfabric.emulation.smoke import main as run
    elif cmd == "host":
        try:
            from hosts.cli import main as run
        except ImportError:
            print("cellfabric: error: the host programs are not built yet", file=sys.stderr)
            return 2
    else:
        print(f"cellfabric: error: unknown command '{cmd}' (expected run, sim, cli, topo, "
              "sweep, host or smoke)",
              file=sys.stderr)
        return 2
    return int(run(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
