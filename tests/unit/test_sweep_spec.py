"""SPEC expansion: axes' cartesian product, explicit lists, bundled axis values, the command
line of each task, and one-line errors naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellfabric.sweep.spec import SpecError, load_spec, parse_spec

SPEC = Path("exp.yaml")


def test_axes_are_a_cartesian_product_over_the_base_options():
    spec = parse_spec({"mode": "sim", "options": {"topology": "leaf-spine", "size": 4096},
                       "axes": {"spray": ["ecmp", "spray"], "seed": [1, 2, 3]}}, SPEC)
    assert len(spec.tasks) == 6
    combos = {(t.params["spray"], t.params["seed"]) for t in spec.tasks}
    assert combos == {(s, n) for s in ("ecmp", "spray") for n in (1, 2, 3)}
    t = next(t for t in spec.tasks if t.params == {"topology": "leaf-spine", "size": 4096,
                                                   "spray": "spray", "seed": 2})
    assert list(t.argv) == ["cellfabric", "sim", "leaf-spine", "--size", "4096",
                            "--spray", "spray", "--seed", "2"]
    assert t.command("/r/x")[-2:] == ["--results", "/r/x"]
    assert len({t.id for t in spec.tasks}) == 6


def test_groups_explicit_tasks_and_bundled_values():
    spec = parse_spec({
        "mode": "run",
        "options": {"workload": "incast", "pcap": False},
        "groups": [
            {"name": "incast", "mode": "sim",
             "axes": {"degree": [{"senders": 4, "topology": "leaf-spine-3x3"},
                                 {"senders": 15, "topology": "leaf-spine-4x4"}],
                      "cc": ["none", "hpcc"]}},
            {"name": "fail", "tasks": [{"topology": "dual-homed", "fail": ["l1-h1@0.5", "x@1:2"],
                                        "pcap": True}],
             "axes": {"seed": [7, 8]}},
        ]}, SPEC)
    incast = [t for t in spec.tasks if t.group == "incast"]
    assert len(incast) == 4
    assert {(t.params["senders"], t.params["topology"]) for t in incast} == {
        (4, "leaf-spine-3x3"), (15, "leaf-spine-4x4")}
    assert all(t.argv[1] == "sim" for t in incast)
    fail = [t for t in spec.tasks if t.group == "fail"]
    assert len(fail) == 2 and spec.modes == {"sim", "run"}
    argv = list(fail[0].argv)
    assert argv[:3] == ["cellfabric", "run", "dual-homed"]
    # a list repeats the flag, true is a bare flag, false is left out
    assert argv.count("--fail") == 2 and "--pcap" in argv
    assert "--pcap" not in incast[0].argv


def test_task_ids_are_stable_and_change_with_the_command():
    doc = {"axes": {"spray": ["ecmp"], "seed": [1]}, "options": {"topology": "leaf-spine"}}
    a = parse_spec(doc, SPEC).tasks[0].id
    assert parse_spec(doc, SPEC).tasks[0].id == a
    doc["options"]["size"] = 99
    assert parse_spec(doc, SPEC).tasks[0].id != a


@pytest.mark.parametrize("doc, where", [
    ({"axes": {"spray": "ecmp"}}, "axes.spray: expected a non-empty list"),
    ({"axes": {"spray": []}}, "axes.spray: expected a non-empty list"),
    ({"axes": {"seed": [1, 1]}}, "axes.seed: a value appears twice"),
    ({"mode": "emulate", "axes": {"seed": [1]}}, "mode: expected one of sim, run"),
    ({"axis": {"seed": [1]}}, "axis: unknown field"),
    ({"options": {"results": "x"}, "axes": {"seed": [1]}}, "options.results: the sweep gives"),
    ({"options": {"Size": 1}, "axes": {"seed": [1]}}, "options: an option name"),
    ({"groups": [{"name": "a", "axes": {"seed": [1]}}, {"name": "a", "axes": {"seed": [2]}}]},
     "groups[1].name: expected a unique name"),
    ({"groups": [{"name": "a"}]}, "groups[0]: a group needs 'axes' or 'tasks'"),
    ({"axes": {"seed": [1]}, "plots": [{"x": "load"}]}, "plots[0]: expected a mapping with x"),
    ({"axes": {"seed": [{"a": {"b": 1}}]}}, "axes.seed[0].a: expected a value or a list"),
])
def test_bad_specs_get_one_line_naming_the_field(doc, where):
    with pytest.raises(SpecError) as err:
        parse_spec(doc, SPEC)
    msg = str(err.value)
    assert msg.startswith("exp.yaml: ") and where in msg and "\n" not in msg


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("axes:\n  spray: [ecmp, spray\n")
    with pytest.raises(SpecError, match=r"bad\.yaml:\d+:\d+: not valid YAML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")


def test_shipped_headline_spec_expands():
    root = Path(__file__).resolve().parents[2]
    spec = load_spec(root / "experiments" / "headline.yaml")
    assert spec.name == "headline"
    assert {t.group for t in spec.tasks} >= {"utilization", "incast"}
    assert all(t.argv[:2] == ("cellfabric", "sim") for t in spec.tasks)
    assert len({t.params.get("seed") for t in spec.tasks}) >= 2
