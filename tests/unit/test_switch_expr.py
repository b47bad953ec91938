"""BMv2 expression semantics: arbitrary precision inside an expression, truncation (unsigned
wraparound / two's complement) when stored, saturating casts, shifts, slices, concatenation,
comparisons, boolean ops, ternary, d2b/b2d, validity."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx, prim

from p4sim.switch.codegen import Gen
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.program import load_program

FIELDS = [("a", 8, False), ("b", 8, False), ("s", 8, True), ("w", 16, False),
          ("r1", 8, False), ("r2", 16, False), ("r3", 8, True), ("r4", 8, False)]


def evaluate(node: dict, **values: int) -> object:
    prog = load_program(Prog(FIELDS).json())
    gen = Gen(prog, {})
    fn = gen.compile_expr(node, "test")
    F = prog.initial_phv()
    F[prog.header("probe").valid_slot] = 1
    for name, v in values.items():
        F[prog.field(["probe", name]).slot] = v
    return fn(None, F, ())


A, B, S, W = f("probe", "a"), f("probe", "b"), f("probe", "s"), f("probe", "w")


@pytest.mark.parametrize("node,values,expected", [
    (ex("+", A, B), {"a": 200, "b": 100}, 300),  # no truncation inside the expression
    (ex("&", ex("+", A, B), hx(0xFF)), {"a": 200, "b": 100}, 44),
    (ex("-", A, B), {"a": 1, "b": 2}, -1),
    (ex("&", ex("~", None, A), hx(0xFF)), {"a": 0x0F}, 0xF0),
    (ex("<<", A, hx(4)), {"a": 0xFF}, 0xFF0),
    (ex(">>", S, hx(1)), {"s": -8}, -4),  # arithmetic shift of a signed value
    (ex("&", ex(">>", W, hx(4)), hx(0xF)), {"w": 0xABCD}, 0xC),  # slice w[7:4]
    (ex("|", ex("<<", A, hx(8)), B), {"a": 0x12, "b": 0x34}, 0x1234),  # concat a ++ b
    (ex("?", A, B, cond=ex(">", A, B)), {"a": 3, "b": 9}, 9),
    (ex("b2d", None, ex("==", A, B)), {"a": 5, "b": 5}, 1),
    (ex("d2b", None, A), {"a": 0}, False),
    (ex("and", ex("d2b", None, A), ex("not", None, ex("d2b", None, B))), {"a": 1, "b": 0}, True),
    (ex("or", ex("<", A, B), ex(">=", A, hx(10))), {"a": 4, "b": 2}, False),
    (ex("two_comp_mod", hx(257), hx(8)), {}, 1),
    (ex("two_comp_mod", hx(-129), hx(8)), {}, 127),
    (ex("usat_cast", ex("+", A, B), hx(8)), {"a": 200, "b": 100}, 255),
    (ex("usat_cast", ex("-", A, B), hx(8)), {"a": 1, "b": 2}, 0),
    (ex("sat_cast", ex("+", S, S), hx(8)), {"s": 100}, 127),
    (ex("sat_cast", ex("+", S, S), hx(8)), {"s": -100}, -128),
    (ex("valid", None, {"type": "header", "value": "probe"}), {}, True),
    (ex("valid", None, {"type": "header", "value": "ethernet"}), {}, False),
    (ex("%", A, hx(7)), {"a": 20}, 6),
])
def test_expression(node: dict, values: dict[str, int], expected: object) -> None:
    assert evaluate(node, **values) == expected


def test_assignment_truncates_to_field_width_and_sign() -> None:
    p = Prog(FIELDS)
    act = p.action("compute", [], [
        assign(f("probe", "r1"), ex("+", A, B)),  # unsigned wrap
        assign(f("probe", "r2"), ex("-", A, B)),  # negative into bit<16>
        assign(f("probe", "r3"), ex("+", S, hx(100))),  # int<8> two's complement wrap
        assign(f("probe", "r4"), ex("usat_cast", ex("+", A, B), hx(8))),  # |+| saturates
    ])
    p.table("t", [], [act], default=(act, []))
    dp = DataPlane()
    dp.load_pipeline(p.json())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.receive(0, p.frame(200, 100, 100, 0))
    assert out[0]["r1"] == (200 + 100) % 256
    assert out[0]["r2"] == (200 - 100) % 65536
    assert out[0]["r3"] == (100 + 100 - 256) & 0xFF  # -56 on the wire
    assert out[0]["r4"] == 255
    dp.receive(0, p.frame(1, 2, 0x80, 0))  # s = -128
    assert out[1]["r2"] == 0xFFFF
    assert out[1]["r3"] == (-128 + 100) & 0xFF
    assert out[1]["r4"] == 3  # 1 |+| 2 does not saturate


def test_log_msg_formats_values_in_order() -> None:
    p = Prog(FIELDS)
    act = p.action("say", [], [prim("log_msg", {"type": "string", "value": "a={} 100% b={}"},
                                    {"type": "parameters_vector", "value": [A, B]})])
    p.table("t", [], [act], default=(act, []))
    lines: list[str] = []
    dp = DataPlane(log=lines.append)
    dp.load_pipeline(p.json())
    dp.receive(0, p.frame(7, 9))
    assert lines == ["a=7 100% b=9"]
