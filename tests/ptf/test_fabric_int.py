"""fabric.p4: INT-MD v2.1 over UDP (source, transit, sink) and Telemetry Report v2.0.

Expected frames are assembled from the INT v2.1 / Telemetry Report v2.0 layouts (shim after
UDP, INT-MD header, this hop's metadata on top of the stack in instruction-bit order). Only
values the test cannot know are masked: timestamps, hop latency, queue/buffer occupancy and
the tx-bytes counter; their relations are then checked on the received bytes."""

from __future__ import annotations

import struct

from fabric_lib import (
    C_INT,
    EGR,
    HOST_MAC,
    ING,
    INT_DSCP,
    INT_HOP_EXCEEDED,
    INT_REPORT,
    INT_SINK_STRIP,
    INT_SKIPPED,
    INT_SOURCE_INSERT,
    INT_TRANSIT_PUSH,
    INT_UNPARSED,
    ROCE_PORT,
    ROUTER_MAC,
    T_INT_SINK,
    T_REPORT,
    T_TRANSIT,
    T_WATCHLIST,
    FabricTest,
    bitmap,
    int_md_header,
    int_shim,
    neighbour_mac,
    port_mac,
)
from ptf import testutils
from ptf.mask import Mask
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controlplane.p4rt import CloneSession, Replica

NODE_ID = 0x0A0B0C0D
OUT = 2
ORIG_DSCP = 0x0A
L4 = 14 + 20 + 8          # offset of the INT shim in a frame
HOP0 = L4 + 4 + 12        # offset of the newest hop's metadata


def roce_body(psn: int, payload_len: int) -> bytes:
    """BTH + payload + ICRC (zero) as the hosts send it."""
    body = bytes((psn * 7 + i) & 0xFF for i in range(payload_len))
    return bytes(BTH(opcode=0x01, psn=psn, dqpn=0x22, icrc=0) / Raw(body))


def frame(int_block: bytes, dscp: int, ttl: int = 64, psn: int = 1, payload_len: int = 256,
          src_mac: str = HOST_MAC, dst_mac: str = ROUTER_MAC, src_ip: str = "10.0.0.1",
          udp_chksum: int | None = 0) -> Ether:
    """Ethernet/IPv4 (ECT(0))/UDP 4791 (checksum 0 unless ``udp_chksum`` is None: computed)/
    [INT block]/BTH/payload/ICRC; lengths and the IPv4 checksum computed by Scapy."""
    return Ether(bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst="10.0.2.1", tos=(dscp << 2) | 2, ttl=ttl, flags="DF", id=psn)
        / UDP(sport=49200, dport=ROCE_PORT, chksum=udp_chksum)
        / Raw(int_block + roce_body(psn, payload_len))))


def out_of(port: int, ttl: int) -> dict:
    return {"src_mac": port_mac(port), "dst_mac": neighbour_mac(port), "ttl": ttl}


class IntTest(FabricTest):
    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [OUT])
        self.add_route("10.0.2.0/24", 1)

    def make_transit(self) -> None:
        self.table_add(T_TRANSIT, {"hdr.int_shim.int_type": 1}, f"{EGR}.int_egress.int_transit",
                       node_id=NODE_ID)

    def int_count(self, index: int) -> int:
        return self.counter(C_INT, index)[0]

    def receive_masked(self, exp: Mask, port: int) -> bytes:
        got = self.collect(1)
        self.assertEqual(len(got), 1, f"expected one frame, got {len(got)}")
        rx_port, data = got[0]
        self.assertEqual(rx_port, port)
        self.assertTrue(exp.pkt_match(data), f"frame differs from the expected one:\n{exp}\n"
                        f"got {data.hex()}")
        return data


