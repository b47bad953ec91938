"""A collective workload on real simple_switch_grpc (`cellfabric run --target bmv2`): the
double binary tree's every message delivered, level by level, as on p4sim.

Needs root (Mininet), Mininet, and the real toolchain on PATH (`make test-toolchain`)."""

from __future__ import annotations

import json
from pathlib import Path

from bmv2_under_mininet import NEEDS  # skips this module without Mininet

pytestmark = NEEDS

from cellfabric.collectives import CollectiveSpec, build  # noqa: E402
from cellfabric.run_cli import run_main  # noqa: E402


def test_tree_allreduce_on_real_bmv2(tmp_path: Path) -> None:
    size = 16384
    assert run_main(["leaf-spine", "--target", "bmv2", "--workload", "allreduce-tree",
                     "--size", str(size), "--channels", "2", "--results", str(tmp_path)]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "metrics.json").exists()]
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["run"]["target"] == "bmv2"
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] > 0
    schedule = build("allreduce-tree", CollectiveSpec(4, size, 2))
    hosts = ["h1", "h2", "h3", "h4"]
    msgs = data["messages"]
    # every rank's half goes up and comes back down each tree: 2(n-1) x size in all
    assert sum(m["size"] for m in msgs) == schedule.bytes_sent == 2 * 3 * size
    for k, level in enumerate(schedule.levels()):
        assert {(m["src"], m["dst"]) for m in msgs if m["step"] == k} == {
            (hosts[x.src], hosts[x.dst]) for x in level}


def test_topology_policy_paths_hold_on_real_bmv2(tmp_path: Path) -> None:
    """The scheduler's path model is BMv2's ECMP choice: under `--channel-policy topology`
    each leaf's two cross-leaf sends of a step go up its two spine links, one each, so every
    uplink carries one send's cells per step (two on one uplink would read twice that)."""
    import math

    from topologies.catalog import resolve_topology

    size, channels, ranks = 40000, 2, 4
    code = run_main(["leaf-spine", "--target", "bmv2", "--workload", "allreduce-ring",
                     "--size", str(size), "--channels", str(channels), "--spray", "ecmp",
                     "--channel-policy", "topology", "--results", str(tmp_path)])
    assert code in (0, 3)  # 3: delivered, flagged invalid as a measurement (a slow machine)
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "metrics.json").exists()]
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] > 0
    cell = resolve_topology("leaf-spine").fabric.cell_size
    one_send = 2 * (ranks - 1) * math.ceil((size // channels // ranks + 4) / cell)
    retransmitted = data["summary"]["retransmitted_cells"]
    up = [d["cells"] for rec in data["link_load"]["links"]
          for key, d in rec["directions"].items()
          if key.split("->")[0].startswith("l") and key.split("->")[1].startswith("s")]
    assert len(up) == 4
    assert all(one_send <= cells <= one_send + retransmitted for cells in up), up
