"""Compiler front-end pieces: preprocessor, lexer, the P4Info id scheme, command-line flags."""

from __future__ import annotations

import json
import os

import pytest

from p4sim.backend.p4info_ids import aliases, jenkins_hash
from p4sim.compile import main as compile_main
from p4sim.frontend.errors import CompileError
from p4sim.frontend.lexer import parse_int, tokenize
from p4sim.frontend.preprocess import preprocess

PROGS = os.path.join(os.path.dirname(__file__), "p4progs")


def pp_text(tmp_path, text: str, defines=None, name="t.p4"):
    src = tmp_path / name
    src.write_text(text)
    out = preprocess(str(src), [], defines or {})
    return [line.strip() for line in out.text.splitlines() if line.strip()], out


def test_object_and_function_macros(tmp_path):
    lines, _ = pp_text(tmp_path, "#define W 16\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n"
                                 "bit<W> x = MAX(W, 3 + 1);\n")
    assert lines == ["bit<16> x = ((16) > (3 + 1) ? (16) : (3 + 1));"]


def test_conditionals_defined_and_arithmetic(tmp_path):
    text = ("#define V 20200408\n#if defined(V) && V >= 20200101\nnew\n#elif 1\nmid\n"
            "#else\nold\n#endif\n#ifdef NOPE\nno\n#else\nyes\n#endif\n"
            "#if !defined NOPE && (2 * 3 == 6)\nmath\n#endif\n#undef V\n#ifndef V\ngone\n#endif\n")
    lines, _ = pp_text(tmp_path, text)
    assert lines == ["new", "yes", "math", "gone"]


def test_command_line_defines_and_comments(tmp_path):
    lines, _ = pp_text(tmp_path, "/* X\n X */ a X // X\n\"X\" X\n", {"X": "7"})
    assert lines == ["a 7", '"X" 7']


def test_line_map_points_into_included_files(tmp_path):
    (tmp_path / "inc.p4").write_text("\n\nint_in_inc\n")
    src = tmp_path / "main.p4"
    src.write_text('#include "inc.p4"\nmain_line\n')
    out = preprocess(str(src), [], {})
    toks = tokenize(out)
    where = {t.text: (os.path.basename(t.loc.file), t.loc.line, t.loc.col) for t in toks
             if t.kind == "id"}
    assert where == {"int_in_inc": ("inc.p4", 3, 1), "main_line": ("main.p4", 2, 1)}


def test_include_path_flag(tmp_path):
    d = tmp_path / "incdir"
    d.mkdir()
    (d / "defs.p4").write_text("#define FROM_I 1\n")
    src = tmp_path / "t.p4"
    src.write_text("#include <defs.p4>\nFROM_I\n")
    with pytest.raises(CompileError) as ei:
        preprocess(str(src), [], {})
    assert ei.value.message == "#include file defs.p4 not found"
    out = preprocess(str(src), [str(d)], {})
    assert [x for x in out.text.splitlines() if x.strip()] == ["1"]


def test_unterminated_if_is_an_error(tmp_path):
    src = tmp_path / "u.p4"
    src.write_text("#ifdef A\nx\n")
    with pytest.raises(CompileError) as ei:
        preprocess(str(src), [], {})
    assert ei.value.message == "missing #endif"


@pytest.mark.parametrize("text,value,width,signed", [
    ("42", 42, None, False), ("0x2A", 42, None, False), ("0b1010_1010", 0xAA, None, False),
    ("0o17", 15, None, False), ("8w255", 255, 8, False), ("16w0x800", 0x800, 16, False),
    ("4s7", 7, 4, True), ("32w0d100", 100, 32, False), ("1_000", 1000, None, False),
])
def test_int_literals(text, value, width, signed):
    assert parse_int(text) == (value, width, signed)


