"""The control plane's per-switch hash salts decorrelate the tiers of a fat-tree.

A model of the data plane's choice written from the hash definition in p4src/README.md (zlib
CRC-32 of the fields, low 16 bits, key = bits 31..16 of h * salt, member = key mod n over the
group's ports in order) follows cells of cross-pod flows through the planned groups of a k=4
fat-tree: with the planned salts every core link carries its share; with one salt for every
switch (what an unsalted program amounts to) half of the core links carry nothing."""

from __future__ import annotations

import socket
import struct
import zlib
from collections import Counter

from controlplane.entities import TableEntry
from controlplane.fabric_plan import T_GROUP_MODE, hash_salt, next_hops, plan_fabric
from topologies.generators import generate


def _key(fields: bytes, salt: int) -> int:
    return (((zlib.crc32(fields) & 0xFFFF) * salt) & 0xFFFFFFFF) >> 16


def _core_loads(salt_of) -> Counter:
    topo = generate("fat-tree:k=4")
    hops = next_hops(topo, set())
    hosts = list(topo.hosts.values())
    loads: Counter = Counter()
    for i, src in enumerate(hosts):
        dst = hosts[(i + 4) % len(hosts)]  # next pod: every flow crosses the core
        for psn in range(64):
            fields = (socket.inet_aton(src.ip) + socket.inet_aton(dst.ip) + bytes([17])
                      + struct.pack(">HH", 49152 + i, 4791) + psn.to_bytes(3, "big"))
            node = src.leaves[0]
            while node in topo.switches:
                ports = hops[node][dst.name]
                port = ports[_key(fields, salt_of(node)) % len(ports)]
                peer, _ = topo.peer(node, port)
                if topo.switches[node].role == "spine" and peer.startswith("c"):
                    loads[(node, peer)] += 1
                node = peer
    return loads


def test_planned_salts_are_per_switch_and_in_the_group_entries() -> None:
    topo = generate("fat-tree:k=4")
    plans = plan_fabric(topo)
    salts = {}
    for name, plan in plans.items():
        modes = [e for e in plan.entities if isinstance(e, TableEntry)
                 and e.table == T_GROUP_MODE]
        assert modes and {e.params["salt"] for e in modes} == {hash_salt(name)}
        salts[name] = hash_salt(name)
    assert len(set(salts.values())) == len(salts)
    assert all(s & 1 and s >= 1 << 16 for s in salts.values())


def test_salted_spray_uses_every_core_link() -> None:
    loads = _core_loads(hash_salt)
    assert len(loads) == 16  # 8 aggregation switches x 2 core uplinks
    mean = sum(loads.values()) / len(loads)
    assert min(loads.values()) >= 0.6 * mean, loads


def test_one_salt_everywhere_polarizes() -> None:
    loads = _core_loads(lambda _name: 0x10000)
    assert len(loads) == 8, loads  # the second core uplink of every aggregation switch idles
