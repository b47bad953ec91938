"""Host-sink INT in the simulator: every INT cell a receiver takes becomes one Telemetry
Report, sent as a frame over the fabric to the collector host, whose collector decodes the
cell's per-hop stack (stamped in virtual time), as `cellfabric run`'s collector process does."""

from __future__ import annotations

import json
from pathlib import Path

from cellfabric.sim.cli import sim_main

ROOT = Path(__file__).resolve().parents[2]
INCAST = ["--workload", "incast", "--senders", "2", "--size", "65536", "--count", "1",
          "--cc", "none", "--quiet"]


def _run(tmp_path: Path, collector: str | None) -> dict:
    text = (ROOT / "topologies" / "leaf-spine.yaml").read_text()
    mode = "{mode: host-sink" + (f", collector: {collector}" if collector else "") + "}"
    topo = tmp_path / "leaf-spine.yaml"
    topo.write_text(text.replace("int: {mode: host-sink}", f"int: {mode}"))
    assert mode in topo.read_text()
    out = tmp_path / "runs"
    assert sim_main([str(topo), *INCAST, "--results", str(out)]) == 0
    (run_dir,) = list(out.iterdir())
    m = json.loads((run_dir / "metrics.json").read_text())
    m["records_file"] = run_dir / "hosts" / "int.jsonl"
    return m


def test_receivers_report_every_int_cell_to_the_collector_over_the_fabric(tmp_path) -> None:
    m = _run(tmp_path, "h3")
    s, t = m["summary"], m["telemetry"]
    assert s["cells_dropped"] == 0 and s["retransmitted_cells"] == 0
    cells = s["cells_sent"]  # each carries INT (host sink); none lost, none resent
    assert cells >= 2 * 64  # two senders' 64 KiB in 1 KiB cells
    assert t["reports"] == cells and t["malformed_reports"] == 0
    # across the spines every cell crosses leaf, spine, leaf: three hop records
    assert t["records"] == 3 * cells
    records = [json.loads(line) for line in m["records_file"].read_text().splitlines()]
    assert len(records) == 3 * cells
    assert all(0 < r["t"] <= m["run"]["sim"]["virtual_time_s"] for r in records)
    # the reports reached h3 over its link (h3 neither sends nor receives data here)
    into_h3 = [d for d in s["link_accounting"]["directions"].values()
               if d["link"].endswith("-h3") and d["queue"].startswith("l")]
    assert into_h3 and into_h3[0]["cells"] == 0 and into_h3[0]["other"] > 0


def test_without_a_collector_nothing_is_reported(tmp_path) -> None:
    m = _run(tmp_path, None)
    assert m["telemetry"] == {}
