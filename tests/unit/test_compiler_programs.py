"""Compiles the test programs in p4progs/ and checks the BMv2 JSON and P4Info structurally
(tables, keys, actions, ids, parser transitions, expression trees)."""

from __future__ import annotations

import json
import os

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4sim.compile import main as compile_main

PROGS = os.path.join(os.path.dirname(__file__), "p4progs")


def compile_prog(tmp_path, name: str):
    out = tmp_path / f"{name}.json"
    info = tmp_path / f"{name}.p4info.txtpb"
    rc = compile_main([os.path.join(PROGS, name + ".p4"), "-o", str(out),
                       "--p4runtime-files", str(info)])
    assert rc == 0
    doc = json.loads(out.read_text())
    p4i = text_format.Parse(info.read_text(), p4info_pb2.P4Info())
    return doc, p4i


def table(doc, name):
    for p in doc["pipelines"]:
        for t in p["tables"]:
            if t["name"] == name:
                return t
    raise AssertionError(f"no table {name}")


def action(doc, name):
    return next(a for a in doc["actions"] if a["name"] == name)


def field(h, f):
    return {"type": "field", "value": [h, f]}


def hexv(j):
    assert j["type"] == "hexstr"
    return int(j["value"], 16)


def unwrap(p):
    """Primitive parameters wrap expressions twice; return the inner op dict."""
    while p.get("type") == "expression":
        p = p["value"]
    return p


def by_name(msgs, name):
    return next(m for m in msgs if m.preamble.name == name)


# ---- basic IPv4 -------------------------------------------------------------------------------
def test_basic_ipv4_tables_and_actions(tmp_path):
    doc, _ = compile_prog(tmp_path, "basic_ipv4")
    t = table(doc, "MyIngress.ipv4_lpm")
    assert t["match_type"] == "lpm"
    assert t["key"] == [{"match_type": "lpm", "name": "hdr.ipv4.dstAddr",
                         "target": ["ipv4", "dstAddr"], "mask": None}]
    assert set(t["actions"]) == {"MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"}
    assert t["max_size"] == 1024
    drop_id = action(doc, "MyIngress.drop")["id"]
    assert t["default_entry"]["action_id"] == drop_id
    assert t["default_entry"]["action_const"] is False
    fwd = action(doc, "MyIngress.ipv4_forward")
    assert fwd["runtime_data"] == [{"name": "dstAddr", "bitwidth": 48},
                                   {"name": "port", "bitwidth": 9}]
    prims = fwd["primitives"]
    assert prims[0]["op"] == "assign"
    assert prims[0]["parameters"] == [field("standard_metadata", "egress_spec"),
                                      {"type": "runtime_data", "value": 1}]
    # hdr.ipv4.ttl = hdr.ipv4.ttl - 1 is computed modulo 2^8: (ttl - 1) & 0xff
    ttl = prims[3]
    assert ttl["parameters"][0] == field("ipv4", "ttl")
    e = unwrap(ttl["parameters"][1])
    assert e["op"] == "&" and hexv(e["right"]) == 0xFF
    inner = e["left"]["value"]
    assert inner["op"] == "-" and inner["left"] == field("ipv4", "ttl")
    assert hexv(inner["right"]) == 1
    drop = action(doc, "MyIngress.drop")
    assert drop["primitives"][0]["op"] == "mark_to_drop"
    assert drop["primitives"][0]["parameters"] == [{"type": "header",
                                                    "value": "standard_metadata"}]


def test_basic_ipv4_control_flow_and_parser(tmp_path):
    doc, _ = compile_prog(tmp_path, "basic_ipv4")
    ing = doc["pipelines"][0]
    assert ing["name"] == "ingress" and doc["pipelines"][1]["name"] == "egress"
    cond = next(c for c in ing["conditionals"] if c["name"] == ing["init_table"])
    e = cond["expression"]["value"]
    assert e["op"] == "and"
    assert e["left"]["value"] == {"op": "d2b", "left": None,
                                  "right": field("ipv4", "$valid$")}
    gt = e["right"]["value"]
    assert gt["op"] == ">" and gt["left"] == field("ipv4", "ttl") and hexv(gt["right"]) == 1
    assert cond["true_next"] == "MyIngress.ipv4_lpm"
    # else branch: the direct call drop() runs through a hidden table with a const default
    other = table(doc, cond["false_next"])
    assert other["key"] == [] and other["actions"] == ["MyIngress.drop"]
    assert other["default_entry"]["action_const"] is True
    states = {s["name"]: s for s in doc["parsers"][0]["parse_states"]}
    assert doc["parsers"][0]["init_state"] == "start"
    eth = states["parse_ethernet"]
    assert eth["parser_ops"] == [{"op": "extract", "parameters": [{"type": "regular",
                                                                   "value": "ethernet"}]}]
    assert eth["transition_key"] == [field("ethernet", "etherType")]
    assert eth["transitions"][0] == {"type": "hexstr", "value": "0x0800", "mask": None,
                                     "next_state": "parse_ipv4"}
    assert eth["transitions"][1]["type"] == "default"
    assert eth["transitions"][1]["next_state"] is None  # accept
    verify = states["parse_ipv4"]["parser_ops"][1]
    assert verify["op"] == "verify"
    errors = dict(doc["errors"])
    assert hexv(verify["parameters"][1]) == errors["HeaderTooShort"]
    assert doc["deparsers"][0]["order"] == ["ethernet", "ipv4"]


