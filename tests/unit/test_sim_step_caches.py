"""What a multi-step run works out once instead of at every step or transfer (per-step
pair counts, the fabric's longest host path, each step's duration) gives what working it
out each time gives, and follows a change of its input."""

from __future__ import annotations

from pathlib import Path

from cellfabric.core.hostmetrics import step_durations
from cellfabric.core.hostplan import nvlink_flows
from cellfabric.core.report import RunMetrics
from cellfabric.core.workloads import Step, Transfer
from cellfabric.sim.hostsetup import max_host_hops
from topologies.model import load_topology

TOPO_DIR = Path(__file__).resolve().parents[2] / "topologies"


def test_flows_between_a_pair_are_counted_per_step() -> None:
    a = Step((Transfer("h1", "h2", 10, 1), Transfer("h1", "h2", 10, 1, channel=1),
              Transfer("h2", "h1", 10, 1)))
    b = Step((Transfer("h1", "h2", 10, 1),))
    assert nvlink_flows(a, a.transfers[0]) == 2
    assert nvlink_flows(a, a.transfers[2]) == 1
    assert nvlink_flows(b, b.transfers[0]) == 1  # another step: its own count
    assert nvlink_flows(a, Transfer("h3", "h4", 1, 1)) == 1  # none: at least one
    for _ in range(100):  # many steps later (the kept counts are bounded)
        assert nvlink_flows(Step((Transfer("h5", "h6", 1, 1),) * 3),
                            Transfer("h5", "h6", 1, 1)) == 3
    assert nvlink_flows(a, a.transfers[0]) == 2


def test_longest_host_path_follows_an_added_link() -> None:
    topo = load_topology(TOPO_DIR / "leaf-spine.yaml")
    assert max_host_hops(topo) == 4  # host, leaf, spine, leaf, host
    assert max_host_hops(topo) == 4
    leaves = [s for s, sw in topo.switches.items() if sw.role == "leaf"]
    lk = topo.links[0]
    for i, a in enumerate(leaves):  # every leaf pair linked directly: one switch fewer
        for j, b in enumerate(leaves[i + 1:]):
            topo.links.append(type(lk)(a, b, 90 + i + j, 80 + i + j, lk.queue))
    assert max_host_hops(topo) == 3


def test_step_durations_are_each_steps_slowest_message() -> None:
    m = RunMetrics(run={})
    m.messages = [{"step": 1, "fct_s": 3.0, "ideal_s": 1.0},
                  {"step": 0, "fct_s": 2.0, "ideal_s": 0.5},
                  {"step": 1, "fct_s": 5.0, "ideal_s": 2.0},
                  {"step": 2, "fct_s": None, "ideal_s": 1.5},
                  {"step": 2, "fct_s": 1.0, "ideal_s": 1.0}]
    steps = step_durations(m, [{"step": 0}, {"step": 1}, {"step": 2}, {"step": 3}])
    assert [(s["duration_s"], s["ideal_s"]) for s in steps] == [
        (2.0, 0.5), (5.0, 2.0), (None, 1.5), (None, None)]
