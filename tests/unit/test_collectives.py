"""The collective library's schedules: every algorithm's result checked on every rank with
symbolic data, on odd, even and non-power-of-2 rank counts, sizes that do not divide evenly
(and smaller than the chunk count), 1-4 channels, pipelined or not; and wrong schedules
(a dropped, duplicated or unordered send) failing that check."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellfabric.collectives import ALGORITHMS, CollectiveSpec, ScheduleError, build, check, verify
from cellfabric.collectives.schedule import COPY, REDUCE, split
from cellfabric.collectives.trees import dtree_parents

RANKS = (1, 2, 3, 5, 6, 7, 12)
SIZES = (1, 5, 1000, 65537)  # 1 and 5 bytes: fewer bytes than chunks


def servers_for(n: int, per: int) -> tuple[str, ...]:
    return tuple(f"s{r // per}" for r in range(n))


def spec(n: int, size: int, channels: int = 1, chunk: int | None = None,
         **kw) -> CollectiveSpec:
    kw.setdefault("servers", servers_for(n, 2 if n % 2 == 0 else 1))
    return CollectiveSpec(n, size, channels, chunk, **kw)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
@pytest.mark.parametrize("n", RANKS)
def test_every_algorithm_gives_every_rank_its_result(algo: str, n: int) -> None:
    for size in SIZES:
        for channels in (1, 2, 3, 4):
            for chunk in (None, 300):
                s = build(algo, spec(n, size, channels, chunk))
                assert verify(s) == [], (algo, n, size, channels, chunk)
                assert sum(c.nbytes for c in s.chunks) == (size * n if algo.startswith(
                    "all-to-all") else size)


@pytest.mark.parametrize("n", (3, 5, 7, 12))
def test_broadcast_from_any_root(n: int) -> None:
    for root in range(n):
        s = build("broadcast-chain", spec(n, 777, 2, 100, root=root))
        check(s)
        assert {x.src for x in s.sends if x.channel == 0} == set(range(n)) - {s.sends[-1].dst}


@pytest.mark.parametrize(("n", "per"), [(8, 4), (12, 3), (6, 2), (5, 5), (7, 1)])
def test_hierarchical_on_servers(n: int, per: int) -> None:
    servers = servers_for(n, per)
    for algo in ("allreduce-hier", "allreduce-hier-rail"):
        for size, channels, chunk in ((1000, 1, None), (333, 3, 10), (2, 2, None)):
            check(build(algo, spec(n, size, channels, chunk, servers=servers)))


def test_hierarchical_keeps_intra_server_traffic_inside() -> None:
    """Server mode: only the leaders (first rank of each server) send across servers; rail
    mode: a cross-server send joins the same local index (GPU g to GPU g)."""
    servers = servers_for(8, 4)
    s = build("allreduce-hier", spec(8, 4096, servers=servers))
    cross = [x for x in s.sends if servers[x.src] != servers[x.dst]]
    assert cross and {x.src for x in cross} == {0, 4}
    r = build("allreduce-hier-rail", spec(8, 4096, servers=servers))
    cross = [x for x in r.sends if servers[x.src] != servers[x.dst]]
    assert cross and all(x.src % 4 == x.dst % 4 for x in cross)


def test_ring_allreduce_moves_2_n_minus_1_segments_per_rank() -> None:
    """The textbook ring: 2(n-1) steps, each rank sending one B/n segment per step."""
    s = build("allreduce-ring", spec(5, 1000))
    assert len(s.levels()) == 8
    assert all(sorted(x.src for x in lv) == [0, 1, 2, 3, 4] for lv in s.levels())
    assert {x.nbytes for x in s.sends} == {200}
    assert [x.op for x in s.sends].count(REDUCE) == [x.op for x in s.sends].count(COPY) == 20


def test_reduce_scatter_gives_rank_r_its_block() -> None:
    """nccl-tests' reduce-scatter size is the whole array; rank r's block is size/n."""
    n, size = 5, 1003
    s = build("reduce-scatter-ring", spec(n, size, channels=3, chunk=40))
    owned = Counter()
    for c in s.chunks:
        owned[c.owner] += c.nbytes
    assert [owned[r] for r in range(n)] == [201, 201, 201, 200, 200]
    assert max(c.nbytes for c in s.chunks) <= 40


def test_pipelined_chain_broadcast_overlaps_slices() -> None:
    """Slice s leaves chain position k at step s + k: 10 slices over 5 ranks take
    10 + 5 - 2 = 13 steps, not 10 x 4."""
    s = build("broadcast-chain", spec(5, 1000, chunk=100))
    assert len(s.sends) == 40 and len(s.levels()) == 13


def test_pairwise_all_to_all_is_a_permutation_per_step() -> None:
    n = 6
    s = build("all-to-all-pairwise", spec(n, 6000))
    levels = s.levels()
    assert len(levels) == n - 1
    for lv in levels:
        assert sorted(x.src for x in lv) == sorted(x.dst for x in lv) == list(range(n))
    assert {(x.src, x.dst) for x in s.sends} == {(a, b) for a in range(n) for b in range(n)
                                                 if a != b}


def test_tree_children_send_up_at_once() -> None:
    """Reduces into one node commute: a node's two children are in the same step."""
    s = build("allreduce-tree", spec(7, 700))
    first = s.levels()[0]
    parents = Counter(x.dst for x in first if x.op == REDUCE)
    assert max(parents.values()) == 2


