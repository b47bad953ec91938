"""Forwarding of the p4sim switch (tests/ptf/p4/switch_forwarding.p4): exact, ternary and LPM
matches, default actions changed over P4Runtime, and routing's MAC/TTL rewrite with the IPv4
header checksum recomputed.

    python -m netlab.ptf_runner --ports 4 test_switch_forwarding
"""

from __future__ import annotations

from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import SwitchTest, ones_complement_checksum, program

from controlplane.entities import TableEntry

ING = "SwIngress"
T_L2 = f"{ING}.l2_exact"
T_ACL = f"{ING}.acl"
T_LPM = f"{ING}.ipv4_lpm"
HOST_MAC = "02:00:00:00:0a:01"
ROUTER_MAC = "02:00:00:00:00:fe"
PAYLOAD = bytes(range(48))


def udp_packet(dst: str, src: str = "192.168.0.1", ttl: int = 64, tos: int = 0,
               ident: int = 1, sport: int = 1234, dport: int = 5678) -> Packet:
    return (Ether(src=HOST_MAC, dst=ROUTER_MAC)
            / IP(src=src, dst=dst, ttl=ttl, tos=tos, id=ident)
            / UDP(sport=sport, dport=dport) / Raw(PAYLOAD))


def as_bytes(pkt: Packet) -> bytes:
    return bytes(pkt)


class ForwardingTest(SwitchTest):
    P4_PROGRAM = program("switch_forwarding.p4")


class ExactMatch(ForwardingTest):
    """l2_exact: each destination MAC to its own port, unchanged; an unknown one hits the
    program's default action (drop)."""

    def runTest(self) -> None:
        self.table_add(T_L2, {"hdr.ethernet.dst_addr": "02:00:00:00:0b:02"},
                       f"{ING}.l2_forward", port=2)
        self.table_add(T_L2, {"hdr.ethernet.dst_addr": "02:00:00:00:0b:03"},
                       f"{ING}.l2_forward", port=3)
        for dst, port in (("02:00:00:00:0b:02", 2), ("02:00:00:00:0b:03", 3)):
            frame = Ether(src=HOST_MAC, dst=dst, type=0x9000) / Raw(PAYLOAD)
            self.send(1, frame)
            testutils.verify_packet(self, frame, port)
        testutils.verify_no_other_packets(self)
        # one bit away from a key: no match, default drop
        self.send(1, Ether(src=HOST_MAC, dst="02:00:00:00:0b:06", type=0x9000) / Raw(PAYLOAD))
        self.verify_dropped()


class TernaryPriority(ForwardingTest):
    """acl: among overlapping ternary entries the highest priority wins, whatever the masks'
    specificity and the insertion order."""

    def runTest(self) -> None:
        fwd = f"{ING}.acl_forward"
        # inserted lowest priority first, most specific lowest
        self.table_add(T_ACL, {"hdr.ipv4.dst_addr": "10.1.3.4&&&255.255.255.255"}, fwd,
                       priority=5, port=3)
        self.table_add(T_ACL, {"hdr.ipv4.dst_addr": "10.1.0.0&&&255.255.0.0"}, fwd,
                       priority=10, port=1)
        self.table_add(T_ACL, {"hdr.ipv4.dst_addr": "10.1.2.0&&&255.255.255.0"}, fwd,
                       priority=20, port=2)
        # UDP from 172.16.x.x anywhere in 10.1/16 dropped, above everything else
        self.table_add(T_ACL, {"hdr.ipv4.src_addr": "172.16.0.0&&&255.255.0.0",
                               "hdr.ipv4.protocol": "17&&&255"}, f"{ING}.acl_drop",
                       priority=30)
        cases = [
            ("10.1.2.3", "192.168.0.1", 2),   # /24 (prio 20) beats /16 (prio 10)
            ("10.1.7.7", "192.168.0.1", 1),   # only the /16
            ("10.1.3.4", "192.168.0.1", 1),   # exact /32 exists but has priority 5 < 10
            ("10.1.2.3", "172.16.9.9", None),  # drop rule, priority 30
        ]
        for dst, src, port in cases:
            pkt = udp_packet(dst, src=src)
            self.send(0, pkt)
            if port is not None:
                # the ACL forwards without routing: bytes unchanged
                testutils.verify_packet(self, pkt, port)
                testutils.verify_no_other_packets(self)
            else:
                self.verify_dropped()
        # Delete the /16: 10.1.3.4 now matches only its own (priority 5) entry.
        self.table_delete(T_ACL, {"hdr.ipv4.dst_addr": "10.1.0.0&&&255.255.0.0"}, priority=10)
        pkt = udp_packet("10.1.3.4")
        self.send(0, pkt)
        testutils.verify_packet(self, pkt, 3)
        testutils.verify_no_other_packets(self)


