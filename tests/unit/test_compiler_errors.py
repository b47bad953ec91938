"""Rejected programs: each gives `FILE:LINE:COL: error: MESSAGE` at the offending place, the
source line with a caret, exit status 1, and no traceback.

The expected position is marked in each program by the comment `/*^*/` placed immediately
before the offending token; the messages follow from the P4_16 rules being broken."""

from __future__ import annotations

import textwrap

import pytest

from p4sim.compile import main as compile_main

TEMPLATE = """\
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<32> c; bit<1> f; }
struct meta_t { bit<8> x; bit<16> y; bool flag; }
struct headers_t { h_t h; }
@@DECLS@@
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
@@PARSER@@
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
@@LOCALS@@
    apply {
@@BODY@@
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
@@MAIN@@
"""
MAIN = "V1Switch(P(), VC(), I(), E(), CC(), D()) main;"


def program(decls="", parser="        transition accept;", locals_="", body="", main=MAIN):
    text = TEMPLATE
    for k, v in (("DECLS", decls), ("PARSER", parser), ("LOCALS", locals_), ("BODY", body),
                 ("MAIN", main)):
        text = text.replace(f"@@{k}@@", textwrap.indent(textwrap.dedent(v).strip("\n"),
                                                        "        " if k in ("BODY",) else ""))
    return text


def marker_pos(text: str) -> tuple[int, int]:
    for i, line in enumerate(text.splitlines(), 1):
        j = line.find("/*^*/")
        if j >= 0:
            return i, j + len("/*^*/") + 1
    raise AssertionError("no marker")


APPLIED_TABLE = "action a() { }\ntable /*^*/t { actions = { a; } default_action = a(); }"

