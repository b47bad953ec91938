"""A sweep over the offered load (`load` axis) of real `cellfabric sim` tasks: the flag reaches
every task, summary.csv gets a `load` and a `goodput` column holding each task's own figures,
and the goodput-vs-load plot is drawn without the SPEC asking for it."""

from __future__ import annotations

import csv
import json

import pytest
from sweep_helpers import run_sweep, write_spec

from cellfabric.sweep.spec import load_spec

pytestmark = pytest.mark.timeout(240)


def test_load_axis_gives_the_goodput_column_and_plot(tmp_path):
    spec = write_spec(tmp_path / "load.yaml", {
        "name": "load", "mode": "sim",
        "options": {"topology": "leaf-spine", "workload": "permutation", "cc": "none",
                    "size": 16384, "count": 4, "quiet": True},
        "axes": {"spray": ["ecmp", "spray"], "load": [0.2, 0.6]},
        "plots": [{"x": "spray", "y": "slowdown_p99", "series": "load"}],
    }, fake=False)
    tasks = load_spec(spec).tasks
    assert sorted(t.argv[t.argv.index("--load") + 1] for t in tasks) == \
        ["0.2", "0.2", "0.6", "0.6"]
    res = tmp_path / "out"
    proc = run_sweep(spec, res, "--workers", "2", timeout=200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(res / "summary.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 4 and {"load", "goodput", "offered_load"} <= set(table[0])
    for row in table:
        assert row["status"] == "ok"
        metrics = next((res / "tasks" / row["task"]).rglob("metrics.json"))
        summary = json.loads(metrics.read_text())["summary"]
        assert float(row["load"]) == summary["load"]
        assert float(row["goodput"]) == pytest.approx(summary["goodput"], rel=1e-12)
        assert 0 < float(row["goodput"]) <= float(row["offered_load"]) <= 1
    assert sorted(float(r["load"]) for r in table) == [0.2, 0.2, 0.6, 0.6]
    assert (res / "goodput_vs_load_per_spray.png").stat().st_size > 5000
    assert (res / "slowdown_p99_vs_spray_per_load.png").exists()  # the SPEC's own plot too
