"""The switch-to-switch fabric in C (cellfabric.sim.cfabric, p4sim/switch/native/fabric.c)
against the plain path (SimFabric.native_fabric off: net.Wire and SimSwitch's deadlines as
Python events, each hop one C call): byte-identical metrics.json, wall-clock fields aside,
for every scenario tests/sim/test_sim_hop.py runs (spray modes, queues, tail drops, INT, ECN,
credit, a link failure mid-run, NVLink) and for switch-sink INT, whose report clones hand a
switch back to the Python path mid-run. The engine's event count is part of the comparison:
C counts its events (stale deadlines included) the way the engine does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_sim_hop import BASE, ROOT, RUNS

from cellfabric.sim.cfabric import NativeFabric
from cellfabric.sim.cli import sim_main
from cellfabric.sim.hop import HopSwitch
from cellfabric.sim.net import SimFabric
from p4sim.switch.native import build

pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")


def _run(results: Path, args: list[str]) -> tuple[str, dict[str, Any]]:
    """metrics.json without its wall-clock section (as canonical text), and that section."""
    assert sim_main([*args, *BASE, "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    wall = data["run"].pop("wall_clock")  # the only figures allowed to differ
    return json.dumps(data, sort_keys=True), wall


def _c_events(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the events NativeFabric.run ran in C (and the calls)."""
    seen = [0, 0]
    run = NativeFabric.run

    def counted(self: NativeFabric, *args: Any) -> int:
        ran = run(self, *args)
        seen[0] += ran
        seen[1] += 1
        return ran

    monkeypatch.setattr(NativeFabric, "run", counted)
    return seen


def _on_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                args: list[str]) -> tuple[str, str, dict[str, Any], list[int]]:
    seen = _c_events(monkeypatch)
    fast, wall = _run(tmp_path / "c", args)
    monkeypatch.setattr(SimFabric, "native_fabric", False)
    plain, plain_wall = _run(tmp_path / "plain", args)
    assert plain_wall["c_fabric"] == "off: off"
    return fast, plain, wall, seen


@pytest.mark.parametrize("name", sorted(RUNS))
def test_c_fabric_gives_the_plain_paths_metrics(name: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, wall, seen = _on_and_off(tmp_path, monkeypatch, RUNS[name])
    assert wall["c_fabric"] == "on"
    events = json.loads(fast)["run"]["sim"]["events"]
    # the C fabric ran, and most of the run's events were its own
    assert seen[1] > 0 and seen[0] > events // 4, (seen, events)
    assert fast == plain


def test_report_clones_leave_the_c_fabric_with_the_same_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = (ROOT / "topologies" / "leaf-spine.yaml").read_text()
    sink = tmp_path / "ls-sink.yaml"
    sink.write_text(topo.replace("int: {mode: host-sink}",
                                 "int: {mode: switch-sink, collector: h4}"))
    args = [str(sink), "--workload", "permutation", "--spray", "spray", "--cc", "hpcc",
            "--size", "131072", "--seed", "3"]
    left = [0]
    leave = HopSwitch._hop_leave

    def counted_leave(self: Any, *a: Any) -> None:
        left[0] += self._fab is not None
        leave(self, *a)

    monkeypatch.setattr(HopSwitch, "_hop_leave", counted_leave)
    fast, plain, wall, seen = _on_and_off(tmp_path, monkeypatch, args)
    assert wall["c_fabric"] == "on" and seen[0] > 0
    assert left[0] >= 1  # a switch left the C hop while the C fabric ran
    assert json.loads(fast)["telemetry"]
    assert fast == plain


@pytest.mark.parametrize(("extra", "why"), [(["--link-rate", "topology"], "packet mode"),
                                             (["--trace-sample", "4"], "packet trace on")],
                         ids=["packet-mode", "trace"])
def test_runs_it_does_not_cover_say_so_and_run_the_plain_path(
        tmp_path: Path, extra: list[str], why: str) -> None:
    args = ["leaf-spine", "--workload", "permutation", "--size", "16384", "--cc", "none",
            "--count", "1", "--quiet", "--seed", "5", *extra, "--results", str(tmp_path)]
    assert sim_main(args) == 0
    (run_dir,) = list(tmp_path.iterdir())
    wall = json.loads((run_dir / "metrics.json").read_text())["run"]["wall_clock"]
    assert wall["c_fabric"].startswith(f"off: {why}")
