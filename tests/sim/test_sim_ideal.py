"""The ideal a message is measured against: a flow alone on an idle fabric at data-center
settings is its own ideal (100% of the bottleneck, slowdown 1.0), whatever its size; the idle
path's round trip (a hundred cell times at 100 Gb/s) is part of the ideal, not a loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topologies.sim.cli import sim_main


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
