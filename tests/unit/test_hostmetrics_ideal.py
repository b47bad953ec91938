"""A message's ideal time on a rail fabric (2 servers x 2 GPUs: dual-port NICs at 100 packets
per second a port, NVLinks at 4x a NIC port), worked out by hand from the rates and sizes:
flows that share an NVLink split it, flows that share a dual-port NIC share both its lines,
and the ideal counts the cells less one at the fair share (the first cell leaves at 0).

Every host is given a line rate of 80 cells/s here (``line_rate``), so a 32 KiB message is
ceil((32768 + 4) / 1024) = 33 cells and its last cell leaves 32 slots after its first."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellfabric.core.hostmetrics import collect_host_metrics
from cellfabric.core.hostplan import HostPlan, StepPlan, plan_step
from cellfabric.core.report import RunMetrics
from cellfabric.core.workloads import Step, Transfer
from hosts.config import SenderConfig
from topologies.catalog import resolve_topology

SIZE = 32768  # 33 cells of 1024 B
RATE = 80.0  # cells/s a host sends at, alone
TOPO = resolve_topology("rail:servers=2,gpus=2")  # h1 h2 in one server, h3 h4 in the other


def _ideals(transfers: list[Transfer], serialized: bool = False) -> list[float]:
    plan = StepPlan(0, senders=[HostPlan(t.src, None, Path(f"/nonexistent/{n}"), transfer=t)
                                for n, t in enumerate(transfers)])  # type: ignore[arg-type]
    m = RunMetrics()
    collect_host_metrics(m, TOPO, [plan], read=lambda _p: {}, line_rate=lambda _t, _h: RATE,
                         serialized=serialized)
    return [msg["ideal_s"] for msg in m.messages]


def test_two_channels_on_one_nvlink_split_it() -> None:
    # 320 cells/s of NVLink for two flows: 160 each, 32 slots of 1/160 s
    ideals = _ideals([Transfer("h1", "h2", SIZE, 1, channel=0),
                      Transfer("h1", "h2", SIZE, 1, channel=1)])
    assert ideals == pytest.approx([0.2, 0.2])


def test_two_flows_on_a_dual_port_nic_go_at_their_own_pace() -> None:
    # two ports of 100 packets/s carry both at their own 80 cells/s: 32 / 80
    ideals = _ideals([Transfer("h2", "h3", SIZE, 1, channel=0),
                      Transfer("h2", "h3", SIZE, 1, channel=1)])
    assert ideals == pytest.approx([0.4, 0.4])


def test_three_flows_into_a_dual_port_nic_share_its_two_lines() -> None:
    # 200 packets/s of h3's two lines for three flows: 66.7 cells/s each, 32 x 3 / 200
    ideals = _ideals([Transfer("h1", "h3", SIZE, 1), Transfer("h2", "h3", SIZE, 1),
                      Transfer("h1", "h3", SIZE, 1, channel=1)])
    assert ideals == pytest.approx([0.48, 0.48, 0.48])


def test_serialized_lines_add_the_last_cells_own_time() -> None:
    # one flow alone on its NVLink (320 cells/s): 32 slots to the last cell's start, then
    # that cell takes its own 1/320 s on the line: 33 / 320
    assert _ideals([Transfer("h3", "h4", SIZE, 1)], serialized=True) == pytest.approx(
        [33 / 320])


def test_the_plan_splits_a_shared_nvlink_between_its_flows(tmp_path: Path) -> None:
    def rate_bps(transfers: list[Transfer]) -> float:
        plan = plan_step(TOPO, Step(tuple(transfers)), 0, tmp_path,
                         lambda h, i: f"{h}-eth{i}", "dcqcn", 1)
        cfg = plan.senders[0].config
        assert isinstance(cfg, SenderConfig)
        return cfg.rate_bps

    alone = rate_bps([Transfer("h1", "h2", SIZE, 1)])
    shared = rate_bps([Transfer("h1", "h2", SIZE, 1, channel=0),
                       Transfer("h1", "h2", SIZE, 1, channel=1),
                       Transfer("h2", "h1", SIZE, 1)])  # the other direction is its own
    assert shared == pytest.approx(alone / 2)
