"""Collective workloads through `cellfabric sim`: every byte the schedule sends is delivered,
step by step in the schedule's DAG levels, and the run's metrics give the collective's time
(and from it nccl-tests' bandwidths)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cellfabric.collectives import ALGORITHMS, CollectiveSpec, build
from cellfabric.collectives.lower import collective_time_s
from cellfabric.collectives.perf import PerfRow
from cellfabric.sim.cli import sim_main
from topologies.catalog import resolve_topology

LINK_BPS = 100e9


def _run(tmp: Path, topology: str, workload: str, size: int, *extra: str) -> dict:
    assert sim_main([topology, "--workload", workload, "--size", str(size), "--quiet",
                     "--results", str(tmp), *extra]) == 0
    (run_dir,) = list(tmp.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


def _schedule(topology: str, workload: str, size: int, channels: int, chunk: int | None):
    topo = resolve_topology(topology)
    hosts = sorted(topo.hosts, key=lambda h: int(re.sub(r"\D", "", h)))
    servers = tuple(topo.hosts[h].leaves[0] for h in hosts)
    (algo,) = [a for a in ALGORITHMS.values() if a.workload == workload]
    return hosts, build(algo.name, CollectiveSpec(len(hosts), size, channels, chunk,
                                                  servers=servers))


@pytest.mark.parametrize(("topology", "workload", "size", "channels", "chunk"), [
    ("fat-tree:k=4", "allreduce-tree", 100_003, 2, None),
    ("leaf-spine", "allreduce-hier", 100_000, 2, 8192),
    ("leaf-spine", "all-to-all-coll", 30_001, 1, None),
    ("leaf-spine", "reduce-scatter", 65_536, 3, 4096),
])
def test_sim_delivers_every_byte_of_the_schedule(tmp_path: Path, topology: str,
                                                 workload: str, size: int, channels: int,
                                                 chunk: int | None) -> None:
    extra = ["--channels", str(channels)] + (["--chunk-size", str(chunk)] if chunk else [])
    data = _run(tmp_path, topology, workload, size, *extra)
    hosts, schedule = _schedule(topology, workload, size, channels, chunk)
    s = data["summary"]
    assert s["messages_completed"] == s["messages_total"] > 0
    msgs = data["messages"]
    assert all(m["fct_s"] is not None for m in msgs)
    assert sum(m["size"] for m in msgs) == schedule.bytes_sent
    # step k of the run carries exactly the rank pairs of the schedule's level k
    levels = [lv for lv in schedule.levels() if any(x.nbytes for x in lv)]
    for k, level in enumerate(levels):
        want = {(hosts[x.src], hosts[x.dst]) for x in level if x.nbytes}
        assert {(m["src"], m["dst"]) for m in msgs if m["step"] == k} == want
    assert max(m["step"] for m in msgs) == len(levels) - 1
    time_s = collective_time_s(data)
    assert time_s == pytest.approx(sum(st["sim_s"] for st in data["steps"]))
    # no rank can send its bytes faster than its link's rate
    busiest = max(sum(x.nbytes for x in schedule.sends if x.src == r)
                  for r in range(schedule.nranks))
    assert time_s > busiest * 8 / LINK_BPS
    row = PerfRow(schedule.collective, schedule.algorithm, schedule.nranks, size, time_s)
    assert 0 < row.busbw < LINK_BPS / 8 / 1e9
