"""One entry per algorithm: the collective it computes, its builder, and the workload name
it runs under in `cellfabric run` and `cellfabric sim` (the CLI's choices derive from it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from cellfabric.collectives import rings, trees
from cellfabric.collectives.schedule import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    REDUCE_SCATTER,
    CollectiveSpec,
    Schedule,
    ScheduleError,
)


class Algorithm(NamedTuple):
    name: str
    collective: str
    build: Callable[[CollectiveSpec], Schedule]
    workload: str  # --workload name
    needs_servers: bool = False


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("allreduce-ring", ALL_REDUCE, rings.allreduce_ring, "allreduce-ring"),
    Algorithm("allreduce-tree", ALL_REDUCE, trees.allreduce_tree, "allreduce-tree"),
    Algorithm("allreduce-hier", ALL_REDUCE, trees.allreduce_hier, "allreduce-hier", True),
    Algorithm("allreduce-hier-rail", ALL_REDUCE, trees.allreduce_hier_rail,
              "allreduce-hier-rail", True),
    Algorithm("reduce-scatter-ring", REDUCE_SCATTER, rings.reduce_scatter_ring,
              "reduce-scatter"),
    Algorithm("all-gather-ring", ALL_GATHER, rings.all_gather_ring, "all-gather"),
    Algorithm("all-to-all-pairwise", ALL_TO_ALL, rings.all_to_all_pairwise, "all-to-all-coll"),
    Algorithm("broadcast-chain", BROADCAST, rings.broadcast_chain, "broadcast"),
)}


def build(name: str, spec: CollectiveSpec) -> Schedule:
    algo = ALGORITHMS.get(name)
    if algo is None:
        raise ScheduleError(f"unknown collective algorithm '{name}' (expected one of "
                            f"{', '.join(ALGORITHMS)})")
    spec.check()
    return algo.build(spec)
