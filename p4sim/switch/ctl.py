"""`p4sim ctl`: runtime queue/port settings of a running p4sim switch, like simple_switch_CLI.

    p4sim ctl [--thrift-port N | --addr HOST:PORT] set_queue_rate PPS [PORT [PRIORITY]]
    p4sim ctl ... set_queue_depth PKTS [PORT] | set_port_rate PPS PORT [BELOW_PRIORITY]
    p4sim ctl ... port_down PORT | port_up PORT | stats
    p4sim ctl ... register_read NAME INDEX | register_write NAME INDEX VALUE

Without a command, commands are read from standard input one per line (as simple_switch_CLI
does when piped).
"""

from __future__ import annotations

import argparse
import json
import sys

from p4sim.switch.admin import COMMANDS, DEFAULT_PORT, request


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="p4sim ctl", description=__doc__.splitlines()[0])
    ap.add_argument("--thrift-port", type=int, default=DEFAULT_PORT,
                    help="the switch's admin port (default %(default)s)")
    ap.add_argument("--thrift-ip", default="127.0.0.1")
    ap.add_argument("--addr", help="HOST:PORT of the switch's admin channel")
    ap.add_argument("command", nargs="?", help=" | ".join(COMMANDS))
    ap.add_argument("args", nargs="*")
    ns = ap.parse_args(argv)
    host, port = ns.thrift_ip, ns.thrift_port
    if ns.addr:
        host, _, p = ns.addr.rpartition(":")
        try:
            port = int(p)
        except ValueError:
            print(f"p4sim ctl: error: bad --addr '{ns.addr}' (expected HOST:PORT)",
                  file=sys.stderr)
            return 2
    if ns.command:
        lines = [[ns.command, *ns.args]]
    else:
        lines = [ln.split() for ln in sys.stdin if ln.strip() and not ln.startswith("#")]
    status = 0
    for words in lines:
        try:
            reply = request((host or "127.0.0.1", port), words[0], words[1:])
        except OSError as e:
            print(f"p4sim ctl: error: cannot reach switch at {host}:{port}: {e.strerror or e}",
                  file=sys.stderr)
            return 1
        if not reply.get("ok"):
            print(f"p4sim ctl: error: {reply.get('error')}", file=sys.stderr)
            status = 1
        elif reply.get("result") is not None:
            print(json.dumps(reply["result"], indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