def test_basic_ipv4_checksums_and_layout(tmp_path):
    doc, _ = compile_prog(tmp_path, "basic_ipv4")
    cks = doc["checksums"]
    assert [(c["verify"], c["update"]) for c in cks] == [(True, False), (False, True)]
    for c in cks:
        assert c["target"] == ["ipv4", "hdrChecksum"]
        calc = next(x for x in doc["calculations"] if x["name"] == c["calculation"])
        assert calc["algo"] == "csum16"
        assert len(calc["input"]) == 11
        assert calc["input"][0] == field("ipv4", "version")
        assert c["if_cond"]["value"]["op"] == "d2b"
    types = {t["name"]: t for t in doc["header_types"]}
    assert types["ipv4_t"]["fields"][0] == ["version", 4, False]
    assert sum(f[1] for f in types["ipv4_t"]["fields"]) == 160
    sm = types["standard_metadata"]["fields"]
    assert ["enq_qdepth", 19, False] in sm and ["deq_timedelta", 32, False] in sm
    assert sum(f[1] for f in sm) % 8 == 0
    scal = types["scalars_0"]["fields"]
    assert ["userMetadata.routed", 1, False] in scal
    headers = {h["name"]: h for h in doc["headers"]}
    assert headers["ipv4"]["header_type"] == "ipv4_t" and not headers["ipv4"]["metadata"]
    assert headers["standard_metadata"]["metadata"]
    assert ["queueing_metadata.enq_qdepth", ["standard_metadata", "enq_qdepth"]] in \
        doc["field_aliases"]
    assert doc["__meta__"]["version"] == [2, 23]


def test_basic_ipv4_p4info_ids_match_p4c(tmp_path):
    # Ids published with the p4lang tutorials' basic.p4, produced by real p4c.
    _, p4i = compile_prog(tmp_path, "basic_ipv4")
    t = by_name(p4i.tables, "MyIngress.ipv4_lpm")
    assert t.preamble.id == 37375156 and t.preamble.alias == "ipv4_lpm"
    assert by_name(p4i.actions, "MyIngress.ipv4_forward").preamble.id == 28792405
    assert by_name(p4i.actions, "MyIngress.drop").preamble.id == 25652968
    assert by_name(p4i.actions, "NoAction").preamble.id == 21257015
    mf = t.match_fields[0]
    assert (mf.id, mf.name, mf.bitwidth, mf.match_type) == (1, "hdr.ipv4.dstAddr", 32,
                                                            p4info_pb2.MatchField.LPM)
    fwd = by_name(p4i.actions, "MyIngress.ipv4_forward")
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dstAddr", 48),
                                                                 (2, "port", 9)]
    assert t.size == 1024
    assert not any(x.preamble.name.startswith("tbl_") for x in p4i.tables)


# ---- ECN --------------------------------------------------------------------------------------
def test_ecn_marking_at_egress(tmp_path):
    doc, p4i = compile_prog(tmp_path, "ecn_marking")
    eg = doc["pipelines"][1]
    first = next(c for c in eg["conditionals"] if c["name"] == eg["init_table"])
    e = first["expression"]["value"]
    assert e["op"] == "and" and e["right"]["value"]["op"] == "or"
    second = next(c for c in eg["conditionals"] if c["name"] == first["true_next"])
    ge = second["expression"]["value"]
    assert ge["op"] == ">=" and ge["left"] == field("standard_metadata", "enq_qdepth")
    assert hexv(ge["right"]) == 10
    mark_tbl = table(doc, second["true_next"])
    mark = action(doc, mark_tbl["actions"][0])
    assert mark["name"] == "EcnEgress.mark_ecn"
    assert mark["primitives"][0]["parameters"] == [field("ipv4", "ecn"),
                                                   {"type": "hexstr", "value": "0x3"}]
    fwd = table(doc, "EcnIngress.port_fwd")
    assert fwd["key"][0]["target"] == ["standard_metadata", "ingress_port"]
    assert fwd["max_size"] == 64
    assert by_name(p4i.tables, "EcnIngress.port_fwd").size == 64


