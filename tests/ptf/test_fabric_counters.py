"""fabric.p4: per-port and per-table counters; CNP/ACK priority classification."""

from __future__ import annotations

from fabric_lib import (
    EGR,
    HOST_MAC,
    ING,
    ROCE_PORT,
    ROUTER_MAC,
    T_LPM,
    T_PRIORITY,
    T_TRANSIT,
    T_WATCHLIST,
    FabricTest,
    bitmap,
    roce_cell,
    routed,
)
from ptf import testutils
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controlplane.p4rt import CounterEntry

HOP0 = 14 + 20 + 8 + 4 + 12


class PortAndTableCounters(FabricTest):
    """port_rx/port_tx count packets and bytes per port; ipv4_lpm's direct counter counts the
    packets that hit each route."""

    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [3])
        self.add_route("10.0.2.0/24", 1)

    def runTest(self) -> None:
        sizes = (60, 200, 1000)
        for n, size in enumerate(sizes):
            pkt = (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src="10.0.0.1", dst="10.0.2.3", id=n)
                   / UDP(sport=1, dport=2))
            pkt = pkt / bytes(size - len(pkt))
            self.send(1, pkt)
            testutils.verify_packet(self, routed(pkt, 3), 3)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.counter(f"{ING}.port_rx", 1), (3, sum(sizes)))
        self.assertEqual(self.counter(f"{EGR}.port_tx", 3), (3, sum(sizes)))
        self.assertEqual(self.counter(f"{ING}.port_rx", 2), (0, 0))
        self.assertEqual(self.direct_counter(T_LPM, {"hdr.ipv4.dst_addr": "10.0.2.0/24"}),
                         (3, sum(sizes)))
        every = self.sw.read(CounterEntry(f"{EGR}.port_tx"))
        self.assertEqual(sum(e.packets for e in every), 3)


class FeedbackPriority(FabricTest):
    """ACK (0x11) and CNP (0x81) get the feedback priority, data cells do not. The queue a
    packet went through is visible as the INT queue id of this hop (bit 3). With
    --priority-queues N >= 2 (test param priority_queues) the priority is 1, else 0 (a single
    queue: simple_switch drops priorities it has no queue for)."""

    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [2])
        self.add_route("10.0.2.0/24", 1)
        queues = int(testutils.test_params_get().get("priority_queues", 1))
        self.prio = 1 if queues >= 2 else 0
        for opcode in (0x11, 0x81):
            self.table_add(T_PRIORITY, {"hdr.bth.opcode": opcode}, f"{ING}.feedback.set_priority",
                           prio=self.prio)
        self.table_add(T_TRANSIT, {"hdr.int_shim.int_type": 1}, f"{EGR}.int_egress.int_transit",
                       node_id=1)
        self.table_add(T_WATCHLIST, {"meta.l4_dst_port": f"{ROCE_PORT}&&&0xffff"},
                       f"{ING}.int_ingress.int_source", priority=1,
                       instructions=bitmap(3), max_hops=4)

    def queue_id(self, pkt) -> int:
        self.send(0, pkt)
        got = self.collect(1)
        self.assertEqual(len(got), 1)
        port, data = got[0]
        self.assertEqual(port, 2)
        self.assertEqual(data[14 + 1] >> 2, 0x17, "not INT-marked")
        return data[HOP0]

    def runTest(self) -> None:
        udp = UDP(sport=49152, dport=ROCE_PORT, chksum=0)
        ip = IP(src="10.0.0.1", dst="10.0.2.1", tos=2)
        eth = Ether(src=HOST_MAC, dst=ROUTER_MAC)
        ack = eth / ip / udp / BTH(opcode=0x11, psn=5, dqpn=3, icrc=0) / AETH(syndrome=0, msn=1)
        cnp = eth / ip / udp / BTH(opcode=0x81, becn=1, dqpn=3, icrc=0) / Raw(bytes(16))
        self.assertEqual(self.queue_id(ack), self.prio)
        self.assertEqual(self.queue_id(cnp), self.prio)
        self.assertEqual(self.queue_id(roce_cell(9)), 0)
        self.assertEqual(self.direct_counter(T_PRIORITY, {"hdr.bth.opcode": 0x11})[0], 1)
        self.assertEqual(self.direct_counter(T_PRIORITY, {"hdr.bth.opcode": 0x81})[0], 1)