@pytest.mark.parametrize("n", range(1, 40))
def test_double_binary_tree_shape(n: int) -> None:
    for parent in dtree_parents(n):
        assert parent.count(-1) == 1
        for p in range(n):
            seen, q = set(), p
            while parent[q] >= 0:  # every rank reaches the root
                assert q not in seen
                seen.add(q)
                q = parent[q]
        assert max(Counter(x for x in parent if x >= 0).values(), default=0) <= 2
    first, second = dtree_parents(n)
    inner = [{x for x in t if x >= 0} for t in (first, second)]
    assert len(inner[0] & inner[1]) <= 1  # a leaf in one tree, an inner node in the other


def test_double_binary_tree_matches_nccls_drawing() -> None:
    """NCCL's trees.cc draws 12 ranks: 0-8, 8-{4, 10}, 4-{2, 6}, 10-{9, 11}; the mirror
    tree's root is 11 with child 3; 13 ranks shift it by one: root 1, child 9."""
    first, second = dtree_parents(12)
    assert (first[8], first[4], first[10], first[2], first[6], first[9], first[11]) \
        == (0, 8, 8, 4, 4, 10, 10)
    assert second[11] == -1 and second[3] == 11 and second[7] == 3
    assert dtree_parents(13)[1][1] == -1 and dtree_parents(13)[1][9] == 1
    assert dtree_parents(14)[0][13] == 12


