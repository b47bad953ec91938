"""Topology files: YAML in, a validated ``Topology`` out, with one-line errors.

A topology names switches (role ``leaf``/``spine``/``core``, tier 1 = leaf), hosts (each on one
leaf, or two for dual-homed hosts; optionally a GPU of an AI server, see below), links (with a queue rate in packets per second and a depth in
packets, as simple_switch's ``set_queue_rate``/``set_queue_depth``), and fabric-wide settings:
cell size, spray mode, ECN thresholds, INT, tenants. Port numbers are assigned from 1 in the
order links appear in the file, per switch and per host, the way Mininet numbers them, so a file
fully determines every port the controller programs.

AI servers (optional, backward compatible: a file without them loads as before): a host with
``server: NAME`` and ``gpu: I`` is GPU ``I`` of that server (its rank, its NIC and so its rail
``I``); a server's GPUs are numbered 0..G-1. The GPUs of one server are joined pairwise by
intra-server (NVLink-like) links, ``nvlinks``, at ``servers.nvlink_rate``: the top-level
``servers: {nvlink_rate: 400G, nic_rate: 100G}`` says how much faster than a NIC port
(``nic_rate``, the rate the file's links stand for) an NVLink is, so a link of R packets/s
makes an NVLink of R x nvlink_rate / nic_rate. NVLink ports are numbered after a host's
fabric ports; they are not switch links and no switch ever sees their traffic.

Errors are ``TopologyError("FILE: where: what")``, one line each.
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hosts.cc import NAMES as CC_MODES  # the rate controls registered (hosts.cc), read live
from topologies.servers import (
    NvLinkSpec,
    ServerSettings,
    ServerSpec,
    gpu_of,
    nvlinks_of,
    server_settings,
    servers_of,
)

SPRAY_MODES = ("ecmp", "spray", "round-robin", "adaptive")
ROLES = {"leaf": 1, "spine": 2, "core": 3}
INT_MODES = ("off", "host-sink", "switch-sink")
_NAME = re.compile(r"^[a-z][a-z0-9]{0,5}$")  # short: names end up inside interface names


# Where the runner's switch N (its device_id) listens on 127.0.0.1: P4Runtime on GRPC_BASE + N,
# the runtime admin channel (queue settings) on THRIFT_BASE + N.
GRPC_BASE = 50100
THRIFT_BASE = 29090


class TopologyError(ValueError):
    """A topology file is invalid; the message is one line saying where and what."""


@dataclass(frozen=True)
class QueueSpec:
    rate_pps: int  # 0 = unlimited (simple_switch's default)
    depth: int  # packets


@dataclass(frozen=True)
class EcnSpec:
    kmin: int  # packets: below this never mark
    kmax: int  # packets: at or above this always mark
    pmax: float  # marking probability reached at kmax (DCQCN's RED-like profile)


@dataclass(frozen=True)
class IntSpec:
    mode: str  # off | host-sink | switch-sink
    collector: str | None  # host name receiving Telemetry Reports (switch-sink)


@dataclass
class FabricSpec:
    cell_size: int = 1024
    spray: str = "spray"
    cc: str = "dcqcn"
    queue: QueueSpec = QueueSpec(rate_pps=2000, depth=64)
    ecn: EcnSpec = EcnSpec(kmin=5, kmax=20, pmax=0.2)
    int: IntSpec = IntSpec(mode="host-sink", collector=None)
    tenants: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class SwitchSpec:
    name: str
    role: str
    device_id: int
    node_id: int  # INT switch id

    @property
    def tier(self) -> int:
        return ROLES[self.role]


@dataclass
class HostSpec:
    name: str
    ip: str
    mac: str
    leaves: list[str]  # one, or two for a dual-homed host
    server: str | None = None  # the AI server this host is a GPU of (None: a plain host)
    gpu: int | None = None  # its GPU index in that server: its rail

    def nic_mac(self, index: int) -> str:
        """MAC of host port ``index`` (0 = the one on ``leaves[0]``). The second port of a
        dual-homed host differs in the first octet's locally-administered bits, and so does
        each NVLink port after them (0x0a, 0x0e, ...: still locally administered, unicast)."""
        if index == 0:
            return self.mac
        return f"{(0x02 | (index << 2)) & 0xFE:02x}{self.mac[2:]}"


@dataclass
class LinkSpec:
    a: str
    b: str
    a_port: int
    b_port: int
    queue: QueueSpec

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


@dataclass
class Topology:
    name: str
    source: str
    fabric: FabricSpec
    switches: dict[str, SwitchSpec]
    hosts: dict[str, HostSpec]
    links: list[LinkSpec]
    servers: dict[str, ServerSpec] = field(default_factory=dict)
    nvlinks: list[NvLinkSpec] = field(default_factory=list)
    server_settings: ServerSettings = field(default_factory=ServerSettings)
    # (node, port) -> (peer, peer port): built on first use and again whenever links were
    # added since (planning a k=16 fat-tree asks 12 k times; a scan of every link each time
    # was a third of it)
    _peers: dict[tuple[str, int], tuple[str, int]] | None = field(
        default=None, init=False, repr=False, compare=False)
    # (links counted, adjacency with nothing down): the same rule as _peers (a simulator's
    # set-up searches from every host twice; rebuilding the map each time was most of it)
    _adj: tuple[int, dict[str, list[str]]] | None = field(
        default=None, init=False, repr=False, compare=False)
    # node -> its links; (gpu, peer gpu) -> its NVLink port; host -> distances with nothing
    # down: built on first use and again when links (NVLinks) were added, as _peers. A
    # simulated collective plans every step's flows from these (a 128-rank ring asked 230 k
    # times for a host's links and searched the fabric from every host at each of 254 steps)
    _by_node: tuple[int, dict[str, list[LinkSpec]]] | None = field(
        default=None, init=False, repr=False, compare=False)
    _nv_ports: tuple[int, dict[tuple[str, str], int], dict[str, int]] | None = field(
        default=None, init=False, repr=False, compare=False)
    _dist: tuple[int, dict[str, dict[str, int]]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def same_server(self, a: str, b: str) -> bool:
        """Whether two different hosts are GPUs of one server (their traffic is NVLink's)."""
        sa = self.hosts[a].server
        return a != b and sa is not None and sa == self.hosts[b].server

    def nvlink_port(self, src: str, dst: str) -> int:
        """``src``'s host port (1-based) of its NVLink to ``dst``, a GPU of its server."""
        try:
            return self._nv_index()[0][(src, dst)]
        except KeyError:
            raise KeyError(f"no NVLink from {src} to {dst}") from None

    def _nv_index(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """(src, dst) -> src's NVLink port, and host -> its NVLinks (kept as _peers is)."""
        if self._nv_ports is None or self._nv_ports[0] != len(self.nvlinks):
            ports: dict[tuple[str, str], int] = {}
            count: dict[str, int] = {}
            for nv in self.nvlinks:  # the first NVLink of a pair wins, as a scan's
                ports.setdefault((nv.a, nv.b), nv.a_port)
                ports.setdefault((nv.b, nv.a), nv.b_port)
                for end in {nv.a, nv.b}:
                    count[end] = count.get(end, 0) + 1
            self._nv_ports = (len(self.nvlinks), ports, count)
        return self._nv_ports[1], self._nv_ports[2]

    def host_ports(self, host: str) -> int:
        """All of a host's ports: its fabric NIC ports, then its NVLink ports."""
        return len(self.hosts[host].leaves) + self._nv_index()[1].get(host, 0)

    def links_of(self, node: str) -> list[LinkSpec]:
        """``node``'s links, in the order of ``links`` (a new list)."""
        if self._by_node is None or self._by_node[0] != len(self.links):
            by_node: dict[str, list[LinkSpec]] = {}
            for lk in self.links:
                by_node.setdefault(lk.a, []).append(lk)
                if lk.b != lk.a:
                    by_node.setdefault(lk.b, []).append(lk)
            self._by_node = (len(self.links), by_node)
        return list(self._by_node[1].get(node, ()))

    def port_of(self, node: str, peer: str) -> list[int]:
        """Ports of ``node`` that face ``peer`` (several if parallel links)."""
        ports = []
        for lk in self.links:
            if (lk.a, lk.b) == (node, peer):
                ports.append(lk.a_port)
            elif (lk.b, lk.a) == (node, peer):
                ports.append(lk.b_port)
        return ports

    def peer(self, node: str, port: int) -> tuple[str, int]:
        peers = self._peers
        if peers is None or len(peers) != 2 * len(self.links):
            peers = {}
            for lk in reversed(self.links):  # the first link on a port wins, as a scan's
                peers[(lk.b, lk.b_port)] = (lk.a, lk.a_port)
                peers[(lk.a, lk.a_port)] = (lk.b, lk.b_port)
            self._peers = peers
        try:
            return peers[(node, port)]
        except KeyError:
            raise KeyError(f"{node} has no port {port}") from None

    def adjacency(self, down: Collection[frozenset[str]] = frozenset()) -> dict[str, list[str]]:
        """Each node's peers over the links not in ``down`` (each a frozenset of its ends).
        With nothing down, one map kept until links are added: read it, never change it."""
        if not down and self._adj is not None and self._adj[0] == len(self.links):
            return self._adj[1]
        adj: dict[str, list[str]] = {}
        # nothing down (the usual case): no frozenset per link to look up
        links = self.links if not down else [lk for lk in self.links
                                             if frozenset((lk.a, lk.b)) not in down]
        for lk in links:
            adj.setdefault(lk.a, []).append(lk.b)
            adj.setdefault(lk.b, []).append(lk.a)
        if not down:
            self._adj = (len(self.links), adj)
        return adj

    def distances(self, src: str, down: Collection[frozenset[str]] = frozenset(),
                  adj: dict[str, list[str]] | None = None) -> dict[str, int]:
        """Links on a shortest path from ``src`` to every node it reaches, over links not in
        ``down``; hosts never forward, so a path passes through no host but its ends. The one
        search the controller's routes, the host plans' round trips and the simulator's idle
        latencies all use (``adj``: ``adjacency(down)``, when searching from many nodes).
        With nothing down the answer is kept until links are added: read it, never change
        it."""
        kept = not down and (adj is None or adj is self.adjacency())
        if kept:
            if self._dist is None or self._dist[0] != len(self.links):
                self._dist = (len(self.links), {})
            found = self._dist[1].get(src)
            if found is not None:
                return found
        adj = self.adjacency(down) if adj is None else adj
        dist = {src: 0}
        todo = deque([src])
        while todo:
            node = todo.popleft()
            if node != src and node in self.hosts:
                continue
            for peer in adj.get(node, ()):
                if peer not in dist:
                    dist[peer] = dist[node] + 1
                    todo.append(peer)
        if kept:
            self._dist[1][src] = dist  # type: ignore[index]
        return dist

    def link(self, name: str) -> LinkSpec:
        """A link by ``a-b`` (either order)."""
        a, sep, b = name.partition("-")
        for lk in self.links:
            if {lk.a, lk.b} == {a, b} and sep:
                return lk
        raise TopologyError(f"{self.source}: no link '{name}' (links are named A-B)")

    def tenant_of(self, host: str) -> int:
        """Tenant number (1-based, in file order); 0 when the fabric has no tenants."""
        for i, members in enumerate(self.fabric.tenants.values(), start=1):
            if host in members:
                return i
        return 0


class _Reader:
    """Typed access to the YAML tree, raising errors that name the file and the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, what: str) -> TopologyError:
        return TopologyError(f"{self.source}: {where}: {what}")

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def integer(self, value: Any, where: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {value!r}")
        if not lo <= value <= hi:
            raise self.fail(where, f"{value} out of range [{lo}, {hi}]")
        return value

    def number(self, value: Any, where: str, lo: float, hi: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"expected a number, got {value!r}")
        if not lo <= value <= hi:
            raise self.fail(where, f"{value} out of range [{lo}, {hi}]")
        return float(value)

    def choice(self, value: Any, where: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(where, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def only(self, value: dict[str, Any], where: str, keys: set[str]) -> None:
        unknown = sorted(set(value) - keys)
        if unknown:
            raise self.fail(where, f"unknown field '{unknown[0]}' (known: "
                                   f"{', '.join(sorted(keys))})")


def _queue(r: _Reader, raw: Any, where: str, default: QueueSpec) -> QueueSpec:
    if raw is None:
        return default
    raw = r.mapping(raw, where)
    r.only(raw, where, {"rate_pps", "depth"})
    return QueueSpec(
        rate_pps=r.integer(raw.get("rate_pps", default.rate_pps), f"{where}.rate_pps", 0, 10**6),
        depth=r.integer(raw.get("depth", default.depth), f"{where}.depth", 1, 16384),
    )


def _fabric(r: _Reader, raw: Any) -> FabricSpec:
    spec = FabricSpec()
    if raw is None:
        return spec
    raw = r.mapping(raw, "fabric")
    r.only(raw, "fabric", {"cell_size", "spray", "cc", "queue", "ecn", "int", "tenants"})
    spec.cell_size = r.integer(raw.get("cell_size", spec.cell_size), "fabric.cell_size", 64, 4096)
    spec.spray = r.choice(raw.get("spray", spec.spray), "fabric.spray", SPRAY_MODES)
    spec.cc = r.choice(raw.get("cc", spec.cc), "fabric.cc", CC_MODES)
    spec.queue = _queue(r, raw.get("queue"), "fabric.queue", spec.queue)
    if "ecn" in raw:
        ecn = r.mapping(raw["ecn"], "fabric.ecn")
        r.only(ecn, "fabric.ecn", {"kmin", "kmax", "pmax"})
        kmin = r.integer(ecn.get("kmin", spec.ecn.kmin), "fabric.ecn.kmin", 0, 16384)
        kmax = r.integer(ecn.get("kmax", spec.ecn.kmax), "fabric.ecn.kmax", 0, 16384)
        if kmax < kmin:
            raise r.fail("fabric.ecn", f"kmax ({kmax}) must be >= kmin ({kmin})")
        pmax = r.number(ecn.get("pmax", spec.ecn.pmax), "fabric.ecn.pmax", 0.0, 1.0)
        spec.ecn = EcnSpec(kmin, kmax, pmax)
    if "int" in raw:
        it = r.mapping(raw["int"], "fabric.int")
        r.only(it, "fabric.int", {"mode", "collector"})
        spec.int = IntSpec(mode=r.choice(it.get("mode", "host-sink"), "fabric.int.mode",
                                         INT_MODES),
                           collector=it.get("collector"))
    if "tenants" in raw:
        tenants = r.mapping(raw["tenants"], "fabric.tenants")
        spec.tenants = {str(k): [str(h) for h in r.seq(v, f"fabric.tenants.{k}")]
                        for k, v in tenants.items()}
    return spec


def router_mac(device_id: int) -> str:
    """The one MAC address a switch routes with (all its ports): the fabric is layer 3."""
    return "02:fa:00:00:{:02x}:{:02x}".format(*divmod(device_id, 256))


def _mac_for(index: int) -> str:
    # Locally administered unicast, unique per host in the file.
    return "02:cf:00:00:{:02x}:{:02x}".format(*divmod(index, 256))


def parse_topology(data: Any, source: str = "<topology>") -> Topology:
    r = _Reader(source)
    root = r.mapping(data, "top level")
    r.only(root, "top level", {"name", "fabric", "switches", "hosts", "links", "servers"})
    fabric = _fabric(r, root.get("fabric"))
    settings = server_settings(r, root.get("servers"))
    names: set[str] = set()

    def new_name(value: Any, where: str) -> str:
        if not isinstance(value, str) or not _NAME.match(value):
            raise r.fail(where, f"bad name {value!r} (lower-case letter then up to 5 letters or "
                                "digits: names become part of interface names)")
        if value in names:
            raise r.fail(where, f"duplicate name '{value}'")
        names.add(value)
        return value

    switches: dict[str, SwitchSpec] = {}
    for i, raw in enumerate(r.seq(root.get("switches"), "switches")):
        where = f"switches[{i}]"
        raw = r.mapping(raw, where)
        r.only(raw, where, {"name", "role"})
        name = new_name(raw.get("name"), f"{where}.name")
        role = r.choice(raw.get("role"), f"{where}.role", tuple(ROLES))
        switches[name] = SwitchSpec(name, role, device_id=i + 1, node_id=i + 1)

    hosts: dict[str, HostSpec] = {}
    ips: set[str] = set()
    for i, raw in enumerate(r.seq(root.get("hosts"), "hosts")):
        where = f"hosts[{i}]"
        raw = r.mapping(raw, where)
        r.only(raw, where, {"name", "ip", "leaf", "leaves", "server", "gpu"})
        name = new_name(raw.get("name"), f"{where}.name")
        try:
            ip = str(ipaddress.IPv4Address(raw.get("ip")))
        except ValueError as exc:
            raise r.fail(f"{where}.ip", f"not an IPv4 address: {raw.get('ip')!r}") from exc
        if ip in ips:
            raise r.fail(f"{where}.ip", f"duplicate address {ip}")
        ips.add(ip)
        leaves = _host_leaves(r, raw, where, switches)
        server, gpu = gpu_of(r, raw, where, _NAME)
        hosts[name] = HostSpec(name, ip, _mac_for(i + 1), leaves, server, gpu)
    servers = servers_of(r, hosts)

    next_port: dict[str, int] = {}
    links: list[LinkSpec] = []
    for i, raw in enumerate(r.seq(root.get("links", []), "links")):
        where = f"links[{i}]"
        if isinstance(raw, list):
            raw = {"a": raw[0], "b": raw[1]} if len(raw) == 2 else raw
        raw = r.mapping(raw, where)
        r.only(raw, where, {"a", "b", "queue"})
        a, b = raw.get("a"), raw.get("b")
        for end, value in (("a", a), ("b", b)):
            if value not in switches:
                raise r.fail(f"{where}.{end}", f"unknown switch {value!r} (host links come "
                                               "from hosts[].leaves)")
        if a == b:
            raise r.fail(where, f"link from '{a}' to itself")
        queue = _queue(r, raw.get("queue"), f"{where}.queue", fabric.queue)
        links.append(_add_link(next_port, a, b, queue))
    for host in hosts.values():
        for leaf in host.leaves:
            links.append(_add_link(next_port, leaf, host.name, fabric.queue))

    for tenant, members in fabric.tenants.items():
        for h in members:
            if h not in hosts:
                raise r.fail(f"fabric.tenants.{tenant}", f"unknown host '{h}'")
    if fabric.int.collector is not None and fabric.int.collector not in hosts:
        raise r.fail("fabric.int.collector", f"unknown host '{fabric.int.collector}'")
    name = str(root.get("name") or Path(source).stem)
    return Topology(name, source, fabric, switches, hosts, links, servers,
                    nvlinks_of(servers, hosts), settings)


def _host_leaves(r: _Reader, raw: dict[str, Any], where: str,
                 switches: dict[str, SwitchSpec]) -> list[str]:
    leaves = raw.get("leaves", [raw["leaf"]] if "leaf" in raw else None)
    leaves = [str(x) for x in r.seq(leaves, f"{where}.leaves")]
    if not 1 <= len(leaves) <= 2:
        raise r.fail(f"{where}.leaves", "a host attaches to one leaf, or two (dual-homed)")
    for leaf in leaves:
        if switches.get(leaf) is None or switches[leaf].role != "leaf":
            raise r.fail(f"{where}.leaves", f"'{leaf}' is not a leaf switch")
    return leaves


def _add_link(next_port: dict[str, int], a: str, b: str, queue: QueueSpec) -> LinkSpec:
    pa = next_port.get(a, 1)
    pb = next_port.get(b, 1)
    next_port[a], next_port[b] = pa + 1, pb + 1
    return LinkSpec(a, b, pa, pb, queue)


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_topology(path: str | Path) -> Topology:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        # libyaml's loader where PyYAML was built with it: the same data, ~9x less CPU on a
        # generated k=8 fat-tree (0.16 -> 0.02 s), which every simulated run reads first
        data = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise TopologyError(f"{where}: {problem}") from exc
    return parse_topology(data, str(path))
