"""`cellfabric sim --load`: a higher offered load delivers a higher goodput, goodput never
exceeds what was offered (tests/unit/test_workload_load.py checks the arrival process and
that each message is timed from its arrival)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

pytestmark = pytest.mark.timeout(240)

BASE = ["leaf-spine", "--size", "65536", "--count", "12", "--spray", "spray", "--cc", "none",
        "--quiet"]


def _run(results: Path, load: float) -> dict:
    assert sim_main([*BASE, "--load", str(load), "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


def test_goodput_rises_with_offered_load_and_never_exceeds_it(tmp_path: Path) -> None:
    low, high = _run(tmp_path / "low", 0.2), _run(tmp_path / "high", 0.7)
    for doc, load in ((low, 0.2), (high, 0.7)):
        s = doc["summary"]
        assert s["messages_completed"] == s["messages_total"] == 48
        assert s["load"] == load and doc["run"]["load"] == load
        # what 12 Poisson arrivals per flow offered, within their noise of the configured
        assert abs(s["offered_load"] - load) < 0.35 * load
        assert 0 < s["goodput"] <= s["offered_load"] <= 1
        # timed against the message alone on its link: never faster than that
        assert s["slowdown_p50"] >= 1.0
    assert high["summary"]["goodput"] > 2 * low["summary"]["goodput"]
    # At 20% the fabric keeps up: nearly all of what was offered is delivered.
    assert low["summary"]["goodput"] > 0.85 * low["summary"]["offered_load"]

