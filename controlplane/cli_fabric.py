"""`fabricctl fabric up|diff|status`: the whole fabric of a topology, through FabricController.

    fabricctl --topology topologies/leaf-spine.yaml fabric up [--down l1-s1 ...]
    fabricctl --topology ... fabric diff        # what `up` would write, writing nothing
    fabricctl --topology ... fabric status      # per switch: reachable, pipeline, pending

Switch addresses come from the topology (see controlplane.addresses: the runner's gRPC/admin
port bases plus each switch's device id, overridable with --grpc-base/--thrift-base). Links
given with --down are planned around, as after a failure.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from controlplane.addresses import topology_addresses
from controlplane.admin import AdminChannel
from controlplane.cli_commands import UsageError
from controlplane.cli_format import render_table
from controlplane.errors import ControlPlaneError
from controlplane.fabric import Fabric
from controlplane.tls import tls_from_args

DEFAULT_P4INFO = Path("build/fabric.p4info.txtpb")
DEFAULT_JSON = Path("build/fabric.json")


def add_parser(sub: Any) -> None:
    f = sub.add_parser("fabric", help="bring the whole fabric of --topology to its plan")
    f.add_argument("op", choices=["up", "diff", "status"])
    f.add_argument("--p4info", type=Path, default=DEFAULT_P4INFO)
    f.add_argument("--bmv2-json", type=Path, default=DEFAULT_JSON)
    f.add_argument("--down", action="append", default=[], metavar="LINK",
                   help="a link (a-b) to plan around; repeatable")
    f.add_argument("--no-queues", action="store_true", help="do not set queue rates/depths")


def _load(args: argparse.Namespace) -> tuple[Any, Fabric, dict[str, str]]:
    if not args.topology:
        raise UsageError("fabric: needs --topology FILE")
    from topologies.catalog import resolve_topology
    from topologies.model import TopologyError

    try:
        topo = resolve_topology(args.topology)
    except TopologyError as err:
        raise UsageError(str(err)) from None
    for f in (args.p4info, args.bmv2_json):
        if not f.is_file():
            raise UsageError(f"fabric: no such file: {f} (compile p4src/fabric.p4 first, or "
                             "give --p4info/--bmv2-json)")
    addrs = topology_addresses(args.topology, args.grpc_base, args.thrift_base)
    from controlplane.cli import role_options
    from controlplane.fabric_controller import fabric_role_config

    fabric = Fabric({n: (a.grpc_addr, a.device_id) for n, a in addrs.items()},
                    _election(args), reconnect=False, timeout=args.timeout,
                    tls=tls_from_args(args), **role_options(args, fabric_role_config()))
    admin = {n: a.admin_addr or "" for n, a in addrs.items()}
    return topo, fabric, admin


def _election(args: argparse.Namespace) -> tuple[int, int]:
    from controlplane.cli import _election_id

    return _election_id(args.election_id)


def cmd_fabric(args: argparse.Namespace) -> Any:
    from controlplane.fabric_controller import FabricController
    from controlplane.fabric_plan import QueuePlan

    topo, fabric, admin = _load(args)
    for link in args.down:
        try:
            topo.link(link)
        except (KeyError, ValueError) as err:
            raise UsageError(f"fabric: --down {link}: {err}") from None

    def set_queue(switch: str, queue: QueuePlan) -> None:
        channel = AdminChannel(admin[switch], args.admin_tool)
        channel.set_queue_rate(queue.line_pps, queue.port)
        channel.set_queue_depth(queue.depth, queue.port)

    with fabric:
        messages: list[str] = []
        ctl = FabricController(topo, fabric, args.p4info, args.bmv2_json,
                               queue_setter=None if args.no_queues else set_queue,
                               log=messages.append)
        for link in args.down:
            lk = topo.link(link)
            ctl.down.add(frozenset((lk.a, lk.b)))
        if args.op == "up":
            diffs = ctl.up()
        elif args.op == "diff":
            diffs = _diff_or_empty(ctl, fabric)
        else:
            return _status(ctl, fabric, args.json)
    rows = {name: {"insert": len(d.inserts), "modify": len(d.modifies),
                   "delete": len(d.deletes)} for name, d in diffs.items()}
    if args.json:
        return rows
    verb = "wrote" if args.op == "up" else "would write"
    total = sum(sum(r.values()) for r in rows.values())
    table = render_table(["switch", "insert", "modify", "delete"],
                         [[n, r["insert"], r["modify"], r["delete"]] for n, r in rows.items()])
    return f"{table}\nfabric {args.op}: {verb} {total} updates on {len(rows)} switches"


def _diff_or_empty(ctl: Any, fabric: Fabric) -> Any:
    missing = [c.name for c in fabric if not _has_pipeline(c)]
    if missing:
        raise ControlPlaneError(f"fabric diff: no pipeline on {', '.join(missing)} (run "
                                "`fabric up` first)")
    return ctl.diff()


def _has_pipeline(conn: Any) -> bool:
    try:
        conn.index  # noqa: B018 - raises NoPipelineError
        return True
    except ControlPlaneError:
        return False


def _status(ctl: Any, fabric: Fabric, as_json: bool) -> Any:
    loaded = {c.name: _has_pipeline(c) for c in fabric}
    pending: dict[str, int | None] = dict.fromkeys(loaded)
    if all(loaded.values()):
        pending = {n: d.writes for n, d in ctl.diff().items()}
    rows = {c.name: {"addr": c.addr, "device_id": c.device_id, "primary": c.is_primary,
                     "pipeline": loaded[c.name], "pending_writes": pending[c.name]}
            for c in fabric}
    if as_json:
        return rows
    return render_table(
        ["switch", "address", "device", "primary", "pipeline", "pending writes"],
        [[n, r["addr"], r["device_id"], r["primary"], r["pipeline"],
          "?" if r["pending_writes"] is None else r["pending_writes"]] for n, r in rows.items()])
