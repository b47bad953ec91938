"""p4runtime-shell drives the server with the P4Info/JSON of p4rt_test.p4 as compiled by the
project's toolchain (netlab.targets.compile_p4): ids and names as a compiler makes them,
packet-in/packet-out through the controller headers, digests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4rt_harness import DEVICE_ID, FIXTURES, Switch, ipv4_frame

from netlab.targets import compile_p4
from p4sim.switch import api

SRC_MAC = bytes.fromhex("aabbccddeeff")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("p4rt_compiled")
    return compile_p4(FIXTURES / "p4rt_test.p4", out, target="embedded")


@pytest.fixture
def shell(compiled):
    from p4runtime_sh import shell as sh

    json_path, p4info_path = compiled
    sw = Switch()
    sh.setup(device_id=DEVICE_ID, grpc_addr=sw.addr, election_id=(0, 1),
             config=sh.FwdPipeConfig(str(p4info_path), str(json_path)), verbose=False)
    try:
        yield sh, sw
    finally:
        sh.teardown()
        sw.close()


def test_packet_in_and_out_with_compiled_program(shell, compiled):
    sh, sw = shell
    to_cpu = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.send_to_cpu")
    to_cpu.match["hdr.ipv4.dstAddr"] = "10.0.0.0/8"
    to_cpu.insert()
    nhop = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.set_nhop")
    nhop.match["hdr.ipv4.dstAddr"] = "11.0.0.0/8"
    nhop.action["port"] = "4"
    nhop.action["dmac"] = "02:00:00:00:00:04"
    nhop.insert()

    sniffer = sh.PacketIn()
    frame = ipv4_frame(b"\x0a\x01\x02\x03")
    sw.inject(3, frame)
    (msg,) = list(sniffer.sniff(timeout=2))
    md = {m.metadata_id: m.value for m in msg.packet.metadata}
    p4info = text_format.Parse(Path(compiled[1]).read_text(), p4info_pb2.P4Info())
    (packet_in,) = [h for h in p4info.controller_packet_metadata
                    if h.preamble.name == "packet_in"]
    ingress_port_id = next(m.id for m in packet_in.metadata if m.name == "ingress_port")
    assert md[ingress_port_id] == b"\x03"
    assert msg.packet.payload == frame

    out = sh.PacketOut(ipv4_frame(b"\x0b\x00\x00\x01"), egress_port="7", flags="5")
    out.send()
    deadline = time.monotonic() + 3
    while not sw.egress and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sw.packet_outs[0][:2] == (7 << 7 | 5 << 4).to_bytes(2, "big")
    assert [p for p, _ in sw.egress] == [4]


def test_digest_with_compiled_program(shell):
    sh, sw = shell
    de = sh.DigestEntry("mac_learn_t")
    de.max_list_size = 1
    de.insert()
    learn = sh.TableEntry("MyIngress.acl")(action="MyIngress.learn")
    learn.priority = 1
    learn.insert()
    digests = sh.DigestList()
    sw.inject(5, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    (msg,) = list(digests.sniff(timeout=2))
    (data,) = msg.digest.data
    assert [m.bitstring for m in data.struct.members] == [SRC_MAC, b"\x05"]


def test_counters_and_selector_with_compiled_program(shell):
    sh, sw = shell
    sw.inject(2, ipv4_frame(b"\x0c\x00\x00\x01", length=70))
    c = sh.CounterEntry("MyIngress.port_counter")
    c.index = 2
    (got,) = list(c.read())
    assert (got.data.packet_count, got.data.byte_count) == (1, 70)
    for mid, port in ((1, "1"), (2, "2")):
        m = sh.ActionProfileMember("MyIngress.ecmp_selector")(member_id=mid,
                                                             action="MyIngress.set_nhop")
        m.action["port"] = port
        m.action["dmac"] = "02:00:00:00:00:01"
        m.insert()
    g = sh.ActionProfileGroup("MyIngress.ecmp_selector")(group_id=1)
    g.add(1, weight=1).add(2, weight=1)
    g.insert()
    groups = sw.dp.groups("MyIngress.ecmp_selector")
    assert sorted(m.member_id for m in groups[1]) == [1, 2]
    assert sw.dp.members("MyIngress.ecmp_selector")[2] == api.ActionCall(
        "MyIngress.set_nhop", (2, 0x020000000001))
