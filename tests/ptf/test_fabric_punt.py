"""fabric.p4's local_punt table (p4src/README.md): every IPv4 packet and every ARP addressed
to one of the switch's own link addresses reaches the CPU port as a PacketIn carrying its
ingress port, unchanged (BGP either way of the TCP connection, BFD, ICMP, ARP requests and
replies, TTL 1 included); traffic to other addresses is forwarded as before; a PacketOut
leaves the port it names unchanged and counts in port_tx_control (the switch's own frames,
which an emulated fabric serves off the line rate); forwarded traffic does not. This is the
in-band path of --routing bgp."""

from __future__ import annotations

from fabric_lib import EGR, ING, ROUTER_MAC, FabricTest, routed
from ptf import testutils
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

T_PUNT = f"{ING}.forwarding.local_punt"
OWN = "172.16.0.0"      # this switch's end of the /31 on port 1
PEER = "172.16.0.1"     # the neighbour's end
PEER_MAC = "02:fa:00:00:00:09"


class PuntTest(FabricTest):
    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [2])
        self.add_route("10.0.2.0/24", 1)
        self.table_add(T_PUNT, {"meta.local_addr": OWN}, f"{ING}.forwarding.punt_to_cpu")

    def expect_punted(self, pkt: Ether, port: int) -> None:
        self.send(port, pkt)
        pin = self.sw.packet_in(timeout=5)
        self.assertIsNotNone(pin, f"no PacketIn for {pkt.summary()}")
        self.assertEqual(pin.payload, bytes(pkt))
        self.assertEqual(pin.metadata["ingress_port"], port)


class ControlTrafficToOwnAddressPunted(PuntTest):
    def runTest(self) -> None:
        self.assertIsNotNone(self.cpu_port, "needs the switch's CPU port: ptf_runner --cpu-port")
        eth = Ether(src=PEER_MAC, dst=ROUTER_MAC)
        # BGP: the peer's SYN to port 179, and the peer's answers from 179 to our port
        self.expect_punted(eth / IP(src=PEER, dst=OWN, ttl=1) / TCP(sport=40001, dport=179,
                                                                    flags="S"), 1)
        self.expect_punted(eth / IP(src=PEER, dst=OWN, ttl=1) / TCP(sport=179, dport=40002,
                                                                    flags="SA"), 1)
        # BFD single hop (RFC 5881: TTL 255) and echo ports
        self.expect_punted(eth / IP(src=PEER, dst=OWN, ttl=255)
                           / UDP(sport=49152, dport=3784) / bytes(24), 1)
        self.expect_punted(eth / IP(src=PEER, dst=OWN) / UDP(sport=49153, dport=4784)
                           / bytes(24), 1)
        self.expect_punted(eth / IP(src=PEER, dst=OWN) / ICMP(type=8) / b"ping", 1)
        # ARP request (broadcast) and reply for our address
        self.expect_punted(Ether(src=PEER_MAC, dst="ff:ff:ff:ff:ff:ff")
                           / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER, pdst=OWN), 1)
        self.expect_punted(eth / ARP(op=2, hwsrc=PEER_MAC, psrc=PEER, hwdst=ROUTER_MAC,
                                     pdst=OWN), 1)
        testutils.verify_no_other_packets(self)


class OtherTrafficForwardedAsBefore(PuntTest):
    def runTest(self) -> None:
        data = (Ether(src=PEER_MAC, dst=ROUTER_MAC) / IP(src=PEER, dst="10.0.2.7")
                / TCP(sport=40001, dport=179) / b"x")
        self.send(1, data)
        testutils.verify_packet(self, routed(data, 2), 2)
        # ARP for the neighbour's address is not ours: no PacketIn
        self.send(1, Ether(src=PEER_MAC, dst="ff:ff:ff:ff:ff:ff")
                  / ARP(op=1, hwsrc=PEER_MAC, psrc=OWN, pdst="172.16.0.5"))
        testutils.verify_no_other_packets(self)
        self.assertIsNone(self.sw.packet_in(timeout=0.5))


class PacketOutLeavesNamedPort(PuntTest):
    def runTest(self) -> None:
        self.assertIsNotNone(self.cpu_port, "needs the switch's CPU port: ptf_runner --cpu-port")
        out = (Ether(src=ROUTER_MAC, dst=PEER_MAC) / IP(src=OWN, dst=PEER, ttl=1)
               / TCP(sport=179, dport=40001, flags="SA"))
        self.sw.packet_out(bytes(out), egress_port=1, _pad=0)
        testutils.verify_packet(self, out, 1)
        data = (Ether(src=PEER_MAC, dst=ROUTER_MAC) / IP(src=PEER, dst="10.0.2.7")
                / TCP(sport=40001, dport=179) / b"x")
        self.send(1, data)
        testutils.verify_packet(self, routed(data, 2), 2)
        testutils.verify_no_other_packets(self)
        control, sent = f"{EGR}.port_tx_control", f"{EGR}.port_tx"
        self.assertEqual((self.counter(control, 1)[0], self.counter(sent, 1)[0]), (1, 1))
        self.assertEqual((self.counter(control, 2)[0], self.counter(sent, 2)[0]), (0, 1))
