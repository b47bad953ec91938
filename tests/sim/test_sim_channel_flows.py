"""A collective's flows in the metrics: one record per step and channel (two channels between
one pair of hosts are two flows on two UDP source ports), and the flow figures count every
step, not only the last one's records."""

from __future__ import annotations

import json
import math
from pathlib import Path

from cellfabric.sim.cli import sim_main
from topologies.catalog import resolve_topology


def _metrics(tmp: Path, *args: str) -> dict:
    assert sim_main([*args, "--quiet", "--results", str(tmp)]) == 0
    (run_dir,) = list(tmp.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


def test_every_step_and_channel_has_its_own_flow_and_cells_count_all_steps(
        tmp_path: Path) -> None:
    size, channels = 40_000, 2
    m = _metrics(tmp_path, "leaf-spine", "--workload", "allreduce-ring", "--size", str(size),
                 "--channels", str(channels), "--cc", "none", "--spray", "ecmp")
    hosts = 4
    steps = 2 * (hosts - 1)  # a ring all-reduce: reduce-scatter then all-gather
    # every step: each of the 4 ring hops on each of the 2 channels
    assert len(m["flows"]) == steps * hosts * channels
    assert {(f["step"], f["channel"]) for f in m["flows"].values()} == {
        (s, c) for s in range(steps) for c in range(channels)}
    # each channel moves size/2 bytes, in 4 chunks of 5000 bytes: one cell count per send
    cell = resolve_topology("leaf-spine").fabric.cell_size
    per_send = math.ceil((size // channels // hosts + 4) / cell)
    s = m["summary"]
    assert s["retransmitted_cells"] == 0
    assert s["cells_sent"] == steps * hosts * channels * per_send
    assert "all 6 steps" in s["flow_figures_over"]
    assert 0.0 < s["goodput_fraction"] <= 1.0
