"""Switches loading one program share what is built from it once (the parsed Program, the
generated source of its actions), and nothing of their state: a register, a counter, a meter
or a table written on one switch is never seen on another."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx, prim, rd

from p4sim.switch.api import ActionCall, Exact, Replica, TableEntry
from p4sim.switch.dataplane import DataPlane

FIELDS = [("k1", 16), ("k2", 8), ("out", 32), ("color", 8)]


def _prog() -> Prog:
    p = Prog(FIELDS)
    p.counters.append({"name": "pkts", "id": 0, "size": 8, "is_direct": False})
    p.registers.append({"name": "reg", "id": 0, "size": 4, "bitwidth": 16})
    # names nothing of a switch: its source is generated once for both switches
    fwd = p.action("fwd", [("port", 9)], [
        assign(f("standard_metadata", "egress_spec"), rd(0)),
        assign(f("probe", "color"), hx(7))])
    # names the switch's register and counter: generated for each switch
    work = p.action("work", [("idx", 3)], [
        prim("count", {"type": "counter_array", "value": "pkts"}, rd(0)),
        prim("register_read", f("probe", "out"), {"type": "register_array", "value": "reg"},
             f("probe", "k2")),
        prim("register_write", {"type": "register_array", "value": "reg"}, f("probe", "k2"),
             ex("+", f("probe", "out"), hx(1))),
    ])
    p.table("t", [("exact", ["probe", "k1"])], [work, fwd, 0], default=(0, []))
    return p


def _switch(p: Prog, mode: str) -> tuple[DataPlane, list[tuple[int, dict[str, int]]]]:
    dp = DataPlane(dataplane=mode)
    dp.load_pipeline(p.json())
    out: list[tuple[int, dict[str, int]]] = []
    dp.set_transmit_fn(lambda port, frame: out.append((port, p.fields(frame))))
    return dp, out


@pytest.mark.parametrize("mode", ["python", "auto"])
def test_switches_of_one_program_share_no_state(mode: str) -> None:
    p = _prog()
    one, out1 = _switch(p, mode)
    two, out2 = _switch(p, mode)
    assert one.cp is not None and two.cp is not None
    assert one.cp.p is two.cp.p  # the program is built once...
    assert one.cp.registers["reg"] is not two.cp.registers["reg"]  # ...its state per switch
    # a table entry written on one switch only
    one.table_insert("t", TableEntry((Exact(1),), ActionCall("work", (5,))))
    assert two.table_entries("t") == []
    for _ in range(3):
        one.receive(0, p.frame(1, 2))
    assert [o["out"] for _, o in out1] == [0, 1, 2]
    assert one.register_read("reg", 2) == 3 and one.counter_read("pkts", 5)[0] == 3
    assert two.register_read("reg", 2) == 0 and two.counter_read("pkts", 5) == (0, 0)
    # the other switch runs the same action on its own register and counter
    two.table_insert("t", TableEntry((Exact(1),), ActionCall("work", (5,))))
    two.register_write("reg", 2, 40)
    two.receive(0, p.frame(1, 2))
    assert out2[-1][1]["out"] == 40
    assert two.register_read("reg", 2) == 41 and one.register_read("reg", 2) == 3
    assert two.counter_read("pkts", 5)[0] == 1 and one.counter_read("pkts", 5)[0] == 3
    # the shared action, with each switch's own entry data
    one.table_insert("t", TableEntry((Exact(9),), ActionCall("fwd", (3,))))
    two.table_insert("t", TableEntry((Exact(9),), ActionCall("fwd", (4,))))
    one.receive(0, p.frame(9, 0))
    two.receive(0, p.frame(9, 0))
    assert (out1[-1][0], out1[-1][1]["color"]) == (3, 7)
    assert (out2[-1][0], out2[-1][1]["color"]) == (4, 7)
    assert [e.action.action for e in two.table_entries("t")] == ["work", "fwd"]


def test_only_source_naming_no_switch_state_is_kept_on_the_program() -> None:
    p = _prog()
    one, _ = _switch(p, "python")
    assert one.cp is not None
    kept = {k[1] for k in one.cp.p.generated if k[0] == "action"}
    actions = {a["name"]: id(a) for a in one.cp.p.doc["actions"]}
    assert actions["fwd"] in kept
    assert actions["work"] not in kept  # names the switch's register and counter


def _mcast_prog() -> Prog:
    p = Prog([("k1", 16), ("out", 16), ("color", 8)])
    fwd = p.action("fwd", [("port", 9)], [
        assign(f("standard_metadata", "egress_spec"), rd(0)),
        assign(f("probe", "color"), hx(7))])
    mc = p.action("mc", [("grp", 16)], [
        assign(f("standard_metadata", "mcast_grp"), rd(0))])
    mark = p.action("mark", [("base", 16)], [
        assign(f("probe", "out"), ex("+", f("standard_metadata", "egress_port"), rd(0)))])
    p.table("t", [("exact", ["probe", "k1"])], [fwd, mc, 0], default=(0, []))
    p.table("e", [("exact", ["standard_metadata", "egress_port"])], [mark],
            default=(mark, [100]), pipe="egress")
    return p


def test_a_native_switch_builds_the_python_code_only_when_a_packet_needs_it() -> None:
    """The second switch of a program, on the native path, defers the Python path's code:
    unicast packets never build it; a multicast packet (which continues on the Python path)
    builds it, and then runs the entries written before the code existed exactly as a switch
    that built its code at load (the Python path's own switch) does."""
    p = _mcast_prog()
    first, _ = _switch(p, "auto")
    lazy, out = _switch(p, "auto")
    ref, ref_out = _switch(p, "python")
    assert lazy.dataplane == "native"
    assert first.cp is not None and first.cp.code_built  # the first load checks the program
    assert lazy.cp is not None and not lazy.cp.code_built
    for dp in (lazy, ref):
        dp.table_insert("t", TableEntry((Exact(1),), ActionCall("fwd", (2,))))
        dp.table_insert("t", TableEntry((Exact(2),), ActionCall("mc", (5,))))
        dp.mcast_group_set(5, [Replica(3, 1), Replica(4, 2)])
        dp.table_insert("e", TableEntry((Exact(3),), ActionCall("mark", (1000,))))
        dp.table_insert("e", TableEntry((Exact(4),), ActionCall("mark", (2000,))))
    for k1 in (1, 2, 1, 9):
        lazy.receive(0, p.frame(k1, 0, 0))
        ref.receive(0, p.frame(k1, 0, 0))
        if k1 == 1 and len(out) == 1:
            assert not lazy.cp.code_built  # unicast ran natively, egress table included
    assert lazy.cp.code_built  # the multicast packet needed it
    assert out == ref_out
    assert [(port, o["out"], o["color"]) for port, o in out] == [
        (2, 102, 7), (3, 1003, 0), (4, 2004, 0), (2, 102, 7), (0, 100, 0)]  # 9: a miss
    # entries written after the code was built run on both paths alike
    lazy.table_insert("t", TableEntry((Exact(9),), ActionCall("mc", (5,))))
    ref.table_insert("t", TableEntry((Exact(9),), ActionCall("mc", (5,))))
    lazy.receive(0, p.frame(9, 0, 0))
    ref.receive(0, p.frame(9, 0, 0))
    assert out == ref_out and [port for port, _ in out[5:]] == [3, 4]
