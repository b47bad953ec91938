"""Match kinds and BMv2's priority rules, default entries, hit/miss and per-action next tables."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, f, hx, rd

from p4sim.switch.api import (
    ActionCall,
    ApiError,
    Code,
    Exact,
    Lpm,
    Optional_,
    Range,
    TableEntry,
    Ternary,
)
from p4sim.switch.dataplane import DataPlane

FIELDS = [("k1", 16), ("k2", 8), ("out", 16), ("out2", 16)]


def make(prog: Prog, clock: Callable[[], int] | None = None) -> DataPlane:
    dp = DataPlane(clock=clock)
    dp.load_pipeline(prog.json())
    dp.out = []  # type: ignore[attr-defined]
    dp.set_transmit_fn(lambda port, frame: dp.out.append((port, prog.fields(frame))))  # type: ignore
    return dp


def run(dp: DataPlane, prog: Prog, *values: int) -> dict[str, int] | None:
    dp.out.clear()  # type: ignore[attr-defined]
    dp.receive(1, prog.frame(*values))
    return dp.out[0][1] if dp.out else None  # type: ignore[attr-defined]


def setter_prog(keys: list[tuple[str, object]]) -> tuple[Prog, int]:
    p = Prog(FIELDS)
    a = p.action("set_out", [("v", 16)], [assign(f("probe", "out"), rd(0))])
    p.table("t", keys, [a, 0], default=(0, []))
    return p, a


def entry(key: tuple, v: int, prio: int = 0) -> TableEntry:
    return TableEntry(key, ActionCall("set_out", (v,)), priority=prio)


def test_ternary_higher_priority_wins_regardless_of_insert_order() -> None:
    p, _ = setter_prog([("ternary", ["probe", "k1"])])
    dp = make(p)
    dp.table_insert("t", entry((Ternary(0x1200, 0xFF00),), 1, prio=10))
    dp.table_insert("t", entry((Ternary(0x1234, 0xFFFF),), 2, prio=20))
    dp.table_insert("t", entry((Ternary(0, 0),), 3, prio=1))
    assert run(dp, p, 0x1234)["out"] == 2
    assert run(dp, p, 0x12FF)["out"] == 1
    assert run(dp, p, 0x9999)["out"] == 3
    dp.table_delete("t", (Ternary(0x1234, 0xFFFF),), 20)
    assert run(dp, p, 0x1234)["out"] == 1
    # Same key, different priority: two distinct entries.
    dp.table_insert("t", entry((Ternary(0x1200, 0xFF00),), 4, prio=11))
    assert run(dp, p, 0x1201)["out"] == 4


def test_range_and_exact_combined() -> None:
    p, _ = setter_prog([("exact", ["probe", "k1"]), ("range", ["probe", "k2"])])
    dp = make(p)
    dp.table_insert("t", entry((Exact(7), Range(10, 20)), 1, prio=5))
    dp.table_insert("t", entry((Exact(7), Range(15, 30)), 2, prio=6))
    assert run(dp, p, 7, 10)["out"] == 1
    assert run(dp, p, 7, 15)["out"] == 2  # both match, higher priority wins
    assert run(dp, p, 7, 30)["out"] == 2
    assert run(dp, p, 7, 31)["out"] == 0
    assert run(dp, p, 8, 15)["out"] == 0
    with pytest.raises(ApiError) as e:
        dp.table_insert("t", entry((Exact(1), Range(9, 3)), 1, prio=1))
    assert e.value.code == Code.INVALID_ARGUMENT


def test_optional_wildcard_and_value() -> None:
    p, _ = setter_prog([("optional", ["probe", "k1"]), ("optional", ["probe", "k2"])])
    dp = make(p)
    dp.table_insert("t", entry((Optional_(5), Optional_(None)), 1, prio=1))
    dp.table_insert("t", entry((Optional_(5), Optional_(9)), 2, prio=2))
    assert run(dp, p, 5, 9)["out"] == 2
    assert run(dp, p, 5, 8)["out"] == 1
    assert run(dp, p, 6, 9)["out"] == 0


def test_exact_multi_field_and_valid_key() -> None:
    p, _ = setter_prog([("exact", ["probe", "k1"]), ("exact", ["probe", "k2"]),
                        ("valid", "probe")])
    dp = make(p)
    dp.table_insert("t", entry((Exact(1), Exact(2), Exact(1)), 12))
    assert run(dp, p, 1, 2)["out"] == 12
    assert run(dp, p, 2, 1)["out"] == 0


def test_lpm_with_exact_prefers_longest_prefix_within_exact_match() -> None:
    p, _ = setter_prog([("exact", ["probe", "k2"]), ("lpm", ["probe", "k1"])])
    dp = make(p)
    dp.table_insert("t", entry((Exact(1), Lpm(0xAB00, 8)), 1))
    dp.table_insert("t", entry((Exact(1), Lpm(0xABC0, 12)), 2))
    dp.table_insert("t", entry((Exact(2), Lpm(0xABCD, 16)), 3))
    dp.table_insert("t", entry((Exact(1), Lpm(0, 0)), 4))
    assert run(dp, p, 0xABCD, 1)["out"] == 2
    assert run(dp, p, 0xAB0D, 1)["out"] == 1
    assert run(dp, p, 0xFFFF, 1)["out"] == 4
    assert run(dp, p, 0xABCD, 2)["out"] == 3
    assert run(dp, p, 0xABCE, 2)["out"] == 0


def test_hit_miss_next_tables() -> None:
    p = Prog(FIELDS)
    a = p.action("set_out", [("v", 16)], [assign(f("probe", "out"), rd(0))])
    b = p.action("set_out2", [("v", 16)], [assign(f("probe", "out2"), rd(0))])
    t1 = p.table("t1", [("exact", ["probe", "k1"])], [a, 0], default=(0, []))
    p.table("t_hit", [], [b], default=(b, [0x11]))
    p.table("t_miss", [], [b], default=(b, [0x22]))
    t1["next_tables"] = {"__HIT__": "t_hit", "__MISS__": "t_miss"}
    doc_tables = p.tables["ingress"]
    p.tables["ingress"] = [t1]  # chain only t1; t_hit/t_miss are reached by hit/miss
    dp = DataPlane()
    doc = p.doc()
    for t in doc_tables[1:]:
        t["next_tables"] = {"set_out2": None}
        t["base_default_next"] = None
        doc["pipelines"][0]["tables"].append(t)
    import json

    dp.load_pipeline(json.dumps(doc).encode())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.table_insert("t1", entry((Exact(3),), 7))
    dp.receive(0, p.frame(3))
    dp.receive(0, p.frame(4))
    assert (out[0]["out"], out[0]["out2"]) == (7, 0x11)
    assert (out[1]["out"], out[1]["out2"]) == (0, 0x22)


def test_action_specific_next_table() -> None:
    p = Prog(FIELDS)
    a = p.action("go_a", [], [assign(f("probe", "out"), hx(1))])
    b = p.action("go_b", [], [assign(f("probe", "out"), hx(2))])
    c = p.action("mark", [("v", 16)], [assign(f("probe", "out2"), rd(0))])
    t1 = p.table("t1", [("exact", ["probe", "k1"])], [a, b], default=(a, []))
    t2 = p.table("t2", [], [c], default=(c, [0xA]))
    p.tables["ingress"] = [t1]
    import json

    doc = p.doc()
    t1["next_tables"] = {"go_a": "t2", "go_b": None}
    t2["next_tables"] = {"mark": None}
    doc["pipelines"][0]["tables"] = [t1, t2]
    dp = DataPlane()
    dp.load_pipeline(json.dumps(doc).encode())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.table_insert("t1", TableEntry((Exact(9),), ActionCall("go_b")))
    dp.receive(0, p.frame(1))
    dp.receive(0, p.frame(9))
    assert (out[0]["out"], out[0]["out2"]) == (1, 0xA)  # go_a (default) -> t2
    assert (out[1]["out"], out[1]["out2"]) == (2, 0)  # go_b -> end of pipeline


def test_json_const_entry_priority_smaller_number_wins() -> None:
    p, a = setter_prog([("ternary", ["probe", "k1"])])
    t = p.tables["ingress"][0]
    t["entries"] = [
        {"match_key": [{"match_type": "ternary", "key": "0x0000", "mask": "0x0000"}],
         "action_entry": {"action_id": a, "action_data": ["0x0001"]}, "priority": 2},
        {"match_key": [{"match_type": "ternary", "key": "0x0005", "mask": "0xffff"}],
         "action_entry": {"action_id": a, "action_data": ["0x0002"]}, "priority": 1},
    ]
    dp = make(p)
    assert run(dp, p, 5)["out"] == 2
    assert run(dp, p, 6)["out"] == 1


def test_idle_timeout_notifies_once_per_idle_period() -> None:
    now = [500.0]  # seconds on the switch's injected clock
    p, _ = setter_prog([("exact", ["probe", "k1"])])
    p.tables["ingress"][0]["support_timeout"] = True
    dp = make(p, clock=lambda: round(now[0] * 1e9))
    seen: list[tuple[str, list[int]]] = []
    dp.set_idle_handler(lambda t, es: seen.append((t, [e.key[0].value for e in es])))
    dp.table_insert("t", TableEntry((Exact(1),), ActionCall("set_out", (1,)), timeout_ms=100))
    dp.table_insert("t", TableEntry((Exact(2),), ActionCall("set_out", (2,)), timeout_ms=300))
    dp.table_insert("t", TableEntry((Exact(3),), ActionCall("set_out", (3,))))  # never ages
    now[0] += 0.05
    run(dp, p, 1)
    dp.check_idle()
    assert seen == []
    now[0] += 0.12  # entry 1 was hit 120 ms ago, entry 2 inserted 170 ms ago
    dp.check_idle()
    assert seen == [("t", [1])]
    dp.check_idle()
    assert seen == [("t", [1])]  # once per idle period
    now[0] += 0.2
    dp.check_idle()
    assert seen == [("t", [1]), ("t", [2])]
    run(dp, p, 1)  # a hit starts a new period for entry 1
    now[0] += 0.15
    dp.check_idle()
    assert seen[-1] == ("t", [1]) and len(seen) == 3
