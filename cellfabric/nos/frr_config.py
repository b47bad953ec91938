"""FRR configuration for every switch of a fabric, computed from the topology: pure, no I/O.

ASNs follow RFC 7938 (section 5.2.1): every leaf (Tier 3) has its own ASN, the spines of one
pod (Tier 2 devices that serve the same leaves) share one, and the cores (Tier 1) share one;
in a two-tier fabric the spines are Tier 1 and all share one. The shared ASNs are what keep
valley paths out: a spine never accepts a route that already crossed a spine of its group.
All ASNs are private 4-byte ASNs (RFC 6996: 4200000000-4294967294).

Every fabric link is one /31 (RFC 3021) taken in link order from LINK_NET, the lower address
on the link's ``a`` end; one eBGP session runs over it with BFD. Leaves announce a /32 per
attached host (a dual-homed host is announced by both its leaves, so either path is used).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from topologies.model import Topology

ASN_CORE = 4200000000
ASN_SPINE_BASE = 4200000100  # + spine group index (0-based)
ASN_LEAF_BASE = 4200010000   # + leaf index in file order (0-based)
LINK_NET = ipaddress.IPv4Network("172.16.0.0/12")
ROUTER_ID_NET = ipaddress.IPv4Network("172.31.0.0/16")  # never announced; only names the router
MAX_PATHS = 64


@dataclass(frozen=True)
class BfdTimers:
    """BFD intervals in milliseconds; detection time is multiplier x receive interval."""
    tx_ms: int = 300
    rx_ms: int = 300
    multiplier: int = 3


@dataclass(frozen=True)
class Session:
    """One eBGP session seen from one end: the link, the local port and both addresses."""
    link: str
    port: int
    interface: str
    local_ip: str
    peer: str
    peer_ip: str
    peer_asn: int


@dataclass(frozen=True)
class SwitchRouting:
    name: str
    asn: int
    router_id: str
    sessions: tuple[Session, ...]
    prefixes: tuple[str, ...]  # announced by this switch (leaves: their hosts' /32s)


def port_interface(port: int) -> str:
    """Interface name of front-panel port ``port`` inside a switch's namespace."""
    return f"port{port}"


def _spine_groups(topo: Topology) -> dict[str, int]:
    """Group index of every spine: spines that link to the same set of leaves form a group
    (a pod of a three-tier Clos, or all spines of a two-tier fabric), numbered in the order
    their first member appears in the file."""
    groups: dict[frozenset[str], int] = {}
    out: dict[str, int] = {}
    for name, sw in topo.switches.items():
        if sw.role != "spine":
            continue
        leaves = frozenset(p for lk in topo.links_of(name) for p in (lk.a, lk.b)
                           if p != name and p in topo.switches
                           and topo.switches[p].role == "leaf")
        out[name] = groups.setdefault(leaves, len(groups))
    return out


def asn_layout(topo: Topology) -> dict[str, int]:
    """The ASN of every switch (see the module doc)."""
    groups = _spine_groups(topo)
    has_cores = any(sw.role == "core" for sw in topo.switches.values())
    asns: dict[str, int] = {}
    leaf_index = 0
    for name, sw in topo.switches.items():
        if sw.role == "leaf":
            asns[name] = ASN_LEAF_BASE + leaf_index
            leaf_index += 1
        elif sw.role == "core" or not has_cores:
            asns[name] = ASN_CORE  # Tier 1: cores, or a two-tier fabric's spines
        else:
            asns[name] = ASN_SPINE_BASE + groups[name]
    return asns


def link_addresses(topo: Topology) -> dict[str, tuple[str, str]]:
    """Per switch-to-switch link name: (address of its a end, of its b end), each a /31."""
    out: dict[str, tuple[str, str]] = {}
    base = int(LINK_NET.network_address)
    fabric_links = [lk for lk in topo.links if lk.a in topo.switches and lk.b in topo.switches]
    if 2 * len(fabric_links) > LINK_NET.num_addresses:
        raise ValueError(f"{topo.source}: {len(fabric_links)} fabric links do not fit {LINK_NET}")
    for i, lk in enumerate(fabric_links):
        a = ipaddress.IPv4Address(base + 2 * i)
        out[lk.name] = (str(a), str(a + 1))
    return out


