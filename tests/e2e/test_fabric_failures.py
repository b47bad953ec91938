"""Failure injection at fabric scale: the three-tier fat-tree (k=4: 4 core, 8 aggregation, 8
edge switches, 16 hosts) loses a whole core switch, or one aggregation-core link, mid-transfer.
The controller re-plans every path around it; the hosts' transport resends the cells that were
in flight. Each test is one `cellfabric run`, with the --fail spec a user would type."""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.core.workloads import permutation
from cellfabric.emulation.runner import RunConfig, execute
from cellfabric.run_cli import parse_fail
from netlab.hosts import existing_links
from topologies.model import QueueSpec, load_topology

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]
ROOT = Path(__file__).resolve().parents[2]


def _run_with_failure(spec: str, tmp_path: Path, cc: str = "hpcc", name: str = "fat-tree"):
    topo = load_topology(ROOT / "topologies" / f"{name}.yaml")
    topo.fabric = replace(topo.fabric, cc=cc)
    # 50 packets/s links: 20 switches and 16 (or 32-port) hosts share two cores, and at the
    # file's 100 pps an edge switch falls behind its rate (the run is then rightly invalid).
    topo = replace(topo, links=[replace(lk, queue=QueueSpec(rate_pps=50, depth=lk.queue.depth))
                                for lk in topo.links])
    hosts = sorted(topo.hosts, key=lambda h: int(h[1:]))
    # permutation pairs hosts across pods, so every flow crosses the core
    # A run the machine could not keep up with (a switch served below its rate while
    # backlogged) says nothing about the fabric: it is run once more before the test fails.
    for _attempt in range(2):
        cfg = RunConfig(topo=topo, target="embedded",
                        workload=permutation(hosts, 32 * 1024, 2), cc=cc,
                        run_dir=tmp_path / f"run-{secrets.token_hex(2)}",
                        events=parse_fail(spec, topo), step_timeout_s=180, progress=False)
        metrics, _ = execute(cfg)
        assert not {n for n in existing_links() if cfg.run_dir.name[-4:] in n}
        if not metrics.run["invalid_reasons"]:
            break
    assert not metrics.run["invalid_reasons"], metrics.run["invalid_reasons"]
    return metrics


def test_core_switch_failure_reroutes_and_loses_no_message(tmp_path: Path) -> None:
    m = _run_with_failure("c1@0.5", tmp_path)
    assert m.summary["messages_completed"] == m.summary["messages_total"] == 32
    (failure,) = m.run["failures"]
    assert failure["what"] == "c1" and not failure["up"]
    assert sorted(failure["links"]) == ["a11-c1", "a21-c1", "a31-c1", "a41-c1"]
    assert failure["reroute_s"] is not None and failure["writes"] > 0
    rerouted = [e["event"] for e in m.run["events"] if "rerouted in" in e["event"]]
    assert rerouted and rerouted[0].startswith("link c1 (4 links) down: rerouted in ")
    # every aggregation switch that had a path through c1 was re-planned
    plan = next(e["event"] for e in m.run["events"] if e["event"].startswith("link a11-c1,"))
    assert all(f"{agg}: " in plan for agg in ("a11", "a21", "a31", "a41"))
    # the failure hit live traffic: cells through c1 were lost and resent
    assert sum(f["retransmits"] for f in m.flows.values()) > 0


def test_agg_core_link_failure_with_dual_homed_hosts_and_hpcc_loses_no_message(tmp_path: Path) -> None:
    m = _run_with_failure("a11-c1@0.5", tmp_path, cc="hpcc", name="fat-tree-dual")
    assert m.summary["messages_completed"] == m.summary["messages_total"] == 32
    (failure,) = m.run["failures"]
    assert failure["links"] == ["a11-c1"] and failure["reroute_s"] is not None
    assert failure["writes"] > 0  # a11 and c1 (at least) re-planned around the link
