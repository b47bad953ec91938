"""A training iteration on real simple_switch_grpc (`cellfabric run --target bmv2`): every
message of its collectives delivered, and its iteration figures its steps' times.

Needs root (Mininet), Mininet, and the real toolchain on PATH (`make test-toolchain`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bmv2_under_mininet import NEEDS  # skips this module without Mininet

pytestmark = NEEDS

from cellfabric.run_cli import run_main  # noqa: E402


def test_one_iteration_on_real_bmv2(tmp_path: Path) -> None:
    # 1 layer of hidden 32: 12288 parameters, 6144 per TP rank of 2 bytes; activations
    # 8 x 32 x 2 = 512 bytes. TP pairs h1,h2 and h3,h4 (one leaf each), DP pairs across.
    model = "layers=1,hidden=32,seq=8,tp=2,dp=2"
    assert run_main(["leaf-spine", "--target", "bmv2", "--workload", f"train:{model}",
                     "--gpus-per-server", "2", "--results", str(tmp_path)]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "metrics.json").exists()]
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["run"]["target"] == "bmv2"
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] > 0
    it = data["iteration"]
    rows = it["collectives"]
    # 2 TP all-reduces forward and 2 backward per replica, then one DP bucket per TP rank
    assert [(r["group"], r["bytes"]) for r in rows] == (
        [([0, 1], 512), ([0, 1], 512), ([2, 3], 512), ([2, 3], 512)] * 2
        + [([0, 2], 12288), ([1, 3], 12288)])
    # a 2-rank ring all-reduce sends half the buffer each way, twice
    assert sum(m["size"] for m in data["messages"]) == 8 * 2 * 512 + 2 * 2 * 12288
    step_s = {st["step"]: st["duration_s"] for st in data["steps"]}
    assert it["communication_time_s"] == pytest.approx(sum(step_s.values()))
    for r in rows:
        assert r["time_s"] == pytest.approx(
            sum(step_s[k] for k in range(r["first_step"], r["first_step"] + r["steps"])))
