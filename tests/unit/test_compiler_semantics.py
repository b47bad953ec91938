"""P4_16 evaluation rules the compiler must keep, checked on packets through p4sim's switch:
copy-in/copy-out of action and function arguments, left-to-right evaluation with each call
complete before the next operand is read, short-circuit and conditional operators running
only the operand they need, `.hit` as a value, constants under the operand's width, run-time
division, loops, control instances applied twice, and table entries as p4c gives them to BMv2.

Each program is small and written for one rule; the expected bytes follow from the P4_16
specification (and, for entry priorities, from what p4c emits for BMv2)."""

from __future__ import annotations

import json
import textwrap

from p4sim.compile import main as compile_main
from p4sim.switch.api import ActionCall, Exact, TableEntry
from p4sim.switch.dataplane import DataPlane

TEMPLATE = """\
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
header s_t { bit<8> v; }
struct headers_t { h_t h; s_t[2] s; }
struct meta_t { }
@@DECLS@@
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
@@PARSER@@
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
@@LOCALS@@
    apply {
        sm.egress_spec = 1;
@@BODY@@
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.s); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
PARSE_ALL = "pkt.extract(hdr.h);\npkt.extract(hdr.s.next);\npkt.extract(hdr.s.next);\n" \
            "transition accept;"
PAYLOAD = bytes(range(10))


def build(tmp_path, decls: str = "", locals_: str = "", body: str = "",
          parser: str = PARSE_ALL) -> tuple[DataPlane, dict]:
    text = TEMPLATE
    for key, value in (("DECLS", decls), ("LOCALS", locals_), ("BODY", body),
                       ("PARSER", parser)):
        text = text.replace(f"@@{key}@@", textwrap.dedent(value).strip("\n"))
    src = tmp_path / "prog.p4"
    src.write_text(text)
    out = tmp_path / "prog.json"
    assert compile_main([str(src), "-o", str(out), "--p4runtime-files",
                         str(tmp_path / "prog.p4info.json")]) == 0
    dp = DataPlane()
    dp.load_pipeline(out.read_bytes())
    dp.out = []  # type: ignore[attr-defined]
    dp.tx = lambda port, frame: dp.out.append((port, frame))  # type: ignore[attr-defined]
    return dp, json.loads((tmp_path / "prog.p4info.json").read_text())


def run(dp: DataPlane, a: int, b: int = 0, c: int = 0, d: int = 0, s0: int = 0, s1: int = 0,
        port: int = 0) -> tuple[int, bytes]:
    """Send a frame with header h = (a, b, c, d) and stack s = (s0, s1); the one output."""
    dp.out.clear()  # type: ignore[attr-defined]
    dp.receive(port, bytes([a, b, c, d, s0, s1]) + PAYLOAD)
    ((out_port, frame),) = dp.out  # type: ignore[attr-defined]
    assert frame[6:] == PAYLOAD
    return out_port, frame[:6]


def test_inout_action_argument_is_copied_in_and_out(tmp_path):
    # The body writes the argument's field directly, then the parameter: copy-out wins, and
    # the parameter started from the value at the call (by reference: a = 5 + 1 = 6).
    dp, _ = build(tmp_path, locals_="""
        action bump(inout bit<8> x) { hdr.h.a = 5; x = x + 1; }""", body="bump(hdr.h.a);")
    assert run(dp, a=1)[1][0] == 2


def test_in_action_argument_is_read_at_the_call(tmp_path):
    dp, _ = build(tmp_path, locals_="""
        action keep(in bit<8> v) { hdr.h.a = 9; hdr.h.b = v; }""", body="keep(hdr.h.a);")
    assert run(dp, a=1)[1][:2] == bytes([9, 1])


def test_operand_is_read_before_a_later_call_writes_it(tmp_path):
    # `a + inc(a)`: a is read (1), then inc makes it 2 and returns 2: 1 + 2.
    dp, _ = build(tmp_path, decls="""
        bit<8> inc(inout bit<8> x) { x = x + 1; return x; }""",
                  body="hdr.h.b = hdr.h.a + inc(hdr.h.a);")
    assert run(dp, a=1)[1][:2] == bytes([2, 3])


def test_lvalue_index_is_fixed_before_the_right_hand_side_runs(tmp_path):
    # hdr.s[a] is chosen with a = 0; set_one then makes a = 1 and returns 7.
    dp, _ = build(tmp_path, decls="""
        bit<8> set_one(inout bit<8> i) { i = 1; return 7; }""",
                  body="hdr.s[hdr.h.a].v = set_one(hdr.h.a);")
    frame = run(dp, a=0, s0=0x10, s1=0x20)[1]
    assert frame[0] == 1 and frame[4:6] == bytes([7, 0x20])


def test_compound_assignment_evaluates_the_index_once(tmp_path):
    # `s[next(a)].v |= 0x0f` reads and writes the same element; next() runs once.
    dp, _ = build(tmp_path, decls="""
        bit<8> next(inout bit<8> i) { i = i + 1; return i - 1; }""",
                  body="hdr.s[next(hdr.h.a)].v |= 0x0f;")
    frame = run(dp, a=0, s0=0x10, s1=0x20)[1]
    assert frame[0] == 1 and frame[4:6] == bytes([0x1f, 0x20])


def test_and_or_run_their_right_operand_only_when_needed(tmp_path):
    dp, _ = build(tmp_path, decls="""
        bool mark(inout bit<8> x) { x = 0xff; return true; }""", body="""
        bool r = hdr.h.a == 0 && mark(hdr.h.b);
        bool q = hdr.h.a == 0 || mark(hdr.h.c);
        hdr.h.d = (bit<8>)(r ? 8w1 : 8w0) + (q ? 8w2 : 8w0);""")
    assert run(dp, a=1)[1][1:4] == bytes([0, 0xff, 2])  # && skipped, || ran
    assert run(dp, a=0)[1][1:4] == bytes([0xff, 0, 3])  # && ran, || skipped


def test_conditional_operator_runs_only_the_chosen_branch(tmp_path):
    dp, _ = build(tmp_path, decls="""
        bit<8> take(inout bit<8> x) { x = 0xee; return 5; }""",
                  body="hdr.h.c = hdr.h.a == 0 ? take(hdr.h.b) : take(hdr.h.d);")
    assert run(dp, a=0, b=1, d=2)[1] == bytes([0, 0xee, 5, 2, 0, 0])
    assert run(dp, a=9, b=1, d=2)[1] == bytes([9, 1, 5, 0xee, 0, 0])


def test_hit_is_a_value(tmp_path):
    dp, _ = build(tmp_path, locals_="""
        table t { key = { hdr.h.a : exact; } actions = { NoAction; } }""",
                  body="hdr.h.c = t.apply().hit ? 8w1 : 8w2;")
    dp.table_insert("I.t", TableEntry((Exact(3),), ActionCall("NoAction", ())))
    assert run(dp, a=3)[1][2] == 1
    assert run(dp, a=4)[1][2] == 2


def test_negative_constant_takes_the_unsigned_width(tmp_path):
    # -1 as bit<8> is 255, at compile time and against a field at run time.
    dp, _ = build(tmp_path, body="""
        if (8w255 == -1) { hdr.h.c = 1; } else { hdr.h.c = 2; }
        if (hdr.h.a == -1) { hdr.h.d = 1; } else { hdr.h.d = 2; }""")
    assert run(dp, a=255)[1][2:4] == bytes([1, 1])
    assert run(dp, a=254)[1][2:4] == bytes([1, 2])


def test_run_time_division_and_remainder(tmp_path):
    dp, _ = build(tmp_path, body="hdr.h.c = hdr.h.a / hdr.h.b; hdr.h.d = hdr.h.a % hdr.h.b;")
    assert run(dp, a=17, b=5)[1][2:4] == bytes([3, 2])


def test_for_loop_with_break_and_continue(tmp_path):
    # c counts i in [0, a) up to the first 5; d counts the odd ones of them.
    dp, _ = build(tmp_path, locals_="""
        action count() {
            hdr.h.c = 0;
            hdr.h.d = 0;
            for (bit<8> i = 0; i < hdr.h.a; i = i + 1) {
                if (i == 5) { break; }
                hdr.h.c = hdr.h.c + 1;
                if ((i & 1) == 0) { continue; }
                hdr.h.d = hdr.h.d + 1;
            }
        }""", body="count();")
    assert run(dp, a=3)[1][2:4] == bytes([3, 1])
    assert run(dp, a=9)[1][2:4] == bytes([5, 2])
    assert run(dp, a=0)[1][2:4] == bytes([0, 0])


def test_exit_in_an_action_still_copies_out(tmp_path):
    dp, _ = build(tmp_path, locals_="""
        action stop(inout bit<8> x) { x = 7; exit; }""", body="stop(hdr.h.a);\nhdr.h.b = 1;")
    assert run(dp, a=1, b=2)[1][:2] == bytes([7, 2])


def test_control_instance_applied_twice(tmp_path):
    dp, _ = build(tmp_path, decls="""
        control Add(inout bit<8> x)(bit<8> step) { apply { x = x + step; } }""",
                  locals_="Add(3) add3;", body="add3.apply(hdr.h.a);\nadd3.apply(hdr.h.a);")
    assert run(dp, a=1)[1][0] == 7


def test_control_arguments_are_copied_in_and_out_when_they_alias(tmp_path):
    # `inc.apply(a, a, b)`: v and w are copies of a (1); w = 2, o = 1 + 2 = 3, w = 5; copy-out
    # in parameter order: a = 5, b = 3. `inc.apply(c, c, c)`: c = 5 -> w = 17, o = 11; c = 11.
    # By reference: a = 6, b = 4, c = 24 (real p4c + BMv2 give 5, 3, 11).
    dp, _ = build(tmp_path, decls="""
        control Inc(in bit<8> v, inout bit<8> w, out bit<8> o) {
            apply { w = w + 1; o = v; o = o + w; w = w + o; } }""",
                  locals_="Inc() inc;",
                  body="inc.apply(hdr.h.a, hdr.h.a, hdr.h.b);\ninc.apply(hdr.h.c, hdr.h.c, hdr.h.c);")
    assert run(dp, a=1, b=0, c=5)[1][:3] == bytes([5, 3, 11])


def test_control_return_copies_out_and_exit_does_not(tmp_path):
    # Ret(a, a): w = 2, o = 1 + 2, return: copy-out a = 2 then a = 3. Ex(c, c): w = 8,
    # o = 13 > 10, exit: no copy-out, c stays 5, and nothing after runs (d stays 4).
    # Real p4c + BMv2 give exactly this; by reference c would be 13 (0x0d).
    dp, _ = build(tmp_path, decls="""
        control Ret(inout bit<8> w, inout bit<8> o) {
            apply { w = w + 1; if (w == 2) { o = o + w; return; } o = 99; } }
        control Ex(inout bit<8> w, inout bit<8> o) {
            apply { w = w + 3; o = o + w; if (o > 10) { exit; } o = 77; } }""",
                  body="Ret.apply(hdr.h.a, hdr.h.a);\nEx.apply(hdr.h.c, hdr.h.c);\nhdr.h.d = 9;")
    assert run(dp, a=1, c=5, d=4)[1][:4] == bytes([3, 0, 5, 4])
    # o = 1 + 4 = 5 <= 10: no exit, o = 77 is copied out last.
    assert run(dp, a=1, c=1, d=4)[1][:4] == bytes([3, 0, 77, 9])


def test_out_header_argument_of_a_control_starts_invalid(tmp_path):
    # The control never writes its `out` header: after the call the caller's header is
    # invalid, so the deparser leaves it out (by reference it stayed valid).
    dp, _ = build(tmp_path, decls="""
        control Clear(out s_t x) { apply { } }""", body="if (hdr.h.b == 1) { Clear.apply(hdr.s[0]); }")
    dp.out.clear()  # type: ignore[attr-defined]
    dp.receive(0, bytes([1, 1, 0, 0, 0xAA, 0xBB]) + PAYLOAD)
    ((_, frame),) = dp.out  # type: ignore[attr-defined]
    assert frame == bytes([1, 1, 0, 0, 0xBB]) + PAYLOAD
    assert run(dp, a=1, b=0, s0=0xAA, s1=0xBB)[1] == bytes([1, 0, 0, 0, 0xAA, 0xBB])


def test_slice_key_matches_the_slice_value(tmp_path):
    dp, info = build(tmp_path, locals_="""
        action set(bit<8> v) { hdr.h.c = v; }
        table t { key = { hdr.h.a[7:4] : exact; } actions = { set; NoAction; }
                  default_action = NoAction(); }""", body="t.apply();")
    (table,) = info["tables"]
    assert [(m["name"], m["bitwidth"]) for m in table["matchFields"]] == [("hdr.h.a[7:4]", 4)]
    dp.table_insert("I.t", TableEntry((Exact(0xA),), ActionCall("I.set", (0x55,))))
    assert run(dp, a=0xA3)[1][2] == 0x55
    assert run(dp, a=0xB3)[1][2] == 0


def test_optional_wildcard_and_priority_annotation_in_const_entries(tmp_path):
    dp, _ = build(tmp_path, locals_="""
        action set(bit<8> v) { hdr.h.c = v; }
        table t {
            key = { hdr.h.a : optional; hdr.h.b : ternary; }
            actions = { set; }
            const entries = {
                (1, _) : set(1);
                (_, 0x10 &&& 0xf0) : set(2) @priority(20);
                (_, 0x11) : set(3) @priority(10);
                (_, _) : set(4) @priority(30);
            }
        }""", body="t.apply();")
    assert run(dp, a=1, b=0x11)[1][2] == 1  # priority 1: the first entry
    assert run(dp, a=2, b=0x11)[1][2] == 3  # 10 before 20: BMv2's smaller value first
    assert run(dp, a=2, b=0x12)[1][2] == 2
    assert run(dp, a=2, b=0x99)[1][2] == 4  # `_` on the optional key is a wildcard


def test_unused_lookahead_still_needs_the_bits(tmp_path):
    dp, _ = build(tmp_path, parser="pkt.lookahead<bit<160>>();\ntransition accept;",
                  body="if (sm.parser_error == error.PacketTooShort) { sm.egress_spec = 2; }")
    dp.out.clear()  # type: ignore[attr-defined]
    dp.receive(0, bytes(16))  # 128 bits: too short for the 160-bit lookahead
    dp.receive(0, bytes(24))
    assert [p for p, _ in dp.out] == [2, 1]  # type: ignore[attr-defined]


def test_one_action_bound_to_two_fields_is_one_p4info_action(tmp_path):
    dp, info = build(tmp_path, locals_="""
        action setbyte(out bit<8> r, bit<8> v) { r = v; }
        table ta { key = { hdr.h.d : exact; } actions = { setbyte(hdr.h.a); } }
        table tb { key = { hdr.h.d : exact; } actions = { setbyte(hdr.h.b); } }""",
                    body="ta.apply();\ntb.apply();")
    names = [a["preamble"]["name"] for a in info["actions"]]
    assert names.count("I.setbyte") == 1
    dp.table_insert("I.ta", TableEntry((Exact(0),), ActionCall("I.setbyte", (0x31,))))
    dp.table_insert("I.tb", TableEntry((Exact(0),), ActionCall("I.setbyte", (0x32,))))
    assert run(dp, a=0, b=0, d=0)[1][:2] == bytes([0x31, 0x32])
