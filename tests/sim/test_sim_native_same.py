"""The simulator on p4sim's native data plane and on its Python path: the same metrics.json for
the same seed (wall-clock fields aside), on runs that exercise what differs between the two:
INT on every hop and ECN marking from the seeded random() (HPCC, DCQCN), queues that build,
spraying and ECMP hashing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

RUNS = {
    "hpcc-spray": ["leaf-spine", "--workload", "permutation", "--spray", "spray", "--cc", "hpcc",
                   "--size", "131072", "--count", "1", "--link-rate", "100G", "--seed", "3"],
    "dcqcn-incast-ecmp": ["leaf-spine", "--workload", "incast", "--spray", "ecmp", "--cc",
                          "dcqcn", "--size", "65536", "--count", "1", "--link-rate", "100G",
                          "--seed", "4"],
}


def _metrics(results: Path, args: list[str]) -> dict:
    assert sim_main([*args, "--quiet", "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    wall = data["run"].pop("wall_clock")
    data["paths"] = wall["dataplane"]
    return data


@pytest.mark.parametrize("name", sorted(RUNS))
def test_native_and_python_paths_give_one_metrics_json(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P4SIM_DATAPLANE", "native")
    native = _metrics(tmp_path / "native", RUNS[name])
    monkeypatch.setenv("P4SIM_DATAPLANE", "python")
    python = _metrics(tmp_path / "python", RUNS[name])
    switches = sum(native["paths"].values())
    assert native.pop("paths") == {"native": switches}  # it did run natively
    assert python.pop("paths") == {"python": switches}
    assert native == python
    summary = native["summary"]
    assert summary["messages_completed"] == summary["messages_total"] > 0
