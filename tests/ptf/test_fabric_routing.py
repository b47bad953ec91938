"""fabric.p4: IPv4 routing (LPM, TTL, checksum, MAC rewrite), drops by reason, ARP, L2,
packet-in/out. Expected frames follow RFC 791/826 and the MAC plan in fabric_lib."""

from __future__ import annotations

from fabric_lib import (
    C_DROPS,
    DROP_BAD_PACKET,
    DROP_NO_ROUTE,
    DROP_TTL,
    HOST_MAC,
    ING,
    ROUTER_MAC,
    T_ACL,
    T_ARP,
    T_L2,
    FabricTest,
    routed,
)
from ptf import testutils
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

from controlplane.p4rt import MulticastGroup, Replica


def udp_packet(dst: str = "10.0.2.5", ttl: int = 64, sport: int = 1234) -> Ether:
    return (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src="10.0.0.1", dst=dst, ttl=ttl)
            / UDP(sport=sport, dport=5678) / bytes(range(64)))


class RoutingTest(FabricTest):
    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [2])
        self.add_group(2, [3])
        self.add_route("10.0.2.0/24", 1)
        self.add_route("10.0.0.0/8", 2)


class LpmTtlMacRewrite(RoutingTest):
    """Longest prefix wins; TTL - 1, checksum recomputed, MACs of the egress port's link."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.2.5")
        self.send(0, pkt)
        testutils.verify_packet(self, routed(pkt, 2), 2)
        other = udp_packet("10.9.9.9")
        self.send(1, other)
        testutils.verify_packet(self, routed(other, 3), 3)
        tcp = (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src="10.0.0.1", dst="10.0.2.7", ttl=9)
               / TCP(sport=40000, dport=80, flags="S") / b"hello")
        self.send(0, tcp)
        testutils.verify_packet(self, routed(tcp, 2), 2)
        testutils.verify_no_other_packets(self)


class TtlExpiryDropped(RoutingTest):
    """TTL 1 (and 0) is dropped and counted; TTL 2 leaves with TTL 1."""

    def runTest(self) -> None:
        before, _ = self.counter(C_DROPS, DROP_TTL)
        self.send(0, udp_packet(ttl=1))
        self.send(0, udp_packet(ttl=0))
        testutils.verify_no_other_packets(self, timeout=1)
        after, _ = self.counter(C_DROPS, DROP_TTL)
        self.assertEqual(after - before, 2)
        pkt = udp_packet(ttl=2)
        self.send(0, pkt)
        exp = routed(pkt, 2)
        self.assertEqual(exp[IP].ttl, 1)
        testutils.verify_packet(self, exp, 2)
        testutils.verify_no_other_packets(self)


class NoRouteDropped(RoutingTest):
    def runTest(self) -> None:
        before, _ = self.counter(C_DROPS, DROP_NO_ROUTE)
        self.send(0, udp_packet("192.168.7.7"))
        testutils.verify_no_other_packets(self, timeout=1)
        after, _ = self.counter(C_DROPS, DROP_NO_ROUTE)
        self.assertEqual(after - before, 1)


class BadChecksumDropped(RoutingTest):
    def runTest(self) -> None:
        pkt = udp_packet()
        pkt[IP].chksum = 0x1234
        before, _ = self.counter(C_DROPS, DROP_BAD_PACKET)
        self.send(0, pkt)
        testutils.verify_no_other_packets(self, timeout=1)
        after, _ = self.counter(C_DROPS, DROP_BAD_PACKET)
        self.assertEqual(after - before, 1)


class ArpGatewayReply(FabricTest):
    """A request for the gateway address is answered out of the port it came in on."""

    def runTest(self) -> None:
        gw_mac = "02:cf:00:00:00:fe"
        self.table_add(T_ARP, {"hdr.arp.tpa": "10.0.0.254"}, f"{ING}.forwarding.arp_reply",
                       gateway_mac=gw_mac)
        req = (Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff")
               / ARP(op=1, hwsrc=HOST_MAC, psrc="10.0.0.1", hwdst="00:00:00:00:00:00",
                     pdst="10.0.0.254"))
        self.send(1, req)
        reply = (Ether(src=gw_mac, dst=HOST_MAC)
                 / ARP(op=2, hwsrc=gw_mac, psrc="10.0.0.254", hwdst=HOST_MAC, pdst="10.0.0.1"))
        testutils.verify_packet(self, reply, 1)
        testutils.verify_no_other_packets(self)


class ArpBroadcastFlooded(FabricTest):
    """A request the switch does not answer is flooded, never back out of its ingress port."""

    def runTest(self) -> None:
        self.sw.insert(MulticastGroup(1, [Replica(p, 1) for p in (0, 1, 2, 3)]))
        self.table_add(T_L2, {"hdr.ethernet.dst_addr": "ff:ff:ff:ff:ff:ff"},
                       f"{ING}.forwarding.l2_flood", mcast_grp=1)
        req = (Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff")
               / ARP(op=1, hwsrc=HOST_MAC, psrc="10.0.0.1", pdst="10.0.0.2"))
        self.send(1, req)
        for p in (0, 2, 3):
            testutils.verify_packet(self, req, p)
        testutils.verify_no_other_packets(self)


class L2BridgedUnchanged(FabricTest):
    """Frames not addressed to the router MAC are bridged unchanged (no TTL/MAC rewrite)."""

    def runTest(self) -> None:
        dst = "02:cf:00:00:10:02"
        self.table_add(T_L2, {"hdr.ethernet.dst_addr": dst}, f"{ING}.forwarding.l2_output",
                       port=3)
        pkt = udp_packet()
        pkt[Ether].dst = dst
        self.send(0, pkt)
        testutils.verify_packet(self, pkt, 3)
        unknown = udp_packet()
        unknown[Ether].dst = "02:cf:00:00:10:09"
        self.send(0, unknown)
        testutils.verify_no_other_packets(self)


class PacketInOut(FabricTest):
    """ACL punt to the CPU port arrives as a P4Runtime PacketIn with its ingress port; a
    PacketOut leaves the port named in its metadata, unchanged."""

    def runTest(self) -> None:
        self.assertIsNotNone(self.cpu_port, "needs the switch's CPU port: ptf_runner --cpu-port")
        self.table_add(T_ACL, {"meta.l4_dst_port": "9999&&&0xffff"},
                       f"{ING}.forwarding.punt_to_cpu", priority=10)
        pkt = (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src="10.0.0.1", dst="10.0.0.254")
               / UDP(sport=1, dport=9999) / b"control")
        self.send(2, pkt)
        pin = self.sw.packet_in(timeout=3)
        self.assertIsNotNone(pin, "no PacketIn")
        self.assertEqual(pin.payload, bytes(pkt))
        self.assertEqual(pin.metadata["ingress_port"], 2)
        out = (Ether(src=ROUTER_MAC, dst=HOST_MAC) / IP(src="10.0.0.254", dst="10.0.0.1")
               / UDP(sport=2, dport=3) / b"reply")
        self.sw.packet_out(bytes(out), egress_port=1, _pad=0)
        testutils.verify_packet(self, out, 1)
        testutils.verify_no_other_packets(self)


class MalformedDroppedOthersFlow(RoutingTest):
    """A RoCEv2 frame too short for its BTH is a parser error: dropped and counted as a bad
    packet; the next good packet is routed as usual."""

    def runTest(self) -> None:
        before, _ = self.counter(C_DROPS, DROP_BAD_PACKET)
        short = (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src="10.0.0.1", dst="10.0.2.5")
                 / UDP(sport=1, dport=4791) / b"\x01\x02\x03\x04")
        self.send(0, short)
        good = udp_packet()
        self.send(0, good)
        testutils.verify_packet(self, routed(good, 2), 2)
        testutils.verify_no_other_packets(self)
        after, _ = self.counter(C_DROPS, DROP_BAD_PACKET)
        self.assertEqual(after - before, 1)