class LongestPrefix(ForwardingTest):
    """ipv4_lpm: the longest matching prefix wins, regardless of insertion order; deleting it
    falls back to the next longest."""

    def runTest(self) -> None:
        routes = [("10.2.3.0/24", 2), ("0.0.0.0/1", 0), ("10.2.3.4/32", 3), ("10.2.0.0/16", 1)]
        for prefix, port in routes:
            self.table_add(T_LPM, {"hdr.ipv4.dst_addr": prefix}, f"{ING}.unrouted", port=port)
        cases = [("10.2.3.4", 3), ("10.2.3.5", 2), ("10.2.4.1", 1), ("10.3.0.1", 0),
                 ("10.2.3.255", 2), ("10.2.255.255", 1)]
        for dst, port in cases:
            pkt = udp_packet(dst)
            self.send(1, pkt)
            testutils.verify_packet(self, pkt, port)
            testutils.verify_no_other_packets(self)
        # 200.0.0.1 is outside 0.0.0.0/1: no route, default drop
        self.send(1, udp_packet("200.0.0.1"))
        self.verify_dropped()
        self.table_delete(T_LPM, {"hdr.ipv4.dst_addr": "10.2.3.4/32"})
        pkt = udp_packet("10.2.3.4")
        self.send(1, pkt)
        testutils.verify_packet(self, pkt, 2)
        testutils.verify_no_other_packets(self)


class DefaultAction(ForwardingTest):
    """A miss runs the default action: the program's (drop), then whatever the controller
    sets over P4Runtime, then the program's again after a reset."""

    def runTest(self) -> None:
        self.table_add(T_LPM, {"hdr.ipv4.dst_addr": "10.9.0.0/16"}, f"{ING}.unrouted", port=1)
        miss = udp_packet("10.8.0.1")
        self.send(0, miss)
        self.verify_dropped()

        self.set_default(T_LPM, f"{ING}.unrouted", port=3)
        self.send(0, miss)
        testutils.verify_packet(self, miss, 3)
        testutils.verify_no_other_packets(self)
        (entry,) = self.sw.read(TableEntry(T_LPM, is_default=True))
        self.assertEqual(entry.action, f"{ING}.unrouted")
        self.assertEqual(entry.params, {"port": 3})

        self.set_default(T_LPM, f"{ING}.route", port=2, src_mac="02:00:00:00:02:00",
                         dst_mac="02:00:00:00:02:01")
        self.send(0, miss)
        exp = (Ether(src="02:00:00:00:02:00", dst="02:00:00:00:02:01")
               / IP(src="192.168.0.1", dst="10.8.0.1", ttl=63, id=1)
               / UDP(sport=1234, dport=5678) / Raw(PAYLOAD))
        testutils.verify_packet(self, exp, 2)
        testutils.verify_no_other_packets(self)
        # a hit still runs the entry's action, not the default
        hit = udp_packet("10.9.1.1")
        self.send(0, hit)
        testutils.verify_packet(self, hit, 1)
        testutils.verify_no_other_packets(self)

        self.sw.reset_default(T_LPM)
        self.send(0, miss)
        self.verify_dropped()


class RouteRewriteChecksum(ForwardingTest):
    """route: new MACs, TTL - 1, and a correct IPv4 header checksum on the wire."""

    def runTest(self) -> None:
        self.table_add(T_LPM, {"hdr.ipv4.dst_addr": "10.4.0.0/16"}, f"{ING}.route", port=2,
                       src_mac="02:00:00:00:04:02", dst_mac="02:00:00:00:04:99")
        cases = [dict(ttl=64, tos=0, ident=1), dict(ttl=2, tos=0xB8, ident=0xFFFF),
                 dict(ttl=255, tos=0x03, ident=0x1234), dict(ttl=1, tos=0, ident=7)]
        for n, c in enumerate(cases):
            sent = udp_packet(f"10.4.{n}.{n + 1}", ttl=c["ttl"], tos=c["tos"], ident=c["ident"])
            # from scratch: Scapy fills in the checksum of the rewritten header
            exp = (Ether(src="02:00:00:00:04:02", dst="02:00:00:00:04:99")
                   / IP(src="192.168.0.1", dst=f"10.4.{n}.{n + 1}", ttl=c["ttl"] - 1,
                        tos=c["tos"], id=c["ident"])
                   / UDP(sport=1234, dport=5678) / Raw(PAYLOAD))
            exp_bytes = as_bytes(exp)
            # cross-check Scapy's checksum against RFC 1071 over the header
            header = bytearray(exp_bytes[14:34])
            wire_sum = int.from_bytes(header[10:12], "big")
            header[10:12] = b"\0\0"
            self.assertEqual(wire_sum, ones_complement_checksum(bytes(header)))
            self.assertNotEqual(wire_sum, bytes(sent)[24] << 8 | bytes(sent)[25])
            self.send(1, sent)
            testutils.verify_packet(self, exp_bytes, 2)
            testutils.verify_no_other_packets(self)


class BadChecksumDropped(ForwardingTest):
    """verify_checksum: a frame whose IPv4 header checksum is wrong is dropped; the same frame
    with the right checksum is routed."""

    def runTest(self) -> None:
        self.table_add(T_LPM, {"hdr.ipv4.dst_addr": "10.5.0.0/16"}, f"{ING}.unrouted", port=3)
        good = udp_packet("10.5.0.1")
        raw = bytearray(bytes(good))
        raw[24] ^= 0x01  # corrupt the header checksum
        self.send(0, bytes(raw))
        self.verify_dropped()
        self.send(0, good)
        testutils.verify_packet(self, good, 3)
        testutils.verify_no_other_packets(self)
