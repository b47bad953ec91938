"""Invariants every compiled program must satisfy, checked on all test programs and on
p4src/fabric.p4: P4Info and BMv2 JSON describe the same tables/actions/keys, ids carry the
right type prefix and are unique, every control-flow reference resolves, and the JSON loads
into the p4sim data plane."""

from __future__ import annotations

import json
import os

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4sim.compile import main as compile_main
from p4sim.switch.dataplane import DataPlane

HERE = os.path.dirname(__file__)
PROGS = os.path.join(HERE, "p4progs")
FABRIC = os.path.join(HERE, "..", "..", "p4src", "fabric.p4")
PROGRAMS = sorted(os.path.join(PROGS, f) for f in os.listdir(PROGS)
                  if f.endswith(".p4") and f != "common_headers.p4")
if os.path.isfile(FABRIC):
    PROGRAMS.append(os.path.normpath(FABRIC))

PREFIXES = {"tables": 0x02, "actions": 0x01, "action_profiles": 0x11, "counters": 0x12,
            "direct_counters": 0x13, "meters": 0x14, "direct_meters": 0x15,
            "registers": 0x16, "digests": 0x17, "controller_packet_metadata": 0x04,
            "value_sets": 0x03}


@pytest.fixture(scope="module", params=PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
def compiled(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("c")
    rc = compile_main([request.param, "-o", str(out / "p.json"), "--p4runtime-files",
                       str(out / "p.txtpb")])
    assert rc == 0
    doc = json.loads((out / "p.json").read_text())
    info = text_format.Parse((out / "p.txtpb").read_text(), p4info_pb2.P4Info())
    return doc, info, out / "p.json"


def field_width(doc, target):
    types = {t["name"]: t for t in doc["header_types"]}
    hdr = next(h for h in doc["headers"] if h["name"] == target[0])
    if target[1] == "$valid$":
        return 1
    return next(f[1] for f in types[hdr["header_type"]]["fields"] if f[0] == target[1])


def test_ids_have_prefixes_and_are_unique(compiled):
    _, info, _ = compiled
    seen = set()
    for kind, prefix in PREFIXES.items():
        for obj in getattr(info, kind):
            assert obj.preamble.id >> 24 == prefix, (kind, obj.preamble.name)
            assert obj.preamble.id not in seen
            seen.add(obj.preamble.id)
            assert obj.preamble.alias and obj.preamble.name.endswith(obj.preamble.alias)


def test_p4info_matches_json(compiled):
    doc, info, _ = compiled
    tables = {t["name"]: t for p in doc["pipelines"] for t in p["tables"]}
    actions = {a["name"]: a for a in doc["actions"]}
    act_by_id = {a.preamble.id: a.preamble.name for a in info.actions}
    for a in info.actions:
        ja = actions[a.preamble.name]
        assert [(p.name, p.bitwidth) for p in a.params] == [
            (r["name"], r["bitwidth"]) for r in ja["runtime_data"]]
    for t in info.tables:
        jt = tables[t.preamble.name]
        assert sorted(act_by_id[r.id] for r in t.action_refs) == sorted(jt["actions"])
        assert len(t.match_fields) == len(jt["key"])
        for mf, k in zip(t.match_fields, jt["key"]):
            kind = p4info_pb2.MatchField.MatchType.Name(mf.match_type).lower()
            # BMv2 has no optional match: p4c's JSON declares such a key ternary
            assert k["match_type"] == kind or (kind, k["match_type"]) == ("optional", "ternary")
            if k["mask"] is None:
                assert mf.bitwidth == field_width(doc, k["target"])
        assert t.size == jt["max_size"]
        if t.implementation_id:
            prof = next(p for p in info.action_profiles if p.preamble.id == t.implementation_id)
            assert jt["action_profile"] == prof.preamble.name
    for kind, arrays in (("counters", "counter_arrays"), ("direct_counters", "counter_arrays"),
                         ("meters", "meter_arrays"), ("direct_meters", "meter_arrays"),
                         ("registers", "register_arrays")):
        names = {a["name"] for a in doc[arrays]}
        for obj in getattr(info, kind):
            assert obj.preamble.name in names


def test_control_flow_references_resolve(compiled):
    doc, _, _ = compiled
    action_ids = {a["id"]: a for a in doc["actions"]}
    for p in doc["pipelines"]:
        nodes = {t["name"] for t in p["tables"]} | {c["name"] for c in p["conditionals"]}
        assert p["init_table"] is None or p["init_table"] in nodes
        for t in p["tables"]:
            targets = [*list(t["next_tables"].values()), t["base_default_next"]]
            assert all(n is None or n in nodes for n in targets)
            assert [action_ids[i]["name"] for i in t["action_ids"]] == t["actions"]
            if "default_entry" in t:
                de = t["default_entry"]
                assert len(de["action_data"]) == len(action_ids[de["action_id"]]["runtime_data"])
        for c in p["conditionals"]:
            assert all(n is None or n in nodes for n in (c["true_next"], c["false_next"]))
    states = {s["name"] for s in doc["parsers"][0]["parse_states"]}
    for s in doc["parsers"][0]["parse_states"]:
        for t in s["transitions"]:
            assert t["next_state"] is None or t["next_state"] in states
    headers = {h["name"] for h in doc["headers"]}
    assert set(doc["deparsers"][0]["order"]) <= headers


def test_loads_into_the_data_plane(compiled):
    _, _, path = compiled
    dp = DataPlane()
    dp.load_pipeline(path.read_bytes())
    assert dp.pipeline_json() is not None
