"""Rail-optimized fabrics for AI servers, as topology data (``topologies.generators``' format).

A server holds G GPUs; GPU i of every server is on rail i, and a rail is its own set of leaf
switches: GPU i's NIC has two ports, both on rail i, on two different leaves (one plane) or on
the rail's leaf of each of two planes (``planes=2``: two separate fabrics, port 0 in plane 1 and
port 1 in plane 2, as a dual-plane design wires them). Above the leaves:

- two tiers: every leaf to the spines of its plane;
- three tiers: servers are split into ``pods``; each pod has its own rail leaves and spines
  (aggregation), and the spines of every pod link to the plane's cores.

Non-blocking by default: every leaf has as many uplinks as GPU ports below it, every pod spine
as many core links as leaf links. A switch's uplinks go round robin over the switches above it
(starting where the previous switch's left off), so with the default counts each leaf links
every spine of its pod once and each spine every core of its plane once.

Placement within a rail: with one plane and L leaves per rail, port q of the k-th server of a
pod is on the rail's leaf (2k + q) mod L (L = 2: every port 0 on one leaf, every port 1 on the
other); with two planes on leaf k mod L of plane q + 1.

Names: GPU hosts ``h<rank>`` (rank = server x G + gpu, from 1), servers ``sv<n>``, leaves
``r<rail>l<n>`` (the n-th leaf of rail ``rail``), spines ``s<n>``, cores ``c<n>``. Addresses
10.<pod>.<rail>.<server in pod> (pod 0 in two tiers): one /24 per rail and pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topologies.model import TopologyError
from topologies.servers import parse_bit_rate

_MAX_SWITCHES = 4096


def _fail(what: str) -> TopologyError:
    return TopologyError(f"rail generator: {what}")


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(f"{name}={value!r}: expected an integer in [{lo}, {hi}]")
    return value


def _rate(name: str, value: Any) -> int:
    try:
        return parse_bit_rate(value)
    except ValueError as exc:
        raise _fail(f"{name}: {exc}") from None


def _rate_text(bps: int) -> str | int:
    """400000000000 -> '400G', as a topology file writes it (an odd rate stays an integer)."""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6)):
        if bps % scale == 0:
            return f"{bps // scale}{unit}"
    return bps


@dataclass
class _Scope:
    """The switches of one plane and pod: its rail leaves and their downlinks."""

    plane: int
    pod: int
    leaves: dict[tuple[int, int], str] = field(default_factory=dict)  # (rail, idx) -> name
    downlinks: dict[str, int] = field(default_factory=dict)
    spines: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self) -> None:
        self.switches: list[dict[str, Any]] = []
        self.links: list[list[str]] = []
        self.rail_leaves: dict[int, int] = {}
        self.numbered: dict[str, int] = {}  # prefix -> switches of that name made so far

    def switch(self, name: str, role: str) -> str:
        if len(self.switches) >= _MAX_SWITCHES:
            raise _fail(f"more than {_MAX_SWITCHES} switches")
        self.switches.append({"name": name, "role": role})
        return name

    def next_switch(self, prefix: str, role: str) -> str:
        """``s1``, ``s2``, ... (or ``c1``, ...) in the order they are made."""
        n = self.numbered[prefix] = self.numbered.get(prefix, 0) + 1
        return self.switch(f"{prefix}{n}", role)

    def leaf(self, scope: _Scope, rail: int, idx: int) -> str:
        key = (rail, idx)
        if key not in scope.leaves:
            n = self.rail_leaves[rail] = self.rail_leaves.get(rail, 0) + 1
            scope.leaves[key] = self.switch(f"r{rail}l{n}", "leaf")
            scope.downlinks[scope.leaves[key]] = 0
        return scope.leaves[key]

    def uplinks(self, lower: dict[str, int], upper: list[str]) -> dict[str, int]:
        """``lower[name]`` uplinks from each lower switch, round robin over ``upper``; returns
        the links each upper switch received (its downlinks)."""
        received = dict.fromkeys(upper, 0)
        nxt = 0
        for name, count in lower.items():
            for _ in range(count):
                up = upper[nxt % len(upper)]
                self.links.append([name, up])
                received[up] += 1
                nxt += 1
        return received


def _pods_of(servers: int, pods: int) -> list[list[int]]:
    """Servers split into contiguous pods whose sizes differ by at most one."""
    return [list(range(p * servers // pods, (p + 1) * servers // pods)) for p in range(pods)]


def rail(servers: int, gpus: int = 8, tiers: int = 2, planes: int = 1,
         leaves_per_rail: int | None = None, pods: int | None = None,
         spines: int | None = None, cores: int | None = None,
         link_rate: Any = "100G", nvlink_rate: Any = "400G",
         rate_pps: int = 100, depth: int = 64, spray: str = "spray",
         cc: str = "dcqcn") -> dict[str, Any]:
    """A rail-optimized fabric of ``servers`` servers of ``gpus`` GPUs (see the module doc).
    ``spines``: per plane (two tiers) or per pod and plane (three); ``cores``: per plane;
    default: the non-blocking counts. ``link_rate``/``nvlink_rate``: a NIC port's and an
    NVLink's bit rate (the file's packet rates stand for ``link_rate``)."""
    _int("servers", servers, 1, 254)
    _int("gpus", gpus, 1, 64)
    _int("tiers", tiers, 2, 3)
    _int("planes", planes, 1, 2)
    if leaves_per_rail is None:
        leaves_per_rail = 2 if planes == 1 else 1
    _int("leaves-per-rail", leaves_per_rail, 1, 99)
    if planes == 1 and leaves_per_rail < 2:
        raise _fail("leaves-per-rail=1 with one plane: a NIC's two ports need two different "
                    "leaves of its rail (or planes=2)")
    if pods is None:
        pods = min(2, servers) if tiers == 3 else 1
    _int("pods", pods, 1, servers if tiers == 3 else 1)
    ports_per_leaf_row = 2 if planes == 1 else 1  # ports of one server on one plane's rail
    smallest_pod = servers // pods
    if leaves_per_rail > smallest_pod * ports_per_leaf_row:
        raise _fail(f"leaves-per-rail={leaves_per_rail}: a pod of {smallest_pod} server(s) "
                    f"has only {smallest_pod * ports_per_leaf_row} NIC port(s) per rail and "
                    "plane, so some leaf would have no GPU")
    if spines is not None:
        _int("spines", spines, 1, 999)
    if cores is not None:
        _int("cores", cores, 1, 999)
        if tiers == 2:
            raise _fail("cores: a two-tier fabric has none (use tiers=3)")
    settings = {"nvlink_rate": _rate_text(_rate("nvlink-rate", nvlink_rate)),
                "nic_rate": _rate_text(_rate("link-rate", link_rate))}

    b = _Builder()
    scopes: list[_Scope] = []
    hosts: list[dict[str, Any]] = []
    for pod, members in enumerate(_pods_of(servers, pods), start=1 if tiers == 3 else 0):
        pod_scopes = [_Scope(plane, pod) for plane in range(planes)]
        scopes += pod_scopes
        for k, server in enumerate(members):
            for gpu in range(gpus):
                leaves = []
                for q in range(2):
                    if planes == 1:
                        scope, idx = pod_scopes[0], (2 * k + q) % leaves_per_rail
                    else:
                        scope, idx = pod_scopes[q], k % leaves_per_rail
                    leaf = b.leaf(scope, gpu, idx)
                    scope.downlinks[leaf] += 1
                    leaves.append(leaf)
                hosts.append({"name": f"h{server * gpus + gpu + 1}",
                              "ip": f"10.{pod}.{gpu}.{k + 1}", "leaves": leaves,
                              "server": f"sv{server + 1}", "gpu": gpu})
    _wire_up(b, scopes, tiers, planes, spines, cores)
    name = f"rail-{servers}x{gpus}-t{tiers}" + (f"-p{planes}" if planes > 1 else "")
    return {"name": name,
            "fabric": {"cell_size": 1024, "spray": spray, "cc": cc,
                       "queue": {"rate_pps": rate_pps, "depth": depth},
                       "ecn": {"kmin": 5, "kmax": 20, "pmax": 0.2}, "int": {"mode": "host-sink"}},
            "servers": settings, "switches": b.switches, "hosts": hosts, "links": b.links}


def _wire_up(b: _Builder, scopes: list[_Scope], tiers: int, planes: int,
             spines: int | None, cores: int | None) -> None:
    """Spines above every scope's leaves (two tiers: one scope per plane), then for three
    tiers each plane's cores above its pods' spines; non-blocking unless counts are given."""
    core_downlinks: dict[int, dict[str, int]] = {plane: {} for plane in range(planes)}
    for scope in scopes:
        count = spines or max(scope.downlinks.values())
        scope.spines = [b.next_switch("s", "spine") for _ in range(count)]
        received = b.uplinks(scope.downlinks, scope.spines)
        core_downlinks[scope.plane].update(received)
    if tiers == 2:
        return
    for plane in range(planes):
        below = core_downlinks[plane]
        count = cores or max(below.values())
        upper = [b.next_switch("c", "core") for _ in range(count)]
        b.uplinks(below, upper)
