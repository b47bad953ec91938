"""The simulator against the emulation, each run here side by side at the emulation's own
settings (the topology file's packet rates and depths: `cellfabric sim --link-rate topology`):
the same workloads complete the same messages, and the median message slowdown agrees within
15%.

The simulator is deterministic; the emulation is not. Its host and switch processes share two
cores with everything else on the machine, and the scheduling latency they pick up only ever
makes messages slower, never faster. So the emulation is run up to `EMULATION_ATTEMPTS` times
and the attempt closest to the simulator is compared: a simulator that is wrong in either
direction fails every attempt, a machine that was busy during one attempt does not fail the
test. Every valid attempt must complete every message; an attempt the runner marks invalid
(the machine did not keep up with the configured rates) is not compared, and the test fails if
none is valid."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.run_cli import run_main
from cellfabric.sim.cli import sim_main

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]

TOLERANCE = 0.15
EMULATION_ATTEMPTS = 3

CASES = {
    "permutation": ["leaf-spine", "--workload", "permutation", "--size", "65536"],
    # Messages long enough (6 s at the receiver's share) that the emulation's senders, started
    # one process after another, still overlap for nearly all of it.
    "incast-8:1": ["leaf-spine-3x3", "--workload", "incast", "--senders", "8",
                   "--size", "131072", "--count", "1"],
    "allreduce": ["leaf-spine", "--workload", "allreduce"],
    # 2 servers x 4 GPUs on a rail fabric: every GPU to another server's, over both NIC ports
    "rail-permutation": ["rail-2x4", "--workload", "permutation", "--size", "65536"],
    # 2 servers x 2 GPUs, a ring all-reduce on 2 channels: each step two flows share every
    # NVLink (h1->h2, h3->h4) and two share each dual-port NIC on the way between servers
    "rail-allreduce-ring": ["rail:servers=2,gpus=2", "--workload", "allreduce-ring",
                            "--channels", "2"],
}


def _summary(results: Path) -> dict:
    (run_dir,) = [p for p in results.iterdir() if (p / "metrics.json").exists()]
    return json.loads((run_dir / "metrics.json").read_text())["summary"]


def _within(sim: float, emu: float) -> bool:
    return abs(sim - emu) <= TOLERANCE * emu


@pytest.mark.parametrize("case", sorted(CASES))
def test_sim_agrees_with_emulation(tmp_path: Path, case: str) -> None:
    args = CASES[case]
    assert sim_main([*args, "--link-rate", "topology", "--quiet",
                     "--results", str(tmp_path / "sim")]) == 0
    sim = _summary(tmp_path / "sim")
    assert sim["messages_completed"] == sim["messages_total"] > 0
    emulated: list[float] = []
    for attempt in range(EMULATION_ATTEMPTS):
        results = tmp_path / f"run{attempt}"
        rc = run_main([*args, "--target", "embedded", "--results", str(results)])
        emu = _summary(results)
        if rc == 3 or not emu["valid"]:
            continue  # the runner found the machine did not keep up with the configured rates
        assert rc == 0
        assert emu["messages_total"] == sim["messages_total"]
        assert emu["messages_completed"] == emu["messages_total"]
        emulated.append(emu["slowdown_p50"])
        if _within(sim["slowdown_p50"], emu["slowdown_p50"]):
            break
    assert emulated, f"{case}: no emulation attempt of {EMULATION_ATTEMPTS} was valid"
    closest = min(emulated, key=lambda e: abs(e - sim["slowdown_p50"]))
    assert _within(sim["slowdown_p50"], closest), (
        f"{case}: sim slowdown p50 {sim['slowdown_p50']:.3f}, emulation attempts "
        + ", ".join(f"{e:.3f}" for e in emulated))
