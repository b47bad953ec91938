"""Where a flow's cells go through the fabric, from the topology and the controller's plan:
the paths the channel scheduler places channels on.

fabric.p4 picks an ECMP member as the P4 source says (p4src/include/routing.p4): h = the
low 16 bits of the CRC-32 of (IPv4 source, IPv4 destination, protocol, UDP source port, UDP
destination port), key = bits 31..16 of h x the switch's salt (controlplane.fabric_plan's
hash_salt), member = key mod the group's live members, the ports of the switch's shortest
paths to the destination in port order (fabric_plan.next_hops over the links that are up:
a down port leaves its group). A NIC of two ports sends its cells over both in turn, so a
flow's path is the union of one walk from each of its NIC's live leaves.
"""

from __future__ import annotations

import socket
import struct
import zlib
from functools import lru_cache

from controlplane.fabric_plan import hash_salt, next_hops
from hosts.wire import ROCE_UDP_PORT
from topologies.model import Topology

UDP = 17
Hop = tuple[str, str]  # a directed link: (node, next node)
LinkSet = frozenset[frozenset[str]]  # links down, as pairs of node names


@lru_cache(maxsize=4096)
def _salt(switch: str) -> int:
    return hash_salt(switch)


def select_key(src_ip: str, dst_ip: str, sport: int, salt: int) -> int:
    fields = (socket.inet_aton(src_ip) + socket.inet_aton(dst_ip) + bytes([UDP])
              + struct.pack(">HH", sport, ROCE_UDP_PORT))
    return (((zlib.crc32(fields) & 0xFFFF) * salt) & 0xFFFFFFFF) >> 16


class PathModel:
    """ECMP paths of flows over one topology with some links down (next hops cached)."""

    def __init__(self, topo: Topology, down: LinkSet = frozenset()) -> None:
        self.topo = topo
        self.down = down
        self.hops = next_hops(topo, set(down))
        self.tier = {name: sw.tier for name, sw in topo.switches.items()}

    def live_leaves(self, host: str) -> list[str]:
        """The leaves of a host's NIC ports whose host link is up."""
        return [leaf for leaf in self.topo.hosts[host].leaves
                if frozenset((host, leaf)) not in self.down]

    def path(self, src: str, dst: str, sport: int) -> list[Hop]:
        """Every directed link a flow's cells cross, host links included; [] between two GPUs
        of one server joined by NVLink (no switch sees those)."""
        topo = self.topo
        if nvlinked(topo, src, dst):
            return []
        src_ip, dst_ip = topo.hosts[src].ip, topo.hosts[dst].ip
        out: list[Hop] = []
        for leaf in self.live_leaves(src):
            out.append((src, leaf))
            node, seen = leaf, 0
            while node in topo.switches and seen < 16:
                ports = self.hops[node].get(dst)
                if not ports:
                    break  # no route: the cells are dropped here
                port = ports[select_key(src_ip, dst_ip, sport, _salt(node)) % len(ports)]
                peer, _ = topo.peer(node, port)
                out.append((node, peer))
                node, seen = peer, seen + 1
        return out

    def uplinks(self, hops: list[Hop]) -> list[Hop]:
        """The switch-to-switch hops that go up a tier (leaf to spine, spine to core)."""
        return [(a, b) for a, b in hops
                if a in self.tier and b in self.tier and self.tier[b] > self.tier[a]]

    def fabric_links(self, hops: list[Hop]) -> list[Hop]:
        """The switch-to-switch hops (up and down): the links channels compete for."""
        return [(a, b) for a, b in hops if a in self.tier and b in self.tier]


def nvlinked(topo: Topology, src: str, dst: str) -> bool:
    """GPUs of one server talk over their NVLink, never the fabric (as hostplan sends it)."""
    return topo.same_server(src, dst)
