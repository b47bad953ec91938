"""A run that outlasts twice the time its sampling interval was planned for keeps every other
sample and samples at twice the interval from then on: its series stay uniform and bounded,
each sample kept is the one an unthinned run took at that time, and nothing else of the run
moves (the dynamic channel scheduler reads every sample, thinned or not)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from cellfabric.sim import run as simrun
from cellfabric.sim.cli import sim_main

# a 14-step ring: latency-bound steps, far longer than its ideal time at line rate (the
# interval is at its 1 us floor, so the planned interval is the same in both runs)
ARGS = ["rail-2x4", "--workload", "allreduce-ring", "--size", "16384", "--spray", "ecmp",
        "--cc", "none", "--channel-policy", "dynamic", "--quiet"]


def _run(tmp: Path, per_run: int, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(simrun, "SAMPLES_PER_RUN", per_run)
    assert sim_main([*ARGS, "--results", str(tmp)]) == 0
    (run_dir,) = list(tmp.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_long_run_thins_its_samples_and_keeps_the_rest_of_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _run(tmp_path / "full", 10_000, monkeypatch)  # never thinned
    thin = _run(tmp_path / "thin", 10, monkeypatch)  # thinned at 20 samples
    taken = len(next(iter(full["queues"].values())))
    assert taken > 40  # long enough to be thinned at least twice
    for key, rows in thin["queues"].items():
        assert 10 <= len(rows) < 20, key
        times = [t for t, _ in rows]
        steps = {round(b - a, 12) for a, b in itertools.pairwise(times)}
        assert len(steps) == 1 and steps.pop() >= 4e-6  # uniform, at 4x the 1 us at least
        by_time = dict(map(tuple, full["queues"][key]))
        assert all(by_time[t] == d for t, d in rows), key  # the unthinned run's samples
    for name, link in thin["links"].items():
        assert len(link["samples"]) < 20, name
    # the same run otherwise: messages, flows, the scheduler's moves, the summary's figures
    for section in ("messages", "flows", "steps", "reorder", "drops", "link_load"):
        assert thin[section] == full[section], section
    assert thin["run"]["channel_scheduler"] == full["run"]["channel_scheduler"]
    assert thin["summary"] == full["summary"]
    assert thin["run"]["sim"]["virtual_time_s"] == full["run"]["sim"]["virtual_time_s"]


def test_the_window_peak_counts_every_sample_since_its_start_thinned_or_not() -> None:
    from cellfabric.core.sampler import FabricSamples

    s = FabricSamples()
    port = ("s1", 1)
    for i, depth in enumerate([0, 7, 0, 0, 3, 1]):
        s.add_tx(i * 1e-6, {port: 10 * i})
        s.add_depth(i * 1e-6, {port: depth})
    assert s.window_peak == {port: 7}
    s.thin()  # the sample of depth 7 (at 1 us) is dropped from the series...
    assert s.depth[port] == [(0.0, 0), (2 * 1e-6, 0), (4 * 1e-6, 3)]
    assert s.times == [0.0, 2 * 1e-6, 4 * 1e-6]
    assert [t for t, _ in s.tx[port]] == s.times
    assert s.window_peak == {port: 7}  # ...not from what the scheduler sees
    s.open_window(5 * 1e-6)  # a window opened at the latest sample's time includes it
    assert s.window_peak == {port: 1}
    s.open_window(5.5e-6)
    assert s.window_peak == {}
    s.add_depth(6e-6, {port: 2})
    assert s.window_peak == {port: 2}
