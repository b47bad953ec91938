"""Figures at data-center settings that the simulator's own configuration must not distort:
a flow alone on an idle fabric is its own ideal (the idle path's round trip, a hundred cell
times at 100 Gb/s, is part of the ideal, not a loss); cells that only wait in a queue are not
resent; DCQCN marks as its paper does at this link rate, not as the emulation's 64-cell
queues need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main
from cellfabric.sim.hostsetup import SimSettings, cell_frame_bytes, dcqcn_ecn_profile
from topologies.model import load_topology

ROOT = Path(__file__).resolve().parents[2]


def _summary(tmp_path: Path, args: list[str]) -> dict:
    assert sim_main([*args, "--quiet", "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())["summary"]


@pytest.mark.parametrize(("size", "count"), [(65536, 1), (262144, 2)])
def test_a_flow_alone_on_an_idle_fabric_is_its_own_ideal(tmp_path: Path, size: int,
                                                         count: int) -> None:
    assert sim_main(["leaf-spine", "--workload", "incast", "--senders", "1", "--cc", "none",
                     "--size", str(size), "--count", str(count), "--quiet",
                     "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["summary"]["cells_dropped"] == 0 and m["summary"]["retransmitted_cells"] == 0
    # 64 KiB is 64 cells, ~5.5 us at 100 Gb/s, against a ~8 us round trip: without the
    # idle path's latency in the ideal this flow read 40% of its bottleneck.
    assert 0.99 <= m["summary"]["goodput_fraction"] <= 1.0
    for msg in m["messages"]:
        assert 0.0 < msg["base_latency_s"] < msg["ideal_s"]
        assert 0.99 <= msg["ideal_s"] / msg["fct_s"] <= 1.0


def test_cells_queued_behind_an_incast_are_not_resent(tmp_path: Path) -> None:
    # 2:1 incast at 100 Gb/s: the receiver's port queues ~250 cells (~22 us, more than two
    # idle round trips) and nothing is dropped, so every retransmission would be spurious.
    assert sim_main(["leaf-spine", "--workload", "incast", "--senders", "2", "--cc", "none",
                     "--size", "262144", "--count", "1", "--quiet",
                     "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    s = json.loads((run_dir / "metrics.json").read_text())["summary"]
    assert s["cells_dropped"] == 0 and s["peak_queue_depth"] > 200
    assert s["retransmitted_cells"] == 0 and s["duplicate_cells"] == 0


def test_dcqcn_ecn_profile_is_the_papers_scaled_to_the_link_rate() -> None:
    topo = load_topology(ROOT / "topologies" / "leaf-spine.yaml")
    frame = cell_frame_bytes(topo, "dcqcn")
    at40 = dcqcn_ecn_profile(topo, SimSettings(40_000_000_000, 1000, 1 << 20, 1), "dcqcn")
    assert (at40.kmin, at40.kmax, at40.pmax) == (round(5000 / frame), round(200_000 / frame),
                                                 0.01)
    at100 = dcqcn_ecn_profile(topo, SimSettings(100_000_000_000, 1000, 1 << 20, 1), "dcqcn")
    assert (at100.kmin, at100.kmax) == (round(12_500 / frame), round(500_000 / frame))
    small = dcqcn_ecn_profile(topo, SimSettings(100_000_000_000, 1000, 100 * frame, 1), "dcqcn")
    assert small.kmax == 100 and small.kmin < small.kmax  # never beyond the buffer


def test_dcqcn_does_not_throttle_a_sprayed_permutation_at_100g(tmp_path: Path) -> None:
    # Spraying keeps queues at a few tens of cells. The emulation's profile (marks from 5
    # cells, every cell from 20) made DCQCN halve its rate on them: 68% of the bottleneck
    # where no rate control reached 96%.
    args = ["leaf-spine", "--workload", "permutation", "--spray", "spray"]
    none = _summary(tmp_path / "none", [*args, "--cc", "none"])
    dcqcn = _summary(tmp_path / "dcqcn", [*args, "--cc", "dcqcn"])
    assert none["cells_dropped"] == dcqcn["cells_dropped"] == 0
    assert dcqcn["goodput_fraction"] >= none["goodput_fraction"] - 0.02