def test_jenkins_hash_known_values():
    # one-at-a-time hash reference values (Bob Jenkins): "a" and the classic test string
    assert jenkins_hash("a") == 0xCA2E9442
    assert jenkins_hash("The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_alias_is_shortest_unique_suffix():
    got = aliases(["MyIngress.acl", "MyEgress.acl", "MyIngress.fwd.lpm", "NoAction"])
    assert got == {"MyIngress.acl": "MyIngress.acl", "MyEgress.acl": "MyEgress.acl",
                   "MyIngress.fwd.lpm": "lpm", "NoAction": "NoAction"}


def test_define_flag_changes_the_program(tmp_path):
    src = tmp_path / "d.p4"
    with open(os.path.join(PROGS, "ecn_marking.p4")) as f:
        original = f.read()
    text = original.replace(
        "const bit<19> ECN_THRESHOLD = 10;",
        "#ifndef THRESH\n#define THRESH 10\n#endif\nconst bit<19> ECN_THRESHOLD = THRESH;")
    src.write_text(text)
    out = tmp_path / "d.json"
    assert compile_main([str(src), "-I", PROGS, "-D", "THRESH=33", "-o", str(out),
                         "--std", "p4-16", "--arch", "v1model", "--target", "bmv2",
                         "--p4v", "16"]) == 0
    doc = json.loads(out.read_text())
    rights = [c["expression"]["value"]["right"] for p in doc["pipelines"]
              for c in p["conditionals"] if c["expression"]["value"]["op"] == ">="]
    assert [int(r["value"], 16) for r in rights] == [33]


def test_bad_flags_and_missing_file(tmp_path, capsys):
    assert compile_main(["--frobnicate", "x.p4"]) == 2
    assert "unknown option --frobnicate" in capsys.readouterr().err
    assert compile_main([str(tmp_path / "missing.p4")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{tmp_path / 'missing.p4'}: error:")
    assert compile_main(["a.p4", "--arch", "psa"]) == 2


def test_internal_error_is_one_line_without_traceback(tmp_path, capsys, monkeypatch):
    import p4sim.backend.json_program as jp

    def boom(*a, **k):
        raise KeyError("kaboom")

    monkeypatch.setattr(jp, "build_json", boom)
    rc = compile_main([os.path.join(PROGS, "basic_ipv4.p4"), "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.strip() == "error: internal: KeyError: 'kaboom'"


def test_unwritable_output_is_a_clean_error(tmp_path, capsys):
    out = tmp_path / "no" / "such" / "dir" / "o.json"
    rc = compile_main([os.path.join(PROGS, "basic_ipv4.p4"), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.strip() == f"{out}: error: No such file or directory"


def test_newer_v1model_version_has_typed_indices(tmp_path, capsys):
    with open(os.path.join(PROGS, "regs_counters.p4")) as f:
        text = f.read()
    src = tmp_path / "r.p4"
    src.write_text(text)
    flags = ["-I", PROGS, "-D", "V1MODEL_VERSION=20200408", "-o", str(tmp_path / "r.json")]
    # register<T> takes two type arguments (value, index) from version 20200408 on
    assert compile_main([str(src), *flags]) == 1
    assert "register expects 2 type arguments, got 1" in capsys.readouterr().err
    text = (text.replace("register<bit<8>>(512)", "register<bit<8>, bit<9>>(512)")
            .replace("register<bit<32>>(1)", "register<bit<32>, bit<1>>(1)")
            .replace("counter(512,", "counter<bit<9>>(512,")
            .replace("(bit<32>)sm.ingress_port", "sm.ingress_port")
            .replace("rr.read(meta.rr_index, 0);", "rr.read(meta.rr_index, 1w0);")
            .replace("rr.write(0,", "rr.write(1w0,"))
    src.write_text(text)
    assert compile_main([str(src), *flags]) == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert {r["name"]: r["size"] for r in doc["register_arrays"]} == {
        "RcIngress.last_ttl": 512, "RcIngress.rr": 1}


def test_operator_precedence():
    from p4sim.frontend.parse_expr import ExprParser
    from p4sim.frontend.preprocess import Preprocessed

    def tree(text: str) -> str:
        pp = Preprocessed(text + "\n", [("x.p4", 1)])
        p = ExprParser()
        p.toks, p.pos, p.type_names = tokenize(pp), 0, [set()]
        e = p.parse_expr()

        def show(n):
            from p4sim.frontend import ast as A
            if isinstance(n, A.Binary):
                return f"({show(n.left)} {n.op} {show(n.right)})"
            return getattr(n, "name", None) or str(getattr(n, "value", "?"))
        return show(e)

    # bitwise operators bind tighter than comparisons in P4 (not as in C)
    assert tree("a & 1 == 0") == "((a & 1) == 0)"
    assert tree("a | b < c") == "((a | b) < c)"
    assert tree("a == b && c != d || e") == "(((a == b) && (c != d)) || e)"
    assert tree("a ++ b + c") == "((a ++ b) + c)"
    assert tree("a + b * c << 2") == "((a + (b * c)) << 2)"
    assert tree("a >> 1 & b") == "((a >> 1) & b)"


def _expr(tmp_path, text: str):
    from p4sim.frontend.parser import parse

    _, pp = pp_text(tmp_path, f"const bit<8> c = {text};")
    return parse(tokenize(pp)).decls[0].init

def test_node_visitor_dispatch_fallback_and_arguments(tmp_path):
    from p4sim.frontend import ast as A

    class Names(A.NodeVisitor):  # visits below Binary only through generic_visit
        def __init__(self) -> None:
            self.seen: list[tuple[int, str]] = []

        def visit_IntLit(self, e, depth):
            self.seen.append((depth, str(e.value)))

        def visit_Binary(self, e, depth):
            self.seen.append((depth, e.op))
            for child in e.children():
                self.visit(child, depth + 1)

    class Ops(A.NodeVisitor):  # another pass: its own visit_Binary, no visit_IntLit
        def __init__(self) -> None:
            self.ops: list[str] = []

        def visit_Binary(self, e):
            self.ops.append(e.op)
            self.generic_visit(e)

    e = _expr(tmp_path, "(1 + 2) * 3")
    names = Names()
    names.visit(e, 0)
    assert names.seen == [(0, "*"), (1, "+"), (2, "1"), (2, "2"), (1, "3")]
    ops = Ops()
    ops.visit(e)  # the first pass's methods must not leak into this one's dispatch
    assert ops.ops == ["*", "+"]
