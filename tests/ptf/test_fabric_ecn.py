"""fabric.p4: ECN marking at egress (per-port Kmin/Kmax/step profile, enq_qdepth in packets).

Packets are sent one at a time and each is received before the next is sent, so every packet
joins an empty queue (enq_qdepth = 0): thresholds of 0 mean "at threshold", thresholds above 0
mean "below threshold". The marking probability for kmin <= q < kmax is
(q - kmin + 1) * step / 65536 (p4src/README.md)."""

from __future__ import annotations

from fabric_lib import C_ECN, EGR, HOST_MAC, ROUTER_MAC, T_ECN, FabricTest, routed
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

ECN_NOT_ECT, ECN_ECT1, ECN_ECT0, ECN_CE = 0, 1, 2, 3
OUT = 2


def packet(ecn: int, n: int = 0) -> Ether:
    return (Ether(src=HOST_MAC, dst=ROUTER_MAC)
            / IP(src="10.0.0.1", dst="10.0.2.9", tos=(0x0A << 2) | ecn, id=n)
            / UDP(sport=1000, dport=2000) / bytes(range(100)))


def with_ecn(pkt: Ether, ecn: int) -> Ether:
    out = pkt.copy()
    out[IP].tos = (out[IP].tos & 0xFC) | ecn
    out[IP].chksum = None
    return Ether(bytes(out))


class EcnTest(FabricTest):
    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [OUT])
        self.add_route("10.0.2.0/24", 1)

    def profile(self, kmin: int, kmax: int, step: int) -> None:
        self.table_add(T_ECN, {"standard_metadata.egress_port": OUT},
                       f"{EGR}.ecn.set_ecn_profile", kmin=kmin, kmax=kmax, step=step)

    def marks(self) -> int:
        return self.counter(C_ECN, OUT)[0]


class MarkAtThreshold(EcnTest):
    """Queue depth at Kmax: ECT(0) and ECT(1) become CE, each mark counted on the port."""

    def runTest(self) -> None:
        self.profile(kmin=0, kmax=0, step=0)
        for ecn in (ECN_ECT0, ECN_ECT1):
            pkt = packet(ecn)
            self.send(0, pkt)
            testutils.verify_packet(self, with_ecn(routed(pkt, OUT), ECN_CE), OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.marks(), 2)


class NoMarkBelowThreshold(EcnTest):
    def runTest(self) -> None:
        self.profile(kmin=5, kmax=10, step=65535)
        for ecn in (ECN_ECT0, ECN_ECT1):
            pkt = packet(ecn)
            self.send(0, pkt)
            testutils.verify_packet(self, routed(pkt, OUT), OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.marks(), 0)


class NonEctNeverMarked(EcnTest):
    """Not-ECT stays Not-ECT and CE stays CE even above Kmax; neither is counted."""

    def runTest(self) -> None:
        self.profile(kmin=0, kmax=0, step=0)
        for ecn in (ECN_NOT_ECT, ECN_CE):
            pkt = packet(ecn)
            self.send(0, pkt)
            testutils.verify_packet(self, routed(pkt, OUT), OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.marks(), 0)


class ProbabilisticMarkingRate(EcnTest):
    """Between Kmin and Kmax: with step 32768 a packet at depth Kmin is marked with
    probability 1/2. 600 packets: the marked share must lie in [0.40, 0.60] (4.9
    standard deviations), and the per-port counter must equal the marks seen."""

    N = 600

    def runTest(self) -> None:
        self.profile(kmin=0, kmax=1000, step=32768)
        marked = 0
        for n in range(self.N):
            pkt = packet(ECN_ECT0, n)
            plain = bytes(routed(pkt, OUT))
            ce = bytes(with_ecn(routed(pkt, OUT), ECN_CE))
            self.send(0, pkt)
            got = self.collect(1, settle=0.0)
            self.assertEqual(len(got), 1, f"packet {n} lost")
            port, frame = got[0]
            self.assertEqual(port, OUT)
            self.assertIn(frame, (plain, ce))
            marked += frame == ce
        share = marked / self.N
        self.assertGreaterEqual(share, 0.40, f"marked {marked}/{self.N}")
        self.assertLessEqual(share, 0.60, f"marked {marked}/{self.N}")
        self.assertEqual(self.marks(), marked)
