"""`--workload trace:FILE`: a user's JSON list of collectives, sequential unless an entry
says what it waits for, and one-line errors naming the entry, field and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.collectives import verify
from cellfabric.core.workloads import WorkloadError, make_workload
from cellfabric.sim.cli import sim_main

HOSTS = [f"h{i}" for i in range(1, 7)]


def _trace(tmp: Path, entries: object) -> str:
    path = tmp / "trace.json"
    path.write_text(json.dumps(entries))
    return f"trace:{path}"


def test_a_trace_runs_in_order_unless_it_says_otherwise(tmp_path: Path) -> None:
    entries = [
        {"op": "all-reduce", "size": 6000, "group": [0, 1, 2], "algorithm": "allreduce-tree"},
        {"op": "all-reduce", "size": 6000, "group": [3, 4, 5], "after": []},
        {"op": "all-to-all", "size": 999, "group": [0, 1, 2, 3, 4, 5], "after": [0, 1]},
        {"op": "send", "size": 10, "group": [5, 0]},
        {"op": "broadcast", "size": 77, "group": [2, 3], "label": "last"},
    ]
    w = make_workload(_trace(tmp_path, {"collectives": entries}), HOSTS, 1, 1)
    assert [pc.phase for pc in w.calls] == [0, 0, 1, 2, 3]
    assert [pc.call.algorithm_name for pc in w.calls] == [
        "allreduce-tree", "allreduce-ring", "all-to-all-pairwise", "broadcast-chain",
        "broadcast-chain"]
    assert w.calls[4].call.label == "last"
    assert all(verify(s) == [] for s in w.schedules)
    # the send is one transfer from rank 5 to rank 0, the only one of its step
    send = w.calls[3]
    (t,) = w.steps[send.first_step].transfers
    assert (t.src, t.dst, t.size * t.count) == ("h6", "h1", 10)


@pytest.mark.parametrize(("entry", "needle"), [
    ({"op": "allreduce", "size": 8, "group": [0, 1]},
     "entry 1: op 'allreduce' is not one of all-reduce"),
    ({"op": "all-reduce", "size": 8, "group": [0, 6]},
     "entry 1: group rank 6 is out of range 0..5"),
    ({"op": "all-reduce", "size": 0, "group": [0, 1]}, "entry 1: size 0 is not positive"),
    ({"op": "all-reduce", "size": -5, "group": [0, 1]}, "entry 1: size -5 is not positive"),
    ({"op": "all-reduce", "size": "8", "group": [0, 1]}, "entry 1: size \"8\" is not an int"),
    ({"op": "all-reduce", "size": 8}, "entry 1: missing field 'group'"),
    ({"op": "all-reduce", "size": 8, "group": [0, 1], "after": [1]},
     "entry 1: after 1 is not an earlier entry (0..0)"),
    ({"op": "all-reduce", "size": 8, "group": [0, 1], "algorithm": "all-gather-ring"},
     "entry 1: algorithm 'all-gather-ring' does not compute all-reduce"),
    ({"op": "send", "size": 8, "group": [0, 1, 2]}, "entry 1: a send's group is [src, dst]"),
    ({"op": "all-reduce", "size": 8, "group": [1, 1]}, "needs at least 2 distinct ranks"),
    ({"op": "all-reduce", "size": 8, "group": "all"}, "group \"all\" is not a list"),
    ({"op": "all-reduce", "size": 8, "group": [0, 1], "when": 3}, "unknown field 'when'"),
])
def test_bad_trace_entries_are_one_line_errors(tmp_path: Path, entry: dict,
                                               needle: str) -> None:
    first = {"op": "all-reduce", "size": 8, "group": [0, 1]}
    with pytest.raises(WorkloadError) as err:
        make_workload(_trace(tmp_path, [first, entry]), HOSTS, 1, 1)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert str(tmp_path / "trace.json") in str(err.value)


@pytest.mark.parametrize(("text", "needle"), [
    ("[", "not JSON"), ("[]", "non-empty list"), ('{"ops": []}', "non-empty list")])
def test_unreadable_traces_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(WorkloadError, match=needle):
        make_workload(f"trace:{path}", HOSTS, 1, 1)
    with pytest.raises(WorkloadError, match="cannot read it"):
        make_workload(f"trace:{tmp_path / 'missing.json'}", HOSTS, 1, 1)


def test_the_cli_reports_a_bad_trace_in_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    workload = _trace(tmp_path, [{"op": "all-reduce", "size": 8, "group": [0, 99]}])
    assert sim_main(["leaf-spine", "--workload", workload, "--quiet",
                     "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cellfabric sim: error: ") and "group rank 99 is out of range" in err
    assert "\n" not in err and not (tmp_path / "results").exists()
