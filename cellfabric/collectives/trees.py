"""Tree and hierarchical all-reduce.

Double binary tree (NCCL's): two binary trees over the same ranks, each carrying half of the
buffer, built so that a rank that is a leaf in one is mostly an inner node in the other
(together they use every rank's links both ways). The first tree is NCCL's btree: rank 0 at
the root, a rank's parent found from its lowest set bit; the second is that tree mirrored
(rank r -> n-1-r) when n is even and shifted by one (r -> r+1) when n is odd. Tree positions
are laid on ranks by the channel's order. Each slice goes up (reduce) and comes back down
(copy); the slices follow one another on every link, a pipeline.

Hierarchical: inside every server reduce to the leaders, all-reduce among the leaders of the
servers on a ring, broadcast inside every server. ``server`` mode has one leader per server
(its first rank); ``rail`` mode has every rank lead its share of the buffer (a reduce-scatter
inside the server), so GPU g of every server all-reduce their part on rail g, then an
all-gather inside the server, as rail-optimized fabrics want.
"""

from __future__ import annotations

from cellfabric.collectives.rings import ring_all_gather, ring_reduce_scatter
from cellfabric.collectives.schedule import (
    ALL_REDUCE,
    COPY,
    REDUCE,
    CollectiveSpec,
    Schedule,
    ScheduleBuilder,
    ScheduleError,
    slices_of,
    split,
)


def btree_parent(pos: int, n: int) -> int:
    """The parent of position ``pos`` in NCCL's btree over n positions (-1: the root, 0).
    Clearing a position's lowest set bit and setting the next one up gives its parent, or,
    when that falls outside the tree, clearing the bit alone; the lowest set bit grows
    every step up, so every chain ends at 0."""
    if pos == 0:
        return -1
    bit = pos & -pos
    up = (pos ^ bit) | (bit << 1)
    return up if up < n else pos ^ bit


def dtree_parents(n: int) -> tuple[list[int], list[int]]:
    """The two trees of a double binary tree as position -> parent (-1 at the root)."""
    first = [btree_parent(p, n) for p in range(n)]
    if n % 2:
        second = [-1 if (q := btree_parent((p - 1) % n, n)) < 0 else (q + 1) % n
                  for p in range(n)]
    else:
        second = [-1 if (q := btree_parent(n - 1 - p, n)) < 0 else n - 1 - q for p in range(n)]
    return first, second


def _depths(parent: list[int]) -> list[int]:
    depth = [0] * len(parent)
    for p in range(len(parent)):
        q = p
        while parent[q] >= 0:
            depth[p] += 1
            q = parent[q]
    return depth


def tree_allreduce(b: ScheduleBuilder, channel: int, ranks: list[int], parent: list[int],
                   chunk: int) -> None:
    """One chunk up the tree (deepest first, so every node sends after its children's
    reduces reached it) and back down from the root."""
    depth = _depths(parent)
    up = sorted((p for p in range(len(ranks)) if parent[p] >= 0), key=lambda p: -depth[p])
    for p in up:
        b.send(channel, ranks[p], ranks[parent[p]], (chunk,), REDUCE)
    for p in reversed(up):
        b.send(channel, ranks[parent[p]], ranks[p], (chunk,), COPY)


def allreduce_tree(spec: CollectiveSpec) -> Schedule:
    b = ScheduleBuilder(ALL_REDUCE, "double-binary-tree", spec)
    trees = dtree_parents(spec.nranks)
    for ch, part in enumerate(split(spec.nbytes, spec.channels)):
        ranks = spec.ordered(ch, list(range(spec.nranks)))
        for parent, half in zip(trees, split(part, 2)):
            for nbytes in split(half, slices_of(half, 1, spec.chunk_size)):
                tree_allreduce(b, ch, ranks, parent, b.chunk(nbytes, ch, -1))
    return b.build()


def servers_of(spec: CollectiveSpec) -> list[list[int]]:
    """The ranks of every server, servers in the order they first appear."""
    if spec.servers is None:
        raise ScheduleError("a hierarchical all-reduce needs a rank->server map")
    groups: dict[str, list[int]] = {}
    for rank, server in enumerate(spec.servers):
        groups.setdefault(server, []).append(rank)
    return list(groups.values())


def allreduce_hier(spec: CollectiveSpec) -> Schedule:
    """One leader per server: local reduce (every rank straight to its leader, the reduces
    commute so they go at once), a ring all-reduce among the leaders, local broadcast."""
    b = ScheduleBuilder(ALL_REDUCE, "hierarchical", spec)
    servers = servers_of(spec)
    for ch, part in enumerate(split(spec.nbytes, spec.channels)):
        ring = spec.ordered(ch, [local[0] for local in servers])
        n = len(ring)
        for nbytes in split(part, slices_of(part, n, spec.chunk_size)):
            segs = [(b.chunk(seg, ch, -1),) for seg in split(nbytes, n)]
            every = tuple(c for seg in segs for c in seg)
            for local in servers:
                for rank in local[1:]:
                    b.send(ch, rank, local[0], every, REDUCE)
            ring_reduce_scatter(b, ch, ring, segs)
            ring_all_gather(b, ch, ring, segs)
            for local in servers:
                for rank in local[1:]:
                    b.send(ch, local[0], rank, every, COPY)
    return b.build()


def allreduce_hier_rail(spec: CollectiveSpec) -> Schedule:
    """Every local rank g leads share g: a ring reduce-scatter inside each server, a ring
    all-reduce of share g among the servers' rank g (rail g), a ring all-gather inside."""
    b = ScheduleBuilder(ALL_REDUCE, "hierarchical-rail", spec)
    servers = servers_of(spec)
    g = len(servers[0])
    if any(len(local) != g for local in servers):
        raise ScheduleError("a rail all-reduce needs the same number of ranks on every "
                            f"server (got {sorted({len(local) for local in servers})})")
    nserv = len(servers)
    for ch, part in enumerate(split(spec.nbytes, spec.channels)):
        rails = [spec.ordered(ch, [local[i] for local in servers]) for i in range(g)]
        for nbytes in split(part, slices_of(part, g * nserv, spec.chunk_size)):
            shares = [[b.chunk(seg, ch, -1) for seg in split(share, nserv)]
                      for share in split(nbytes, g)]
            # the local ring: position p ends with segment p + 1, which is share p
            local_segs = [tuple(shares[(j - 1) % g]) for j in range(g)]
            for local in servers:
                ring_reduce_scatter(b, ch, local, local_segs)
            for i, rail in enumerate(rails):
                rail_segs = [(shares[i][(j - 1) % nserv],) for j in range(nserv)]
                ring_reduce_scatter(b, ch, rail, rail_segs)
                ring_all_gather(b, ch, rail, rail_segs)
            for local in servers:
                ring_all_gather(b, ch, local, local_segs)
    return b.build()
