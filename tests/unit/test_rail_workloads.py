"""Workloads on rail fabrics: a permutation sends every GPU to another server's GPU (over the
fabric), even where random shuffles would not find such a derangement, and the group-leaving
shift it falls back on is a derangement out of every group."""

from __future__ import annotations

import argparse

import pytest

from cellfabric.core.workloads import _cross_group_shift, permutation
from cellfabric.run_cli import add_workload_options, prepare_workload


def _args(topology: str, *extra: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("topology")
    add_workload_options(ap)
    return ap.parse_args([topology, *extra])


@pytest.mark.parametrize("spec", ["rail:servers=16,gpus=8,tiers=3", "rail:servers=3,gpus=5",
                                  "rail:servers=2,gpus=2"])
def test_permutation_crosses_servers(spec: str) -> None:
    topo, work, _ = prepare_workload(_args(spec))
    (step,) = work.steps
    assert sorted(t.dst for t in step.transfers) == sorted(topo.hosts)  # one each
    assert not any(topo.same_server(t.src, t.dst) for t in step.transfers)


def test_group_shift_leaves_every_group() -> None:
    # groups of 3, 3, 2 (n = 8 > 2 x 3): nobody stays in its group, everyone receives once
    group = dict(zip("abcdefgh", "xxxyyyzz", strict=True))
    dsts = _cross_group_shift(list("abcdefgh"), group)
    assert dsts is not None and sorted(dsts) == list("abcdefgh")
    assert all(group[s] != group[d] for s, d in zip("abcdefgh", dsts, strict=True))
    # one group holding half the hosts: no shift leaves it, so none is offered
    assert _cross_group_shift(list("abcd"), dict(zip("abcd", "xxyz", strict=True))) is None


def test_one_leaf_still_gets_a_plain_shift() -> None:
    (step,) = permutation(["a", "b", "c"], 100, 1, cross_leaf=dict.fromkeys("abc", "l1")).steps
    assert [(t.src, t.dst) for t in step.transfers] == [("a", "b"), ("b", "c"), ("c", "a")]
