"""A network namespace's IPv4 forwarding table (table main), read and followed over netlink.

A route is ``prefix -> {(ifname, gateway), ...}``: one next hop for a plain route, several for a
multipath one (``nexthop via ... dev ... nexthop via ...``, as FRR's zebra installs ECMP routes
when the kernel has nexthop objects, ``nhid``, too: with ``net.ipv4.nexthop_compat_mode`` on, the
default, the kernel expands a route's nexthop object in dumps and notifies each route whose
nexthop object changes). Next hops the kernel marks dead are left out, as the kernel's own
forwarding leaves them out.

``KernelRouteWatch`` binds to the route and link notifications *before* it dumps the table, so
no change between the dump and the first notification is lost: replaying the queued
notifications over the dump in order ends at the table's state (each one sets or removes a
whole route). IPv4 does not notify the routes it flushes when an interface goes down or goes
away, so a link change makes the watch dump the table again.

Netlink is pyroute2's (the asyncio core: ``get`` can wait with a timeout, which the blocking
one's internal buffering does not allow with ``select``).
"""

from __future__ import annotations

import asyncio
import ctypes
import ipaddress
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from controlplane.errors import ControlPlaneError

RT_TABLE_MAIN = 254
RTN_UNICAST = 1
RTNH_F_DEAD = 1
AF_INET = 2
IFF_UP = 1
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"  # where `ip netns add` names namespaces
# iproute2's rt_protos and FRR's rt_protos.d/frr.conf (one number per FRR daemon)
PROTOCOL_NAMES = {0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static",
                  11: "zebra", 12: "bird", 42: "babel", 186: "bgp", 187: "isis", 188: "ospf",
                  189: "rip", 190: "ripng", 191: "nhrp", 192: "eigrp", 193: "ldp",
                  194: "sharp", 195: "pbr", 196: "frr-static", 197: "openfabric"}


class KernelRouteError(ControlPlaneError):
    """The namespace cannot be read (missing, no permission, netlink unavailable)."""


@dataclass(frozen=True, order=True)
class NextHop:
    ifname: str
    gateway: str | None = None  # None: a directly connected route (``dev X`` only)

    def describe(self) -> str:
        return f"via {self.gateway} dev {self.ifname}" if self.gateway else f"dev {self.ifname}"


@dataclass(frozen=True)
class KernelRoute:
    prefix: str  # "10.0.2.0/24"
    nexthops: frozenset[NextHop]
    protocol: str = "unspec"

    def describe(self) -> str:
        hops = ", ".join(h.describe() for h in sorted(self.nexthops))
        return f"{self.prefix} proto {self.protocol}: {hops}"


@dataclass(frozen=True)
class RouteChange:
    """One notification: ``route`` is the route's new state, None when it was deleted."""

    prefix: str
    route: KernelRoute | None


def _attr(msg: object, name: str) -> object:
    return msg.get_attr(name)  # type: ignore[attr-defined]


def parse_route(msg: object, ifnames: dict[int, str]) -> tuple[str, KernelRoute | None] | None:
    """(prefix, route) from an RTM_NEWROUTE/RTM_DELROUTE; None for what is not an IPv4 unicast
    route of table main. A new route whose every next hop is dead comes back as (prefix, None):
    the kernel does not forward by it."""
    if msg["family"] != AF_INET or msg["type"] != RTN_UNICAST:  # type: ignore[index]
        return None
    table = _attr(msg, "RTA_TABLE") or msg["table"]  # type: ignore[index]
    if table != RT_TABLE_MAIN:
        return None
    dst = _attr(msg, "RTA_DST") or "0.0.0.0"
    prefix = str(ipaddress.ip_network(f"{dst}/{msg['dst_len']}", strict=False))  # type: ignore[index]
    if msg.get("event") == "RTM_DELROUTE":  # type: ignore[attr-defined]
        return prefix, None
    hops: set[NextHop] = set()
    multipath = _attr(msg, "RTA_MULTIPATH")
    if multipath:
        for nh in multipath:  # type: ignore[attr-defined]
            if nh["flags"] & RTNH_F_DEAD:
                continue
            gateway = dict(nh["attrs"]).get("RTA_GATEWAY")
            hops.add(NextHop(ifnames.get(nh["oif"], f"if{nh['oif']}"), gateway))
    elif _attr(msg, "RTA_OIF") is not None and not msg["flags"] & RTNH_F_DEAD:  # type: ignore[index]
        oif = int(_attr(msg, "RTA_OIF"))  # type: ignore[arg-type]
        hops.add(NextHop(ifnames.get(oif, f"if{oif}"), _attr(msg, "RTA_GATEWAY")))  # type: ignore[arg-type]
    if not hops:
        return prefix, None
    proto = msg["proto"]  # type: ignore[index]
    return prefix, KernelRoute(prefix, frozenset(hops), PROTOCOL_NAMES.get(proto, str(proto)))


