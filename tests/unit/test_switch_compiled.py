"""Small P4_16 programs compiled with `p4sim compile` (a separate process, the JSON is the only
contract) and run on the p4sim data plane with Scapy frames."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netlab.targets import compile_p4
from p4sim.switch import externs
from p4sim.switch.api import (
    ActionCall,
    CloneSession,
    Exact,
    GroupMember,
    GroupRef,
    Lpm,
    Replica,
    TableEntry,
)
from p4sim.switch.dataplane import DataPlane

HEADERS = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src; bit<32> dst;
}
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }
"""

ROUTER = HEADERS + """
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { bit<8> hits; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action fwd(bit<48> mac, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            if (routes.apply().hit) {
                hdr.ipv4.diffserv = hdr.ipv4.diffserv | 1;
            }
            if (sm.checksum_error == 1) {
                hdr.ipv4.identification = 0xBAD;
            }
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def load(tmp_path: Path, src: str, name: str) -> tuple[DataPlane, list[tuple[int, bytes]]]:
    p4 = tmp_path / f"{name}.p4"
    p4.write_text(src)
    try:
        json_path, _ = compile_p4(p4, tmp_path, target="embedded")
    except Exception as e:  # the compiler is another component: say what failed
        pytest.fail(f"p4sim compile failed on {name}: {e}")
    dp = DataPlane(cpu_port=64)
    dp.load_pipeline(json_path.read_bytes())
    out: list[tuple[int, bytes]] = []
    dp.set_transmit_fn(lambda port, frame: out.append((port, frame)))
    return dp, out


def ipv4_frame(dst: str, ttl: int = 64, **ip: object) -> bytes:
    return bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
                 / IP(src="10.0.0.1", dst=dst, ttl=ttl, **ip) / UDP(sport=7, dport=9)
                 / Raw(b"payload!"))


def test_compiled_router_lpm_hit_checksums(tmp_path: Path) -> None:
    dp, out = load(tmp_path, ROUTER, "router")
    dp.table_insert("I.routes", TableEntry((Lpm(0x0A010000, 16),),
                                           ActionCall("I.fwd", (0x0200000000AA, 3))))
    dp.receive(1, ipv4_frame("10.1.2.3", ttl=20))
    dp.receive(1, ipv4_frame("10.2.2.3"))  # miss: default drop
    assert [p for p, _ in out] == [3]
    got = Ether(out[0][1])
    assert got.dst == "02:00:00:00:00:aa" and got[IP].ttl == 19
    assert got[IP].tos & 1 == 1  # set on hit only
    ref = got[IP].copy()
    ref.chksum = None
    assert IP(bytes(ref)).chksum == got[IP].chksum
    assert bytes(got[UDP].payload) == b"payload!"
    # A frame with a wrong IPv4 checksum: verify_checksum sets checksum_error.
    bad = bytearray(ipv4_frame("10.1.0.1"))
    bad[24] ^= 0xFF
    dp.receive(1, bytes(bad))
    assert Ether(out[1][1])[IP].id == 0xBAD
    dp.receive(1, bytes(Ether(type=0x1234) / Raw(b"x" * 30)))  # not IPv4: to port 0 unchanged
    assert out[2][0] == 0


STACK = HEADERS + """
header tag_t { bit<8> value; bit<7> pad; bit<1> bos; }
struct headers { ethernet_t ethernet; tag_t[3] tags; }
struct metadata { bit<8> n; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x88B6: tag; default: accept; }
    }
    state tag {
        pkt.extract(hdr.tags.next);
        meta.n = meta.n + 1;
        transition select(hdr.tags.last.bos) { 1: accept; default: tag; }
    }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (hdr.tags[0].isValid() && hdr.tags[0].value == 0xEE) {
            hdr.tags.pop_front(1);
        } else {
            hdr.tags.push_front(1);
            hdr.tags[0].setValid();
            hdr.tags[0].value = meta.n;
            hdr.tags[0].bos = 0;
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.tags); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def tags(*values_bos: tuple[int, int]) -> bytes:
    return b"".join(bytes([v, b]) for v, b in values_bos)


def test_compiled_header_stack_parse_push_pop(tmp_path: Path) -> None:
    dp, out = load(tmp_path, STACK, "stack")
    eth = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02", type=0x88B6))
    dp.receive(0, eth + tags((5, 0), (6, 1)) + b"tail")
    # push_front: a new tag (value = number parsed = 2) in front of the two parsed ones.
    assert out[0] == (2, eth + tags((2, 0), (5, 0), (6, 1)) + b"tail")
    dp.receive(0, eth + tags((0xEE, 0), (7, 1)) + b"tail")
    assert out[1] == (2, eth + tags((7, 1)) + b"tail")
    # Four tags overflow the 3-element stack: StackOutOfBounds, the packet still goes on.
    dp.receive(0, eth + tags((1, 0), (2, 0), (3, 0), (4, 1)))
    assert dp.stats().parser_errors == 1 and len(out) == 3