# ---- header stack telemetry -------------------------------------------------------------------
def test_int_stack_parser_and_push(tmp_path):
    doc, _ = compile_prog(tmp_path, "int_stack")
    stacks = doc["header_stacks"]
    assert len(stacks) == 1 and stacks[0]["name"] == "hops" and stacks[0]["size"] == 4
    ids = {h["id"]: h["name"] for h in doc["headers"]}
    assert [ids[i] for i in stacks[0]["header_ids"]] == ["hops[0]", "hops[1]", "hops[2]",
                                                          "hops[3]"]
    states = {s["name"]: s for s in doc["parsers"][0]["parse_states"]}
    hop = states["parse_hop"]
    assert hop["parser_ops"][0] == {"op": "extract", "parameters": [{"type": "stack",
                                                                      "value": "hops"}]}
    assert hop["transition_key"] == [{"type": "stack_field", "value": ["hops", "bos"]}]
    assert hop["transitions"][1]["next_state"] == "parse_hop"
    ip = states["parse_ipv4"]
    # (protocol, frag_offset) = (17, 0): 1 byte + 2 bytes, concatenated
    assert ip["transitions"][0]["value"] == "0x110000"
    push = action(doc, "IntEgress.push_hop")["primitives"]
    assert push[0]["op"] == "push"
    assert push[0]["parameters"] == [{"type": "header_stack", "value": "hops"},
                                     {"type": "hexstr", "value": "0x1"}]
    assert push[1] == {"op": "add_header", "parameters": [{"type": "header",
                                                           "value": "hops[0]"}],
                       "source_info": push[1]["source_info"]}
    tern = unwrap(push[2]["parameters"][1])
    assert tern["op"] == "?" and tern["cond"]["value"]["op"] == "=="
    sat = unwrap(push[9]["parameters"][1])
    assert sat["op"] == "usat_cast" and hexv(sat["right"]) == 8
    assert doc["deparsers"][0]["order"][-4:] == ["hops[0]", "hops[1]", "hops[2]", "hops[3]"]


# ---- ECMP -------------------------------------------------------------------------------------
def test_ecmp_action_selector(tmp_path):
    doc, p4i = compile_prog(tmp_path, "ecmp_selector")
    t = table(doc, "EcmpIngress.ecmp_nhop")
    assert t["type"] == "indirect_ws"
    assert t["action_profile"] == "EcmpIngress.ecmp_selector"
    assert [k["match_type"] for k in t["key"]] == ["lpm"]
    prof = doc["pipelines"][0]["action_profiles"][0]
    assert prof["name"] == "EcmpIngress.ecmp_selector" and prof["max_size"] == 1024
    assert prof["selector"]["algo"] == "crc16"
    assert prof["selector"]["input"] == [
        field("ipv4", "src"), field("ipv4", "dst"), field("ipv4", "protocol"),
        field("scalars", "userMetadata.l4_src"), field("scalars", "userMetadata.l4_dst")]
    pt = by_name(p4i.tables, "EcmpIngress.ecmp_nhop")
    ap = by_name(p4i.action_profiles, "EcmpIngress.ecmp_selector")
    assert ap.preamble.id >> 24 == 0x11
    assert pt.implementation_id == ap.preamble.id
    assert ap.with_selector and ap.size == 1024 and list(ap.table_ids) == [pt.preamble.id]
    assert len(pt.match_fields) == 1
    hashed = [p for a in doc["actions"] for p in a["primitives"]
              if p["op"] == "modify_field_with_hash_based_offset"]
    assert len(hashed) == 1
    dst, base, calc, mx = hashed[0]["parameters"]
    assert dst == field("scalars", "userMetadata.flow_hash")
    assert hexv(base) == 0 and hexv(mx) == 65536
    c = next(x for x in doc["calculations"] if x["name"] == calc["value"])
    assert c["algo"] == "crc16" and len(c["input"]) == 5


