"""The compiler's test programs run on the p4sim data plane: packet-level expectations for
what each compiled program must do (the JSON is the contract between the two)."""

from __future__ import annotations

import json
import os
import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.compile import main as compile_main
from p4sim.switch.api import ActionCall, Exact, Lpm, TableEntry
from p4sim.switch.dataplane import DataPlane

PROGS = os.path.join(os.path.dirname(__file__), "p4progs")


def switch_for(tmp_path, name: str) -> DataPlane:
    out = tmp_path / f"{name}.json"
    assert compile_main([os.path.join(PROGS, name + ".p4"), "-o", str(out)]) == 0
    dp = DataPlane()
    dp.load_pipeline(out.read_bytes())
    dp.out = []  # type: ignore[attr-defined]
    dp.tx = lambda port, frame: dp.out.append((port, frame))  # type: ignore[attr-defined]
    return dp


def udp_pkt(dst: str, ttl: int = 64, dport: int = 2, payload: bytes = b"x" * 16) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09")
                 / IP(src="10.0.0.1", dst=dst, ttl=ttl) / UDP(sport=1, dport=dport)
                 / payload)


def test_basic_ipv4_forwards_decrements_ttl_and_fixes_checksum(tmp_path):
    dp = switch_for(tmp_path, "basic_ipv4")
    dp.table_insert("MyIngress.ipv4_lpm", TableEntry(
        (Lpm(0x0A010000, 16),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 3))))
    dp.receive(0, udp_pkt("10.1.2.3", ttl=64))
    assert [p for p, _ in dp.out] == [3]
    got = Ether(dp.out[0][1])
    assert got.dst == "02:00:00:00:00:aa" and got.src == "00:00:00:00:00:01"
    assert got[IP].ttl == 63
    ref = got[IP].copy()
    ref.chksum = None
    assert got[IP].chksum == IP(bytes(ref)).chksum
    dp.out.clear()
    dp.receive(0, udp_pkt("10.9.9.9"))  # no route: default action drop()
    dp.receive(0, udp_pkt("10.1.2.3", ttl=1))  # ttl too small: the else branch drops
    assert dp.out == []


def test_int_stack_pushes_one_hop_record(tmp_path):
    dp = switch_for(tmp_path, "int_stack")
    dp.table_insert("IntIngress.fwd", TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("IntIngress.set_port", (2,))))
    shim = bytes([0, 17])  # hop_count 0, next_proto
    dp.receive(1, udp_pkt("10.1.1.1", dport=5000, payload=shim + b"data"))
    assert [p for p, _ in dp.out] == [2]
    got = Ether(dp.out[0][1])
    udp = bytes(got[UDP].payload)
    assert udp[0] == 1  # hop_count |+| 1
    hop = int.from_bytes(udp[2:12], "big")
    # bos(1) switch_id(7) ingress_port(9) egress_port(9) qdepth(19) pad(3) latency(32) = 80
    assert hop >> 79 == 1
    assert (hop >> 72) & 0x7F == 1  # default_action set_switch_id(1)
    assert (hop >> 63) & 0x1FF == 1  # ingress port
    assert (hop >> 54) & 0x1FF == 2  # egress port
    assert udp[12:] == b"data"
    assert got[IP].len == 20 + 8 + 2 + 10 + 4
    assert got[UDP].len == 8 + 2 + 10 + 4


def test_registers_and_counters_update(tmp_path):
    dp = switch_for(tmp_path, "regs_counters")
    dp.receive(5, udp_pkt("10.1.1.1", ttl=77, dport=80))
    dp.receive(5, udp_pkt("10.1.1.1", ttl=78, dport=80))
    assert dp.register_read("RcIngress.last_ttl", 5) == 78
    assert dp.register_read("RcIngress.rr", 0) == 2
    assert dp.counter_read("RcIngress.port_pkts", 5)[0] == 2
    # rr was 1 on the second packet: egress_spec = rr & 3
    assert [p for p, _ in dp.out] == [0, 1]


def test_packet_out_header_is_stripped_and_sent(tmp_path):
    dp = switch_for(tmp_path, "clone_cpu")
    eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x1234)) + b"z" * 20
    pkt_out = struct.pack("!H", 4 << 7)  # egress_port 4, 7 pad bits
    dp.receive(510, pkt_out + eth)
    assert [(p, f) for p, f in dp.out] == [(4, eth)]


def test_ecn_table_forwards_by_port(tmp_path):
    dp = switch_for(tmp_path, "ecn_marking")
    dp.table_insert("EcnIngress.port_fwd", TableEntry((Exact(1),),
                                                      ActionCall("EcnIngress.forward", (2,))))
    dp.receive(1, udp_pkt("10.0.0.2"))
    assert [p for p, _ in dp.out] == [2]
    assert Ether(dp.out[0][1])[IP].tos & 3 == 0  # not ECN-capable: never marked


def test_features_tag_rewrites_the_indexed_word(tmp_path):
    dp = switch_for(tmp_path, "features")
    eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B5))
    tag = struct.pack("!BBhH", 1, 1, -5, 0x1234)
    words = struct.pack("!II", 0xAAAAAAAA, 0xBBBBBBBB)
    dp.receive(9, eth + tag + words + b"tail")
    assert [p for p, _ in dp.out] == [1]  # fwd default_action to_port(1)
    out = dp.out[0][1]
    assert out[14:20] == tag
    assert out[20:24] == struct.pack("!I", 0xAAAAAAAA)
    assert out[24:28] == struct.pack("!I", 0x1234 << 3)  # words[idx & 3].w, idx = 1
    assert out[28:] == b"tail"
    dp.out.clear()
    # kind 0 is rejected by the parser: the tag stays unparsed and is not rewritten
    bad = struct.pack("!BBhH", 0, 1, 0, 0x1234) + words
    dp.receive(9, eth + bad)
    assert [(p, f[14:]) for p, f in dp.out] == [(1, bad)]