CASES = [
    # (id, program kwargs, message)
    ("assign-width", dict(body="meta.x = /*^*/hdr.h.b;"),
     "type mismatch: expected bit<8>, got bit<16>"),
    ("binop-width", dict(body="meta.y = /*^*/meta.x + hdr.h.b;"),
     "operands of '+' have different types: bit<8> and bit<16>"),
    ("compare-width", dict(body="if (/*^*/hdr.h.a == hdr.h.b) { }"),
     "operands of '==' have different types: bit<8> and bit<16>"),
    ("undeclared", dict(body="meta.x = /*^*/undefined_thing;"),
     "undeclared name 'undefined_thing'"),
    ("bool-into-bit", dict(body="hdr.h.f = /*^*/true;"),
     "type mismatch: expected bit<1>, got bool"),
    ("bit-as-condition", dict(body="if (/*^*/hdr.h.f) { }"),
     "condition must be bool, got bit<1>"),
    ("bit-in-and", dict(body="meta.flag = hdr.h.f == 1 && /*^*/hdr.h.a;"),
     "'&&' needs bool operands, got bit<8>"),
    ("cast-bool-to-bit8", dict(body="meta.x = /*^*/(bit<8>)meta.flag;"),
     "cannot cast bool to bit<8>"),
    ("extern-arg-count", dict(body="/*^*/mark_to_drop(sm, sm);"),
     "mark_to_drop expects 0 or 1 arguments, got 2"),
    ("action-arg-count", dict(locals_="action a(bit<8> v) { meta.x = v; }",
                              body="/*^*/a();"), "a expects 1 arguments, got 0"),
    ("write-in-param", dict(locals_="action a(in bit<8> v) { /*^*/v = 1; }"),
     "assignment: cannot write to 'v', an 'in' parameter"),
    ("write-action-data", dict(locals_="action a(bit<8> v) { /*^*/v = 3; }"),
     "assignment: cannot write to 'v', a directionless parameter"),
    ("write-constant", dict(decls="const bit<8> K = 1;", body="/*^*/K = 2;"),
     "assignment: cannot write to constant 'K'"),
    ("write-in-header-param", dict(locals_="action a(in h_t hh) { /*^*/hh.a = 1; }"),
     "assignment: cannot write to 'hh', an 'in' parameter"),
    ("unknown-state", dict(parser="transition /*^*/parse_foo;"),
     "no parser state named 'parse_foo'"),
    ("unknown-state-in-select", dict(parser="""
        transition select(hdr.h.a) {
            1: /*^*/nowhere;
            default: accept;
        }"""), "no parser state named 'nowhere'"),
    ("duplicate-action", dict(locals_="action a() { }\naction /*^*/a() { }"),
     "duplicate declaration of 'a'"),
    ("duplicate-field", dict(decls="header d_t { bit<8> q; bit<8> /*^*/q; }"),
     "duplicate field 'q' in header d_t"),
    ("no-such-field", dict(body="meta.x = hdr.h./*^*/zzz;"), "header h_t has no field 'zzz'"),
    ("slice-out-of-range", dict(body="meta.x = /*^*/hdr.h.a[8:1];"),
     "slice [8:1] is out of range for bit<8>"),
    ("unknown-match-kind", dict(locals_="""
        action a() { }
        table t {
            key = { hdr.h.a: /*^*/fuzzy; }
            actions = { a; }
        }""", body="t.apply();"), "unknown match kind 'fuzzy'"),
    ("default-not-in-list", dict(locals_="""
        action a() { }
        action b() { }
        table t {
            key = { hdr.h.a: exact; }
            actions = { a; }
            default_action = /*^*/b();
        }""", body="t.apply();"), "action b is not in the actions list of table t"),
    ("default-arg-not-const", dict(locals_="""
        action a(bit<8> v) { meta.x = v; }
        table t {
            key = { hdr.h.a: exact; }
            actions = { a; }
            default_action = a(/*^*/meta.x);
        }""", body="t.apply();"), "action argument 'v' must be a compile-time constant"),
    ("entry-key-count", dict(locals_="""
        action a() { }
        table t {
            key = { hdr.h.a: exact; }
            actions = { a; }
            const entries = {
                /*^*/(1, 2) : a();
            }
        }""", body="t.apply();"), "entry has 2 key values, table t has 1 keys"),
    ("table-apply-args", dict(locals_="""
        action a() { }
        table t { key = { hdr.h.a: exact; } actions = { a; } }""",
                              body="/*^*/t.apply(1);"),
     "table t.apply() takes no arguments"),
    ("missing-expression", dict(body="meta.x = /*^*/;"),
     "syntax error: expected an expression, found ';'"),
    ("missing-semicolon", dict(body="meta.x = 1\n/*^*/meta.y = 2;"),
     "syntax error: expected ';', found 'meta'"),
    ("unknown-type", dict(decls="header q_t { /*^*/foo_t a; }"),
     "undeclared type 'foo_t'"),
    ("signed-shift-amount", dict(body="meta.x = meta.x << /*^*/(int<8>)1;"),
     "shift amount must be unsigned, got int<8>"),
    ("concat-width", dict(body="meta.x = /*^*/meta.x ++ meta.x;"),
     "type mismatch: expected bit<8>, got bit<16>"),
    ("no-enum-member", dict(decls="enum bit<8> E { A = 1 }",
                            body="meta.x = (bit<8>)E./*^*/B;"), "enum E has no member 'B'"),
    ("no-error-member", dict(parser="verify(false, error./*^*/Nope);\ntransition accept;"),
     "error.Nope is not declared"),
    ("exit-in-parser", dict(parser="/*^*/exit;\ntransition accept;"),
     "'exit' is not allowed in a parser or function"),
    ("ternary-widths", dict(body="meta.x = meta.flag ? /*^*/hdr.h.a : hdr.h.b;"),
     "operands of '?:' have different types: bit<8> and bit<16>"),
    ("keyset-not-const", dict(parser="""
        transition select(hdr.h.a) {
            /*^*/meta.x: accept;
            default: accept;
        }"""), "keyset value must be a compile-time constant"),
    ("extern-no-method", dict(locals_="register<bit<8>>(4) r;", body="r./*^*/bump();"),
     "extern register has no method 'bump'"),
    ("out-arg-not-lvalue", dict(locals_="register<bit<8>>(4) r;",
                                body="r.read(/*^*/8w1, 0);"),
     "argument for out parameter 'result': expression cannot be written to"),
    ("register-value-width", dict(locals_="register<bit<8>>(4) r;",
                                  body="r.write(0, /*^*/hdr.h.b);"),
     "type mismatch: expected bit<8>, got bit<16>"),
    ("stack-index-range", dict(decls="struct s_t { h_t[2] st; }",
                               locals_="action a(inout s_t s) { s.st[/*^*/2].a = 1; }"),
     "index 2 is out of range for h_t[2]"),
    # The package and table-path messages below are real p4c-bm2-ss 1.2.5.16's, pasted from
    # its output on these programs (for a package, its "Originating from" position, in the
    # program, with the "Actual error" text when that names no position in the program).
    ("package-direction", dict(main="V1Switch(P(), VC(), I(), E(), /*^*/D(), D()) main;"),
     "Type of argument 'D' (control D) does not match type of parameter 'ck'"
     " (control ComputeChecksum<...>)"),
    ("package-type-var", dict(
        decls="control I2(inout headers_t hdr, inout h_t m, inout standard_metadata_t s)"
              " { apply { } }",
        main="V1Switch(P(), VC(), /*^*/I2(), E(), CC(), D()) main;"),
     "Type of argument 'I2' (control I2) does not match type of parameter 'ig'"
     " (control Ingress<...>)"),
    ("package-parser-for-control", dict(main="V1Switch(P(), /*^*/P(), I(), E(), CC(), D()) main;"),
     "Type of argument 'P' (parser P) does not match type of parameter 'vr'"
     " (control VerifyChecksum<...>)"),
    ("package-too-many", dict(main="V1Switch(P(), VC(), I(), E(), CC(), D(), D()) /*^*/main;"),
     "V1Switch: 7 arguments supplied while 6 are expected"),
    ("package-too-few", dict(main="V1Switch(P(), VC(), I(), E(), CC()) /*^*/main;"),
     "dep: No argument supplied for parameter"),
    ("package-too-few-named", dict(
        main="V1Switch(p=P(), vr=VC(), ig=I(), eg=E(), dep=D()) /*^*/main;"),
     "ck: No argument supplied for parameter"),
    ("table-applied-twice", dict(locals_=APPLIED_TABLE, body="t.apply();\nt.apply();"),
     "Program can not be implemented on this target since it contains a path from table I.t"
     " back to itself"),
    ("table-applied-after-hit", dict(
        locals_=APPLIED_TABLE,
        body="if (t.apply().hit) { meta.x = 1; }\nif (meta.x == 1) { t.apply(); }"),
     "Program can not be implemented on this target since it contains a path from table I.t"
     " back to itself"),
    ("table-applied-in-action-run", dict(
        locals_=APPLIED_TABLE, body="switch (t.apply().action_run) { a: { t.apply(); } }"),
     "Program can not be implemented on this target since it contains a path from table I.t"
     " back to itself"),
    ("two-lpm-keys", dict(locals_="""
        action a() { }
        table t {
            key = { hdr.h.c: lpm; hdr.h.b: /*^*/lpm; }
            actions = { a; }
        }""", body="t.apply();"), "table t has more than one lpm key"),
    ("lpm-entry-not-prefix", dict(locals_="""
        action a() { }
        table t {
            key = { hdr.h.c: lpm; }
            actions = { a; }
            const entries = { /*^*/0x0a000000 &&& 0xff00ff00 : a(); }
        }""", body="t.apply();"), "lpm entry mask must be a prefix"),
    ("duplicate-state", dict(parser="transition s1;\n    }\n    state s1 { transition accept; }"
                                    "\n    state /*^*/s1 { transition accept; "),
     "duplicate declaration of state 's1'"),
    ("no-start-state", dict(decls="parser /*^*/Q(packet_in p) { state begin { transition "
                                  "accept; } }"), "parser Q has no 'start' state"),
    ("directional-after-data", dict(locals_="action a(bit<8> v, inout bit<8> /*^*/w) { }"),
     "action parameter 'w' has a direction but follows a directionless parameter"),
    ("header-as-action-data", dict(locals_="action a(h_t /*^*/hh) { }"),
     "action data parameter 'hh' cannot have type header h_t"),
    ("return-value-in-action", dict(locals_="action a() { /*^*/return 1; }"),
     "'return' in an action or control takes no value"),
    ("duplicate-switch-label", dict(body="""
        switch (hdr.h.a) {
            1: { meta.x = 1; }
            /*^*/1: { meta.x = 2; }
        }"""), "duplicate switch label"),
    ("switch-on-bool", dict(body="switch (/*^*/meta.flag) { default: { } }"),
     "cannot switch on a value of type bool"),
    ("next-outside-parser", dict(decls="struct s_t { h_t[2] st; }",
                                 locals_="action a(inout s_t s) { s.st./*^*/next.a = 1; }"),
     "'next' may only be used in a parser"),
    ("bool-vs-int", dict(body="if (/*^*/meta.flag == 1) { }"),
     "operands of '==' have different types: bool and int"),
    ("sign-and-width-cast", dict(body="meta.y = /*^*/(bit<16>)(int<8>)meta.x;"),
     "cannot cast int<8> to bit<16>"),
    ("ctor-arg-count", dict(locals_="register<bit<8>>() /*^*/r;"),
     "register expects 1 arguments, got 0"),
    ("size-not-const", dict(locals_="""
        action a() { }
        table t { key = { hdr.h.a: exact; } actions = { a; } size = /*^*/meta.y; }""",
                            body="t.apply();"), "table size must be a compile-time integer constant"),
    ("verify-wrong-error-arg", dict(parser="verify(true, /*^*/8w1);\ntransition accept;"),
     "type mismatch: expected error, got bit<8>"),
    ("complex-key-needs-name", dict(locals_="""
        action a() { }
        table t { key = { /*^*/hdr.h.a + 1: exact; } actions = { a; } }""",
                                    body="t.apply();"),
     "a complex key expression needs a @name annotation"),
    ("defaultonly-in-entry", dict(locals_="""
        action a() { }
        action b() { }
        table t {
            key = { hdr.h.a: exact; }
            actions = { a; @defaultonly b; }
            const entries = { 1 : /*^*/b(); }
        }""", body="t.apply();"), "action b is @defaultonly and cannot be used in an entry"),
    ("priority-on-exact-table", dict(locals_="""
        action a() { }
        table t {
            key = { hdr.h.a: exact; }
            actions = { a; }
            const entries = { priority = /*^*/5 : 1 : a(); }
        }""", body="t.apply();"),
     "table t has no ternary, range or optional key: its entries take no priority"),
    ("width-too-large", dict(decls="header w_t { /*^*/bit<100000> huge; }"),
     "width 100000 is too large (at most 2048 bits)"),
    ("negative-slice", dict(body="meta.x = /*^*/hdr.h.c[7:-1];"),
     "slice indexes must not be negative"),
    ("control-at-top-level", dict(decls="control Q(inout meta_t m) { apply { } }\nQ() /*^*/q;"),
     "q: a control cannot be instantiated at top level"),
    ("missing-apply", dict(decls="control Q(inout meta_t m) {\n    action a() { }\n/*^*/}"),
     "control Q has no apply block"),
    ("no-actions-property", dict(locals_="table /*^*/t { key = { hdr.h.a: exact; } }",
                                 body="t.apply();"), "table t has no 'actions' property"),
    ("signed-run-time-division", dict(body="meta.x = (bit<8>)(/*^*/(int<8>)meta.x / 2);"),
     "'/' is not defined on signed run-time values"),
    ("break-outside-loop", dict(locals_="action a() { /*^*/break; }", body="a();"),
     "'break' outside a loop"),
    ("table-in-for-loop", dict(
        locals_="table t { key = { hdr.h.a: exact; } actions = { NoAction; } }",
        body="for (bit<8> i = 0; i < 4; i = i + 1) { /*^*/t.apply(); }"),
     "unsupported: applying a table or control inside a 'for' loop (BMv2 loops only inside"
     " an action)"),
    ("for-in-loop", dict(body="for (bit<8> i /*^*/in 1 .. 4) { meta.x = i; }"),
     "unsupported: 'for ... in' loops"),
]