# ---- registers and counters -------------------------------------------------------------------
def test_registers_and_counters(tmp_path):
    doc, p4i = compile_prog(tmp_path, "regs_counters")
    regs = {r["name"]: r for r in doc["register_arrays"]}
    assert regs["RcIngress.last_ttl"]["size"] == 512
    assert regs["RcIngress.last_ttl"]["bitwidth"] == 8
    assert regs["RcIngress.rr"]["bitwidth"] == 32
    cnt = {c["name"]: c for c in doc["counter_arrays"]}
    assert cnt["RcIngress.port_pkts"]["is_direct"] is False
    assert cnt["RcIngress.port_pkts"]["size"] == 512
    assert cnt["RcIngress.acl_hits"]["is_direct"] is True
    assert cnt["RcIngress.acl_hits"]["binding"] == "RcIngress.acl"
    ops = [p for a in doc["actions"] for p in a["primitives"]]
    reads = [p for p in ops if p["op"] == "register_read"]
    assert reads[0]["parameters"][1] == {"type": "register_array",
                                         "value": "RcIngress.last_ttl"}
    writes = [p for p in ops if p["op"] == "register_write"]
    assert writes[0]["parameters"][2] == field("ipv4", "ttl")
    counts = [p for p in ops if p["op"] == "count"]
    assert counts[0]["parameters"][0] == {"type": "counter_array",
                                          "value": "RcIngress.port_pkts"}
    acl = table(doc, "RcIngress.acl")
    assert acl["with_counters"] is True and acl["match_type"] == "range"
    # an optional key of a table with entries is ternary in p4c's JSON (`_` is mask 0)
    assert [k["match_type"] for k in acl["key"]] == ["ternary", "ternary", "range"]
    e0, e1 = acl["entries"]
    assert e0["match_key"][0] == {"match_type": "ternary", "key": "0x0a000000",
                                  "mask": "0xff000000"}
    assert e0["match_key"][2] == {"match_type": "range", "start": "0x0000", "end": "0x03ff"}
    assert e1["match_key"][0]["mask"] == "0x00000000"
    assert e0["priority"] < e1["priority"]  # first entry wins (BMv2: lower value first)
    pt = by_name(p4i.tables, "RcIngress.acl")
    assert pt.is_const_table
    dc = by_name(p4i.direct_counters, "RcIngress.acl_hits")
    assert dc.direct_table_id == pt.preamble.id and list(pt.direct_resource_ids) == [
        dc.preamble.id]
    assert dc.preamble.id >> 24 == 0x13
    c = by_name(p4i.counters, "RcIngress.port_pkts")
    assert c.preamble.id >> 24 == 0x12 and c.size == 512
    assert c.spec.unit == p4info_pb2.CounterSpec.BOTH
    r = by_name(p4i.registers, "RcIngress.last_ttl")
    assert r.preamble.id >> 24 == 0x16 and r.size == 512
    assert r.type_spec.bitstring.bit.bitwidth == 8