def test_channels_take_their_own_rank_order() -> None:
    """The order hook lays each channel's ring; channel 1 here runs the ring backwards."""
    def order(channel: int, ranks: list[int]) -> list[int]:
        return ranks if channel == 0 else ranks[::-1]

    s = build("allreduce-ring", spec(5, 1000, channels=2, order=order))
    check(s)
    assert {(x.src, x.dst) for x in s.channel_sends(0)} == {(i, (i + 1) % 5) for i in range(5)}
    assert {(x.src, x.dst) for x in s.channel_sends(1)} == {((i + 1) % 5, i) for i in range(5)}
    bad = spec(5, 1000, order=lambda c, r: r[:-1])
    with pytest.raises(ScheduleError, match="not a permutation"):
        build("allreduce-ring", bad)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_a_dropped_send_fails_the_check(algo: str) -> None:
    s = build(algo, spec(5, 1000, 2, servers=servers_for(5, 1)))
    for i in (0, len(s.sends) // 2, len(s.sends) - 1):
        kept = [x for x in s.sends if x.id != i]
        renum = {x.id: k for k, x in enumerate(kept)}
        wrong = replace(s, sends=tuple(replace(x, id=renum[x.id], deps=tuple(
            renum[d] for d in x.deps if d in renum)) for x in kept))
        assert verify(wrong), (algo, i)
        with pytest.raises(ScheduleError, match=r"over 5 ranks: .*rank"):
            check(wrong)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_a_duplicated_send_fails_the_check(algo: str) -> None:
    s = build(algo, spec(5, 1000, 2, servers=servers_for(5, 1)))
    for i in (0, len(s.sends) - 1):
        # the copy waits for everything before it: no race, only the duplicate itself
        dup = replace(s.sends[i], id=len(s.sends),
                      deps=tuple(x.id for x in s.sends if x.channel == s.sends[i].channel))
        assert verify(replace(s, sends=(*s.sends, dup))), (algo, i)


def test_a_send_without_its_dependencies_is_a_race() -> None:
    s = build("allreduce-ring", spec(5, 1000))
    x = s.sends[7]
    errors = verify(replace(s, sends=tuple(replace(y, deps=()) if y is x else y
                                          for y in s.sends)))
    assert any("not ordered by their dependencies" in e for e in errors)


def test_a_send_to_the_wrong_rank_fails_the_check() -> None:
    s = build("all-to-all-pairwise", spec(4, 400))
    x = s.sends[0]
    stray = replace(x, dst=(x.dst + 1) % 4 if (x.dst + 1) % 4 != x.src else (x.dst + 2) % 4)
    errors = verify(replace(s, sends=(stray, *s.sends[1:])))
    assert any("does not give it" in e for e in errors)
    assert any("holds nothing" in e for e in errors)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"nranks": 0}, "at least 1 rank"), ({"nbytes": 0}, "at least 1 byte"),
    ({"channels": 0}, "--channels 0"), ({"chunk_size": 0}, "chunk size 0"),
    ({"root": 9}, "root 9"), ({"servers": ("a",)}, "1 entries for 4 ranks"),
])
def test_bad_specs_are_one_line_errors(kw: dict, needle: str) -> None:
    base = {"nranks": 4, "nbytes": 100, "servers": ("a", "a", "b", "b")} | kw
    with pytest.raises(ScheduleError, match=needle):
        build("allreduce-hier", CollectiveSpec(**base))


def test_rail_mode_needs_equal_servers_and_hier_needs_a_map() -> None:
    with pytest.raises(ScheduleError, match="same number of ranks"):
        build("allreduce-hier-rail", spec(5, 100, servers=("a", "a", "b", "b", "b")))
    with pytest.raises(ScheduleError, match="rank->server map"):
        build("allreduce-hier", CollectiveSpec(4, 100))
    with pytest.raises(ScheduleError, match="unknown collective algorithm 'ring'"):
        build("ring", spec(4, 100))


def test_split_is_even_and_exact() -> None:
    assert split(10, 4) == [3, 3, 2, 2]
    assert split(2, 5) == [1, 1, 0, 0, 0]


@st.composite
def _specs(draw: st.DrawFn) -> tuple[str, CollectiveSpec]:
    """Any algorithm on any rank count, size, channel count and chunk size, with a random
    rank order per channel and random servers (equal ones for the rail algorithm)."""
    algo = draw(st.sampled_from(list(ALGORITHMS)))
    n = draw(st.integers(1, 13))
    if algo == "allreduce-hier-rail":
        per = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        servers = servers_for(n, per)
    else:
        servers = tuple(draw(st.lists(st.sampled_from("abcd"), min_size=n, max_size=n)))
    channels = draw(st.integers(1, 4))
    perms = [draw(st.permutations(range(n))) for _ in range(channels)]

    def order(channel: int, ranks: list[int]) -> list[int]:
        return sorted(ranks, key=perms[channel].index)

    return algo, CollectiveSpec(n, draw(st.integers(1, 5000)), channels,
                                draw(st.none() | st.integers(1, 700)),
                                root=draw(st.integers(0, n - 1)), servers=servers,
                                order=order)


@settings(max_examples=150, deadline=None)
@given(_specs())
def test_any_spec_and_rank_order_gives_every_rank_its_result(case) -> None:
    algo, s = case
    schedule = build(algo, s)
    assert verify(schedule) == []
    level = {x.id: k for k, lv in enumerate(schedule.levels()) for x in lv}
    assert all(level[d] < level[x.id] for x in schedule.sends for d in x.deps)
