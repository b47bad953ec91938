"""Parser semantics on hand-written BMv2 JSON: select with masks and default, lookahead,
advance, verify with a parser error, variable-length extract, parse value sets, header unions,
and the deparser round trip."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx, prim

from p4sim.switch.dataplane import DataPlane

ETH = bytes.fromhex("0000000000aa00000000bb01")


def program() -> dict:
    """Ethernet, then by EtherType:
    0x88B5 (masked 0xFFF0 == 0x88B0): 'opt' with a length byte and a varbit body, then a
        lookahead on the next byte: 0x0F-masked low nibble 0x5 -> 'tail', else accept;
    0x9999: advance 2 bytes, then extract 'tail';
    0x7777: verify tail-less: verify(false, error 'ParserInvalidArgument');
    value-set 'vs' hit: extract 'u_a' (member of union 'u'), else default accept."""
    p = Prog([("x", 8)])
    doc = p.doc()
    doc["header_types"] += [
        {"name": "opt_t", "id": 10, "fields": [["len", 8, False], ["body", "*"]],
         "max_length": 16},
        {"name": "tail_t", "id": 11, "fields": [["b", 8, False]]},
        {"name": "ua_t", "id": 12, "fields": [["a", 16, False]]},
        {"name": "ub_t", "id": 13, "fields": [["b", 8, False]]},
    ]
    doc["headers"] += [
        {"name": "opt", "id": 10, "header_type": "opt_t", "metadata": False},
        {"name": "tail", "id": 11, "header_type": "tail_t", "metadata": False},
        {"name": "u.a", "id": 12, "header_type": "ua_t", "metadata": False},
        {"name": "u.b", "id": 13, "header_type": "ub_t", "metadata": False},
    ]
    doc["header_union_types"] = [{"name": "u_t", "id": 0,
                                  "headers": [["a", "ua_t"], ["b", "ub_t"]]}]
    doc["header_unions"] = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [12, 13]}]
    doc["parse_vsets"] = [{"name": "vs", "id": 0, "compressed_bitwidth": 16}]
    ext = lambda h: prim("extract", {"type": "regular", "value": h})  # noqa: E731
    dflt = {"type": "default", "value": None, "mask": None, "next_state": None}
    doc["parsers"][0]["parse_states"] = [
        {"name": "start", "id": 0, "parser_ops": [ext("ethernet")],
         "transition_key": [f("ethernet", "etherType")],
         "transitions": [
             {"type": "hexstr", "value": "0x88b0", "mask": "0xfff0", "next_state": "opt"},
             {"type": "hexstr", "value": "0x9999", "mask": None, "next_state": "skip"},
             {"type": "hexstr", "value": "0x7777", "mask": None, "next_state": "bad"},
             {"type": "parse_vset", "value": "vs", "mask": None, "next_state": "union"},
             dflt]},
        {"name": "opt", "id": 1,
         "parser_ops": [prim("extract_VL", {"type": "regular", "value": "opt"},
                             ex("<<", {"type": "lookahead", "value": [0, 8]}, hx(3)))],
         "transition_key": [{"type": "lookahead", "value": [0, 8]}],
         "transitions": [{"type": "hexstr", "value": "0x05", "mask": "0x0f",
                          "next_state": "tail"}, dflt]},
        {"name": "skip", "id": 2, "parser_ops": [prim("advance", hx(16))],
         "transition_key": [], "transitions": [{**dflt, "next_state": "tail"}]},
        {"name": "bad", "id": 3,
         "parser_ops": [prim("verify", {"type": "bool", "value": False}, hx(6))],
         "transition_key": [], "transitions": [dflt]},
        {"name": "tail", "id": 4, "parser_ops": [ext("tail")], "transition_key": [],
         "transitions": [dflt]},
        {"name": "union", "id": 5, "parser_ops": [ext("u.a")], "transition_key": [],
         "transitions": [dflt]},
    ]
    doc["deparsers"][0]["order"] = ["ethernet", "opt", "tail", "u.a", "u.b"]
    return doc


def run(doc: dict, frame: bytes, setup=None) -> tuple[DataPlane, list[bytes]]:
    dp = DataPlane()
    dp.load_pipeline(json.dumps(doc).encode())
    if setup:
        setup(dp)
    out: list[bytes] = []
    dp.tx = lambda port, fr: out.append(fr)
    dp.receive(0, frame)
    return dp, out


def with_tail_marker(doc: dict) -> dict:
    """Ingress: tail.b := tail.b + 1 if tail is valid (so the test sees what was extracted)."""
    p = Prog([("x", 8)])
    act = {"name": "bump", "id": 1, "runtime_data": [], "primitives": [
        assign(f("tail", "b"), ex("+", f("tail", "b"), hx(1)))]}
    doc["actions"] = [*p.doc()["actions"], act]
    doc["pipelines"][0]["init_table"] = "node"
    doc["pipelines"][0]["tables"] = [{
        "name": "t", "id": 0, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": False, "support_timeout": False,
        "direct_meters": None, "action_ids": [1], "actions": ["bump"],
        "base_default_next": None, "next_tables": {"bump": None},
        "default_entry": {"action_id": 1, "action_const": True, "action_data": []}}]
    doc["pipelines"][0]["conditionals"] = [{
        "name": "node", "id": 0, "true_next": "t", "false_next": None,
        "expression": ex("d2b", None, f("tail", "$valid$"))}]
    return doc


def test_masked_select_varbit_and_lookahead() -> None:
    doc = with_tail_marker(program())
    body = bytes([2, 0xAA, 0xBB])  # len=2 -> a 16-bit varbit body
    _, out = run(doc, ETH + b"\x88\xb7" + body + b"\x15" + b"rest")
    # The lookahead byte 0x15 has low nibble 5 -> tail extracted (and bumped by ingress).
    assert out == [ETH + b"\x88\xb7" + body + b"\x16" + b"rest"]
    _, out = run(doc, ETH + b"\x88\xb7" + body + b"\x16" + b"rest")
    assert out == [ETH + b"\x88\xb7" + body + b"\x16" + b"rest"]  # not extracted, untouched


def test_varbit_too_long_is_header_too_short_error() -> None:
    doc = with_tail_marker(program())
    dp, out = run(doc, ETH + b"\x88\xb7" + bytes([40]) + b"\x00" * 40)
    assert dp.stats().parser_errors == 1
    assert len(out) == 1


def test_advance_skips_bytes_and_they_are_dropped_by_the_deparser() -> None:
    doc = with_tail_marker(program())
    _, out = run(doc, ETH + b"\x99\x99" + b"\xde\xad" + b"\x07" + b"rest")
    # BMv2 discards advanced-over bytes: they are not in the deparsed packet.
    assert out == [ETH + b"\x99\x99" + b"\x08" + b"rest"]


def test_verify_failure_sets_parser_error_and_packet_continues() -> None:
    doc = program()
    p = Prog([("x", 8)])
    act = {"name": "rec", "id": 1, "runtime_data": [], "primitives": [
        assign(f("ethernet", "srcAddr"), f("standard_metadata", "parser_error"))]}
    doc["actions"] = [*p.doc()["actions"], act]
    doc["pipelines"][0]["tables"] = [{
        "name": "t", "id": 0, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": False, "support_timeout": False, "direct_meters": None,
        "action_ids": [1], "actions": ["rec"], "base_default_next": None,
        "next_tables": {"rec": None}, "default_entry": {"action_id": 1, "action_data": []}}]
    doc["pipelines"][0]["init_table"] = "t"
    dp, out = run(doc, ETH + b"\x77\x77" + b"payload")
    assert dp.stats().parser_errors == 1
    assert out[0][6:12] == (6).to_bytes(6, "big")  # ParserInvalidArgument = 6
    assert out[0][12:] == b"\x77\x77payload"


def test_parse_value_set_and_union_member() -> None:
    doc = program()
    frame = ETH + b"\x12\x34" + b"\xab\xcd" + b"z"
    _, out = run(doc, frame)
    assert out == [frame]  # vset empty: default transition
    dp, out = run(doc, frame, setup=lambda d: d.parse_vset_set("vs", [0x1234]))
    assert out == [frame]  # u.a extracted and deparsed back in place
    assert dp.parse_vset_get("vs") == [0x1234]


def test_truncated_lookahead_is_packet_too_short() -> None:
    doc = program()
    dp, out = run(doc, ETH + b"\x88\xb0")  # no bytes left for the lookahead
    assert dp.stats().parser_errors == 1 and out == [ETH + b"\x88\xb0"]


def test_union_set_valid_invalidates_the_other_member() -> None:
    doc = program()
    p = Prog([("x", 8)])
    act = {"name": "to_b", "id": 1, "runtime_data": [], "primitives": [
        prim("add_header", {"type": "header", "value": "u.b"}),
        assign(f("u.b", "b"), hx(0x42))]}
    doc["actions"] = [*p.doc()["actions"], act]
    doc["pipelines"][0]["tables"] = [{
        "name": "t", "id": 0, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": False, "support_timeout": False, "direct_meters": None,
        "action_ids": [1], "actions": ["to_b"], "base_default_next": None,
        "next_tables": {"to_b": None}, "default_entry": {"action_id": 1, "action_data": []}}]
    doc["pipelines"][0]["init_table"] = "t"
    frame = ETH + b"\x12\x34" + b"\xab\xcd" + b"z"
    _, out = run(doc, frame, setup=lambda d: d.parse_vset_set("vs", [0x1234]))
    # u.a was extracted; making u.b valid invalidates u.a, so only u.b is emitted.
    assert out == [ETH + b"\x12\x34" + b"\x42" + b"z"]
