"""Workload plans: the traffic matrices have the properties their names promise."""

from __future__ import annotations

from collections import Counter

import pytest

from cellfabric.core.workloads import (
    WorkloadError,
    all_to_all,
    incast,
    make_workload,
    permutation,
    ring_allreduce,
    ring_order,
)

HOSTS = ["h1", "h2", "h3", "h4"]
LEAF = {"h1": "l1", "h2": "l1", "h3": "l2", "h4": "l2"}


@pytest.mark.parametrize("seed", range(10))
def test_permutation_is_a_derangement_across_leaves(seed: int) -> None:
    wl = permutation(HOSTS, 4096, 3, seed=seed, cross_leaf=LEAF)
    (step,) = wl.steps
    srcs = Counter(t.src for t in step.transfers)
    dsts = Counter(t.dst for t in step.transfers)
    assert set(srcs) == set(dsts) == set(HOSTS)
    assert max(srcs.values()) == max(dsts.values()) == 1
    for t in step.transfers:
        assert t.src != t.dst and LEAF[t.src] != LEAF[t.dst]
    assert wl.total_bytes == 4 * 4096 * 3


def test_incast_n_to_one() -> None:
    wl = incast(HOSTS, 3, 1000, 2)
    (step,) = wl.steps
    assert {t.dst for t in step.transfers} == {"h4"}
    assert sorted(t.src for t in step.transfers) == ["h1", "h2", "h3"]
    with pytest.raises(WorkloadError, match="incast 4:1"):
        incast(HOSTS, 4, 1000, 1)


def test_all_to_all_every_ordered_pair_once() -> None:
    wl = all_to_all(HOSTS, 100, 1)
    pairs = [(t.src, t.dst) for t in wl.flows()]
    assert len(pairs) == len(set(pairs)) == 12


def test_ring_allreduce_steps_and_chunks() -> None:
    wl = ring_allreduce(HOSTS, 8000)
    assert len(wl.steps) == 2 * (4 - 1)
    for step in wl.steps:
        assert [(t.src, t.dst) for t in step.transfers] == [
            ("h1", "h2"), ("h2", "h3"), ("h3", "h4"), ("h4", "h1")]
        assert {t.size for t in step.transfers} == {2000}
    # Each host sends 2(N-1)/N of the buffer: the bandwidth-optimal ring's volume.
    per_host = Counter()
    for t in wl.flows():
        per_host[t.src] += t.size * t.count
    assert set(per_host.values()) == {2 * 3 * 8000 // 4}


def test_unknown_workload_named_in_error() -> None:
    with pytest.raises(WorkloadError, match="unknown workload 'gossip'"):
        make_workload("gossip", HOSTS, 1, 1)


def test_ring_order_makes_every_hop_leave_its_leaf() -> None:
    ranks = ring_order(HOSTS, LEAF)
    assert sorted(ranks) == HOSTS
    assert all(LEAF[a] != LEAF[b] for a, b in zip(ranks, ranks[1:] + ranks[:1], strict=True))
    wl = make_workload("allreduce", HOSTS, 8000, 1, leaf_of=LEAF)
    assert all(LEAF[t.src] != LEAF[t.dst] for t in wl.flows())


def test_ring_order_makes_every_hop_leave_its_pod_on_a_fat_tree() -> None:
    hosts = [f"h{i}" for i in range(1, 17)]  # a k=4 fat-tree: 2 hosts per edge, 2 edges per pod
    leaf_of = {h: f"e{(i // 4) + 1}{(i // 2) % 2 + 1}" for i, h in enumerate(hosts)}
    pod_of = {leaf: leaf[1] for leaf in leaf_of.values()}
    ranks = ring_order(hosts, leaf_of, pod_of)
    assert sorted(ranks, key=lambda h: int(h[1:])) == hosts
    hops = list(zip(ranks, ranks[1:] + ranks[:1], strict=True))
    assert all(pod_of[leaf_of[a]] != pod_of[leaf_of[b]] for a, b in hops)


def test_ring_order_keeps_one_leaf_as_it_is() -> None:
    assert ring_order(HOSTS, dict.fromkeys(HOSTS, "l1")) == HOSTS
