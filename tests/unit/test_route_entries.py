"""Kernel routes -> fabric.p4 entries (no switch, no namespace): group ids kept while a port set
lives, handed to the set that takes over its routes, never reused in place when the target
cannot modify groups; spray modes; routes that get no entry and why."""

from __future__ import annotations

import pytest

from controlplane.entities import ActionProfileGroup, ActionProfileMember, TableEntry
from controlplane.fabric_plan import (
    SPRAY_MODE_VALUE,
    T_ADAPTIVE,
    T_GROUP_MODE,
    T_LPM,
    hash_salt,
)
from controlplane.kernel_routes import KernelRoute, NextHop
from controlplane.route_entries import RouteMapper

PORTS = {"1": 1, "2": 2, "3": 3}


def route(prefix: str, *ifnames: str, proto: str = "bgp") -> KernelRoute:
    return KernelRoute(prefix, frozenset(NextHop(n, f"10.77.{n}.2") for n in ifnames), proto)


def table(*routes: KernelRoute) -> dict[str, KernelRoute]:
    return {r.prefix: r for r in routes}


def test_routes_sharing_a_next_hop_set_share_one_group() -> None:
    out = RouteMapper("l1", PORTS, True).map(table(
        route("10.1.0.0/16", "1", "2"), route("10.2.0.0/16", "2", "1"), route("10.3.0.0/16", "3")))
    assert out.groups == {(1, 2): 1, (3,): 2}
    assert out.routes == {"10.1.0.0/16": 1, "10.2.0.0/16": 1, "10.3.0.0/16": 2}
    members = {e.member_id for e in out.entities if isinstance(e, ActionProfileMember)}
    assert members == {1, 2, 3}
    lpm = {e.match["hdr.ipv4.dst_addr"]: e.params["group_id"] for e in out.entities
           if isinstance(e, TableEntry) and e.table == T_LPM}
    assert lpm == out.routes


def test_a_withdrawn_next_hop_shrinks_the_group_in_place() -> None:
    mapper = RouteMapper("l1", PORTS, True)
    mapper.map(table(route("10.1.0.0/16", "1", "2", "3"), route("10.2.0.0/16", "1", "2", "3"),
                     route("10.3.0.0/16", "3")))
    half = mapper.map(table(route("10.1.0.0/16", "1", "3"), route("10.2.0.0/16", "1", "2", "3"),
                            route("10.3.0.0/16", "3")))
    # {1,2,3} still used by 10.2: 10.1 moves to a new group
    assert half.groups == {(1, 2, 3): 1, (3,): 2, (1, 3): 3}
    done = mapper.map(table(route("10.1.0.0/16", "1", "3"), route("10.2.0.0/16", "1", "3"),
                            route("10.3.0.0/16", "3")))
    assert done.groups == {(3,): 2, (1, 3): 3}  # group 1 gone: its set vanished, none took it
    mapper = RouteMapper("l1", PORTS, True)
    mapper.map(table(route("10.1.0.0/16", "1", "2", "3"), route("10.2.0.0/16", "1", "2", "3")))
    both = mapper.map(table(route("10.1.0.0/16", "1", "3"), route("10.2.0.0/16", "1", "3")))
    assert both.groups == {(1, 3): 1}  # the set that took over every route keeps group 1


def test_without_group_modifies_a_changed_set_gets_a_new_group() -> None:
    mapper = RouteMapper("l1", PORTS, True, modify_groups=False)
    mapper.map(table(route("10.1.0.0/16", "1", "2", "3")))
    assert mapper.map(table(route("10.1.0.0/16", "1", "3"))).groups == {(1, 3): 2}
    # group 1 was deleted in the previous pass, so it may be inserted again now
    assert mapper.map(table(route("10.1.0.0/16", "3"))).groups == {(3,): 1}


def test_groups_get_the_runs_spray_mode_and_the_switchs_salt() -> None:
    def modes(mapper: RouteMapper) -> set[tuple[int, int]]:
        out = mapper.map(table(route("10.1.0.0/16", "1", "2")))
        return {(e.params["mode"], e.params["salt"]) for e in out.entities
                if isinstance(e, TableEntry) and e.table == T_GROUP_MODE}

    salt = hash_salt("s7")
    assert modes(RouteMapper("s7", PORTS, True)) == {(SPRAY_MODE_VALUE["spray"], salt)}
    assert modes(RouteMapper("s7", PORTS, False)) == {(SPRAY_MODE_VALUE["ecmp"], salt)}
    adaptive = RouteMapper("s7", PORTS, True, spray_mode="adaptive")
    out = adaptive.map(table(route("10.1.0.0/16", "1", "2")))
    assert sum(isinstance(e, TableEntry) and e.table == T_ADAPTIVE for e in out.entities) == 16
    with pytest.raises(ValueError, match="spray mode 'sideways'"):
        RouteMapper("s7", PORTS, True, spray_mode="sideways")


def test_routes_without_an_entry_say_why() -> None:
    out = RouteMapper("l1", PORTS, True).map(table(
        route("10.77.1.0/24", "1", proto="kernel"), route("10.4.0.0/16", "eth0"),
        route("0.0.0.0/0", "1"), route("10.5.0.0/16", "eth0", "2")))
    assert set(out.skipped) == {"10.77.1.0/24", "10.4.0.0/16", "0.0.0.0/0"}
    assert "connected" in out.skipped["10.77.1.0/24"]
    assert "no front-panel port behind eth0" in out.skipped["10.4.0.0/16"]
    assert "default route" in out.skipped["0.0.0.0/0"]
    assert out.routes == {"10.5.0.0/16": 1}  # the mapped next hop is kept
    groups = [e for e in out.entities if isinstance(e, ActionProfileGroup)]
    assert [[m.member_id for m in g.members] for g in groups] == [[2]]
    assert RouteMapper("l1", PORTS, True, include_connected=True).map(
        table(route("10.77.1.0/24", "1", proto="kernel"))).routes == {"10.77.1.0/24": 1}
