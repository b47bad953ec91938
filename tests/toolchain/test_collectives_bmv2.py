"""A collective workload on real simple_switch_grpc (`cellfabric run --target bmv2`): the
double binary tree's every message delivered, level by level, as on p4sim.

Needs root (Mininet), Mininet, and the real toolchain on PATH (`make test-toolchain`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not (shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss")),
                       reason="real BMv2 toolchain not on PATH"),
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
]
pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

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