@contextmanager
def entered_netns(netns: str | None) -> Iterator[None]:
    """Run the block with this thread in ``netns`` (sockets made there stay there), then put
    the thread back. Not pyroute2's own netns support: that forks a child, which inherits the
    parent's signal handlers (a harness's cleanup handler then runs in the child when pyroute2
    stops it)."""
    if not netns:
        yield
        return
    path = os.path.join(NETNS_DIR, netns)
    # `ip netns` names only what it created; a misspelt name must fail, not be made
    if not os.path.exists(path):
        raise KernelRouteError(f"netns {netns}: no such network namespace")
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise KernelRouteError(f"netns {netns}: cannot enter: {os.strerror(err)}")
        finally:
            os.close(target)
        try:
            yield
        finally:
            libc.setns(home, CLONE_NEWNET)
    finally:
        os.close(home)


def _new_socket():  # -> pyroute2.AsyncIPRoute, not yet bound
    try:
        from pyroute2 import AsyncIPRoute
    except ImportError as err:
        raise KernelRouteError(f"pyroute2 is not installed ({err})") from None
    return AsyncIPRoute()


async def _collect(aiter: object) -> list:
    return [m async for m in aiter]  # type: ignore[attr-defined]


class KernelRouteWatch:
    """Follows one namespace's table: ``await open()``, then ``table`` holds the routes and each
    ``await changes(timeout)`` returns the changes since (in the kernel's order), or [] on
    timeout. Use as ``async with``."""

    def __init__(self, netns: str | None = None) -> None:
        self.netns = netns
        self.table: dict[str, KernelRoute] = {}
        self.ifnames: dict[int, str] = {}
        self._ipr = None
        self._pending: asyncio.Future | None = None

    async def __aenter__(self) -> KernelRouteWatch:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def open(self) -> None:
        from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE, RTMGRP_LINK

        where = f"netns {self.netns}" if self.netns else "this namespace"
        try:
            with entered_netns(self.netns):
                # pyroute2 makes the socket at bind, so bind runs in the namespace too
                self._ipr = _new_socket()
                await self._ipr.bind(groups=RTMGRP_IPV4_ROUTE | RTMGRP_LINK)
            await self.dump()
        except (OSError, KeyError, FileNotFoundError) as err:
            self.close()
            raise KernelRouteError(f"{where}: cannot read routes: {err}") from None

    async def dump(self) -> dict[str, KernelRoute]:
        """Read the whole table again (also the interface names)."""
        assert self._ipr is not None
        links = await _collect(await self._ipr.link("dump"))
        self.ifnames = {ln["index"]: ln.get_attr("IFLA_IFNAME") for ln in links}
        routes = await _collect(await self._ipr.route("dump", family=AF_INET,
                                                      table=RT_TABLE_MAIN))
        table: dict[str, KernelRoute] = {}
        for msg in routes:
            parsed = parse_route(msg, self.ifnames)
            if parsed and parsed[1] is not None:
                table[parsed[0]] = parsed[1]
        self.table = table
        return table

    async def changes(self, timeout: float) -> list[RouteChange] | None:
        """Route changes that arrived (applied to ``table``); [] when none came within
        ``timeout``; None when a link changed and the table was dumped again (compare
        ``table`` with what you had)."""
        assert self._ipr is not None
        if self._pending is None:
            self._pending = asyncio.ensure_future(_collect(self._ipr.get()))
        # wait, not wait_for: a timeout must not cancel a read halfway through its messages
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return []
        messages, self._pending = self._pending.result(), None
        return await self._apply(messages)

    async def _apply(self, messages: Iterable) -> list[RouteChange] | None:
        out: list[RouteChange] = []
        for msg in messages:
            event = msg.get("event")
            if event in ("RTM_NEWLINK", "RTM_DELLINK"):
                name = msg.get_attr("IFLA_IFNAME")
                known = self.ifnames.get(msg["index"])
                up = bool(msg["flags"] & IFF_UP) and event == "RTM_NEWLINK"
                if known == name and up:
                    continue  # a known interface still up (statistics, carrier): no flush
                await self.dump()
                return None
            parsed = parse_route(msg, self.ifnames)
            if parsed is None:
                continue
            prefix, route = parsed
            if route is None:
                self.table.pop(prefix, None)
            else:
                self.table[prefix] = route
            out.append(RouteChange(prefix, route))
        return out

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None


def read_routes(netns: str | None = None) -> dict[str, KernelRoute]:
    """One dump of the namespace's table main (IPv4 unicast routes): prefix -> route."""

    async def once() -> dict[str, KernelRoute]:
        async with KernelRouteWatch(netns) as watch:
            return dict(watch.table)

    return asyncio.run(once())
