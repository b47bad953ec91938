"""`p4sim`: the embedded target's command line (compile, switch, ctl).

Subcommands are imported lazily so that `p4sim switch` never loads the compiler: the switch
must run any BMv2 JSON, not depend on compiler internals.
"""

from __future__ import annotations

import gc
import sys

USAGE = """usage: p4sim {compile,switch,ctl,conformance,dropin} ...
  compile   compile a P4_16 v1model program to BMv2 JSON + P4Info (flags as p4c-bm2-ss)
  switch    run a BMv2-JSON software switch with a P4Runtime server (flags as simple_switch_grpc)
  ctl       runtime queue/port settings of a running switch (like simple_switch_CLI)
  conformance  run p4c STF packet tests (.p4 + .stf) on p4sim, real BMv2 or a mix
  dropin    write p4c-bm2-ss/simple_switch_grpc/simple_switch_CLI wrappers and p4.tmp into DIR"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "compile":
        from p4sim.compile import main as run
    elif cmd == "switch":
        # Start-up allocates many long-lived objects (gRPC, protobuf, generated code) and no
        # cycles worth collecting: the switch turns the collector back on once it is up.
        gc.disable()
        from p4sim.switch.main import main as run
    elif cmd == "ctl":
        from p4sim.switch.ctl import main as run
    elif cmd == "conformance":
        from p4sim.conformance.main import main as run
    elif cmd == "dropin":
        from p4sim.dropin import main as run
    else:
        print(f"p4sim: error: unknown command '{cmd}' (expected compile, switch, ctl, "
              "conformance or dropin)",
              file=sys.stderr)
        return 2
    return int(run(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
