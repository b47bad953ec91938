"""JSON shapes real BMv2 (simple_switch) requires, where p4sim's own switch would accept
either: each was found by running p4sim's JSON on real BMv2 (the conformance corpus, target
mixed-p4sim-on-bmv2) and is the shape p4c emits."""

from __future__ import annotations

import json

from test_compiler_errors import program

from p4sim.compile import main as compile_main


def compile_doc(tmp_path, **parts: str) -> dict:
    src = tmp_path / "p.p4"
    src.write_text(program(**parts))
    out = tmp_path / "p.json"
    assert compile_main([str(src), "-o", str(out)]) == 0
    return json.loads(out.read_text())


def action(doc: dict, name: str) -> dict:
    return next(a for a in doc["actions"] if a["name"] == name)


def operands(node: object) -> list[dict]:
    """Every typed node inside an expression tree."""
    found: list[dict] = []
    if isinstance(node, dict):
        if "type" in node and "value" in node:
            found.append(node)
        for v in node.values():
            found.extend(operands(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(operands(v))
    return found


def test_action_parameter_inside_an_expression_is_local(tmp_path):
    # BMv2 rejects "runtime_data" inside an expression (the switch thread dies: no output)
    doc = compile_doc(tmp_path, locals_="""
        action add(bit<8> v) { hdr.h.a = hdr.h.a + v; meta.x = v; }
        table t { key = { hdr.h.a : exact; } actions = { add; } }""", body="t.apply();")
    first, second = action(doc, "I.add")["primitives"]
    inner = [n["type"] for n in operands(first["parameters"][1]["value"])]
    assert "local" in inner and "runtime_data" not in inner
    assert second["parameters"][1] == {"type": "runtime_data", "value": 0}


def test_exit_jumps_past_the_rest_of_the_action(tmp_path):
    # BMv2's exit only marks the packet; the statements after it would still run
    doc = compile_doc(tmp_path, locals_="""
        action stop() { exit; hdr.h.a = 1; }
        table t { key = { hdr.h.a : exact; } actions = { stop; } }""", body="t.apply();")
    prims = action(doc, "I.stop")["primitives"]
    assert [p["op"] for p in prims] == ["exit", "_jump", "assign"]
    assert int(prims[1]["parameters"][0]["value"], 16) == len(prims)


def test_field_list_ids_start_at_one(tmp_path):
    # BMv2 reads field list 0 as "no resubmit requested": p4c numbers lists from 1, and gives
    # a plain clone an empty list of its own
    doc = compile_doc(tmp_path, locals_="""
        action r() { resubmit_preserving_field_list(0); }
        action c() { clone(CloneType.I2E, 5); }
        table t { key = { hdr.h.a : exact; } actions = { r; c; } }""", body="t.apply();")
    (res,) = action(doc, "I.r")["primitives"]
    (clo,) = action(doc, "I.c")["primitives"]
    ids = {int(res["parameters"][0]["value"], 16), int(clo["parameters"][1]["value"], 16)}
    assert ids == {fl["id"] for fl in doc["field_lists"]} and 0 not in ids and len(ids) == 2
