"""Ring and chain algorithms: all-reduce, reduce-scatter and all-gather on rings (NCCL's
ring, one per channel), broadcast on a pipelined chain, and all-to-all's pairwise exchange.

Every channel takes its own part of the buffer and its own ring (``CollectiveSpec.order``).
Ring convention used throughout: after a reduce-scatter of segments ``segs`` over ``ring``,
the rank at position p holds segment (p + 1) mod n fully reduced; an all-gather starts from
that same placement, so one follows the other for an all-reduce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cellfabric.collectives.schedule import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    COPY,
    REDUCE,
    REDUCE_SCATTER,
    CollectiveSpec,
    Schedule,
    ScheduleBuilder,
    slices_of,
    split,
)

Segments = Sequence[tuple[int, ...]]  # segment j -> the chunk ids one send of it carries


def ring_reduce_scatter(b: ScheduleBuilder, channel: int, ring: list[int],
                        segs: Segments) -> None:
    n = len(ring)
    for k in range(n - 1):
        for i in range(n):
            b.send(channel, ring[i], ring[(i + 1) % n], segs[(i - k) % n], REDUCE)


def ring_all_gather(b: ScheduleBuilder, channel: int, ring: list[int], segs: Segments) -> None:
    n = len(ring)
    for k in range(n - 1):
        for i in range(n):
            b.send(channel, ring[i], ring[(i + 1) % n], segs[(i + 1 - k) % n], COPY)


def _block_chunks(b: ScheduleBuilder, spec: CollectiveSpec, channel: int, ring: list[int],
                  parts: list[int]) -> list[list[tuple[int, ...]]]:
    """Slices x segments of one channel: segment j is ring position j - 1's block (so the
    reduce-scatter leaves every rank its own), ``parts[rank]`` its bytes in this channel."""
    n = len(ring)
    slices = slices_of(max(parts), 1, spec.chunk_size)
    pieces = {r: split(parts[r], slices) for r in ring}
    return [[(b.chunk(pieces[ring[(j - 1) % n]][s], channel, ring[(j - 1) % n]),)
             for j in range(n)] for s in range(slices)]


def _channel_parts(spec: CollectiveSpec) -> list[list[int]]:
    """channel -> rank -> bytes: every rank's block (nccl-tests' size / n) cut over the
    channels, as NCCL gives every channel its slice of each rank's block."""
    blocks = split(spec.nbytes, spec.nranks)
    per_rank = [split(blk, spec.channels) for blk in blocks]
    return [[per_rank[r][c] for r in range(spec.nranks)] for c in range(spec.channels)]


def _ring_phases(op: str, spec: CollectiveSpec,
                 phases: tuple[Callable[..., None], ...]) -> Schedule:
    """Each channel's ring over its slice of every rank's block, chunk by chunk, through the
    given ring phases in order (reduce-scatter, all-gather or both)."""
    b = ScheduleBuilder(op, "ring", spec)
    for ch, parts in enumerate(_channel_parts(spec)):
        ring = spec.ordered(ch, list(range(spec.nranks)))
        for segs in _block_chunks(b, spec, ch, ring, parts):
            for phase in phases:
                phase(b, ch, ring, segs)
    return b.build()


def allreduce_ring(spec: CollectiveSpec) -> Schedule:
    return _ring_phases(ALL_REDUCE, spec, (ring_reduce_scatter, ring_all_gather))


def reduce_scatter_ring(spec: CollectiveSpec) -> Schedule:
    return _ring_phases(REDUCE_SCATTER, spec, (ring_reduce_scatter,))


def all_gather_ring(spec: CollectiveSpec) -> Schedule:
    return _ring_phases(ALL_GATHER, spec, (ring_all_gather,))


def broadcast_chain(spec: CollectiveSpec) -> Schedule:
    """The root's buffer down a chain (the ring cut after the rank before the root), slice
    by slice: slice s leaves position k at step s + k, a pipeline of n - 1 + slices steps."""
    b = ScheduleBuilder(BROADCAST, "chain", spec)
    for ch, part in enumerate(split(spec.nbytes, spec.channels)):
        ring = spec.ordered(ch, list(range(spec.nranks)))
        at = ring.index(spec.root)
        chain = ring[at:] + ring[:at]
        for nbytes in split(part, slices_of(part, 1, spec.chunk_size)):
            c = b.chunk(nbytes, ch, spec.root)
            for k in range(len(chain) - 1):
                b.send(ch, chain[k], chain[k + 1], (c,), COPY)
    return b.build()


def all_to_all_pairwise(spec: CollectiveSpec) -> Schedule:
    """At step k every rank sends its block for the rank k places ahead (in the channel's
    order) and receives from the rank k places behind, a sendrecv that waits for the step
    before: n - 1 permutations instead of one incast-prone burst."""
    n = spec.nranks
    b = ScheduleBuilder(ALL_TO_ALL, "pairwise", spec)
    blocks = split(spec.nbytes, n)  # what each rank has for each peer
    for ch in range(spec.channels):
        order = spec.ordered(ch, list(range(n)))
        part = [split(blk, spec.channels)[ch] for blk in blocks]
        slices = slices_of(max(part), 1, spec.chunk_size)
        for s in range(slices):
            chunk = {(src, dst): b.chunk(split(part[dst], slices)[s], ch, src, dst)
                     for src in range(n) for dst in range(n)}
            prev: dict[int, list[int]] = {r: [] for r in range(n)}
            for k in range(1, n):
                step: dict[int, list[int]] = {r: [] for r in range(n)}
                for i, src in enumerate(order):
                    dst = order[(i + k) % n]
                    sid = b.send(ch, src, dst, (chunk[(src, dst)],), COPY,
                                 after=prev[src] + prev[dst])
                    step[src].append(sid)
                    step[dst].append(sid)
                prev = step
    return b.build()