@pytest.mark.parametrize("kwargs,message", [(c[1], c[2]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_rejected_program(tmp_path, capsys, kwargs, message):
    text = program(**kwargs)
    src = tmp_path / "bad.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    rc = compile_main([str(src), "-o", str(tmp_path / "bad.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "Traceback" not in err
    first = err.splitlines()[0]
    assert first == f"{src}:{line}:{col}: error: {message}"
    src_line, caret = err.splitlines()[1:3]
    assert src_line == text.splitlines()[line - 1].expandtabs(1)
    assert caret == " " * (col - 1) + "^"
    assert not (tmp_path / "bad.json").exists()


def test_error_inside_included_file_points_there(tmp_path, capsys):
    inc = tmp_path / "inc.p4"
    inc.write_text("// helper\nconst bit<4> SMALL = 4w1 + 8w1;\n")
    text = program(decls='#include "inc.p4"')
    src = tmp_path / "main.p4"
    src.write_text(text)
    rc = compile_main([str(src), "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.splitlines()[0].startswith(f"{inc}:2:")
    assert ": error: " in err.splitlines()[0]


# Constants that do not fit their type: real p4c (1.2.5) warns (in these words: p4c's output for
# these very programs), wraps the value to the width and compiles; p4sim does the same, and
# fails on them with --Werror as p4c does. (id, body, p4c's option and message, carets, value)
WARNINGS = [
    ("int-too-wide", "meta.x = /*^*/256;",
     "[--Wwarn=overflow] warning: 8w256: value does not fit in 8 bits", "^^^", 0),
    ("port-too-wide", "sm.egress_spec = /*^*/513;",
     "[--Wwarn=overflow] warning: 9w513: value does not fit in 9 bits", "^^^", 1),
    ("width-literal-too-wide", "meta.x = /*^*/8w300;",
     "[--Wwarn=overflow] warning: 8w300: value does not fit in 8 bits", "^^^^^", 44),
    ("negative-unsigned", "meta.x = /*^*/-1;",
     "[--Wwarn=mismatch] warning: -8w1: negative value with unsigned type", " ^", 255),
]


def _assigned_constant(json_path) -> int:
    import json

    doc = json.loads(json_path.read_text())
    for action in doc["actions"]:
        for p in action["primitives"]:
            if p["op"] == "assign" and p["parameters"][1]["type"] == "hexstr":
                return int(p["parameters"][1]["value"], 16)
    raise AssertionError("no constant assignment in the JSON")


@pytest.mark.parametrize("body,message,carets,wrapped", [w[1:] for w in WARNINGS],
                         ids=[w[0] for w in WARNINGS])
def test_constant_that_does_not_fit_is_a_warning_and_wraps(tmp_path, capsys, body, message,
                                                           carets, wrapped):
    text = program(body=body)
    src = tmp_path / "w.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    out = tmp_path / "w.json"
    assert compile_main([str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{src}({line}): {message}"
    assert err[2] == " " * (col - 1) + carets
    assert _assigned_constant(out) == wrapped
    assert compile_main([str(src), "-o", str(tmp_path / "e.json"), "--Werror"]) == 1
    as_error = message.replace("--Wwarn", "--Werror").replace("] warning:", "] error:")
    assert capsys.readouterr().err.splitlines()[0] == f"{src}({line}): {as_error}"
    assert not (tmp_path / "e.json").exists()


def test_a_program_without_warnings_prints_nothing(tmp_path, capsys):
    src = tmp_path / "ok.p4"
    src.write_text(program(body="meta.x = 255;"))
    assert compile_main([str(src), "-o", str(tmp_path / "ok.json"), "--Werror"]) == 0
    assert capsys.readouterr().err == ""


def test_missing_include_and_error_directive(tmp_path, capsys):
    src = tmp_path / "a.p4"
    src.write_text('#include <core.p4>\n#include "nope.p4"\n')
    assert compile_main([str(src)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{src}:2:1: error: #include file nope.p4 not found")
    src.write_text("#ifndef FOO\n  #error FOO must be defined\n#endif\n")
    assert compile_main([str(src)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{src}:2:3: error: #error FOO must be defined")


def test_unsupported_construct_is_named(tmp_path, capsys):
    # an extern function needs a BMv2 extension module (p4c's extern-funcs test)
    text = program(decls="extern void my_extern(out bit<8> d, bit<8> s);",
                   body="/*^*/my_extern(hdr.h.a, 8w1);")
    src = tmp_path / "u.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    rc = compile_main([str(src), "-o", str(tmp_path / "u.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.splitlines()[0] == f"{src}:{line}:{col}: error: unsupported: extern function my_extern"


def test_table_apply_inside_action_is_rejected(tmp_path, capsys):
    text = program(locals_="""
        action b() { }
        table t { key = { hdr.h.a: exact; } actions = { b; } }
        action a() { /*^*/t.apply(); }""", body="a();")
    src = tmp_path / "t.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    assert compile_main([str(src), "-o", str(tmp_path / "t.json")]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{src}:{line}:{col}: error: t.apply() cannot be called in an action")


def test_program_without_main(tmp_path, capsys):
    src = tmp_path / "nomain.p4"
    src.write_text(program(main=""))
    assert compile_main([str(src), "-o", str(tmp_path / "o.json")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{src}: error: program has no 'main' package instance")


def test_conflicting_control_plane_names(tmp_path, capsys):
    text = program(locals_="""
        @name(".foo") action a() { }
        @name(".foo") action /*^*/b() { }
        table t { key = { hdr.h.a: exact; } actions = { a; b; } }""", body="t.apply();")
    src = tmp_path / "dup.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    assert compile_main([str(src), "-o", str(tmp_path / "o.json")]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"{src}:{line}:{col}: error: foo: conflicting control plane name")


def test_new_type_needs_explicit_casts(tmp_path, capsys):
    text = program(decls="type bit<9> port_t;", locals_="action a(port_t p) {"
                   " sm.egress_spec = /*^*/p; }")
    src = tmp_path / "nt.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    assert compile_main([str(src), "-o", str(tmp_path / "o.json")]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{src}:{line}:{col}: error: type mismatch: expected bit<9>, got port_t")
    src.write_text(text.replace("/*^*/p;", "(bit<9>)p;"))
    assert compile_main([str(src), "-o", str(tmp_path / "o.json")]) == 0


def test_static_assert(tmp_path, capsys):
    text = program(decls='const bool ok = static_assert(V1MODEL_VERSION >= 20180101);\n'
                         'const bool bad = /*^*/static_assert(8w1 == 8w2, "widths disagree");')
    src = tmp_path / "sa.p4"
    src.write_text(text)
    line, col = marker_pos(text)
    assert compile_main([str(src), "-o", str(tmp_path / "o.json")]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{src}:{line}:{col}: error: widths disagree")


@pytest.mark.parametrize("body", [
    "if (hdr.h.a == 1) { t.apply(); } else { t.apply(); }",
    "if (hdr.h.a == 1) { t.apply(); return; }\nt.apply();",
])
def test_table_on_exclusive_paths_is_no_path_error(tmp_path, capsys, body):
    # p4c accepts these (no path applies t twice); p4sim's back end cannot give one table
    # two places in its graph yet, and says so as unsupported, not as p4c's path rule.
    src = tmp_path / "two.p4"
    src.write_text(program(locals_=APPLIED_TABLE.replace("/*^*/", ""), body=body))
    assert compile_main([str(src), "-o", str(tmp_path / "two.json")]) == 1
    err = capsys.readouterr().err
    assert "back to itself" not in err
    assert "error: unsupported: table I.t applied more than once" in err.splitlines()[0]
