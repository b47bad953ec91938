"""Kernel routes as fabric.p4 entries: what a switch's route agent writes for its NOS's table.

A route ``prefix -> {(ifname, gateway), ...}`` becomes an ipv4_lpm entry to a next-hop group
over the routes' front-panel ports (the interface names a port map translates), built exactly as
the central plan builds them (controlplane.fabric_plan: one selector member per port, member id
= port; one group per distinct port set, each member watching its port; the group's spray mode
with this switch's hash salt). fabric.p4's ipv4_lpm only sets a group, so a single next hop is a
group of one, as the central plan's host ports are.

Group ids are kept across changes: a port set keeps its group while some route still uses it,
and a port set that takes over the routes of a set that vanished takes over its group id too,
so a next hop withdrawn from every route through it is one group modify (the group shrinks),
not a route rewrite per prefix. Real BMv2 cannot shrink a group in place: its PI fails a group
MODIFY that removes a member with a watch port (UNKNOWN "Unexpected error in RPC handling",
the group sometimes left changed, sometimes not), so with ``modify_groups=False`` a changed port
set gets a new group (insert it, repoint the routes, delete the old one), never a modify.

The agent writes under a P4Runtime role of its own (``ROUTE_AGENT_ROLE``): only the route,
group and spray-mode tables and the selector, so a controller owning the rest of the pipeline
can run beside it.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import any_pb2

from controlplane import fabric_plan as fp
from controlplane.entities import ActionProfileGroup, ActionProfileMember, Entity, TableEntry
from controlplane.kernel_routes import KernelRoute
from controlplane.roles import role_config

ROUTE_AGENT_ROLE = "route-agent"
ROUTE_AGENT_ENTITIES = (fp.T_LPM, fp.T_GROUP_SELECT, fp.T_GROUP_MODE, fp.T_ADAPTIVE,
                        fp.P_SELECTOR)
ROUTE_TABLES = (fp.T_LPM, fp.T_GROUP_SELECT, fp.T_GROUP_MODE, fp.T_ADAPTIVE)


def route_agent_role_config() -> any_pb2.Any:
    """p4sim's role config for the agent: its tables and the selector, nothing else (no
    pipeline push, no packet I/O, no clone sessions)."""
    return role_config(ROUTE_AGENT_ENTITIES)


def route_agent_reads() -> list[Entity]:
    """Wildcard reads of what the agent owns (named, so a target without roles, real BMv2,
    returns no other writer's entries)."""
    reads: list[Entity] = [TableEntry(table=t) for t in ROUTE_TABLES]
    return [*reads, ActionProfileMember(profile=fp.P_SELECTOR),
            ActionProfileGroup(profile=fp.P_SELECTOR)]


@dataclass
class RouteEntries:
    """One switch's entries for a kernel table, and how each route was mapped."""

    entities: list[Entity] = field(default_factory=list)
    routes: dict[str, int] = field(default_factory=dict)  # prefix -> group id
    groups: dict[tuple[int, ...], int] = field(default_factory=dict)  # ports -> group id
    skipped: dict[str, str] = field(default_factory=dict)  # prefix -> why it has no entry


class RouteMapper:
    """Maps kernel tables to entries for one switch, keeping group ids across calls.

    ``port_of_ifname``: the namespace's interface (TAP) names -> front-panel ports; next hops
    on other interfaces are left out (a management interface, lo). ``spray``: the run sprays,
    so groups get ``spray_mode`` (fabric_plan.SPRAY_MODE_VALUE), else ecmp. Connected routes
    (proto kernel: an interface's own subnet) are left out unless ``include_connected``.
    """

    def __init__(self, switch: str, port_of_ifname: Mapping[str, int], spray: bool, *,
                 spray_mode: str = "spray", include_connected: bool = False,
                 first_group: int = 1, modify_groups: bool = True) -> None:
        mode = spray_mode if spray else "ecmp"
        if mode not in fp.SPRAY_MODE_VALUE:
            raise ValueError(f"spray mode {mode!r}: not one of "
                             f"{', '.join(fp.SPRAY_MODE_VALUE)}")
        self.switch = switch
        self.port_of_ifname = dict(port_of_ifname)
        self.mode = mode
        self.include_connected = include_connected
        self.first_group = first_group
        self.modify_groups = modify_groups
        self.salt = fp.hash_salt(switch)
        self.groups: dict[tuple[int, ...], int] = {}
        self.routes: dict[str, int] = {}

    def ports_of(self, route: KernelRoute) -> tuple[int, ...] | str:
        """The route's ports, or why it gets no entry."""
        if route.protocol == "kernel" and not self.include_connected:
            return "connected route (an interface's own subnet)"
        if route.prefix.endswith("/0"):
            # P4Runtime has no zero-length LPM key (the field is left out: a wildcard entry)
            return "default route (ipv4_lpm gets no /0 entry)"
        ports = sorted({self.port_of_ifname[h.ifname] for h in route.nexthops
                        if h.ifname in self.port_of_ifname})
        if not ports:
            names = ", ".join(sorted({h.ifname for h in route.nexthops}))
            return f"no front-panel port behind {names}"
        return tuple(ports)

    def map(self, table: Mapping[str, KernelRoute]) -> RouteEntries:
        """Entries for ``table``; updates the group ids kept for the next call."""
        out = RouteEntries()
        wanted: dict[str, tuple[int, ...]] = {}
        for prefix, route in sorted(table.items()):
            ports = self.ports_of(route)
            if isinstance(ports, str):
                out.skipped[prefix] = ports
            else:
                wanted[prefix] = ports
        self.groups = self._assign_groups(wanted)
        self.routes = {prefix: self.groups[ports] for prefix, ports in wanted.items()}
        out.routes, out.groups = dict(self.routes), dict(self.groups)
        used_ports = sorted({p for ports in self.groups for p in ports})
        out.entities.extend(fp.selector_member(p) for p in used_ports)
        for ports, gid in sorted(self.groups.items(), key=lambda kv: kv[1]):
            out.entities.extend(fp.group_entities(gid, ports, self.mode, self.salt))
        out.entities.extend(fp.route_entry(prefix, gid)
                            for prefix, gid in sorted(self.routes.items()))
        return out

    def _assign_groups(self, wanted: dict[str, tuple[int, ...]]) -> dict[tuple[int, ...], int]:
        sets = set(wanted.values())
        kept = {ports: gid for ports, gid in self.groups.items() if ports in sets}
        freed = set(self.groups.values()) - set(kept.values())
        for ports in sorted(sets - set(kept)):
            # the freed group most of this set's routes used before, if any
            before = Counter(self.routes.get(p) for p, s in wanted.items() if s == ports)
            heir = [gid for gid, _ in before.most_common()
                    if gid in freed and self.modify_groups]
            if heir:
                gid = heir[0]
                freed.discard(gid)
            else:
                gid = self._lowest_free(set(kept.values()) | freed)
            kept[ports] = gid
        return kept

    def _lowest_free(self, taken: set[int]) -> int:
        gid = self.first_group
        while gid in taken:
            gid += 1
        return gid


def forwarded_prefixes(lpm: Mapping[str, int], selects: Mapping[int, int | None],
                       members: Mapping[int, int]) -> set[str]:
    """The ipv4_lpm prefixes a packet can actually leave by: the entry's group id has a
    group_select entry (fabric.p4 drops NO_ROUTE without one) whose selector group has at
    least one member. ``lpm``: prefix -> group id; ``selects``: group id -> the selector group
    its group_select entry uses; ``members``: selector group -> member count."""
    return {prefix for prefix, gid in lpm.items()
            if members.get(selects.get(gid, -1) or -1, 0) > 0}


def switch_forwarded_prefixes(conn: Any) -> set[str]:
    """forwarded_prefixes() as the switch behind ``conn`` holds them (read over P4Runtime:
    ipv4_lpm, group_select and the selector's groups)."""
    lpm: dict[str, int] = {}
    for e in conn.read(TableEntry(table=fp.T_LPM)):
        m = e.match["hdr.ipv4.dst_addr"]
        prefix = f"{ipaddress.IPv4Address(int(m.value))}/{m.prefix_len}"
        lpm[prefix] = int(e.params.get("group_id", -1))
    selects = {int(e.match["meta.group_id"]): e.group
               for e in conn.read(TableEntry(table=fp.T_GROUP_SELECT))}
    members = {int(g.group_id or 0): len(g.members)
               for g in conn.read(ActionProfileGroup(profile=fp.P_SELECTOR))}
    return forwarded_prefixes(lpm, selects, members)
