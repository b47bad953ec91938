"""Run a schedule on symbolic data and check every rank ends with what the collective means.

Every rank's initial chunks are distinct identities: rank r's copy of chunk c holds the
contribution {r}; a reduce is the multiset union of contributions, a copy replaces. So a
result is right only if it has every contribution it should exactly once: a dropped send
leaves one missing, a duplicated reduce counts one twice, a duplicated copy is caught as a
copy that changes nothing.

Before running it, the DAG is checked for races: two accesses of one (rank, chunk) of which
one writes (two reduces into it commute and may go in either order) must be ordered by the
dependencies, or the result would depend on timing. Without races, running the sends in
list order (a topological order) gives the only result any order could.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from cellfabric.collectives.schedule import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    COLLECTIVES,
    OPERATIONS,
    REDUCE,
    REDUCE_SCATTER,
    Schedule,
    ScheduleError,
    Send,
)

Value = Counter  # contributing rank -> times it was added in

MAX_REPORTED = 5


def initial_state(s: Schedule) -> list[dict[int, Value]]:
    """rank -> chunk -> value, before any send."""
    state: list[dict[int, Value]] = [{} for _ in range(s.nranks)]
    for c in s.chunks:
        if s.collective in (ALL_REDUCE, REDUCE_SCATTER):
            holders = range(s.nranks)
        elif s.collective == BROADCAST:
            holders = [s.root]
        else:  # all-gather, all-to-all: only the owner has its chunk
            holders = [c.owner]
        for r in holders:
            state[r][c.id] = Counter({r: 1})
    return state


def expected_state(s: Schedule) -> list[dict[int, Value]]:
    """rank -> chunk -> value for the chunks the collective defines on that rank."""
    every = Counter(dict.fromkeys(range(s.nranks), 1))
    out: list[dict[int, Value]] = [{} for _ in range(s.nranks)]
    for c in s.chunks:
        for r in range(s.nranks):
            if s.collective == ALL_REDUCE or (s.collective == REDUCE_SCATTER and c.owner == r):
                out[r][c.id] = every
            elif s.collective == ALL_GATHER:
                out[r][c.id] = Counter({c.owner: 1})
            elif s.collective == BROADCAST:
                out[r][c.id] = Counter({s.root: 1})
            elif s.collective == ALL_TO_ALL and c.peer == r:
                out[r][c.id] = Counter({c.owner: 1})
    return out


def structure_errors(s: Schedule) -> Iterator[str]:
    if s.collective not in COLLECTIVES:
        yield f"unknown collective '{s.collective}'"
    for i, c in enumerate(s.chunks):
        if c.id != i or c.nbytes < 0 or not 0 <= c.channel < s.channels:
            yield f"chunk #{i}: bad id, size or channel ({c})"
    for i, x in enumerate(s.sends):
        where = f"send #{i} ({x.src}->{x.dst})"
        if x.id != i:
            yield f"{where}: id {x.id}, expected {i} (sends are numbered in order)"
        if not (0 <= x.src < s.nranks and 0 <= x.dst < s.nranks) or x.src == x.dst:
            yield f"{where}: ranks must be two different ones of 0..{s.nranks - 1}"
        if x.op not in OPERATIONS:
            yield f"{where}: operation '{x.op}', expected one of {', '.join(OPERATIONS)}"
        if not x.chunks or len(set(x.chunks)) != len(x.chunks) \
                or any(not 0 <= c < len(s.chunks) for c in x.chunks):
            yield f"{where}: chunks {x.chunks} are not chunks of the schedule"
        elif x.nbytes != sum(s.chunks[c].nbytes for c in x.chunks):
            yield f"{where}: {x.nbytes} bytes, its chunks hold " \
                  f"{sum(s.chunks[c].nbytes for c in x.chunks)}"
        elif any(s.chunks[c].channel != x.channel for c in x.chunks):
            yield f"{where}: carries chunks of another channel than its own {x.channel}"
        for d in x.deps:
            if not 0 <= d < i or s.sends[d].channel != x.channel:
                yield f"{where}: waits for #{d}, which is not an earlier send of its channel"


def race_errors(s: Schedule) -> Iterator[str]:
    """Unordered conflicting accesses of one (rank, chunk). Channels share no chunk and no
    dependency, so each is checked alone (the ancestor sets grow with its sends squared)."""
    for channel in range(s.channels):
        yield from _channel_races(s.channel_sends(channel))


def _channel_races(sends: list[Send]) -> Iterator[str]:
    local = {x.id: i for i, x in enumerate(sends)}
    ancestors: list[int] = []  # local index -> bit set of what it transitively waits for
    for x in sends:
        bits = 0
        for d in x.deps:
            bits |= ancestors[local[d]] | (1 << local[d])
        ancestors.append(bits)
    accesses: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for x in sends:
        for c in x.chunks:
            accesses.setdefault((x.src, c), []).append((x.id, "read"))
            accesses.setdefault((x.dst, c), []).append((x.id, x.op))
    for (rank, c), acc in accesses.items():
        for i, (a, kind_a) in enumerate(acc):
            for b, kind_b in acc[i + 1:]:
                if kind_a == kind_b and kind_a in ("read", REDUCE):
                    continue  # two reads, or two commuting reduces
                if not ancestors[local[b]] >> local[a] & 1:  # a is before b in the list
                    yield (f"sends #{a} ({kind_a}) and #{b} ({kind_b}) of chunk {c} at rank "
                           f"{rank} are not ordered by their dependencies")


def run(s: Schedule) -> tuple[list[dict[int, Value]], list[str]]:
    """The final state after every send in order, and what went wrong on the way: a read
    of nothing, a copy that changes nothing, and a write nobody uses (overwritten before
    it was read, or left on a rank that does not keep that chunk): wasted bytes."""
    state, errors = initial_state(s), []
    unread: dict[tuple[int, int], list[int]] = {}  # slot -> writes not read yet
    outputs = [set(e) for e in expected_state(s)]
    for x in s.sends:
        for c in x.chunks:
            value = state[x.src].get(c)
            unread.pop((x.src, c), None)
            if value is None:
                errors.append(f"send #{x.id} reads chunk {c} at rank {x.src}, which does "
                              "not hold it")
                continue
            held = state[x.dst].get(c)
            if x.op == REDUCE:
                if held is None:
                    errors.append(f"send #{x.id} reduces chunk {c} into rank {x.dst}, which "
                                  "does not hold it")
                    continue
                state[x.dst][c] = held + value
            elif held == value:
                errors.append(f"send #{x.id} copies chunk {c} to rank {x.dst}, which "
                              "already holds that value (a duplicated send)")
            else:
                state[x.dst][c] = Counter(value)
                errors += [f"send #{w} wrote chunk {c} at rank {x.dst}, overwritten by #{x.id} "
                           "before anything read it" for w in unread.pop((x.dst, c), [])]
            unread.setdefault((x.dst, c), []).append(x.id)
    for (rank, c), writes in sorted(unread.items()):
        if c not in outputs[rank]:
            errors += [f"send #{w} wrote chunk {c} at rank {rank}, which nothing reads and "
                       "the result does not keep" for w in writes]
    return state, errors


def result_errors(s: Schedule, final: list[dict[int, Value]]) -> Iterator[str]:
    start, want = initial_state(s), expected_state(s)
    for r in range(s.nranks):
        for c, value in want[r].items():
            got = final[r].get(c)
            if got != value:
                have = "nothing" if got is None else dict(sorted(got.items()))
                yield (f"rank {r} chunk {c}: holds {have}, expected contributions "
                       f"{dict(sorted(value.items()))}")
        for c in final[r].keys() - want[r].keys() - start[r].keys():
            yield f"rank {r} holds chunk {c}, which the {s.collective} does not give it"


def verify(s: Schedule) -> list[str]:
    """Every error found (empty: the schedule computes its collective on every rank)."""
    errors = list(structure_errors(s))
    if errors:
        return errors
    errors = list(race_errors(s))
    final, run_errors = run(s)
    return errors + run_errors + list(result_errors(s, final))


def check(s: Schedule) -> None:
    """Raise ScheduleError naming the first errors of a wrong schedule."""
    errors = verify(s)
    if errors:
        more = f" (and {len(errors) - MAX_REPORTED} more)" if len(errors) > MAX_REPORTED else ""
        raise ScheduleError(f"{s.algorithm} {s.collective} over {s.nranks} ranks: "
                            + "; ".join(errors[:MAX_REPORTED]) + more)
