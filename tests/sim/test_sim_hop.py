"""The switch hop in C (cellfabric.sim.hop, p4sim/switch/native/hop.c) against the plain path
it replaces (SimSwitch.native_hop off: DataPlane.receive / poll, the Python traffic manager):
the same metrics.json for the same seed, wall-clock fields aside, on runs that exercise what
the C hop does: every spray mode, queues that build behind busy ports (strict priority for
ACKs and CNPs, round robin between ports), tail drops in a small buffer, INT added and
stripped (egress resizes frames: the serializer is settled), ECN from the seeded random(),
credit, a link failure mid-run, a rail fabric with NVLink, and switch-sink INT, whose report
clones hand the switch back to the Python path mid-run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cellfabric.sim.cli import sim_main
from cellfabric.sim.hop import HopSwitch
from cellfabric.sim.net import SimSwitch
from p4sim.switch.native import build

pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--count", "1", "--link-rate", "100G", "--quiet"]
LS = ["leaf-spine", "--workload", "permutation", "--size", "65536", "--cc", "none"]
RUNS: dict[str, list[str]] = {
    "spray": [*LS, "--spray", "spray", "--seed", "5"],
    "ecmp": [*LS, "--spray", "ecmp", "--seed", "5"],
    "round-robin": [*LS, "--spray", "round-robin", "--seed", "6"],
    "adaptive": [*LS, "--spray", "adaptive", "--seed", "7"],
    "hpcc": ["leaf-spine", "--workload", "permutation", "--spray", "spray", "--cc", "hpcc",
             "--size", "131072", "--seed", "3"],
    "dcqcn-incast": ["leaf-spine", "--workload", "incast", "--spray", "ecmp", "--cc", "dcqcn",
                     "--size", "65536", "--seed", "4"],
    "credit": ["leaf-spine", "--workload", "incast", "--spray", "spray", "--cc", "credit",
               "--size", "65536", "--seed", "4"],
    "tail-drop": ["leaf-spine", "--workload", "incast", "--spray", "spray", "--cc", "none",
                  "--size", "65536", "--seed", "4", "--buffer", "8KiB"],
    "fail": ["leaf-spine", "--workload", "all-to-all", "--spray", "ecmp", "--cc", "dcqcn",
             "--size", "32768", "--seed", "2", "--fail", "l1-s1@0.000004"],
    "rail-nvlink": ["rail-2x4", "--workload", "allreduce-ring", "--size", "65536", "--seed",
                    "2"],
}


def _metrics(results: Path, args: list[str]) -> dict:
    assert sim_main([*args, *BASE, "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    data["run"].pop("wall_clock")  # the only figures allowed to differ
    return data


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the switches that started on the C hop and the packets that left it."""
    seen = {"started": 0, "left": 0}
    start, leave = HopSwitch._hop_start, HopSwitch._hop_leave

    def counted_start(self: Any) -> bool:
        ok = start(self)
        seen["started"] += ok
        return ok

    def counted_leave(self: Any, *args: Any) -> None:
        seen["left"] += 1
        leave(self, *args)

    monkeypatch.setattr(HopSwitch, "_hop_start", counted_start)
    monkeypatch.setattr(HopSwitch, "_hop_leave", counted_leave)
    return seen


def _fast_and_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    args: list[str]) -> tuple[dict, dict, dict[str, int]]:
    seen = _counting(monkeypatch)
    fast = _metrics(tmp_path / "fast", args)
    monkeypatch.setattr(SimSwitch, "native_hop", False)
    plain = _metrics(tmp_path / "plain", args)
    return fast, plain, seen


@pytest.mark.parametrize("name", sorted(RUNS))
def test_c_hop_gives_the_plain_paths_metrics(name: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, seen = _fast_and_plain(tmp_path, monkeypatch, RUNS[name])
    assert fast == plain
    assert seen["started"] >= 4  # every switch ran on the C hop
    sim = fast["run"]["sim"]
    assert max(sim["peak_queue_packets"].values()) > 1  # queues did build
    if name == "tail-drop":  # the small buffer dropped cells (retransmitted after)
        assert sum(sw["queue_drops"] for sw in fast["drops"].values()) > 0
    summary = fast["summary"]
    assert summary["messages_completed"] == summary["messages_total"] > 0


def test_report_clones_hand_the_switch_back_to_python_with_the_same_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = (ROOT / "topologies" / "leaf-spine.yaml").read_text()
    assert "int: {mode: host-sink}" in topo
    sink = tmp_path / "ls-sink.yaml"
    sink.write_text(topo.replace("int: {mode: host-sink}",
                                 "int: {mode: switch-sink, collector: h4}"))
    args = [str(sink), "--workload", "permutation", "--spray", "spray", "--cc", "hpcc",
            "--size", "131072", "--seed", "3"]
    fast, plain, seen = _fast_and_plain(tmp_path, monkeypatch, args)
    assert seen["left"] >= 1  # an ingress clone left the C hop mid-run
    assert fast["telemetry"]  # and the collector got its reports
    assert fast == plain