# ---- clone to CPU -----------------------------------------------------------------------------
def test_clone_to_cpu_and_controller_headers(tmp_path):
    doc, p4i = compile_prog(tmp_path, "clone_cpu")
    punt = action(doc, "CpuIngress.punt")["primitives"]
    clone = punt[1]
    assert clone["op"] == "clone_ingress_pkt_to_egress"
    assert hexv(clone["parameters"][0]) == 100
    fl_id = hexv(clone["parameters"][1])
    fl = next(f for f in doc["field_lists"] if f["id"] == fl_id)
    assert fl["elements"] == [field("scalars", "userMetadata.ingress_port")]
    cpm = {m.preamble.name: m for m in p4i.controller_packet_metadata}
    assert set(cpm) == {"packet_in", "packet_out"}
    assert [(m.id, m.name, m.bitwidth) for m in cpm["packet_in"].metadata] == [
        (1, "ingress_port", 9), (2, "_pad", 7)]
    assert cpm["packet_out"].preamble.id >> 24 == 0x04
    dmac = table(doc, "CpuIngress.dmac")
    assert dmac["next_tables"] == {"__HIT__": None, "__MISS__": "CpuIngress.punt_table"}
    assert dmac["default_entry"]["action_const"] is True
    assert by_name(p4i.tables, "CpuIngress.dmac").const_default_action_id == by_name(
        p4i.actions, "NoAction").preamble.id
    exits = [p for a in doc["actions"] for p in a["primitives"] if p["op"] == "exit"]
    assert len(exits) == 1
    learn = action(doc, "CpuIngress.learn")["primitives"][0]
    assert learn["op"] == "generate_digest"
    ll = doc["learn_lists"][0]
    assert hexv(learn["parameters"][1]) == ll["id"]
    assert ll["elements"] == [field("ethernet", "src"), field("standard_metadata",
                                                             "ingress_port")]
    dg = by_name(p4i.digests, "mac_learn_t")
    assert dg.preamble.id >> 24 == 0x17 and dg.type_spec.struct.name == "mac_learn_t"
    members = p4i.type_info.structs["mac_learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("src", 48), ("port", 9)]


# ---- meters -----------------------------------------------------------------------------------
def test_meters_and_action_run(tmp_path):
    doc, p4i = compile_prog(tmp_path, "meters")
    meters = {m["name"]: m for m in doc["meter_arrays"]}
    pm = meters["MIngress.port_meter"]
    assert (pm["is_direct"], pm["size"], pm["type"], pm["rate_count"]) == (False, 64, "bytes",
                                                                           2)
    fm = meters["MIngress.flow_meter"]
    assert fm["is_direct"] and fm["binding"] == "MIngress.policer"
    assert fm["result_target"] == ["scalars", "userMetadata.flow_color"]
    ex = [p for a in doc["actions"] for p in a["primitives"] if p["op"] == "execute_meter"]
    assert ex[0]["parameters"][0] == {"type": "meter_array", "value": "MIngress.port_meter"}
    assert ex[0]["parameters"][2] == field("scalars", "userMetadata.port_color")
    pol = table(doc, "MIngress.policer")
    assert pol["direct_meters"] == "MIngress.flow_meter"
    nt = pol["next_tables"]
    assert nt["MIngress.police"] != nt["MIngress.unpoliced"]
    red = next(c for c in doc["pipelines"][0]["conditionals"]
               if c["name"] == nt["MIngress.police"])
    assert hexv(red["expression"]["value"]["right"]) == 2  # Color.RED
    m = by_name(p4i.meters, "MIngress.port_meter")
    assert m.preamble.id >> 24 == 0x14 and m.spec.unit == p4info_pb2.MeterSpec.BYTES
    dm = by_name(p4i.direct_meters, "MIngress.flow_meter")
    assert dm.preamble.id >> 24 == 0x15
    assert dm.direct_table_id == by_name(p4i.tables, "MIngress.policer").preamble.id


@pytest.mark.parametrize("ext,parse", [
    (".p4info.bin", lambda b: p4info_pb2.P4Info.FromString(b)),
    (".p4info.json", None),
])
def test_p4info_formats_by_extension(tmp_path, ext, parse):
    from google.protobuf import json_format
    out = tmp_path / ("x" + ext)
    txt = tmp_path / "x.txtpb"
    rc = compile_main([os.path.join(PROGS, "basic_ipv4.p4"), "-o", str(tmp_path / "x.json"),
                       f"--p4runtime-files={out},{txt}"])
    assert rc == 0
    want = text_format.Parse(txt.read_text(), p4info_pb2.P4Info())
    if parse is not None:
        got = parse(out.read_bytes())
    else:
        got = json_format.Parse(out.read_text(), p4info_pb2.P4Info())
    assert got == want


# ---- assorted constructs ----------------------------------------------------------------------
def test_features_parser_masks_ranges_lookahead_value_sets(tmp_path):
    doc, _ = compile_prog(tmp_path, "features")
    states = {s["name"]: s for s in doc["parsers"][0]["parse_states"]}
    tr = states["start"]["transitions"]
    assert tr[1] == {"type": "hexstr", "value": "0x8800", "mask": "0xff00",
                     "next_state": "check_tag"}
    assert tr[2]["type"] == "parse_vset" and tr[2]["value"] == "FParser.special_types"
    assert doc["parse_vsets"][0]["compressed_bitwidth"] == 16
    chk = states["check_tag"]
    assert chk["transition_key"] == [{"type": "lookahead", "value": [0, 8]}]
    assert chk["transitions"][0]["next_state"] == "reject"
    # 0x01 .. 0x7f is covered exactly by value/mask pairs
    covered = set()
    for t in chk["transitions"][1:-1]:
        v, m = int(t["value"], 16), int(t["mask"], 16)
        covered |= {x for x in range(256) if x & m == v}
    assert covered == set(range(1, 0x80))
    port = states["parse_tag"]["transitions"][0]
    assert (port["value"], port["mask"]) == ("0x0000", "0x01fc")  # ingress_port in 0 .. 3
    rej = states["reject"]["parser_ops"][0]
    assert rej["op"] == "verify" and rej["parameters"][0] == {"type": "bool", "value": False}


def test_features_actions_and_names(tmp_path):
    doc, p4i = compile_prog(tmp_path, "features")
    early = action(doc, "FIngress.classify.early")["primitives"]
    assert [p["op"] for p in early] == ["assign", "_jump_if_zero", "_jump", "assign"]
    assert hexv(early[1]["parameters"][1]) == 3 and hexv(early[2]["parameters"][0]) == 4
    all_prims = [p for a in doc["actions"] for p in a["primitives"]]
    deref = next(p for p in all_prims if p["op"] == "assign"
                 and unwrap(p["parameters"][0]).get("op") == "access_field")
    lhs = unwrap(deref["parameters"][0])
    assert lhs["left"]["value"]["op"] == "dereference_header_stack" and lhs["right"] == 0
    sdelta = next(p for p in all_prims if p["parameters"]
                  and p["parameters"][0] == field("scalars", "userMetadata.sdelta"))
    assert unwrap(sdelta["parameters"][1])["op"] == "two_comp_mod"
    types = {t["name"]: t for t in doc["header_types"]}
    assert ["delta", 16, True] in types["tag_t"]["fields"]
    ops = {p["op"] for p in all_prims}
    assert {"modify_field_rng_uniform", "log_msg", "assert", "truncate",
            "recirculate"} <= ops
    # @name(".global_fwd") is absolute; @name("kinds") replaces the local name only
    names = {t.preamble.name for t in p4i.tables}
    assert names == {"global_fwd", "FIngress.classify.kinds"}
    kinds = by_name(p4i.tables, "FIngress.classify.kinds")
    assert kinds.match_fields[0].name == "tag_kind"
    assert by_name(p4i.actions, "FIngress.to_port").preamble.id == 0x01000042
    # the value switch becomes a chain of == conditionals on the enum's values
    conds = [c["expression"]["value"] for c in doc["pipelines"][0]["conditionals"]
             if c["expression"]["value"]["op"] == "=="]
    assert sorted(hexv(c["right"]) for c in conds) == [1, 2, 0x81]


def test_header_union_layout(tmp_path):
    doc, _ = compile_prog(tmp_path, "union")
    ut = doc["header_union_types"]
    assert ut == [{"name": "tag_u", "id": 0, "headers": [["s", "short_tag_t"],
                                                          ["l", "long_tag_t"]]}]
    u = doc["header_unions"][0]
    ids = {h["id"]: h["name"] for h in doc["headers"]}
    assert u["union_type"] == "tag_u"
    assert [ids[i] for i in u["header_ids"]] == ["tag.s", "tag.l"]
    assert doc["deparsers"][0]["order"] == ["ethernet", "tag.s", "tag.l"]
    conds = [c["expression"] for c in doc["pipelines"][0]["conditionals"]]
    assert any(c["value"]["op"] == "not" and c["value"]["right"]["value"] == {
        "op": "valid_union", "left": None, "right": {"type": "header_union", "value": "tag"}}
        for c in conds)


def test_if_in_parser_state_splits_the_state(tmp_path):
    doc, _ = compile_prog(tmp_path, "features")
    states = {s["name"]: s for s in doc["parsers"][0]["parse_states"]}
    sp = states["small_port"]
    tmp = sp["transition_key"][0]
    assert sp["parser_ops"][-1]["op"] == "set" and sp["parser_ops"][-1]["parameters"][0] == tmp
    assert unwrap(sp["parser_ops"][-1]["parameters"][1])["op"] == "b2d"
    assert [t["next_state"] for t in sp["transitions"]] == ["small_port_true",
                                                            "small_port_false"]
    for branch, value in (("small_port_true", 3), ("small_port_false", 2)):
        st = states[branch]
        assert hexv(st["parser_ops"][0]["parameters"][1]) == value
        assert st["transitions"][0]["next_state"] == "small_port_join"
    assert states["small_port_join"]["transitions"][0]["next_state"] == "words"


def test_computed_table_key_uses_a_temporary(tmp_path):
    doc, p4i = compile_prog(tmp_path, "features")
    t = table(doc, "FIngress.classify.kinds")
    assert t["key"][0]["target"] == ["tag", "kind"]
    tmp = t["key"][1]["target"]
    assert tmp[0] == "scalars" and t["match_type"] == "ternary"
    setter = next(x for x in doc["pipelines"][0]["tables"]
                  if x["next_tables"].get(x["actions"][0]) == t["name"] and not x["key"])
    prim = action(doc, setter["actions"][0])["primitives"][0]
    assert prim["parameters"][0] == {"type": "field", "value": tmp}
    assert unwrap(prim["parameters"][1])["op"] == "^"
    pt = by_name(p4i.tables, "FIngress.classify.kinds")
    assert [(m.name, m.bitwidth) for m in pt.match_fields] == [("tag_kind", 8),
                                                                   ("tag_value_x", 16)]


def test_varbit_header_and_extract_vl(tmp_path):
    doc, _ = compile_prog(tmp_path, "ipv4_options")
    ht = next(t for t in doc["header_types"] if t["name"] == "ipv4_options_t")
    assert ht["fields"] == [["options", "*"]] and ht["max_length"] == 40
    ops = {s["name"]: s for s in doc["parsers"][0]["parse_states"]}["parse_ipv4"]["parser_ops"]
    vl = ops[2]
    assert vl["op"] == "extract_VL"
    assert vl["parameters"][0] == {"type": "regular", "value": "ipv4_options"}
    assert vl["parameters"][1]["type"] == "expression"


def test_value_set_in_p4info(tmp_path):
    doc, p4i = compile_prog(tmp_path, "features")
    vs = by_name(p4i.value_sets, "FParser.special_types")
    assert vs.preamble.id >> 24 == 0x03 and vs.size == 4
    assert [(m.id, m.bitwidth) for m in vs.match] == [(1, 16)]
    assert doc["parse_vsets"][0]["name"] == "FParser.special_types"


def test_explicit_entry_priorities(tmp_path):
    src = os.path.join(PROGS, "regs_counters.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("(0x0a000000 &&& 0xff000000, IP_PROTO_UDP, 0 .. 1023) : deny();",
                        "priority = 10 : (0x0a000000 &&& 0xff000000, IP_PROTO_UDP, 0 .. 1023)"
                        " : deny();")
    text = text.replace("(_, _, 5000 .. 5010) : allow();",
                        "priority = 20 : (_, _, 5000 .. 5010) : allow();")
    p = tmp_path / "prio.p4"
    p.write_text(text)
    out = tmp_path / "prio.json"
    assert compile_main([str(p), "-I", PROGS, "-o", str(out)]) == 0
    e0, e1 = table(json.loads(out.read_text()), "RcIngress.acl")["entries"]
    # P4 priorities: larger wins; BMv2's: smaller wins. The 20 entry must come first.
    assert e1["priority"] < e0["priority"]


def test_compound_assignment_and_slice_assignment(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
                        "hdr.ipv4.ttl -= 1;\n        hdr.ipv4.diffserv[7:2] = 6w46;")
    p = tmp_path / "ca.p4"
    p.write_text(text)
    out = tmp_path / "ca.json"
    assert compile_main([str(p), "-o", str(out)]) == 0
    prims = action(json.loads(out.read_text()), "MyIngress.ipv4_forward")["primitives"]
    ttl = unwrap(prims[3]["parameters"][1])
    assert ttl["op"] == "&" and ttl["left"]["value"]["op"] == "-"
    dscp = prims[4]
    assert dscp["parameters"][0] == field("ipv4", "diffserv")
    e = unwrap(dscp["parameters"][1])
    # (diffserv & 0x03) | ((46 << 2) & 0xfc)
    assert e["op"] == "|"
    assert e["left"]["value"]["op"] == "&" and hexv(e["left"]["value"]["right"]) == 0x03
    assert hexv(e["right"]["value"]["right"]) == 0xFC


def test_unbraced_if_branches(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("""        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            ipv4_lpm.apply();
        } else {
            drop();
        }""", """        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1)
            ipv4_lpm.apply();
        else
            hdr.ipv4.setInvalid();""")
    p = tmp_path / "ub.p4"
    p.write_text(text)
    out = tmp_path / "ub.json"
    assert compile_main([str(p), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    ing = doc["pipelines"][0]
    cond = next(c for c in ing["conditionals"] if c["name"] == ing["init_table"])
    assert cond["true_next"] == "MyIngress.ipv4_lpm"
    other = table(doc, cond["false_next"])
    assert action(doc, other["actions"][0])["primitives"][0]["op"] == "remove_header"


def test_hit_stored_in_a_variable(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("            ipv4_lpm.apply();\n",
                        "            bool found = ipv4_lpm.apply().hit;\n"
                        "            if (!found) { drop(); }\n")
    p = tmp_path / "hv.p4"
    p.write_text(text)
    out = tmp_path / "hv.json"
    assert compile_main([str(p), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    t = table(doc, "MyIngress.ipv4_lpm")
    hit, miss = table(doc, t["next_tables"]["__HIT__"]), table(doc, t["next_tables"]["__MISS__"])
    for tb, value in ((hit, 1), (miss, 0)):
        p0 = action(doc, tb["actions"][0])["primitives"][0]
        assert p0["parameters"][0] == field("scalars", "found")
        assert hexv(p0["parameters"][1]) == value
        assert tb["base_default_next"] == hit["base_default_next"]  # both join the `if`


def test_header_equality_compares_validity_and_fields(tmp_path):
    src = os.path.join(PROGS, "int_stack.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("        if (hdr.ipv4.isValid()) {\n            fwd.apply();",
                        "        if (hdr.hops[0] != hdr.hops[1]) {\n            fwd.apply();")
    p = tmp_path / "eq.p4"
    p.write_text(text)
    out = tmp_path / "eq.json"
    assert compile_main([str(p), "-I", PROGS, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    ing = doc["pipelines"][0]
    cond = next(c for c in ing["conditionals"] if c["name"] == ing["init_table"])
    e = cond["expression"]["value"]
    assert e["op"] == "not"
    same = e["right"]["value"]
    assert same["op"] == "or"  # both invalid, or both valid with equal fields
    both_invalid = same["left"]["value"]
    assert both_invalid["op"] == "and" and both_invalid["left"]["value"]["op"] == "not"
    text_of = json.dumps(same["right"])
    for fname in ("bos", "switch_id", "hop_latency"):
        assert f'["hops[0]", "{fname}"]' in text_of and f'["hops[1]", "{fname}"]' in text_of


def test_new_types_in_p4info(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("typedef bit<9>  egressSpec_t;",
                        '@p4runtime_translation("cellfabric.test/port", 32)\n'
                        "type bit<9> egressSpec_t;")
    text = text.replace("typedef bit<32> ip4Addr_t;", "type bit<32> ip4Addr_t;")
    text = text.replace("standard_metadata.egress_spec = port;",
                        "standard_metadata.egress_spec = (bit<9>)port;")
    p = tmp_path / "nt.p4"
    p.write_text(text)
    info_path = tmp_path / "nt.txtpb"
    assert compile_main([str(p), "-o", str(tmp_path / "nt.json"),
                         "--p4runtime-files", str(info_path)]) == 0
    p4i = text_format.Parse(info_path.read_text(), p4info_pb2.P4Info())
    mf = by_name(p4i.tables, "MyIngress.ipv4_lpm").match_fields[0]
    assert (mf.bitwidth, mf.type_name.name) == (32, "ip4Addr_t")
    port = by_name(p4i.actions, "MyIngress.ipv4_forward").params[1]
    assert (port.bitwidth, port.type_name.name) == (32, "egressSpec_t")  # translated width
    nts = p4i.type_info.new_types
    assert nts["ip4Addr_t"].original_type.bitstring.bit.bitwidth == 32
    assert nts["egressSpec_t"].translated_type.uri == "cellfabric.test/port"
    assert nts["egressSpec_t"].translated_type.sdn_bitwidth == 32


def test_masked_key_uses_the_json_mask(tmp_path):
    src = os.path.join(PROGS, "basic_ipv4.p4")
    with open(src) as f:
        text = f.read()
    text = text.replace("hdr.ipv4.dstAddr: lpm;", "hdr.ipv4.dstAddr & 0xffff0000: exact;")
    p = tmp_path / "mk.p4"
    p.write_text(text)
    info = tmp_path / "mk.txtpb"
    assert compile_main([str(p), "-o", str(tmp_path / "mk.json"),
                         "--p4runtime-files", str(info)]) == 0
    key = table(json.loads((tmp_path / "mk.json").read_text()), "MyIngress.ipv4_lpm")["key"][0]
    assert key == {"match_type": "exact", "name": "hdr.ipv4.dstAddr & 0xffff0000",
                   "target": ["ipv4", "dstAddr"], "mask": "0xffff0000"}
    p4i = text_format.Parse(info.read_text(), p4info_pb2.P4Info())
    mf = by_name(p4i.tables, "MyIngress.ipv4_lpm").match_fields[0]
    assert (mf.name, mf.bitwidth) == ("hdr.ipv4.dstAddr & 0xffff0000", 32)
