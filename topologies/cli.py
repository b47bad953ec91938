"""`cellfabric`: the project's main command.

    cellfabric run [...]        bring up an emulated fabric, run a workload, report
    cellfabric host send|recv|collect ...   end-host programs (run inside Mininet hosts)
"""

from __future__ import annotations

import sys

USAGE = """usage: cellfabric {run,host} ...
  run     bring up an emulated fabric, run traffic through it, print and save a report
  host    end-host programs: send, recv, collect (started by the runner inside each host)"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "run":
        from topologies.smoke import main as run
    elif cmd == "host":
        try:
            from hosts.cli import main as run
        except ImportError:
            print("cellfabric: error: the host programs are not built yet", file=sys.stderr)
            return 2
    else:
        print(f"cellfabric: error: unknown command '{cmd}' (expected run or host)",
              file=sys.stderr)
        return 2
    return int(run(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