def routing_plan(topo: Topology) -> dict[str, SwitchRouting]:
    """Every switch's ASN, router id, sessions (one per fabric link) and announced prefixes."""
    asns = asn_layout(topo)
    addrs = link_addresses(topo)
    sessions: dict[str, list[Session]] = {name: [] for name in topo.switches}
    for lk in topo.links:
        if lk.name not in addrs:
            continue
        ip_a, ip_b = addrs[lk.name]
        sessions[lk.a].append(Session(lk.name, lk.a_port, port_interface(lk.a_port), ip_a,
                                      lk.b, ip_b, asns[lk.b]))
        sessions[lk.b].append(Session(lk.name, lk.b_port, port_interface(lk.b_port), ip_b,
                                      lk.a, ip_a, asns[lk.a]))
    prefixes: dict[str, list[str]] = {name: [] for name in topo.switches}
    for host in topo.hosts.values():
        for leaf in host.leaves:
            prefixes[leaf].append(f"{host.ip}/32")
    plan = {}
    for name, sw in topo.switches.items():
        router_id = str(ROUTER_ID_NET.network_address + sw.device_id)
        plan[name] = SwitchRouting(name, asns[name], router_id,
                                   tuple(sorted(sessions[name], key=lambda s: s.port)),
                                   tuple(prefixes[name]))
    return plan


def zebra_conf(sw: SwitchRouting) -> str:
    lines = [f"hostname {sw.name}", "!"]
    for s in sw.sessions:
        # the address itself is the namespace's (cellfabric.nos.namespace): one owner
        lines += [f"interface {s.interface}", f" description {s.peer} {s.link}", "!"]
    return "\n".join(lines) + "\n"


def bfdd_conf(sw: SwitchRouting, timers: BfdTimers) -> str:
    """bfdd's: the timers as a profile the sessions name; every session's state change
    in bfdd.log, to the millisecond (the failure report's detection time reads it there)."""
    return "\n".join([
        f"hostname {sw.name}", "debug bfd peer", "!",
        "bfd", " profile fabric",
        f"  transmit-interval {timers.tx_ms}", f"  receive-interval {timers.rx_ms}",
        f"  detect-multiplier {timers.multiplier}", " exit", "exit", "!"]) + "\n"


def bgpd_conf(sw: SwitchRouting) -> str:
    """bgpd's configuration: fast data-center timers, no policy required on eBGP (FRR 8
    otherwise exchanges nothing without a route-map), multipath across differing AS paths."""
    lines = [f"hostname {sw.name}", "debug bgp zebra", "!", f"router bgp {sw.asn}",
             f" bgp router-id {sw.router_id}",
             # a session's every change, with its reason (BFD down, hold timer), in bgpd.log
             " bgp log-neighbor-changes",
             " no bgp ebgp-requires-policy",
             " no bgp network import-check",
             " bgp bestpath as-path multipath-relax",
             " timers bgp 3 9"]
    for s in sw.sessions:
        lines += [f" neighbor {s.peer_ip} remote-as {s.peer_asn}",
                  f" neighbor {s.peer_ip} description {s.peer} {s.link}",
                  f" neighbor {s.peer_ip} timers connect 2",
                  f" neighbor {s.peer_ip} bfd",
                  f" neighbor {s.peer_ip} bfd profile fabric"]
    lines += [" !", " address-family ipv4 unicast", f"  maximum-paths {MAX_PATHS}"]
    lines += [f"  network {p}" for p in sw.prefixes]
    lines += [" exit-address-family", "exit", "!"]
    return "\n".join(lines) + "\n"
