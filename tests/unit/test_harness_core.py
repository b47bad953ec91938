"""The harness's shared core: the simulator stands without the emulation, one sampler, one
hop search, the queue plan each target applies, and the stages every driver goes through."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cellfabric.core.experiment import run_experiment
from cellfabric.core.sampler import FabricSamples
from cellfabric.emulation.admin import SwitchAdmin
from controlplane.fabric_plan import FEEDBACK_PRIORITY, plan_fabric, queue_plan
from topologies.catalog import resolve_topology


def test_simulator_driver_loads_no_mininet() -> None:
    """`cellfabric sim` needs no Mininet (a Debian package, not a pip dependency): importing
    the simulator and running its command-line entry leaves no mininet module loaded."""
    code = ("import sys; import cellfabric.sim.run, cellfabric.sim.cli, cellfabric.sweep.task; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'mininet' "
            "or m.startswith('cellfabric.emulation')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_sampler_link_rates_per_direction() -> None:
    topo = resolve_topology("leaf-spine")
    lk = next(lk for lk in topo.links if lk.a in topo.switches and lk.b in topo.switches)
    s = FabricSamples()
    s.add_tx(0.0, {(lk.a, lk.a_port): 10, (lk.b, lk.b_port): 0})
    s.add_tx(0.5, {(lk.a, lk.a_port): 60, (lk.b, lk.b_port): 5})
    s.add_tx(1.5, {(lk.a, lk.a_port): 160, (lk.b, lk.b_port): 5})
    rows = s.link_samples(topo)[lk.name]["samples"]
    assert rows == [[0.5, 100.0, 10.0], [1.5, 100.0, 0.0]]
    s.add_depth(0.5, {(lk.a, lk.a_port): 3})
    assert s.queue_samples() == {f"{lk.a}:{lk.a_port}": [[0.5, 3]]}


def test_a_port_first_read_later_starts_its_series_then_and_peaks_count_only_depths() -> None:
    # the emulation's monitor may miss a switch's read: a port can first appear at any sample
    s = FabricSamples()
    s.add_depth(0.0, {("s1", 1): 0, ("s1", 2): 4})
    s.add_depth(0.5, {("s2", 1): 2, ("s1", 1): 0, ("s1", 2): 1})
    s.add_depth(1.0, {("s1", 1): 6})
    assert list(s.depth) == [("s1", 1), ("s1", 2), ("s2", 1)]  # first-seen order
    assert s.depth[("s2", 1)] == [(0.5, 2)]
    assert s.depth[("s1", 1)] == [(0.0, 0), (0.5, 0), (1.0, 6)]
    assert s.window_peak == {("s1", 2): 4, ("s2", 1): 2, ("s1", 1): 6}  # no empty queue
    s.add_tx(0.0, {("s1", 1): 3})
    s.add_tx(0.5, {("s1", 2): 1, ("s1", 1): 5})
    assert s.tx == {("s1", 1): [(0.0, 3), (0.5, 5)], ("s1", 2): [(0.5, 1)]}
    s.add_tx(1.0, {("s1", 1): 6, ("s3", 1): 9})  # as many ports as before, one of them new
    assert s.tx[("s3", 1)] == [(1.0, 9)] and s.tx[("s1", 2)] == [(0.5, 1)]


def test_host_side_of_a_link_reads_zero() -> None:
    topo = resolve_topology("leaf-spine")
    lk = next(lk for lk in topo.links if lk.a in topo.hosts or lk.b in topo.hosts)
    sw, port = (lk.b, lk.b_port) if lk.a in topo.hosts else (lk.a, lk.a_port)
    s = FabricSamples()
    s.add_tx(0.0, {(sw, port): 0})
    s.add_tx(1.0, {(sw, port): 7})
    (row,) = s.link_samples(topo)[lk.name]["samples"]
    assert sorted(row[1:]) == [0.0, 7.0]


def test_distances_never_cross_a_host_and_skip_down_links() -> None:
    topo = resolve_topology("fat-tree")
    hosts = list(topo.hosts)
    dist = topo.distances(hosts[0])
    assert dist[hosts[1]] == 2  # same edge switch
    assert dist[hosts[-1]] == 6  # across the core: host-edge-agg-core-agg-edge-host
    assert max(dist[h] for h in hosts) == 6
    # take every link of the first host's edge switch but its own: the others are cut off
    edge = topo.hosts[hosts[0]].leaves[0]
    down = {frozenset((lk.a, lk.b)) for lk in topo.links_of(edge) if hosts[0] not in (lk.a, lk.b)}
    assert hosts[-1] not in topo.distances(hosts[0], down)


def test_queue_plan_per_target() -> None:
    """The controller plans each port once; p4sim shares the line between its queues, BMv2
    paces data and feedback each at its own rate."""
    topo = resolve_topology("leaf-spine")
    plans = plan_fabric(topo, set())
    q = next(iter(plans["l1"].queues.values()))
    assert q.line_pps == topo.links_of("l1")[0].queue.rate_pps
    sent: dict[str, list[str]] = {}
    for target in ("embedded", "bmv2"):
        admin = SwitchAdmin("l1", target, 1)
        admin.run = lambda lines, t=target: sent.setdefault(t, lines)  # type: ignore[method-assign]
        admin.apply_queue(q, priorities=2)
    assert sent["embedded"] == [f"set_queue_rate {q.line_pps} {q.port}",
                                f"set_port_rate {q.line_pps} {q.port}",
                                f"set_queue_depth {q.depth} {q.port}"]
    bmv2 = sent["bmv2"]
    assert bmv2[-1] == f"set_queue_depth {q.depth} {q.port}"
    assert {line.split()[1] for line in bmv2[:-1]} == {str(q.data_pps), str(q.feedback_pps)}
    assert q.feedback_pps == q.line_pps and q.data_pps < q.line_pps
    assert queue_plan(1, 0, 64).data_pps == 0 and FEEDBACK_PRIORITY == 1


class _Driver:
    def __init__(self, fail_at: str | None = None, stop_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.fail_at = fail_at
        self.stop_after = stop_after

    def _do(self, what: str) -> None:
        self.calls.append(what)
        if what == self.fail_at:
            raise RuntimeError(what)

    def bring_up(self) -> None:
        self._do("bring_up")

    def start_workload(self) -> None:
        self._do("start")

    def run_step(self, index: int) -> bool:
        self._do(f"step{index}")
        return self.stop_after is None or index < self.stop_after

    def finish_workload(self) -> None:
        self._do("finish")

    def collect(self) -> str:  # type: ignore[override]
        self._do("collect")
        return "metrics"

    def tear_down(self) -> None:
        self._do("tear_down")


def test_run_experiment_stages_in_order() -> None:
    d = _Driver()
    assert run_experiment(d, 3) == "metrics"  # type: ignore[arg-type]
    assert d.calls == ["bring_up", "start", "step0", "step1", "step2", "finish", "collect",
                       "tear_down"]
    early = _Driver(stop_after=0)
    run_experiment(early, 3)  # type: ignore[arg-type]
    assert early.calls == ["bring_up", "start", "step0", "finish", "collect", "tear_down"]


def test_run_experiment_tears_down_after_a_failed_step() -> None:
    d = _Driver(fail_at="step1")
    with pytest.raises(RuntimeError, match="step1"):
        run_experiment(d, 3)  # type: ignore[arg-type]
    assert d.calls == ["bring_up", "start", "step0", "step1", "finish", "tear_down"]
