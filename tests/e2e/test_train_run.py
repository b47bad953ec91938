"""A trace of collectives through the emulated fabric (`cellfabric run`): concurrent calls
share steps, every message is delivered, and metrics.json has the iteration section."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.run_cli import run_main

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]


def test_run_delivers_a_trace_and_times_it(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([
        {"op": "send", "size": 20_000, "group": [0, 2]},
        {"op": "send", "size": 20_000, "group": [1, 3], "after": []},
        {"op": "all-reduce", "size": 40_000, "group": [0, 1, 2, 3], "after": [0, 1]},
    ]))
    assert run_main(["leaf-spine", "--workload", f"trace:{trace}",
                     "--results", str(tmp_path / "results")]) == 0
    (run_dir,) = [p for p in (tmp_path / "results").iterdir() if (p / "metrics.json").exists()]
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] > 0
    msgs = data["messages"]
    # both sends in step 0; then the ring's 6 steps of one hop per rank, 10000 bytes each
    assert {(m["src"], m["dst"]) for m in msgs if m["step"] == 0} == {("h1", "h3"),
                                                                      ("h2", "h4")}
    assert sum(m["size"] for m in msgs) == 2 * 20_000 + 2 * 3 * 40_000
    it = data["iteration"]
    (send0, send1, ring) = it["collectives"]
    assert (send0["steps"], ring["first_step"], ring["steps"]) == (1, 1, 6)
    durations = {st["step"]: st["duration_s"] for st in data["steps"]}
    assert send0["time_s"] == pytest.approx(durations[0]) == send1["time_s"]
    assert ring["time_s"] == pytest.approx(sum(durations[k] for k in range(1, 7)))
    assert it["communication_time_s"] == pytest.approx(sum(durations.values()))
