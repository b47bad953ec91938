"""Reading and following a namespace's forwarding table over netlink: static multipath routes,
nexthop objects, routes marked proto bgp, routes FRR's zebra installs, and changes seen in the
order they were made."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from controlplane.connection import wait_until
from controlplane.kernel_routes import (
    KernelRouteError,
    KernelRouteWatch,
    NextHop,
    RouteChange,
    read_routes,
)

sys.path.insert(0, str(Path(__file__).parent / "nos_fixtures"))
from route_lab import RouteLab, frr_static, needs_frr, needs_root, route_lab

pytestmark = needs_root


@pytest.fixture
def nos():
    with route_lab() as lab:
        yield lab


def hops(lab: RouteLab, *ports: int) -> frozenset[NextHop]:
    return frozenset(NextHop(lab.ifname(p), lab.gateway(p)) for p in ports)


def test_dump_reads_multipath_single_and_nexthop_object_routes(nos: RouteLab) -> None:
    nos.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *nos.via(1, 2, 3))
    nos.ip("route", "add", "10.2.0.0/24", *nos.via(2))
    nos.ip("nexthop", "add", "id", "11", *nos.via(1))
    nos.ip("nexthop", "add", "id", "13", *nos.via(3))
    nos.ip("nexthop", "add", "id", "20", "group", "11/13")
    nos.ip("route", "add", "10.3.0.0/16", "nhid", "20", "proto", "bgp")
    table = read_routes(nos.ns)
    assert table["10.1.0.0/16"].nexthops == hops(nos, 1, 2, 3)
    assert table["10.1.0.0/16"].protocol == "bgp"
    assert table["10.2.0.0/24"].nexthops == hops(nos, 2)
    assert table["10.2.0.0/24"].protocol == "boot"  # `ip route add`'s default
    assert table["10.3.0.0/16"].nexthops == hops(nos, 1, 3)
    # the interfaces' own subnets, connected (no gateway)
    assert table["10.77.1.0/24"].nexthops == {NextHop(nos.ifname(1), None)}
    assert table["10.77.1.0/24"].protocol == "kernel"


def test_a_missing_namespace_is_one_error_and_is_not_created() -> None:
    with pytest.raises(KernelRouteError, match="cfra-nope: no such network namespace"):
        read_routes("cfra-nope")
    assert not Path("/var/run/netns/cfra-nope").exists()


async def _follow(watch: KernelRouteWatch, count: int) -> list[RouteChange]:
    """Changes until ``count`` arrived (the 30 s bound only stops a broken test hanging)."""
    got: list[RouteChange] = []
    for _ in range(300):
        batch = await watch.changes(0.1)
        assert batch is not None, "no link changed: the watch must not re-dump"
        got += batch
        if len(got) >= count:
            break
    return got


def test_add_replace_delete_are_seen_in_order(nos: RouteLab) -> None:
    async def scenario() -> list[RouteChange]:
        async with KernelRouteWatch(nos.ns) as watch:
            nos.ip("route", "add", "10.5.0.0/16", *nos.via(1, 2))
            nos.ip("route", "replace", "10.5.0.0/16", *nos.via(2, 3))
            nos.ip("route", "add", "10.6.0.0/16", "proto", "bgp", *nos.via(3))
            nos.ip("route", "del", "10.5.0.0/16")
            changes = await _follow(watch, 4)
            assert "10.5.0.0/16" not in watch.table
            assert watch.table["10.6.0.0/16"].nexthops == hops(nos, 3)
            return changes

    changes = asyncio.run(scenario())
    assert [(c.prefix, c.route.nexthops if c.route else None) for c in changes] == [
        ("10.5.0.0/16", hops(nos, 1, 2)),
        ("10.5.0.0/16", hops(nos, 2, 3)),
        ("10.6.0.0/16", hops(nos, 3)),
        ("10.5.0.0/16", None),
    ]


def test_a_changed_nexthop_object_is_seen_as_a_route_change(nos: RouteLab) -> None:
    nos.ip("nexthop", "add", "id", "11", *nos.via(1))
    nos.ip("nexthop", "add", "id", "12", *nos.via(2))
    nos.ip("nexthop", "add", "id", "20", "group", "11/12")
    nos.ip("route", "add", "10.3.0.0/16", "nhid", "20", "proto", "bgp")

    async def scenario() -> list[RouteChange]:
        async with KernelRouteWatch(nos.ns) as watch:
            assert watch.table["10.3.0.0/16"].nexthops == hops(nos, 1, 2)
            nos.ip("nexthop", "replace", "id", "20", "group", "12")
            return await _follow(watch, 1)

    changes = asyncio.run(scenario())
    assert changes[0].prefix == "10.3.0.0/16"
    assert changes[0].route is not None and changes[0].route.nexthops == hops(nos, 2)


def test_an_interface_going_down_dumps_the_table_again(nos: RouteLab) -> None:
    # IPv4 flushes a downed interface's routes without notifying them: only a dump sees it
    nos.ip("route", "add", "10.2.0.0/24", *nos.via(2))
    nos.ip("route", "add", "10.9.0.0/16", *nos.via(1, 2))

    async def scenario() -> KernelRouteWatch:
        async with KernelRouteWatch(nos.ns) as watch:
            nos.ip("link", "set", nos.ifname(2), "down")
            for _ in range(300):
                if await watch.changes(0.1) is None:
                    break
            return watch

    watch = asyncio.run(scenario())
    assert "10.2.0.0/24" not in watch.table
    assert watch.table["10.9.0.0/16"].nexthops == hops(nos, 1)


def test_an_interface_made_after_the_dump_is_learnt_by_name(nos: RouteLab) -> None:
    # the NOS may make a port's TAP after the agent started: its routes must name it
    async def scenario() -> tuple[KernelRouteWatch, str]:
        async with KernelRouteWatch(nos.ns) as watch:
            late, _peer = nos.lab.veth("late", "latep", ns_a=nos.ns, ns_b=nos.ns)
            nos.lab.addr(late, "10.78.0.1/24", ns=nos.ns)
            nos.ip("route", "add", "10.79.0.0/16", "via", "10.78.0.2", "dev", late)
            for _ in range(300):
                if "10.79.0.0/16" in watch.table:
                    break
                await watch.changes(0.1)
            return watch, late

    watch, late = asyncio.run(scenario())
    assert watch.table["10.79.0.0/16"].nexthops == {NextHop(late, "10.78.0.2")}


@needs_frr
def test_routes_frr_installs_are_read_and_followed(nos: RouteLab) -> None:
    # zebra installs ECMP routes as kernel nexthop objects (nhid): read through compat mode
    config = (f"ip route 10.50.0.0/16 {nos.gateway(1)}\nip route 10.50.0.0/16 {nos.gateway(2)}\n"
              f"ip route 10.60.0.0/16 {nos.gateway(3)}\n")
    with frr_static(nos, config) as vty:
        assert wait_until(lambda: "10.60.0.0/16" in read_routes(nos.ns)
                          and len(read_routes(nos.ns)["10.50.0.0/16"].nexthops) == 2, 30.0)
        table = read_routes(nos.ns)
        assert table["10.50.0.0/16"].nexthops == hops(nos, 1, 2)
        assert table["10.50.0.0/16"].protocol == "frr-static"

        async def scenario() -> list[RouteChange]:
            async with KernelRouteWatch(nos.ns) as watch:
                vty(f"no ip route 10.50.0.0/16 {nos.gateway(2)}")
                first = await _follow(watch, 1)
                vty(f"no ip route 10.60.0.0/16 {nos.gateway(3)}")
                return first + await _follow(watch, 1)

        changes = asyncio.run(scenario())
    assert [(c.prefix, c.route.nexthops if c.route else None) for c in changes] == [
        ("10.50.0.0/16", hops(nos, 1)), ("10.60.0.0/16", None)]
