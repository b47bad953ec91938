"""Packet I/O of the p4sim switch (tests/ptf/p4/switch_packetio.p4): clone to CPU and punt as
P4Runtime packet-in with the ingress port and a reason decoded from the controller header, and
packet-out whose egress_port metadata picks the port the frame leaves on.

Ingress-to-egress clones follow simple_switch.md: the clone's contents are the packet as it
began ingress (no ingress modifications), and a preserved field list carries the metadata's
*final* ingress values (here a reason set by a table applied after the clone call).

Needs the switch started with a CPU port (the runner's ``--cpu-port``, 510 by default); the
program's CPU_PORT is set from the ``cpu_port`` test param.

    python -m netlab.ptf_runner --ports 4 --cpu-port 510 test_switch_packetio
"""

from __future__ import annotations

from ptf import testutils
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import DROP_WAIT, Probe, SwitchTest, program

from controlplane.entities import CloneSession, PacketIn, Replica

ING = "SwIngress"
T_FWD = f"{ING}.fwd"
T_PUNT = f"{ING}.punt"
CLONE_SESSION = 100
T_TAG = f"{ING}.tag"
HOST_MAC = "02:00:00:00:0a:01"
TAGGED_HOST_MAC = "02:00:00:00:0a:05"
REWRITTEN_MAC = "02:00:00:00:0e:99"
REASON_CLONE, REASON_PUNT, REASON_TAGGED = 1, 2, 5


def frame(ether_type: int, n: int, src: str = HOST_MAC) -> Packet:
    body = Probe(seq=n) if ether_type == 0x88B5 else Raw(bytes(20))
    return (Ether(src=src, dst="02:00:00:00:0e:01", type=ether_type) / body
            / Raw(bytes((n + i) & 0xFF for i in range(40))))


def rewritten(pkt: Packet) -> Packet:
    out = pkt.copy()
    out[Ether].src = REWRITTEN_MAC
    return out


class PacketIoTest(SwitchTest):
    P4_PROGRAM = program("switch_packetio.p4")

    def setUp(self) -> None:
        # checked before connecting: a setUp that fails after connecting leaves the stream open
        if testutils.test_params_get().get("cpu_port") in (None, ""):
            self.fail("test_switch_packetio needs the switch's CPU port: run the runner with "
                      "a CPU port (--cpu-port, test param cpu_port)")
        super().setUp()
        # port 1 -> 2 rewrites the source MAC; 3 -> 0 and 2 -> 1 forward unchanged
        self.table_add(T_FWD, {"smeta.ingress_port": 1}, f"{ING}.forward_rewrite", port=2,
                       src_mac=REWRITTEN_MAC)
        for ingress, egress in ((3, 0), (2, 1)):
            self.table_add(T_FWD, {"smeta.ingress_port": ingress}, f"{ING}.forward",
                           port=egress)

    def expect_packet_in(self, payload: bytes, ingress_port: int, reason: int) -> None:
        pkt = self.sw.packet_in(timeout=5)
        self.assertIsNotNone(pkt, "a packet-in arrives")
        assert isinstance(pkt, PacketIn)
        self.assertEqual(pkt.payload, payload)
        self.assertEqual(pkt.metadata, {"ingress_port": ingress_port, "reason": reason})

    def expect_no_packet_in(self) -> None:
        pkt = self.sw.packet_in(timeout=DROP_WAIT)
        self.assertIsNone(pkt, f"unexpected packet-in {pkt}")


class CloneToCpu(PacketIoTest):
    """Matching frames are forwarded and a copy, as it entered ingress, reaches the controller
    with its ingress port and the final value of the reason; other frames are only
    forwarded."""

    def runTest(self) -> None:
        self.sw.insert(CloneSession(CLONE_SESSION, [Replica(self.cpu_port)]))
        self.table_add(T_PUNT, {"hdr.ethernet.ether_type": "0x88b5&&&0xffff"},
                       f"{ING}.clone_to_cpu", priority=10)
        self.table_add(T_TAG, {"hdr.ethernet.src_addr": TAGGED_HOST_MAC}, f"{ING}.set_reason",
                       reason=REASON_TAGGED)
        for n, (ingress, egress) in enumerate(((1, 2), (3, 0), (2, 1))):
            pkt = frame(0x88B5, n)
            self.send(ingress, pkt)
            testutils.verify_packet(self, rewritten(pkt) if ingress == 1 else pkt, egress)
            self.expect_packet_in(bytes(pkt), ingress, REASON_CLONE)
        testutils.verify_no_other_packets(self)
        # the tag table runs after the clone call: the clone gets its final value
        tagged = frame(0x88B5, 7, src=TAGGED_HOST_MAC)
        self.send(3, tagged)
        testutils.verify_packet(self, tagged, 0)
        self.expect_packet_in(bytes(tagged), 3, REASON_TAGGED)
        other = frame(0x9000, 9)
        self.send(1, other)
        testutils.verify_packet(self, rewritten(other), 2)
        self.expect_no_packet_in()
        testutils.verify_no_other_packets(self)


class PuntToCpu(PacketIoTest):
    """send_to_cpu overrides forwarding: the frame, as ingress left it, reaches only the
    controller."""

    def runTest(self) -> None:
        self.table_add(T_PUNT, {"hdr.ethernet.ether_type": "0x0806&&&0xffff"},
                       f"{ING}.send_to_cpu", priority=10)
        for ingress in (2, 1, 3):
            pkt = frame(0x0806, ingress)
            self.send(ingress, pkt)
            # not a clone: the frame reaches the CPU port with ingress's modifications
            self.expect_packet_in(bytes(rewritten(pkt) if ingress == 1 else pkt), ingress,
                                  REASON_PUNT)
        self.verify_dropped()


class PacketOut(PacketIoTest):
    """A packet-out leaves exactly on its egress_port, byte for byte, and nowhere else."""

    def runTest(self) -> None:
        for n, port in enumerate((3, 0, 2, 1, 3)):
            pkt = frame(0x88B5, 40 + n)
            self.sw.packet_out(bytes(pkt), egress_port=port, _pad=0)
            testutils.verify_packet(self, pkt, port)
            testutils.verify_no_other_packets(self)
        self.expect_no_packet_in()
