"""One training iteration through `cellfabric sim` on a 16-host fat-tree: every collective's
bytes delivered, and the iteration section's figures are its steps' times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

LINK_BPS = 100e9
# 2 layers of hidden 64: 98304 parameters, 24576 per rank (pp x tp = 4) of 2 bytes
MODEL = "layers=2,hidden=64,seq=16,tp=2,pp=2,dp=4"


def test_one_iteration_on_a_fat_tree(tmp_path: Path) -> None:
    assert sim_main(["fat-tree:k=4", "--workload", f"train:{MODEL}", "--gpus-per-server", "2",
                     "--quiet", "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    it = data["iteration"]
    s = data["summary"]
    assert s["messages_completed"] == s["messages_total"] > 0
    rows = it["collectives"]
    # TP: 2 all-reduces x 2 stages x 4 replicas, forward and backward; PP: 8 sends each way;
    # DP: one bucket per (stage, TP rank)
    ops = [r["op"] for r in rows]
    assert (ops.count("all-reduce"), ops.count("send"), len(rows)) == (36, 16, 52)
    assert sorted(r["bytes"] for r in rows if r["group_size"] == 4) == [49152] * 4
    step_s = {st["step"]: st["sim_s"] for st in data["steps"]}
    assert len(step_s) == it["steps"]
    assert it["communication_time_s"] == pytest.approx(sum(step_s.values()))
    for r in rows:
        own = [step_s[k] for k in range(r["first_step"], r["first_step"] + r["steps"])]
        assert r["time_s"] == pytest.approx(sum(own))
        assert 0 < r["busbw_gbps"] < LINK_BPS / 8 / 1e9
    # a 4-rank ring all-reduce: each rank sends 2 x 3/4 of the buffer, at most at line rate
    dp = [r for r in rows if r["label"].startswith("dp ")]
    assert all(r["time_s"] > 2 * 0.75 * 49152 * 8 / LINK_BPS for r in dp)
    slow = it["slowest_rank"]
    assert 0 < slow["time_s"] <= it["communication_time_s"]
    assert slow["host"] == f"h{slow['rank'] + 1}"
