"""Sender reliability in memory: a lossy, reordering channel between the sender's transport and
a receiver's reorder buffer; every message must complete, byte for byte."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts import wire
from hosts.cells import cell_payload, message_bytes, message_crc, pad_count, plan_cell
from hosts.layers import parse_int_block
from hosts.reorder import MessageAssembler, ReorderBuffer
from hosts.sack import decode_ack, encode_ack
from hosts.transport import SenderTransport


class Link:
    """Cells go sender -> receiver, ACKs come back through the real encoder/decoder."""

    def __init__(self, tr: SenderTransport, drop: set[int], rnd: random.Random,
                 start: int = 0) -> None:
        self.tr, self.drop, self.rnd = tr, drop, rnd
        self.rb = ReorderBuffer(expected=start)
        self.asm = MessageAssembler()
        self.crcs: list[int] = []
        self.dropped: list[int] = []
        self.wire: list[int] = []

    def step(self, now: float, burst: int = 8) -> None:
        for _ in range(burst):
            seq = self.tr.next_to_send()
            if seq is None:
                break
            self.tr.on_sent(seq, now, 0)
            if seq in self.drop:
                self.drop.discard(seq)  # only the first transmission is lost
                self.dropped.append(seq)
                continue
            self.wire.append(seq)
        self.rnd.shuffle(self.wire)  # everything in flight arrives in any order
        for seq in self.wire:
            opcode, payload, pad = self.tr.cell(seq) if seq >= self.tr.snd_una else (0, b"", 0)
            for _, arrived, (op, body, pd) in self.rb.push_psn(seq % wire.PSN_MOD,
                                                               (opcode, payload, pad), now):
                msg = self.asm.add(op, body, pd, arrived, now)
                if msg is not None:
                    self.crcs.append(msg.crc32)
        self.wire.clear()
        held = self.rb.held_seqs()
        body = encode_ack(1, self.rb.expected - 1, 0, held)
        ack = decode_ack(body, self.rb.expected - 1 & 0xFFFFFF, 12, len(body) - 4)
        self.tr.on_ack(ack, now)
        self.tr.check_timeouts(now)


@pytest.mark.parametrize("start", [0, wire.PSN_MOD - 37])
def test_dropped_cells_are_retransmitted_and_every_message_completes(start: int) -> None:
    tr = SenderTransport(payload_len=64, rto_s=0.05, sack_holdoff_s=0.002, start_seq=start)
    msgs = [message_bytes(i, n) for i, n in enumerate([1000, 61, 0, 4000, 777])]
    for m in msgs:
        tr.add_message(m, 0.0)
    total = tr.next_seq - start
    drop = {start + i for i in (0, 5, 17, 18, 19, total - 1)}  # first, middle, run, last cell
    link = Link(tr, set(drop), random.Random(1), start)
    now = 0.0
    while not tr.idle and now < 5.0:
        now += 0.001
        link.step(now)
    assert tr.idle, "not every message completed"
    assert sorted(link.dropped) == sorted(drop)
    assert link.crcs == [message_crc(m) for m in msgs]
    st = tr.stats
    assert st.retx_sack + st.retx_timeout >= len(drop)
    assert st.cells_new == total and st.messages_done == len(msgs)


def test_completion_needs_every_cell_acknowledged() -> None:
    tr = SenderTransport(payload_len=64, rto_s=10.0)
    tr.add_message(bytes(200), 0.0)  # 4 cells
    for _ in range(4):
        tr.on_sent(tr.next_to_send(), 0.0, 0)
    sacked = encode_ack(1, -1, 0, [1, 2, 3])  # everything but the first
    tr.on_ack(decode_ack(sacked, wire.PSN_MOD - 1, 12, len(sacked) - 4), 0.001)
    assert not tr.done and tr.sacked == {1, 2, 3}
    full = encode_ack(1, 3, 1)
    tr.on_ack(decode_ack(full, 3, 12, len(full) - 4), 0.002)
    assert [m.index for m in tr.done] == [0]


def test_failed_port_cells_are_queued_for_the_other_port() -> None:
    tr = SenderTransport(payload_len=64, rto_s=10.0)
    tr.add_message(bytes(600), 0.0)  # 10 cells
    for i in range(10):
        tr.on_sent(tr.next_to_send(), 0.0, i % 2)
    moved = tr.fail_port(1)
    assert moved == [1, 3, 5, 7, 9]
    assert [tr.next_to_send()] == [1]
    tr.on_sent(1, 0.1, 0)
    assert tr.next_to_send() == 3 and tr.stats.retx_failover == 5


def test_credit_grant_limits_new_cells() -> None:
    tr = SenderTransport(payload_len=64)
    tr.grant = 3
    tr.add_message(bytes(600), 0.0)
    sent = []
    while (seq := tr.next_to_send()) is not None:
        tr.on_sent(seq, 0.0, 0)
        sent.append(seq)
    assert sent == [0, 1, 2]
    body = encode_ack(1, 1, 0, grant_seq=6)
    tr.on_ack(decode_ack(body, 1, 12, len(body) - 4), 0.001)
    while (seq := tr.next_to_send()) is not None:
        tr.on_sent(seq, 0.0, 0)
        sent.append(seq)
    assert sent == [0, 1, 2, 3, 4, 5]


@settings(max_examples=300, deadline=None)
@given(body=st.binary(min_size=0, max_size=120), psn=st.integers(0, wire.PSN_MOD - 1))
def test_garbage_acks_never_break_the_sender(body: bytes, psn: int) -> None:
    tr = SenderTransport(payload_len=64)
    tr.add_message(bytes(600), 0.0)
    for _ in range(5):
        tr.on_sent(tr.next_to_send(), 0.0, 0)
    ack = decode_ack(body, psn, 0, len(body))
    if ack is not None:
        tr.on_ack(ack, 0.001)
        if ack.int_block is not None:
            parse_int_block(ack.int_block)
    assert tr.snd_una <= tr.snd_nxt <= tr.next_seq


@pytest.mark.parametrize("size", [0, 1, 1019, 1020, 1021, 1023, 1024, 2040, 2044, 2045, 2048,
                                  5000, 10 * 1020 - 4, 10 * 1020 - 2, 10 * 1020])
def test_cell_gives_what_the_cell_plan_gives_for_every_cell(size: int) -> None:
    """SenderTransport.cell skips the plan for a full middle cell: every cell of a message,
    at sizes around the cell boundaries (the short second-to-last cell among them), is what
    plan_cell, cell_payload and pad_count make of it."""
    payload_len = 1020
    tr = SenderTransport(payload_len=payload_len, start_seq=7)
    data = bytes(i % 251 for i in range(size))
    msg = tr.add_message(data, 0.0)
    for index in range(msg.cells):
        plan = plan_cell(size, payload_len, index, msg.cells)
        opcode, payload, pad = tr.cell(msg.first_seq + index)
        assert (opcode, bytes(payload), pad) == (
            plan.opcode, bytes(cell_payload(data, plan, payload_len)), pad_count(plan))