class IntSourceInsertsAndPushes(IntTest):
    """A watched flow gets shim + INT-MD header (DSCP saved in the shim, DSCP = INT), and the
    source pushes its own metadata for bits 0,1,2,3,4,5,7 (Hop ML 9, RemainingHopCnt 8 -> 7)."""

    def runTest(self) -> None:
        self.make_transit()
        instructions = bitmap(0, 1, 2, 3, 4, 5, 7)
        self.table_add(T_WATCHLIST, {"hdr.ipv4.src_addr": "10.0.0.1&&&255.255.255.255"},
                       f"{ING}.int_ingress.int_source", priority=10,
                       instructions=instructions, max_hops=8)
        sent = frame(b"", ORIG_DSCP)
        self.send(0, sent)
        hop = struct.pack("!IHHI", NODE_ID, 0, OUT, 0) + struct.pack("!BxxxQQI", 0, 0, 0, 0)
        block = int_shim(3 + 9, ORIG_DSCP) + int_md_header(9, 7, instructions) + hop
        exp = Mask(frame(block, INT_DSCP, **out_of(OUT, 63)))
        exp.set_do_not_care((HOP0 + 8) * 8, 32)       # hop latency
        exp.set_do_not_care((HOP0 + 13) * 8, 24)      # queue occupancy
        exp.set_do_not_care((HOP0 + 16) * 8, 128)     # ingress + egress timestamps
        exp.set_do_not_care((HOP0 + 32) * 8, 32)      # tx bytes
        data = self.receive_masked(exp, OUT)
        latency, = struct.unpack_from("!I", data, HOP0 + 8)
        t_in, t_out = struct.unpack_from("!QQ", data, HOP0 + 16)
        self.assertLessEqual(t_in, t_out)
        self.assertEqual(latency, (t_out - t_in) & 0xFFFFFFFF)
        self.assertEqual(self.int_count(INT_SOURCE_INSERT), 1)
        self.assertEqual(self.int_count(INT_TRANSIT_PUSH), 1)
        # a flow that is not watched passes unchanged apart from routing
        other = frame(b"", ORIG_DSCP, src_ip="10.0.0.9", psn=5)
        self.send(0, other)
        testutils.verify_packet(self, frame(b"", ORIG_DSCP, src_ip="10.0.0.9", psn=5,
                                            **out_of(OUT, 63)), OUT)
        # a watched flow whose UDP checksum is set is left alone (it would need updating)
        summed = frame(b"", ORIG_DSCP, psn=6, udp_chksum=None)
        self.assertNotEqual(summed[UDP].chksum, 0)
        self.send(0, summed)
        testutils.verify_packet(self, frame(b"", ORIG_DSCP, psn=6, udp_chksum=None,
                                            **out_of(OUT, 63)), OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.int_count(INT_SOURCE_INSERT), 1)


class IntTransitPushesPerBitmap(IntTest):
    """A transit hop puts its metadata on top of the stack, in bit order, and fixes shim
    length, RemainingHopCnt, IPv4 total length and checksum, UDP length. With no int_sink entry
    INT is left in the packet for an INT-aware host."""

    def runTest(self) -> None:
        self.make_transit()
        # bits 0, 1, 3: node id, level-1 ports, queue id + occupancy (Hop ML 3)
        ins = bitmap(0, 1, 3)
        old_hop = struct.pack("!IHHI", 0x01010101, 5, 6, 0x00000007)
        sent = frame(int_shim(3 + 3, ORIG_DSCP) + int_md_header(3, 4, ins) + old_hop, INT_DSCP)
        self.send(1, sent)
        new_hop = struct.pack("!IHHI", NODE_ID, 1, OUT, 0)
        exp = Mask(frame(int_shim(3 + 6, ORIG_DSCP) + int_md_header(3, 3, ins) + new_hop
                         + old_hop, INT_DSCP, **out_of(OUT, 63)))
        exp.set_do_not_care((HOP0 + 9) * 8, 24)
        self.receive_masked(exp, OUT)
        # bits 0, 6, 8: node id, level-2 ports (8 B), buffer id + occupancy (Hop ML 4)
        ins2 = bitmap(0, 6, 8)
        sent2 = frame(int_shim(3, 0) + int_md_header(4, 2, ins2), INT_DSCP, psn=2)
        self.send(3, sent2)
        hop2 = struct.pack("!IIII", NODE_ID, 3, OUT, 0)
        exp2 = Mask(frame(int_shim(3 + 4, 0) + int_md_header(4, 1, ins2) + hop2, INT_DSCP,
                          psn=2, **out_of(OUT, 63)))
        exp2.set_do_not_care((HOP0 + 13) * 8, 24)
        self.receive_masked(exp2, OUT)
        self.assertEqual(self.int_count(INT_TRANSIT_PUSH), 2)
        testutils.verify_no_other_packets(self)


class IntHopLimitAndUnsupported(IntTest):
    """RemainingHopCnt 0: nothing pushed, E set. A reserved instruction bit, or a UDP checksum
    that would need updating: nothing pushed, header untouched. Only routing changes these."""

    def runTest(self) -> None:
        self.make_transit()
        ins = bitmap(0, 1)
        sent = frame(int_shim(3, 0) + int_md_header(2, 0, ins), INT_DSCP)
        self.send(0, sent)
        exp = frame(int_shim(3, 0) + int_md_header(2, 0, ins, e=1), INT_DSCP, **out_of(OUT, 63))
        testutils.verify_packet(self, exp, OUT)
        reserved = bitmap(0, 10)
        sent = frame(int_shim(3, 0) + int_md_header(2, 5, reserved), INT_DSCP, psn=3)
        self.send(0, sent)
        exp = frame(int_shim(3, 0) + int_md_header(2, 5, reserved), INT_DSCP, psn=3,
                    **out_of(OUT, 63))
        testutils.verify_packet(self, exp, OUT)
        ok_bits = bitmap(0, 1)
        sent = frame(int_shim(3, 0) + int_md_header(2, 5, ok_bits), INT_DSCP, psn=4,
                     udp_chksum=None)
        self.send(0, sent)
        exp = frame(int_shim(3, 0) + int_md_header(2, 5, ok_bits), INT_DSCP, psn=4,
                    udp_chksum=None, **out_of(OUT, 63))
        testutils.verify_packet(self, exp, OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.int_count(INT_HOP_EXCEEDED), 1)
        self.assertEqual(self.int_count(INT_SKIPPED), 2)
        self.assertEqual(self.int_count(INT_TRANSIT_PUSH), 0)


