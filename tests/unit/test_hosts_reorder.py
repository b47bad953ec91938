"""Reorder buffer and message assembly: in order, exactly once, whatever the arrival order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts import wire
from hosts.cells import cell_payload, message_bytes, pad_count, segment
from hosts.reorder import MessageAssembler, ReorderBuffer
from hosts.sack import encode_bitmap


def _deliver_all(arrivals: list[int], window: int = 1 << 20, start: int = 0) -> tuple[list[int], ReorderBuffer]:
    rb = ReorderBuffer(window=window, expected=start)
    out: list[int] = []
    for t, seq in enumerate(arrivals):
        out += [s for s, _, _ in rb.push(seq, seq, float(t))]
    return out, rb


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.permutations(list(range(n)))))
def test_any_permutation_is_delivered_in_order(perm: list[int]) -> None:
    out, rb = _deliver_all(perm)
    assert out == sorted(perm)
    assert rb.depth == 0
    late = sum(1 for i, s in enumerate(perm) if s != min(perm[i:]))
    assert rb.stats.out_of_order == late


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 80), max_size=400))
def test_duplicates_and_gaps_deliver_the_in_order_prefix_once(arrivals: list[int]) -> None:
    out, rb = _deliver_all(arrivals)
    seen = set(arrivals)
    prefix = 0
    while prefix in seen:
        prefix += 1
    assert out == list(range(prefix))  # exactly the contiguous prefix, each once
    assert rb.depth == len(seen) - prefix  # the rest waits behind the first gap
    assert rb.stats.duplicates == len(arrivals) - len(seen)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 600), max_size=300))
def test_incremental_sack_bitmap_matches_the_held_cells(arrivals: list[int]) -> None:
    _, rb = _deliver_all(arrivals)
    offsets = [s - rb.expected for s in rb.held_seqs()]
    assert rb.sack_bitmap() == encode_bitmap(offsets)


def test_psn_wraparound_keeps_order() -> None:
    start = wire.PSN_MOD - 5
    seqs = list(range(start, start + 12))
    random.Random(3).shuffle(seqs)
    rb = ReorderBuffer(expected=start)
    out = []
    for t, seq in enumerate(seqs):
        out += [s for s, _, _ in rb.push_psn(seq % wire.PSN_MOD, None, float(t))]
    assert out == list(range(start, start + 12))
    assert [s % wire.PSN_MOD for s in out][5] == 0


def test_memory_bound_drops_beyond_window_and_counts() -> None:
    rb = ReorderBuffer(window=8)
    for seq in range(1, 20):  # 0 is missing: everything waits
        rb.push(seq, seq, 0.0)
    assert rb.depth == 7  # seq 1..7 fit in [0, 8)
    assert rb.stats.beyond_window == 12
    out = [s for s, _, _ in rb.push(0, 0, 1.0)]
    assert out == list(range(8))
    # the dropped cells come back (retransmitted) and are accepted now
    for seq in range(8, 20):
        out += [s for s, _, _ in rb.push(seq, seq, 2.0)]
    assert out == list(range(20))


def test_reorder_statistics() -> None:
    rb = ReorderBuffer()
    rb.push(2, "c", 1.0)
    rb.push(1, "b", 2.0)
    rb.push(0, "a", 5.0)
    st_ = rb.stats
    assert st_.out_of_order == 2 and st_.max_depth == 2
    assert st_.reorder_delay_max_s == 4.0  # cell 2 waited from t=1 to t=5
    assert st_.reorder_delay_sum_s == 4.0 + 3.0
    assert st_.depth_hist == {1: 1, 2: 1}  # depths seen by the two early arrivals
    assert st_.depth_percentile(0.5) == 1 and st_.as_dict()["p99_depth"] == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_messages_reassemble_from_shuffled_cells(sizes: list[int], rnd: random.Random) -> None:
    payload_len = 64
    cells = []
    msgs = [message_bytes(i, n, seed=7) for i, n in enumerate(sizes)]
    seq = 0
    for msg in msgs:
        for plan in segment(len(msg), payload_len):
            cells.append((seq, (plan.opcode, cell_payload(msg, plan, payload_len), pad_count(plan))))
            seq += 1
    rnd.shuffle(cells)
    rb, asm = ReorderBuffer(), MessageAssembler(keep_data=True)
    got = []
    for t, (s, item) in enumerate(cells):
        for _, arrived, (op, body, pad) in rb.push(s, item, float(t)):
            assert len(body) == payload_len  # every cell has the same length
            m = asm.add(op, body, pad, arrived, float(t))
            if m is not None:
                got.append(m.data)
    assert got == msgs
    assert asm.malformed == 0


def test_assembler_rejects_a_wrong_length() -> None:
    asm = MessageAssembler()
    body = (100).to_bytes(4, "big") + bytes(60)  # claims 100 bytes, only room for 60
    assert asm.add(wire.OP_SEND_ONLY_IMM, body, 0, 0.0, 0.0) is None
    assert asm.malformed == 1
