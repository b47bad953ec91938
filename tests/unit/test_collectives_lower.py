"""A collective schedule lowered to the harness's workload: one step per DAG level, sends as
transfers, and the collective workloads in the --workload registry."""

from __future__ import annotations

import pytest

from cellfabric.collectives import ALGORITHMS, CollectiveSpec, build
from cellfabric.collectives.lower import collective_time_s, collective_workload, lower
from cellfabric.core.workloads import (
    COLLECTIVE_WORKLOADS,
    WORKLOADS,
    WorkloadError,
    make_workload,
)

HOSTS = [f"h{i}" for i in range(1, 6)]


def test_every_algorithm_is_a_workload() -> None:
    assert set(COLLECTIVE_WORKLOADS) == {a.workload for a in ALGORITHMS.values()}
    assert {"allreduce-ring", "allreduce-tree", "allreduce-hier", "reduce-scatter",
            "all-gather", "all-to-all-coll", "broadcast"} <= set(COLLECTIVE_WORKLOADS)
    assert set(COLLECTIVE_WORKLOADS) < set(WORKLOADS)
    assert {"permutation", "incast", "all-to-all", "allreduce"} < set(WORKLOADS)


def test_a_ring_is_2_n_minus_1_steps_of_one_hop_each() -> None:
    w = make_workload("allreduce-ring", HOSTS, 1000, 1)
    assert len(w.steps) == 8
    for step in w.steps:
        assert sorted((t.src, t.dst) for t in step.transfers) == sorted(
            (HOSTS[i], HOSTS[(i + 1) % 5]) for i in range(5))
        assert {(t.size, t.count) for t in step.transfers} == {(200, 1)}
    assert w.total_bytes == 2 * 4 * 1000


def test_channels_between_one_pair_are_transfers_of_their_own() -> None:
    """Two rings in rank order send the same hops: per step, each pair sends one transfer
    per channel (its own queue pair and source port), never one merged transfer."""
    w = make_workload("allreduce-ring", HOSTS, 1000, 1, channels=2)
    assert len(w.steps) == 8
    for step in w.steps:
        assert sorted((t.src, t.dst, t.channel) for t in step.transfers) == sorted(
            (HOSTS[i], HOSTS[(i + 1) % 5], c) for i in range(5) for c in (0, 1))
        assert {(t.size, t.count) for t in step.transfers} == {(100, 1)}
    uneven = make_workload("allreduce-ring", HOSTS, 1003, 1, channels=2)
    sizes = {(t.size, t.count) for s in uneven.steps for t in s.transfers}
    assert sizes == {(101, 1), (100, 1)}  # 502 and 501 bytes per channel, in 5 chunks
    assert uneven.total_bytes == 2 * 4 * 1003


def test_empty_chunks_and_levels_are_left_out() -> None:
    """3 bytes over 5 ranks: two of the five segments are empty."""
    s = build("allreduce-ring", CollectiveSpec(5, 3))
    w = lower(s, HOSTS, "allreduce-ring")
    assert all(t.size > 0 for st in w.steps for t in st.transfers)
    assert w.total_bytes == s.bytes_sent == 2 * 4 * 3
    assert len(w.steps) == 8  # every level still has a non-empty segment moving
    one = lower(build("broadcast-chain", CollectiveSpec(5, 1, channels=4)), HOSTS, "broadcast")
    assert len(one.steps) == 4 and one.total_bytes == 4


def test_pipelined_broadcast_lowers_to_overlapping_steps() -> None:
    w = make_workload("broadcast", HOSTS, 1000, 1, chunk_size=250)
    assert len(w.steps) == 4 + 5 - 2
    assert [len(s.transfers) for s in w.steps] == [1, 2, 3, 4, 3, 2, 1]


def test_hierarchical_takes_servers_from_the_leaves() -> None:
    hosts = ["h1", "h2", "h3", "h4"]
    leaf = {"h1": "l1", "h2": "l1", "h3": "l2", "h4": "l2"}
    w = make_workload("allreduce-hier", hosts, 1000, 1, leaf_of=leaf)
    first, last = w.steps[0], w.steps[-1]
    assert sorted((t.src, t.dst) for t in first.transfers) == [("h2", "h1"), ("h4", "h3")]
    assert sorted((t.src, t.dst) for t in last.transfers) == [("h1", "h2"), ("h3", "h4")]
    cross = {(t.src, t.dst) for s in w.steps[1:-1] for t in s.transfers}
    assert cross == {("h1", "h3"), ("h3", "h1")}
    servers = {"h1": "a", "h2": "b", "h3": "a", "h4": "b"}
    w2 = make_workload("allreduce-hier", hosts, 1000, 1, leaf_of=leaf, server_of=servers)
    assert sorted((t.src, t.dst) for t in w2.steps[0].transfers) == [("h3", "h1"), ("h4", "h2")]


@pytest.mark.parametrize(("args", "needle"), [
    ({"name": "permutation", "channels": 2}, "--channels and --chunk-size apply to"),
    ({"name": "allreduce-ring", "channels": 0}, "--workload allreduce-ring: --channels 0"),
    ({"name": "allreduce-ring", "chunk_size": -1}, "chunk size -1"),
    ({"name": "all-gather", "hosts": ["h1"]}, "needs at least 2 hosts"),
    ({"name": "allreduce-hier-rail", "leaf_of": {"h1": "a", "h2": "a", "h3": "b"},
      "hosts": ["h1", "h2", "h3"]}, "same number of ranks"),
])
def test_bad_collective_workloads_are_one_line_errors(args: dict, needle: str) -> None:
    kw = {"hosts": HOSTS, "size": 1000, "count": 1} | args
    with pytest.raises(WorkloadError, match=needle) as err:
        make_workload(**kw)
    assert "\n" not in str(err.value)


def test_collective_time_sums_the_steps() -> None:
    assert collective_time_s({"steps": [{"sim_s": 1e-6}, {"sim_s": 2.5e-6}]}) == pytest.approx(3.5e-6)
    assert collective_time_s({"messages": [{"fct_s": 2e-6}, {"fct_s": 3e-6}]}) == 3e-6
    with pytest.raises(WorkloadError, match="do not time every step"):
        collective_time_s({"steps": [{"sim_s": 1e-6}, {"duration_s": None}]})


def test_lowering_checks_the_host_count() -> None:
    with pytest.raises(WorkloadError, match="3 hosts for a schedule of 5 ranks"):
        lower(build("allreduce-ring", CollectiveSpec(5, 100)), HOSTS[:3], "x")
    assert collective_workload("all-to-all-pairwise", HOSTS, 500).total_bytes == 5 * 4 * 100
