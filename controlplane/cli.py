"""`fabricctl`: inspect and edit one switch over P4Runtime, by names from its P4Info.

    fabricctl --switch 127.0.0.1:9559[,DEVICE_ID] tables
    fabricctl --switch ... table add ipv4_lpm hdr.ipv4.dstAddr=10.0.0.0/8 \\
        action=set_nhop dmac=00:00:00:00:00:02 port=2
    fabricctl --topology running.yaml --switch l1 --json table dump ipv4_lpm
    fabricctl --topology running.yaml tables          # every switch of the fabric
    fabricctl --topology running.yaml --switch l1 routes   # kernel routes vs P4 entries

In `table add|modify|delete`, ``key=value`` words before ``action=`` are match keys (a value
of ``*`` is don't-care), words after it are action params; ``priority=N``, ``member=ID`` and
``group=ID`` may appear anywhere. Every bad input prints one line on stderr and exits 2, with
nothing written to the switch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

# gRPC's core logs each refused TLS handshake on stderr at info level, before fabricctl's own
# error line says why; it reads the setting once, when grpc is first imported (below).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from controlplane.addresses import (
    GRPC_BASE,
    THRIFT_BASE,
    SwitchAddress,
    topology_addresses,
    topology_switch,
)
from controlplane.admin import DEFAULT_ADMIN_PORT, AdminChannel
from controlplane.cli_commands import (
    UsageError,
    cmd_concern,
    cmd_counters,
    cmd_groups,
    cmd_mcast,
    cmd_pipeline,
    cmd_registers,
    cmd_table,
    cmd_tables,
)
from controlplane.cli_diagnose import explain
from controlplane.cli_fabric import add_parser as add_fabric_parser
from controlplane.cli_fabric import cmd_fabric
from controlplane.cli_format import render_table
from controlplane.cli_routes import add_parser as add_routes_parser
from controlplane.cli_routes import cmd_routes
from controlplane.connection import SwitchConnection
from controlplane.errors import ControlPlaneError
from controlplane.roles import role_config
from controlplane.tls import add_tls_options, tls_from_args

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        raise UsageError(f"{message} (try '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fabricctl", description="P4Runtime table management for one switch.")
    p.add_argument("--switch", help="ADDR[,DEVICE_ID] or, with --topology, a switch name")
    p.add_argument("--topology", help="topology file giving each switch's gRPC address")
    p.add_argument("--device-id", type=int, default=None)
    p.add_argument("--election-id", default="0,1", help="HIGH,LOW or LOW (default 0,1)")
    p.add_argument("--role", default="", help="P4Runtime role to arbitrate and write under "
                   "(default: the default role, full pipeline access)")
    p.add_argument("--role-entities", default=None, metavar="NAME,...",
                   help="with --role, on p4sim: the P4 entities the role may write (a "
                   "p4sim.v1.RoleConfig; default: all, or for 'fabric' the controller's)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the switch")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_tls_options(p)
    p.add_argument("--admin", help="HOST:PORT of the switch's admin channel (Thrift port for "
                   f"BMv2; default: the switch's host, port {DEFAULT_ADMIN_PORT})")
    p.add_argument("--admin-tool", choices=["auto", "p4sim", "bmv2"], default="auto",
                   help="admin CLI: p4sim ctl or simple_switch_CLI (default: auto)")
    p.add_argument("--grpc-base", type=int, default=GRPC_BASE,
                   help="with --topology: switch N listens on 127.0.0.1:(BASE+N)")
    p.add_argument("--thrift-base", type=int, default=THRIFT_BASE,
                   help="with --topology: switch N's admin channel is 127.0.0.1:(BASE+N)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    sub.add_parser("tables", help="list tables")
    t = sub.add_parser("table", help="show, dump or edit one table")
    t.add_argument("op", choices=["show", "dump", "add", "modify", "delete", "default"])
    t.add_argument("name")
    t.add_argument("words", nargs="*", help="key=value, action=NAME, param=value, priority=N")
    g = sub.add_parser("groups", help="action profile members and groups")
    g.add_argument("profile", nargs="?")
    c = sub.add_parser("counters", help="read counters (indirect or direct)")
    c.add_argument("name", nargs="?")
    r = sub.add_parser("registers", help="read or write a register")
    r.add_argument("op", choices=["read", "write"])
    r.add_argument("name")
    r.add_argument("index", nargs="?", type=_int)
    r.add_argument("value", nargs="?")
    m = sub.add_parser("mcast", help="multicast groups and clone sessions")
    m.add_argument("op", nargs="?", choices=["show", "add", "modify", "delete"], default="show")
    m.add_argument("group", nargs="?", type=_int)
    m.add_argument("replicas", nargs="*", help="PORT[:INSTANCE] ...")
    pl = sub.add_parser("pipeline", help="push or show the pipeline")
    pl.add_argument("op", choices=["push", "show"])
    pl.add_argument("p4info", nargs="?")
    pl.add_argument("json_file", nargs="?", metavar="json")
    q = sub.add_parser("queues", help="egress queue rate/depth (admin channel)")
    q.add_argument("--port", type=int)
    q.add_argument("--rate", type=int, help="packets per second (0 = unlimited)")
    q.add_argument("--depth", type=int, help="packets")
    sub.add_parser("ecn", help="ECN marking and feedback-priority tables (fabric.p4)")
    sub.add_parser("int", help="INT watchlist, sink, transit and report tables (fabric.p4)")
    add_fabric_parser(sub)
    add_routes_parser(sub)
    sh = sub.add_parser("shell", help="open p4runtime-shell on the switch")
    sh.add_argument("target", nargs="?", help="switch name (with --topology) or address")
    return p


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: '{text}'") from None


def role_options(args: argparse.Namespace, default_config: Any = None) -> dict[str, Any]:
    """``role`` and ``role_config`` for a SwitchConnection/Fabric from --role and
    --role-entities (a role config needs a role: the default role has full access)."""
    if args.role_entities is not None and not args.role:
        raise UsageError("--role-entities needs --role NAME")
    config = default_config if args.role else None
    if args.role_entities is not None:
        names = [n.strip() for n in args.role_entities.split(",") if n.strip()]
        config = role_config(names, packet_replication=True, receives_packet_ins=True,
                             can_send_packet_outs=True)
    return {"role": args.role, "role_config": config}


def _election_id(text: str) -> tuple[int, int]:
    try:
        parts = [int(x, 0) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--election-id: not HIGH,LOW or LOW: '{text}'") from None
    if len(parts) == 1:
        return 0, parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise UsageError(f"--election-id: not HIGH,LOW or LOW: '{text}'")


def resolve_switch(args: argparse.Namespace, name: str | None = None) -> SwitchAddress:
    """The switch named by --switch (ADDR[,DEVICE_ID], or a name with --topology)."""
    spec = name or args.switch
    if not spec:
        raise UsageError("give --switch ADDR[,DEVICE_ID] (or --topology FILE --switch NAME)")
    if args.topology:
        return topology_switch(args.topology, spec, args.grpc_base, args.thrift_base)
    addr, _, dev = spec.partition(",")
    if ":" not in addr:
        raise UsageError(f"--switch: '{spec}' is not HOST:PORT[,DEVICE_ID] (a switch name "
                         "needs --topology)")
    try:
        device_id = int(dev) if dev else (args.device_id or 0)
    except ValueError:
        raise UsageError(f"--switch: bad device id '{dev}' in '{spec}'") from None
    return SwitchAddress(addr, addr, device_id)


def admin_channel(args: argparse.Namespace, sw: SwitchAddress) -> AdminChannel:
    host = sw.grpc_addr.rpartition(":")[0] or "127.0.0.1"
    addr = args.admin or sw.admin_addr or f"{host}:{DEFAULT_ADMIN_PORT}"
    return AdminChannel(addr, args.admin_tool)


def cmd_queues(args: argparse.Namespace, sw: SwitchAddress) -> Any:
    """Egress queue settings go over the admin channel: P4Runtime has none."""
    admin = admin_channel(args, sw)
    if args.rate is None and args.depth is None:
        stats = admin.stats()
        if args.json or not isinstance(stats, dict):
            return stats
        ports = stats.get("ports") or {}
        cols = sorted({k for p in ports.values() for k in p})
        table = render_table(["port", *cols], [[n, *(p.get(c, "") for c in cols)]
                                               for n, p in ports.items()])
        rest = "\n".join(f"{k}: {v}" for k, v in stats.items() if k != "ports")
        return f"{table}\n{rest}" if ports else f"(no ports)\n{rest}"
    done = []
    if args.rate is not None:
        admin.set_queue_rate(args.rate, args.port)
        done.append(f"rate {args.rate} pps")
    if args.depth is not None:
        admin.set_queue_depth(args.depth, args.port)
        done.append(f"depth {args.depth} packets")
    where = "every port" if args.port is None else f"port {args.port}"
    if args.json:
        return {"ok": True, "port": args.port, "rate": args.rate, "depth": args.depth}
    return f"queues of {where}: {', '.join(done)}"


def cmd_shell(args: argparse.Namespace) -> int:
    target = resolve_switch(args, args.target)
    high, low = _election_id(args.election_id)
    argv = [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", target.grpc_addr,
            "--device-id", str(target.device_id), "--election-id", f"{high},{low}"]
    tls = tls_from_args(args)
    if tls is not None:
        argv += tls.shell_args()
    os.execv(sys.executable, argv)
    return 0  # not reached


COMMANDS = {"tables": cmd_tables, "table": cmd_table, "groups": cmd_groups,
            "counters": cmd_counters, "mcast": cmd_mcast, "ecn": cmd_concern,
            "int": cmd_concern,
            "pipeline": cmd_pipeline, "routes": cmd_routes}


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "shell":
        return cmd_shell(args)
    if args.cmd == "fabric":
        return _emit(cmd_fabric(args), args.json)
    if args.topology and not args.switch:
        return run_fabric(args)
    return _emit(run_one(args, resolve_switch(args)), args.json)


def run_one(args: argparse.Namespace, target: SwitchAddress) -> Any:
    if args.cmd == "queues":
        return cmd_queues(args, target)
    election = _election_id(args.election_id)
    tls = tls_from_args(args)
    conn = SwitchConnection(target.grpc_addr, target.device_id, election, name=target.name,
                            reconnect=False, timeout=args.timeout, tls=tls, **role_options(args))
    try:
        with conn as sw:
            if args.cmd == "registers":
                return cmd_registers(sw, args, lambda: admin_channel(args, target))
            return COMMANDS[args.cmd](sw, args)
    except ControlPlaneError as err:
        raise explain(err, target, election, conn.primary_election_id, tls) from None


def run_fabric(args: argparse.Namespace) -> int:
    """--topology without --switch: the command on every switch of the fabric, in file order.
    The first failing switch stops the run (its error names it); switches before it keep
    what was written to them."""
    results: dict[str, Any] = {}
    for name, target in topology_addresses(args.topology, args.grpc_base,
                                           args.thrift_base).items():
        try:
            results[name] = run_one(args, target)
        except ControlPlaneError as err:
            done = f" (done on: {', '.join(results)})" if results else ""
            raise ControlPlaneError(f"switch {name}: {err}{done}") from None
    if args.json:
        return _emit(results, True)
    return _emit("\n".join(f"== {name} ==\n{out}" for name, out in results.items()), False)


def _emit(result: Any, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    elif result is not None:
        print(result)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except ControlPlaneError as err:
        print(f"fabricctl: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        print(f"fabricctl: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # argparse --help
        return int(exc.code or 0)


if __name__ == "__main__":
    sys.exit(main())
