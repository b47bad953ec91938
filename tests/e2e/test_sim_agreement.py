"""The simulator against the emulation, each run here side by side at the emulation's own
settings (the topology file's packet rates and depths: `cellfabric sim --link-rate topology`):
the same workloads complete the same messages, and the median message slowdown agrees within
15%. (The emulation's host and switch processes add scheduling latency of their own that the
simulator, with zero processing time, does not have; a run the machine could not keep up
with is skipped, as the runner marks it invalid.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from topologies.run_cli import run_main
from topologies.sim.cli import sim_main

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]

CASES = {
    "permutation": ["leaf-spine", "--workload", "permutation", "--size", "65536"],
    # Messages long enough (6 s at the receiver's share) that the emulation's senders, started
    # one process after another, still overlap for nearly all of it.
    "incast-8:1": ["leaf-spine-3x3", "--workload", "incast", "--senders", "8",
                   "--size", "131072", "--count", "1"],
    "allreduce": ["leaf-spine", "--workload", "allreduce"],
}


def _summary(results: Path) -> dict:
    (run_dir,) = [p for p in results.iterdir() if (p / "metrics.json").exists()]
    return json.loads((run_dir / "metrics.json").read_text())["summary"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_sim_agrees_with_emulation(tmp_path: Path, case: str) -> None:
    args = CASES[case]
    rc = run_main([*args, "--target", "embedded", "--results", str(tmp_path / "run")])
    emu = _summary(tmp_path / "run")
    if rc == 3 or not emu["valid"]:
        pytest.skip("the machine could not keep up with the emulation's rates")
    assert rc == 0
    assert sim_main([*args, "--link-rate", "topology", "--quiet",
                     "--results", str(tmp_path / "sim")]) == 0
    sim = _summary(tmp_path / "sim")
    assert sim["messages_total"] == emu["messages_total"]
    assert sim["messages_completed"] == emu["messages_completed"] == emu["messages_total"]
    assert sim["slowdown_p50"] == pytest.approx(emu["slowdown_p50"], rel=0.15), (
        f"{case}: sim {sim['slowdown_p50']:.3f} vs emulation {emu['slowdown_p50']:.3f}")
