"""A collective workload through the emulated fabric (`cellfabric run`): every message of
the schedule delivered, in the schedule's DAG levels, on real processes and veths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.collectives import CollectiveSpec, build
from cellfabric.run_cli import run_main

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]


def test_run_delivers_a_hierarchical_allreduce(tmp_path: Path) -> None:
    size = 20_000
    assert run_main(["leaf-spine", "--workload", "allreduce-hier", "--size", str(size),
                     "--channels", "2", "--results", str(tmp_path)]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "metrics.json").exists()]
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] > 0
    # leaf-spine: h1, h2 under l1 and h3, h4 under l2, the leaves standing in for servers
    hosts = ["h1", "h2", "h3", "h4"]
    schedule = build("allreduce-hier", CollectiveSpec(4, size, 2,
                                                      servers=("l1", "l1", "l2", "l2")))
    msgs = data["messages"]
    assert sum(m["size"] for m in msgs) == schedule.bytes_sent == 3 * 2 * size
    for k, level in enumerate(schedule.levels()):
        assert {(m["src"], m["dst"]) for m in msgs if m["step"] == k} == {
            (hosts[x.src], hosts[x.dst]) for x in level}
