"""Name resolution (controlplane.p4info) and entity <-> protobuf conversion (controlplane.codec)
against a hand-written P4Info fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2

from controlplane.codec import Codec
from controlplane.encoding import Match
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    CounterEntry,
    GroupMember,
    MulticastGroup,
    RegisterEntry,
    Replica,
    TableEntry,
)
from controlplane.errors import ControlPlaneError, EncodeError, P4InfoLookupError
from controlplane.p4info import P4InfoIndex

FIXTURE = Path(__file__).parent / "cp_fixtures" / "basic.p4info.txtpb"


@pytest.fixture(scope="module")
def ix() -> P4InfoIndex:
    return P4InfoIndex.from_file(FIXTURE)


@pytest.fixture(scope="module")
def codec(ix: P4InfoIndex) -> Codec:
    return Codec(ix)


def test_names_resolve_by_full_name_alias_suffix_and_id(ix: P4InfoIndex) -> None:
    assert ix.id("table", "MyIngress.ipv4_lpm") == 33574068
    assert ix.id("table", "ipv4_lpm") == 33574068
    assert ix.id("action", "set_nhop") == 16799317
    assert ix.id("action_profile", "ecmp_selector") == 285233948
    assert ix.id("register", "queue_occ") == 369146154
    assert ix.table(33574068).preamble.name == "MyIngress.ipv4_lpm"
    assert ix.name_of(16805608) == "MyIngress.drop"
    assert ix.match_field("acl", "srcAddr").name == "hdr.ipv4.srcAddr"
    assert ix.match_field("acl", "hdr.l4.dstPort").match_type == "range"
    assert ix.param("set_nhop", "port").bitwidth == 9
    assert ix.register_bitwidth("queue_occ") == 19
    assert [f.name for f in ix.digest_fields("mac_learn_digest_t")] == ["srcAddr", "ingress_port"]
    assert [(f.name, f.bitwidth) for f in ix.packet_metadata("packet_in")] == [
        ("ingress_port", 9), ("_pad", 7)]


@pytest.mark.parametrize(("call", "needle"), [
    (lambda ix: ix.table("ipv4_lmp"), "unknown table 'ipv4_lmp'; did you mean MyIngress.ipv4_lpm?"),
    (lambda ix: ix.action("frobnicate"), "unknown action 'frobnicate'; known:"),
    (lambda ix: ix.match_field("ipv4_lpm", "dstAdr"),
     "unknown match field 'dstAdr' in table MyIngress.ipv4_lpm; did you mean hdr.ipv4.dstAddr?"),
    (lambda ix: ix.param("set_nhop", "prot"),
     "unknown param 'prot' of action MyIngress.set_nhop; did you mean port?"),
    (lambda ix: ix.table_action("acl", "set_nhop"),
     "action 'MyIngress.set_nhop' is not an action of table MyIngress.acl (allowed: "
     "MyIngress.drop, NoAction)"),
    (lambda ix: ix.table(33554432), "unknown table id 33554432"),
    (lambda ix: ix.get("value_set", "vs"), "the P4Info declares no value_sets"),
])
def test_unknown_names_give_one_line_with_suggestion(ix: P4InfoIndex, call, needle: str) -> None:
    with pytest.raises(P4InfoLookupError) as info:
        call(ix)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_table_entry_encodes_to_p4runtime_ids_and_canonical_bytes(codec: Codec) -> None:
    e = TableEntry("ipv4_lpm", match={"dstAddr": "10.1.2.3/8"}, action="set_nhop",
                   params={"dmac": "00:00:00:00:01:02", "port": 3})
    te = codec.to_proto(e).table_entry
    assert te.table_id == 33574068
    assert te.match[0].field_id == 1
    assert te.match[0].lpm.value == b"\x0a\x00\x00\x00"
    assert te.match[0].lpm.prefix_len == 8
    assert te.action.action.action_id == 16799317
    assert [(p.param_id, p.value) for p in te.action.action.params] == [
        (1, b"\x01\x02"), (2, b"\x03")]
    back = codec.table_entry_from(te)
    assert back.table == "MyIngress.ipv4_lpm"
    assert back.match == {"hdr.ipv4.dstAddr": Match("lpm", 0x0A000000, prefix_len=8)}
    assert back.params == {"dmac": 0x0102, "port": 3}


def test_ternary_table_with_dont_care_fields(codec: Codec) -> None:
    e = TableEntry("acl", match={"protocol": 6, "srcAddr": "10.0.0.0&&&255.0.0.0",
                                 "dstPort": "0..65535", "ingress_port": "*"},
                   action="drop", priority=10)
    te = codec.to_proto(e).table_entry
    # dstPort full range and ingress_port '*' are don't-care: omitted, as P4Runtime requires.
    assert sorted(fm.field_id for fm in te.match) == [1, 4]
    assert te.priority == 10


@pytest.mark.parametrize(("entry", "needle"), [
    (TableEntry("ipv4_lpm", match={"dstAddr": "10.0.0.0/8"}, action="set_nhop",
                params={"port": 1}), "action MyIngress.set_nhop: missing param 'dmac' (bit<48>)"),
    (TableEntry("ipv4_lpm", match={"dstAddr": "10.0.0.0/8"}, action="set_nhop",
                params={"port": 512, "dmac": 0}),
     "table MyIngress.ipv4_lpm: action MyIngress.set_nhop: param port: value 512 does not fit "
     "in 9 bits"),
    (TableEntry("ipv4_lpm", match={"dstAddr": "10.0.0.0/8"}, action="set_nhop",
                params={"port": 1, "dmac": 0, "vlan": 3}), "unknown param 'vlan'"),
    (TableEntry("ipv4_lpm", match={"dstAddr": "10.0.0.0/8"}), "missing action"),
    (TableEntry("ipv4_lpm", match={"dstAddr": "10.0.0.0/8"}, action="drop", priority=5),
     "priority 5 given but the table has only exact/lpm keys"),
    (TableEntry("acl", match={"protocol": 6}, action="drop"), "needs priority > 0"),
    (TableEntry("acl", match={"srcAddr": "1.2.3.4"}, action="drop", priority=1),
     "missing match field 'hdr.ipv4.protocol' (exact, bit<8>)"),
    (TableEntry("acl", match={"protocol": 256}, action="drop", priority=1),
     "match field hdr.ipv4.protocol: value 256 does not fit in 8 bits"),
    (TableEntry("ecmp_group", match={"group_id": 1}, member=1, group=2),
     "give only one of action, member or group"),
    (TableEntry("ipv4_lpm", match={"dstAddr": "1.0.0.0/8"}, is_default=True, action="drop"),
     "the default entry has no match key"),
])
def test_bad_entries_fail_before_sending_with_field_and_value(codec: Codec, entry: TableEntry,
                                                              needle: str) -> None:
    with pytest.raises(ControlPlaneError) as info:
        codec.to_proto(entry)
    assert needle in str(info.value)


def test_read_templates_allow_wildcards(codec: Codec) -> None:
    # An all-wildcard template must still say which entity kind it reads.
    for template, kind in [(TableEntry(), "table_entry"), (CounterEntry(), "counter_entry"),
                           (RegisterEntry(), "register_entry"),
                           (MulticastGroup(), "packet_replication_engine_entry")]:
        assert codec.to_proto(template, for_read=True).WhichOneof("entity") == kind
    assert codec.to_proto(TableEntry(), for_read=True).table_entry.table_id == 0
    te = codec.to_proto(TableEntry("acl"), for_read=True).table_entry
    assert te.table_id == 33557865 and not te.match and not te.HasField("action")
    reg = codec.to_proto(RegisterEntry("queue_occ"), for_read=True).register_entry
    assert reg.register_id == 369146154 and not reg.HasField("index")


def test_action_profile_members_groups_and_pre(codec: Codec) -> None:
    m = codec.to_proto(ActionProfileMember("ecmp_selector", 7, "set_nhop",
                                           {"dmac": 1, "port": 2})).action_profile_member
    assert (m.action_profile_id, m.member_id, m.action.action_id) == (285233948, 7, 16799317)
    g = codec.to_proto(ActionProfileGroup("ecmp_selector", 3, [
        GroupMember(7, weight=2, watch_port=5), GroupMember(8)])).action_profile_group
    assert [(x.member_id, x.weight, x.watch_port, x.WhichOneof("watch_kind")) for x in g.members] \
        == [(7, 2, b"\x05", "watch_port"), (8, 1, b"", None)]
    back = codec.from_proto(p4runtime_pb2.Entity(action_profile_group=g))
    assert back == ActionProfileGroup("MyIngress.ecmp_selector", 3, [
        GroupMember(7, 2, 5), GroupMember(8, 1, None)])
    mc = codec.to_proto(MulticastGroup(1, [Replica(1), Replica(2, 1)]))
    assert [(r.egress_port, r.instance) for r in
            mc.packet_replication_engine_entry.multicast_group_entry.replicas] == [(1, 0), (2, 1)]
    cs = codec.to_proto(CloneSession(5, [Replica(510)], packet_length_bytes=128))
    assert codec.from_proto(cs) == CloneSession(5, [Replica(510)], 0, 128)


def test_register_value_checked_against_register_width(codec: Codec) -> None:
    r = codec.to_proto(RegisterEntry("queue_occ", 3, (1 << 19) - 1)).register_entry
    assert r.data.bitstring == b"\x07\xff\xff"
    with pytest.raises(EncodeError, match=r"register queue_occ\[3\]: value 524288 does not fit"):
        codec.to_proto(RegisterEntry("queue_occ", 3, 1 << 19))


def test_packet_out_metadata_and_packet_in_decoding(codec: Codec) -> None:
    out = codec.packet_out(b"\x01\x02", {"egress_port": 4})
    assert [(m.metadata_id, m.value) for m in out.metadata] == [(1, b"\x04")]
    with pytest.raises(EncodeError, match="unknown metadata ingress_port"):
        codec.packet_out(b"", {"ingress_port": 1})
    pin = p4runtime_pb2.PacketIn(payload=b"x")
    pin.metadata.add(metadata_id=1, value=b"\x01\x01")
    assert codec.packet_in(pin).metadata == {"ingress_port": 257}
    dl = p4runtime_pb2.DigestList(digest_id=385928011, list_id=9)
    row = dl.data.add()
    row.struct.members.add(bitstring=b"\x00\x11\x22\x33\x44\x55")
    row.struct.members.add(bitstring=b"\x03")
    got = codec.digest_list(dl)
    assert (got.digest, got.list_id, got.data) == (
        "mac_learn_digest_t", 9, [{"srcAddr": 0x001122334455, "ingress_port": 3}])


@settings(max_examples=60, deadline=None)
@given(dst=st.integers(0, (1 << 32) - 1), plen=st.integers(1, 32),
       src=st.integers(0, (1 << 32) - 1), smask=st.integers(1, (1 << 32) - 1),
       lo=st.integers(0, 65535), span=st.integers(0, 65534), port=st.integers(0, 511),
       proto=st.integers(0, 255), prio=st.integers(1, (1 << 31) - 1))
def test_entries_survive_encode_decode(codec: Codec, dst: int, plen: int, src: int, smask: int,
                                       lo: int, span: int, port: int, proto: int,
                                       prio: int) -> None:
    hi = min(65535, lo + span)
    lpm = TableEntry("ipv4_lpm", match={"dstAddr": (dst, plen)}, action="set_nhop",
                     params={"dmac": dst, "port": port})
    back = codec.from_proto(codec.to_proto(lpm))
    host_bits = (1 << (32 - plen)) - 1
    assert back.match == {"hdr.ipv4.dstAddr": Match("lpm", dst & ~host_bits, prefix_len=plen)}
    assert back.params == {"dmac": dst, "port": port}
    acl = TableEntry("acl", match={"srcAddr": (src, smask), "dstPort": (lo, hi),
                                   "ingress_port": port, "protocol": proto},
                     action="drop", priority=prio)
    back = codec.from_proto(codec.to_proto(acl))
    expected = {"hdr.ipv4.srcAddr": Match("ternary", src & smask, mask=smask),
                "hdr.ipv4.protocol": proto, "standard_metadata.ingress_port": port}
    if (lo, hi) != (0, 65535):
        expected["hdr.l4.dstPort"] = Match("range", lo, high=hi)
    assert back.match == expected and back.priority == prio