ALU = HEADERS + """
header calc_t { bit<8> a; bit<8> b; int<8> s; bit<8> sum; bit<8> sat; int<8> ssat; bit<16> cat;
                bit<8> hi; bit<32> h; bit<32> reg_old; }
struct headers { ethernet_t ethernet; calc_t calc; }
struct metadata { bit<32> tmp; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.calc); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(4) totals;
    counter(4, CounterType.packets_and_bytes) seen;
    apply {
        sm.egress_spec = 1;
        hdr.calc.sum = hdr.calc.a + hdr.calc.b;
        hdr.calc.sat = hdr.calc.a |+| hdr.calc.b;
        hdr.calc.ssat = hdr.calc.s |+| 8s100;
        hdr.calc.cat = hdr.calc.a ++ hdr.calc.b;
        hdr.calc.hi = (bit<8>)hdr.calc.cat[11:4];
        hash(hdr.calc.h, HashAlgorithm.crc32, 32w0, { hdr.calc.a, hdr.calc.b }, 32w65536);
        totals.read(hdr.calc.reg_old, 1);
        totals.write(1, hdr.calc.reg_old + (bit<32>)hdr.calc.a);
        seen.count(2);
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.calc); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_compiled_arithmetic_hash_registers_counters(tmp_path: Path) -> None:
    dp, out = load(tmp_path, ALU, "alu")
    eth = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02", type=0x9000))
    body = bytes([200, 100, 100]) + bytes(25)
    dp.receive(0, eth + body)
    dp.receive(0, eth + body)
    fields = out[1][1][14:]
    a, b = 200, 100
    assert fields[3] == (a + b) % 256
    assert fields[4] == 255  # saturating add
    assert fields[5] == 127  # int<8> saturating add: 100 + 100 -> 127
    assert int.from_bytes(fields[6:8], "big") == (a << 8) | b
    assert fields[8] == (((a << 8) | b) >> 4) & 0xFF
    assert int.from_bytes(fields[9:13], "big") == externs.crc32(bytes([a, b])) % 65536
    assert int.from_bytes(fields[13:17], "big") == 200  # second packet read the first's sum
    assert dp.register_read("I.totals", 1) == 400
    assert dp.counter_read("I.seen", 2) == (2, 2 * len(eth + body))


SELECTOR = HEADERS + """
struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; }
struct metadata { bit<8> unused; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: udp; default: accept; }
    }
    state udp { pkt.extract(hdr.udp); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
    table ecmp {
        key = { hdr.ipv4.dst: exact; hdr.udp.sport: selector; }
        actions = { set_port; }
        implementation = sel;
    }
    apply {
        if (hdr.udp.isValid()) {
            ecmp.apply();
            if (hdr.udp.dport == 99) {
                clone(CloneType.I2E, 32w5);
            }
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) { hdr.ipv4.ttl = 1; }
    }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_compiled_selector_watch_port_and_clone(tmp_path: Path) -> None:
    dp, out = load(tmp_path, SELECTOR, "selector")
    doc = json.loads(dp.pipeline_json() or b"{}")
    [prof] = [p for pipe in doc["pipelines"] for p in pipe.get("action_profiles", [])]
    for m, port in ((1, 1), (2, 2)):
        dp.member_add(prof["name"], m, ActionCall("I.set_port", (port,)))
    dp.group_add(prof["name"], 1, [GroupMember(1, watch_port=1), GroupMember(2, watch_port=2)])
    dp.table_insert("I.ecmp", TableEntry((Exact(0x0A000009),), GroupRef(1)))

    def send(sport: int, dport: int = 9) -> None:
        dp.receive(0, bytes(Ether() / IP(dst="10.0.0.9") / UDP(sport=sport, dport=dport)))

    for sport in range(40):
        send(sport)
    ports = [p for p, _ in out]
    assert set(ports) == {1, 2}
    assert ports == [[1, 2][externs.crc16(s.to_bytes(2, "big")) % 2] for s in range(40)]
    out.clear()
    dp.set_port_up(1, False)
    for sport in range(10):
        send(sport)
    assert {p for p, _ in out} == {2}
    out.clear()
    dp.clone_session_set(CloneSession(5, [Replica(7, 0)]))
    send(3, dport=99)
    by_port = {p: Ether(f) for p, f in out}
    assert set(by_port) == {2, 7}
    assert by_port[7][IP].ttl == 1 and by_port[2][IP].ttl == 64


RESUBMIT = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
struct metadata { @field_list(1) bit<16> mark; bit<8> other; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 0) {
            meta.mark = 0xAB;
            meta.other = 7;
            hdr.ethernet.dst = 0;
            resubmit_preserving_field_list(1);
        } else {
            hdr.ethernet.ether_type = meta.mark;
            hdr.ethernet.src = (bit<48>)meta.other;
            sm.egress_spec = 3;
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_compiled_resubmit_preserves_only_the_field_list(tmp_path: Path) -> None:
    dp, out = load(tmp_path, RESUBMIT, "resubmit")
    frame = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02", type=0x1234)
                  / Raw(b"r" * 20))
    dp.receive(0, frame)
    assert len(out) == 1 and out[0][0] == 3
    got = out[0][1]  # raw bytes: an EtherType below 0x600 would make Scapy read 802.3
    assert got[12:14] == b"\x00\xab"  # meta.mark preserved through the resubmit
    assert got[6:12] == bytes(6)  # meta.other was not in the list: reset to 0
    assert got[0:6] == bytes.fromhex("020000000001")  # the original packet, not the modified
    assert got[14:] == b"r" * 20
