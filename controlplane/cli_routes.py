"""`fabricctl routes`: a switch's learned kernel routes next to the fabric.p4 entries they became.

    fabricctl --topology t.yaml --switch l1 routes [--netns NS] [--port-map IF=PORT,...]
    fabricctl --topology t.yaml routes --netns 'nos-{switch}'   # every switch of the fabric

The kernel table is read from the switch's network namespace (default: one named after the
switch; ``{switch}`` in --netns is replaced by its name), the entries from the switch over
P4Runtime (ipv4_lpm, the spray selector's groups and members). Each route is shown with the
ports its next hops leave by and the entry and group ports it has on the switch; a route with
no entry, an entry whose ports differ from its route's and an entry with no route are flagged.
Routes the agent leaves out by design (connected subnets, next hops on no front-panel port) are
shown as skipped, with why.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from controlplane.cli_commands import UsageError
from controlplane.cli_format import render_table
from controlplane.entities import ActionProfileGroup, ActionProfileMember, TableEntry
from controlplane.fabric_plan import P_SELECTOR, T_LPM
from controlplane.kernel_routes import KernelRoute, read_routes
from controlplane.route_entries import RouteMapper

OK, NO_ENTRY, PORTS_DIFFER, NO_ROUTE, SKIPPED = ("ok", "NO ENTRY", "PORTS DIFFER",
                                                 "ENTRY WITHOUT ROUTE", "skipped")
FLAGS = (NO_ENTRY, PORTS_DIFFER, NO_ROUTE)


def add_parser(sub: Any) -> None:
    r = sub.add_parser("routes", help="kernel routes of the switch's namespace next to the "
                       "fabric.p4 entries they became (the route agent's view)")
    r.add_argument("--netns", default="{switch}",
                   help="the switch's network namespace ({switch}: its name; the default)")
    r.add_argument("--port-map", default=None, metavar="IF=PORT,...",
                   help="interface -> front-panel port (default: interfaces named after "
                   "their port number: N or portN)")


@dataclass
class RouteRow:
    prefix: str
    kernel: str  # "bgp: via 10.0.0.1 dev 1, ..." or "-"
    kernel_ports: list[int]
    group: int | None
    entry_ports: list[int]
    status: str
    why: str = ""


def port_map(text: str | None, ifnames: set[str]) -> dict[str, int]:
    """--port-map, or by default the interfaces named after their port: ``N`` or ``portN``
    (the names `cellfabric run --routing bgp` gives its namespaces' TAP and host ports)."""
    if text is None:
        named = ((n, n.removeprefix("port")) for n in ifnames)
        return {n: int(num) for n, num in named if num.isdigit()}
    out: dict[str, int] = {}
    for item in filter(None, (w.strip() for w in text.split(","))):
        name, sep, port = item.partition("=")
        if not sep or not name or not port.isdigit():
            raise UsageError(f"routes: --port-map: {item!r} is not IFNAME=PORT")
        out[name] = int(port)
    return out


def switch_routes(sw) -> dict[str, tuple[int, list[int]]]:
    """prefix -> (group id, the group's ports) as the switch holds them."""
    member_port = {m.member_id: int(m.params.get("port", -1))
                   for m in sw.read(ActionProfileMember(profile=P_SELECTOR))}
    group_ports = {g.group_id: sorted(member_port.get(m.member_id, -1) for m in g.members)
                   for g in sw.read(ActionProfileGroup(profile=P_SELECTOR))}
    out: dict[str, tuple[int, list[int]]] = {}
    for e in sw.read(TableEntry(table=T_LPM)):
        m = e.match["hdr.ipv4.dst_addr"]
        gid = int(e.params.get("group_id", -1))
        prefix = f"{ipaddress.IPv4Address(int(m.value))}/{m.prefix_len}"
        out[prefix] = (gid, group_ports.get(gid, []))
    return out


def compare(table: Mapping[str, KernelRoute], ports_of: Mapping[str, int],
            entries: Mapping[str, tuple[int, list[int]]], switch: str) -> list[RouteRow]:
    mapper = RouteMapper(switch, ports_of, spray=False)
    rows: list[RouteRow] = []
    for prefix in sorted(set(table) | set(entries), key=ipaddress.ip_network):
        route, entry = table.get(prefix), entries.get(prefix)
        gid, entry_ports = entry if entry else (None, [])
        if route is None:
            rows.append(RouteRow(prefix, "-", [], gid, entry_ports, NO_ROUTE))
            continue
        hops = ", ".join(h.describe() for h in sorted(route.nexthops))
        kernel = f"{route.protocol}: {hops}"
        ports = mapper.ports_of(route)
        if isinstance(ports, str):
            status = SKIPPED if entry is None else NO_ROUTE
            rows.append(RouteRow(prefix, kernel, [], gid, entry_ports, status, ports))
        elif entry is None:
            rows.append(RouteRow(prefix, kernel, list(ports), None, [], NO_ENTRY))
        else:
            status = OK if list(ports) == entry_ports else PORTS_DIFFER
            rows.append(RouteRow(prefix, kernel, list(ports), gid, entry_ports, status))
    return rows


def cmd_routes(sw, args: argparse.Namespace) -> Any:
    if "{switch}" in args.netns and ":" in sw.name:
        raise UsageError("routes: give --netns (a switch given by address has no name to "
                         "name its namespace by)")
    netns = args.netns.replace("{switch}", sw.name)
    table = read_routes(netns)
    ifnames = {h.ifname for r in table.values() for h in r.nexthops}
    rows = compare(table, port_map(args.port_map, ifnames), switch_routes(sw), sw.name)
    flagged = sum(r.status in FLAGS for r in rows)
    if args.json:
        return {"netns": netns, "routes": [asdict(r) for r in rows], "flagged": flagged}
    body = render_table(
        ["prefix", "kernel route", "ports", "p4 group", "group ports", "status"],
        [[r.prefix, r.kernel, _ports(r.kernel_ports), "-" if r.group is None else r.group,
          _ports(r.entry_ports), f"{r.status}: {r.why}" if r.why else r.status] for r in rows])
    summary = (f"{sum(r.kernel != '-' for r in rows)} kernel routes in netns {netns}, "
               f"{sum(r.group is not None for r in rows)} ipv4_lpm entries, {flagged} flagged")
    return f"{body}\n{summary}"


def _ports(ports: list[int]) -> str:
    return ",".join(map(str, ports)) or "-"
