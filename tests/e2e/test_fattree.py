"""Three-tier fabric, end to end: a k=4 fat-tree (20 switches, 16 hosts) in Mininet, every flow
of a permutation crossing the core. With per-switch hash salts every equal-cost path carries
its share at every tier; without them the aggregation tier repeats the edge tier's choice and
half of the core links carry nothing (the balance test fails on a program whose key is the
plain hash at every switch: see the module doc of tests/unit/test_tier_decorrelation.py).

Loads are the cells (RoCEv2 data packets) each link direction carried over the whole workload,
read from fabric.p4's port_tx_data counters. Budget: about 40 s per run on the embedded target
(bring-up of 20 switches included), 4 runs (more only if a run was slow); the bmv2 run only
where the real toolchain is on PATH."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.core.report import RunMetrics
from cellfabric.core.workloads import Step, Transfer, Workload
from cellfabric.emulation.runner import RunConfig, execute
from netlab.hosts import existing_links
from topologies.generators import generate
from topologies.model import Topology

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]

# Links at 30 packets/s: 20 switches and 16 hosts share two cores with whatever else runs;
# every figure is a ratio to the configured rates, so a slow rate changes no result.
SPEC = "fat-tree:k=4,rate=30,depth=64"
# Cells per flow, spread over 4 core paths each. A message is many cells, as in a fabric whose
# cells take well under a microsecond: here a cell takes 33 ms a hop, and a cross-pod path's
# loaded latency (about 25 cell times, queueing at 90% load on 5 hops, and credit's first
# round trip) is a fixed cost per message that a 48-cell message read as 1.3x.
CELLS = 192
# Real BMv2 costs more CPU per packet than p4sim and runs several threads per switch: with 20
# of them and 32 host processes on two cores, a switch waits for a CPU for tens of ms at a
# time. At 30 cells/s that is a cell time or more per hop, and sprayed cells delayed that much
# come back SACKed out of order (spurious resends, which the run reports as possible loss).
# Half the rate makes the same wait half as many cell times.
BMV2_SPEC = "fat-tree:k=4,rate=15,depth=64"
BALANCE = 0.6  # every link direction of a tier carries >= 60% of the tier's mean


def _topo(spray: str, cc: str, spec: str = SPEC) -> Topology:
    topo = generate(spec)
    topo.fabric.spray, topo.fabric.cc = spray, cc
    return topo


def _cross_pod(topo: Topology) -> Workload:
    """Host i sends to host i + 4 (the same position one pod on): every flow leaves its pod."""
    hosts = sorted(topo.hosts, key=lambda h: int(h[1:]))
    size = CELLS * topo.fabric.cell_size
    return Workload("cross-pod", (Step(tuple(Transfer(h, hosts[(i + 4) % len(hosts)], size, 1)
                                             for i, h in enumerate(hosts))),))


def _run(topo: Topology, tmp_path: Path, target: str = "embedded") -> RunMetrics:
    cfg = RunConfig(topo=topo, target=target, workload=_cross_pod(topo), cc=topo.fabric.cc,
                    run_dir=tmp_path / f"run-{secrets.token_hex(2)}", step_timeout_s=150,
                    progress=False)
    metrics, _ = execute(cfg)
    assert not {n for n in existing_links() if cfg.run_dir.name[-4:] in n}
    assert metrics.summary["messages_completed"] == 16, metrics.summary
    metrics.run["hosts_dir"] = str(cfg.run_dir / "hosts")
    return metrics


def _feedback_sent(m: RunMetrics) -> int:
    """Every packet the hosts sent that is not a cell: ACKs, NAKs, CNPs and INT reports from
    the receivers, credit probes from the senders (their own metrics files)."""
    total = 0
    for path in Path(m.run["hosts_dir"]).glob("step*-*.json"):
        rec = json.loads(path.read_text())
        if rec["role"] == "recv":
            total += rec["int_reports_sent"] + sum(
                f["acks_sent"] + f["naks_sent"] + f["cnps_sent"] for f in rec["flows"])
        elif rec["role"] == "send":
            total += rec.get("credit_probes", 0)
    return total


def _cells(m: RunMetrics, tier: str) -> dict[str, int]:
    return {k: d["cells"] for k, d in m.summary["link_accounting"]["directions"].items()
            if d["tier"] == tier}


def _assert_balanced(m: RunMetrics, tiers: tuple[str, ...]) -> None:
    for tier in tiers:
        cells = _cells(m, tier)
        assert len(cells) == 16, (tier, cells)
        mean = sum(cells.values()) / len(cells)
        assert mean >= 0.8 * CELLS, (tier, cells)  # the data crossed this tier
        low = {k: v for k, v in cells.items() if v < BALANCE * mean}
        assert not low, f"{tier}: below {BALANCE} x mean {mean:.1f}: {low}"


def _assert_honest(m: RunMetrics) -> None:
    acct = m.summary["link_accounting"]
    assert 0 < acct["max_offered"] <= 1.0, acct["max_offered"]
    assert 0 < m.summary["goodput_fraction"] <= 1.0


CORE = ("spine-core up", "spine-core down")
ALL_TIERS = ("leaf-spine up", *CORE, "leaf-spine down")


@pytest.fixture(scope="module", params=["hpcc", "credit"])
def spray_run(request, tmp_path_factory) -> RunMetrics:
    """One `spray` run per rate control, shared by the tests below."""
    return _run(_topo("spray", request.param), tmp_path_factory.mktemp(f"spray-{request.param}"))


def test_spray_uses_every_core_link_without_loss(spray_run: RunMetrics) -> None:
    m = spray_run
    assert not m.run["invalid_reasons"], m.run["invalid_reasons"]
    core = {**_cells(m, CORE[0]), **_cells(m, CORE[1])}
    assert len(core) == 32
    mean = sum(core.values()) / len(core)
    low = {k: v for k, v in core.items() if v < BALANCE * mean}
    assert not low, f"core directions below {BALANCE} x mean {mean:.1f}: {low}"
    assert m.summary["cells_dropped"] == 0, m.drops
    _assert_honest(m)


def test_senders_start_together(spray_run: RunMetrics) -> None:
    # The runner holds every sender at a start gate until all 32 hosts have their ports open:
    # without it, on a loaded machine, the 16 senders' first cells left up to 13 s apart (a
    # CI run) and the early flows ran against a fabric whose CPU the late ones' start-up took.
    starts = [f["flow_start_s"] for f in spray_run.flows.values()]
    assert len(starts) == 16 and None not in starts
    assert max(starts) - min(starts) < 2.0, sorted(starts)


def test_core_links_carry_only_cells_and_the_hosts_feedback(spray_run: RunMetrics) -> None:
    # Every flow crosses the core, so each packet a host sent crosses exactly one core uplink:
    # data as a cell, feedback as one of the "other" packets. Anything more is traffic nobody
    # sent on purpose (a host kernel's ICMP port unreachable for each cell and ACK it saw,
    # IPv6 chatter of the switch ports), which took a third of the core's non-data packets
    # and pushed the queues past their rate.
    up = [d for d in spray_run.summary["link_accounting"]["directions"].values()
          if d["tier"] == CORE[0]]
    other = sum(d["other"] for d in up)
    assert 0 < other <= _feedback_sent(spray_run), (other, _feedback_sent(spray_run))


def test_spray_permutation_finishes_near_ideal(spray_run: RunMetrics, tmp_path: Path) -> None:
    # Scheduling noise on a shared machine only ever slows an emulated run (36 processes on
    # two cores), never speeds it: a fabric that is really slow is slow in every attempt, so
    # up to two more runs are allowed and the fastest valid one is held to the bound.
    runs = [spray_run]
    while runs[-1].summary["slowdown_p50"] > 1.25 and len(runs) < 3:
        runs.append(_run(_topo("spray", spray_run.run["cc"]), tmp_path / str(len(runs))))
    valid = [m for m in runs if not m.run["invalid_reasons"]]
    assert valid, [m.run["invalid_reasons"] for m in runs]
    best = min(valid, key=lambda m: m.summary["slowdown_p50"])
    assert best.summary["slowdown_p50"] <= 1.25, [m.summary["slowdown_p50"] for m in runs]
    assert best.summary["cells_dropped"] == 0


@pytest.mark.parametrize("spray", ["round-robin", "adaptive"])
def test_round_robin_and_adaptive_balance_every_tier(tmp_path: Path, spray: str) -> None:
    m = _run(_topo(spray, "hpcc"), tmp_path)
    assert not m.run["invalid_reasons"], m.run["invalid_reasons"]
    _assert_balanced(m, ALL_TIERS)
    _assert_honest(m)


needs_bmv2 = pytest.mark.skipif(
    not (shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss")),
    reason="real BMv2 toolchain not on PATH")


@pytest.fixture(scope="module")
def bmv2_spray_run(tmp_path_factory: pytest.TempPathFactory) -> RunMetrics:
    return _run(_topo("spray", "hpcc", BMV2_SPEC), tmp_path_factory.mktemp("bmv2"),
                target="bmv2")


@needs_bmv2
def test_spray_balance_on_real_bmv2(bmv2_spray_run: RunMetrics) -> None:
    # The same program and entries on real BMv2 spread the same way at every tier, and no
    # link is reported above its rate.
    _assert_balanced(bmv2_spray_run, ALL_TIERS)
    _assert_honest(bmv2_spray_run)


@needs_bmv2
def test_spray_run_on_real_bmv2_is_valid(bmv2_spray_run: RunMetrics) -> None:
    assert not bmv2_spray_run.run["invalid_reasons"], bmv2_spray_run.run["invalid_reasons"]