class IntSinkStripsAndReports(IntTest):
    """Sink (a): the host gets the packet without INT, DSCP and lengths restored; the collector
    gets a Telemetry Report v2.0 (UDP 32766) wrapping the frame as received, INT included,
    with the sink's level-1 ports and ingress timestamp (RepMdBits 0x4800)."""

    COLLECTOR_PORT = 3
    SESSION = 7

    def runTest(self) -> None:
        self.make_transit()
        self.sw.insert(CloneSession(self.SESSION, [Replica(self.COLLECTOR_PORT, 0)]))
        self.table_add(T_INT_SINK, {"standard_metadata.egress_spec": OUT},
                       f"{ING}.int_ingress.int_sink_report", session=self.SESSION)
        self.table_add(T_REPORT, {"standard_metadata.egress_port": self.COLLECTOR_PORT},
                       f"{EGR}.report.encap_report", src_mac="02:cf:00:00:0c:01",
                       dst_mac="02:cf:00:00:0c:02", src_ip="10.9.0.1", dst_ip="10.9.0.2",
                       udp_src_port=40000, udp_dst_port=32766, node_id=NODE_ID)
        ins = bitmap(0, 1, 3)
        upstream = struct.pack("!IHHI", 0x01010101, 5, 6, 9)
        for seq, payload_len in enumerate((256, 1024)):
            sent = frame(int_shim(3 + 3, ORIG_DSCP) + int_md_header(3, 6, ins) + upstream,
                         INT_DSCP, psn=10 + seq, payload_len=payload_len)
            self.send(0, sent)
            stripped = frame(b"", ORIG_DSCP, psn=10 + seq, payload_len=payload_len,
                             **out_of(OUT, 63))
            testutils.verify_packet(self, stripped, OUT)
            inner = bytes(sent)
            report_len = min(255, 5 + (len(inner) + 3) // 4)
            group = struct.pack("!II", (2 << 28) | seq, NODE_ID)
            individual = struct.pack("!BBBBHHHH", (1 << 4) | 3, report_len, 3, 0b0010 << 4,
                                     0x4800, 0, 0, 0)
            sink_md = struct.pack("!HHQ", 0, OUT, 0)
            report = Ether(bytes(
                Ether(src="02:cf:00:00:0c:01", dst="02:cf:00:00:0c:02")
                / IP(src="10.9.0.1", dst="10.9.0.2", ttl=64, flags="DF", id=0, tos=0)
                / UDP(sport=40000, dport=32766, chksum=0)
                / Raw(group + individual + sink_md + inner)))
            exp = Mask(report)
            exp.set_do_not_care((L4 + 8 + 12 + 4) * 8, 64)   # sink ingress timestamp
            testutils.verify_packet(self, exp, self.COLLECTOR_PORT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.int_count(INT_SINK_STRIP), 2)
        self.assertEqual(self.int_count(INT_REPORT), 2)


class IntStackTooLongKept(IntTest):
    """A stack longer than the 127 words the parser takes apart cannot be stripped: the sink
    forwards such a packet unchanged (apart from routing) and counts it; a 127-word stack is
    still stripped."""

    def runTest(self) -> None:
        self.table_add(T_INT_SINK, {"standard_metadata.egress_spec": OUT},
                       f"{ING}.int_ingress.int_sink_strip")
        ins = bitmap(0)
        for words, stripped in ((128, False), (127, True)):
            stack = b"".join(struct.pack("!I", 0x0C000000 + i) for i in range(words))
            block = int_shim(3 + words, ORIG_DSCP) + int_md_header(1, 0, ins) + stack
            self.send(0, frame(block, INT_DSCP, psn=words))
            if stripped:
                exp = frame(b"", ORIG_DSCP, psn=words, **out_of(OUT, 63))
            else:
                exp = frame(block, INT_DSCP, psn=words, **out_of(OUT, 63))
            testutils.verify_packet(self, exp, OUT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.int_count(INT_UNPARSED), 1)
        self.assertEqual(self.int_count(INT_SINK_STRIP), 1)