def test_header_union_member_switch(tmp_path):
    dp = switch_for(tmp_path, "union")
    eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x9001))
    dp.receive(1, eth + struct.pack("!H", 41) + b"rest")
    assert [p for p, _ in dp.out] == [2]
    out = dp.out[0][1]
    # setValid on one member invalidates the other: only the long tag is emitted
    assert out[12:14] == b"\x90\x02"
    assert out[14:20] == struct.pack("!IH", 42, 0) and out[20:] == b"rest"
    dp.out.clear()
    dp.receive(1, bytes(Ether(type=0x0800)) + b"x" * 30)  # no tag at all: dropped
    assert dp.out == []


def test_ipv4_options_varbit_round_trip(tmp_path):
    from scapy.layers.inet import IPOption_NOP

    dp = switch_for(tmp_path, "ipv4_options")
    pkt = (Ether() / IP(dst="10.0.0.2", options=[IPOption_NOP()] * 4) / UDP(sport=5, dport=7)
           / b"payload")
    raw = bytes(pkt)
    assert raw[14] == 0x46  # ihl 6: 4 bytes of options
    dp.receive(0, raw)
    assert [p for p, _ in dp.out] == [1]
    got = dp.out[0][1]
    assert got[34:38] == b"\x01\x01\x01\x01"  # options preserved by extract_VL + emit
    assert Ether(got)[UDP].dport == 8 and bytes(Ether(got)[UDP].payload) == b"payload"


def test_subparser_is_inlined(tmp_path):
    dp = switch_for(tmp_path, "subparser")
    dp.receive(0, udp_pkt("10.0.0.9", dport=4000))
    assert [p for p, _ in dp.out] == [3]
    got = Ether(dp.out[0][1])
    assert got[UDP].sport == 4001  # sub-parser's meta.dport, then + 1
    # update_checksum_with_payload over the pseudo header, UDP header and payload
    ref = got.copy()
    ref[UDP].chksum = None
    assert got[UDP].chksum == Ether(bytes(ref))[UDP].chksum


def test_slice_assignment_rewrites_only_those_bits(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    p = tmp_path / "sl.p4"
    p.write_text(text.replace("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
                              "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;\n"
                              "        hdr.ipv4.diffserv[7:2] = 6w46;"))
    out = tmp_path / "sl.json"
    assert compile_main([str(p), "-o", str(out)]) == 0
    dp = DataPlane()
    dp.load_pipeline(out.read_bytes())
    got = []
    dp.tx = lambda port, frame: got.append(frame)
    dp.table_insert("MyIngress.ipv4_lpm", TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 1))))
    pkt = Ether() / IP(dst="10.0.0.1", tos=0x03) / UDP() / b"x"
    dp.receive(0, bytes(pkt))
    assert Ether(got[0])[IP].tos == (46 << 2) | 0x03  # DSCP set, ECN bits kept


def test_function_with_statements_inlined_in_an_action(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("control MyIngress(", """bit<8> dec_floor(in bit<8> v) {
    if (v <= 10) {
        return 10;
    }
    return v - 1;
}

control MyIngress(""").replace("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
                               "hdr.ipv4.ttl = dec_floor(hdr.ipv4.ttl);")
    p = tmp_path / "fn.p4"
    p.write_text(text)
    out = tmp_path / "fn.json"
    assert compile_main([str(p), "-o", str(out)]) == 0
    dp = DataPlane()
    dp.load_pipeline(out.read_bytes())
    got = []
    dp.tx = lambda port, frame: got.append(frame)
    dp.table_insert("MyIngress.ipv4_lpm", TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 1))))
    for ttl in (64, 5):
        dp.receive(0, udp_pkt("10.0.0.1", ttl=ttl))
    assert [Ether(f)[IP].ttl for f in got] == [63, 10]


def test_struct_field_inside_a_header(tmp_path):
    src = os.path.join(PROGS, "union.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("header short_tag_t { bit<16> id; }",
                        "struct id_t { bit<8> hi; bit<8> lo; }\n"
                        "header short_tag_t { id_t id; }")
    text = text.replace("meta.tag_id = (bit<32>)hdr.tag.s.id;",
                        "meta.tag_id = (bit<32>)(hdr.tag.s.id.hi ++ hdr.tag.s.id.lo);")
    p = tmp_path / "sf.p4"
    p.write_text(text)
    out = tmp_path / "sf.json"
    assert compile_main([str(p), "-I", PROGS, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    ht = next(t for t in doc["header_types"] if t["name"] == "short_tag_t")
    assert ht["fields"] == [["id.hi", 8, False], ["id.lo", 8, False]]
    dp = DataPlane()
    dp.load_pipeline(out.read_bytes())
    got = []
    dp.tx = lambda port, frame: got.append(frame)
    eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x9001))
    dp.receive(1, eth + struct.pack("!H", 0x0102))
    assert got[0][14:20] == struct.pack("!IH", 0x0103, 0)
