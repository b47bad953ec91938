"""Multicast of the p4sim switch (tests/ptf/p4/switch_mcast.p4): one copy per replica of the
group (two replicas on one port give two copies; the ingress port is not pruned, as in
simple_switch), each copy carrying its replica's egress_rid in the probe header; groups
modified and deleted over P4Runtime.

    python -m netlab.ptf_runner --ports 4 test_switch_mcast
"""

from __future__ import annotations

from collections import Counter

from ptf import testutils
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import Probe, SwitchTest, program

from controlplane.entities import MulticastGroup, Replica

ING = "SwIngress"
T_MCAST = f"{ING}.mcast"
HOST_MAC = "02:00:00:00:0a:01"
GROUP_MAC = {1: "01:00:5e:00:00:01", 2: "01:00:5e:00:00:02"}


def probe(dst: str, seq: int, rid: int = 0, port: int = 0) -> Packet:
    return (Ether(src=HOST_MAC, dst=dst) / Probe(seq=seq, rid=rid, egress_port=port)
            / Raw(bytes(range(30))))


class McastTest(SwitchTest):
    P4_PROGRAM = program("switch_mcast.p4")

    def setUp(self) -> None:
        super().setUp()
        for grp, mac in GROUP_MAC.items():
            self.table_add(T_MCAST, {"hdr.ethernet.dst_addr": mac}, f"{ING}.set_mcast_grp",
                           grp=grp)

    def replicate(self, grp: int, ingress: int, replicas: list[Replica], seq: int) -> None:
        """Send one probe to group ``grp``; exactly one copy per replica must arrive."""
        self.send(ingress, probe(GROUP_MAC[grp], seq))
        want = Counter((r.port, bytes(probe(GROUP_MAC[grp], seq, r.instance, r.port)))
                       for r in replicas)
        got = Counter(self.receive_all(expect=len(replicas), settle=0.5))
        self.assertEqual(got, want)


class Replication(McastTest):
    """Every replica of a group gets its own copy with its rid; groups are independent;
    modify replaces the replica set; delete stops replication."""

    def runTest(self) -> None:
        g1 = [Replica(1, 1), Replica(2, 2), Replica(3, 3), Replica(2, 7), Replica(0, 9)]
        g2 = [Replica(3, 300), Replica(1, 100)]
        self.sw.insert(MulticastGroup(1, g1), MulticastGroup(2, g2))
        self.replicate(1, 0, g1, seq=1)
        self.replicate(2, 2, g2, seq=2)
        self.replicate(1, 3, g1, seq=3)

        (read,) = self.sw.read(MulticastGroup(2))
        self.assertEqual(sorted(read.replicas, key=lambda r: (r.port, r.instance)),
                         sorted(g2, key=lambda r: (r.port, r.instance)))

        g1_new = [Replica(3, 4), Replica(1, 5)]
        self.sw.modify(MulticastGroup(1, g1_new))
        self.replicate(1, 0, g1_new, seq=4)
        self.replicate(2, 1, g2, seq=5)

        # replicas with the same rid on distinct ports: identical copies (egress leaves
        # non-probe frames alone), a flood
        g3 = [Replica(1), Replica(2), Replica(3)]
        self.sw.insert(MulticastGroup(3, g3))
        self.table_add(T_MCAST, {"hdr.ethernet.dst_addr": "ff:ff:ff:ff:ff:ff"},
                       f"{ING}.set_mcast_grp", grp=3)
        flood = Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff", type=0x9000) / Raw(bytes(46))
        self.send(0, flood)
        testutils.verify_packets(self, flood, [1, 2, 3])
        testutils.verify_no_other_packets(self)

        self.sw.delete(MulticastGroup(1))
        self.send(0, probe(GROUP_MAC[1], 6))
        self.verify_dropped()
        self.replicate(2, 0, g2, seq=7)
