"""The receiver's decisions on real frames, with ports that record what would be sent:
CNP pacing, INT echo, ACK/SACK/NAK, in-order delivery of whole messages."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosts import wire
from hosts.cells import (
    CellTemplate,
    cell_payload,
    message_bytes,
    message_crc,
    pad_count,
    parse_roce,
    segment,
)
from hosts.layers import HopRecord, encode_hop, int_source_block
from hosts.nic import PacketSocketPort
from hosts.receiver import Receiver, ReceiverConfig
from hosts.sack import AckInfo, decode_ack

PAYLOAD = 64


class RecordingPort(PacketSocketPort):
    def send(self, frame: bytes | bytearray) -> bool:
        self.events.append({"frame": bytes(frame)})
        return True

    def frames_out(self) -> list[bytes]:
        return [e["frame"] for e in self.events]


def _receiver(**kw: object) -> tuple[Receiver, RecordingPort]:
    rx = Receiver(ReceiverConfig(ifaces=["fake0"], **kw))  # type: ignore[arg-type]
    port = RecordingPort(0, "fake0", mac="02:00:00:00:00:02")
    rx.ports = [port]
    return rx, port


def _cells(msgs: list[bytes], int_source: bool = False) -> list[bytearray]:
    tpl = CellTemplate("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
                       qpn=7, payload_len=PAYLOAD, int_source=int_source)
    frames, seq = [], 0
    for msg in msgs:
        for plan in segment(len(msg), PAYLOAD):
            frames.append(tpl.frame(seq, plan.opcode, cell_payload(msg, plan, PAYLOAD),
                                    pad_count(plan)))
            seq += 1
    return frames


def _decode(frame: bytes) -> tuple[int, AckInfo | None]:
    f = parse_roce(frame)
    assert f is not None and f.qpn == 7
    if f.opcode == wire.OP_ACK:
        return f.opcode, decode_ack(frame, f.psn, f.body_off, f.body_end)
    return f.opcode, None


def test_at_most_one_cnp_per_interval() -> None:
    rx, port = _receiver(cnp_interval_s=50e-6, ack_every=1000, ack_delay_s=1.0)
    frames = _cells([bytes(PAYLOAD * 12)])
    for i, frame in enumerate(frames[:10]):
        frame[15] |= wire.ECN_CE  # congestion experienced
        rx.on_frame(frame, len(frame), i * 20e-6, port)  # every 20 us
    cnps = [fr for fr in port.frames_out() if _decode(fr)[0] == wire.OP_CNP]
    assert len(cnps) == 4  # at 0, 60, 120, 180 us
    rx.on_frame(frames[10], len(frames[10]), 1.0, port)  # not CE: no CNP
    assert len([fr for fr in port.frames_out() if _decode(fr)[0] == wire.OP_CNP]) == 4
    assert rx.flows[next(iter(rx.flows))].ce_cells == 10


def test_int_stack_is_echoed_in_the_next_ack() -> None:
    rx, port = _receiver(ack_every=1)
    frame = _cells([bytes(10)], int_source=True)[0]
    hop = encode_hop(wire.INT_INSTRUCTIONS, HopRecord(node_id=3, queue_occupancy=9, tx_bytes=5))
    block = bytearray(int_source_block())
    block[1] += len(hop) // 4  # one hop pushed, as a transit switch would
    shim = 14 + 20 + 8
    frame = frame[:shim + 16] + hop + frame[shim + 16:]
    frame[shim:shim + 16] = block  # (IP/UDP lengths stay stale: the receiver does not read them)
    rx.on_frame(frame, len(frame), 0.0, port)
    acks = [info for op, info in map(_decode, port.frames_out()) if op == wire.OP_ACK]
    assert acks and acks[0].int_block == bytes(block[:16]) + hop


def test_shuffled_duplicated_cells_give_whole_messages_in_order() -> None:
    msgs = [message_bytes(i, n, seed=2) for i, n in enumerate([300, 61, 0, 1000])]
    frames = _cells(msgs)
    arrivals = frames + random.Random(5).sample(frames, 6)  # some duplicates
    random.Random(9).shuffle(arrivals)
    rx, port = _receiver(ack_every=4)
    for t, frame in enumerate(arrivals):
        rx.on_frame(frame, len(frame), t * 1e-3, port)
    flow = rx.metrics(1.0)["flows"][0]
    assert [m["crc32"] for m in flow["message_log"]] == [message_crc(m) for m in msgs]
    assert flow["reorder"]["duplicates"] == 6 and flow["reorder"]["out_of_order"] > 0
    last = _decode(port.frames_out()[-1])[1]
    assert last.cum_psn == len(frames) - 1 and last.msn == len(msgs)


def test_sack_reports_held_cells_and_nak_follows_a_lasting_gap() -> None:
    rx, port = _receiver(ack_every=1, nak_holdoff_s=0.003, ack_delay_s=1.0)
    frames = _cells([bytes(PAYLOAD * 6)])
    for t, i in enumerate((0, 2, 3)):  # cell 1 is missing
        rx.on_frame(frames[i], len(frames[i]), t * 1e-4, port)
    ack = _decode(port.frames_out()[-1])[1]
    assert ack.cum_psn == 0 and ack.base_psn == 1 and ack.sacked_offsets() == [1, 2]
    assert ack.syndrome == wire.AETH_ACK
    rx.tick(0.001)  # the gap is noticed
    rx.tick(0.002)
    assert all(_decode(f)[1].syndrome == wire.AETH_ACK for f in port.frames_out())
    rx.tick(0.0045)  # 3 ms later it is still there: NAK
    nak = _decode(port.frames_out()[-1])[1]
    assert nak.syndrome == wire.AETH_NAK_SEQ and nak.cum_psn == 0


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, 200), noise=st.binary(min_size=0, max_size=120),
       flip=st.integers(0, 150))
def test_malformed_frames_are_counted_not_fatal(cut: int, noise: bytes, flip: int) -> None:
    rx, port = _receiver(ack_every=1)
    good = _cells([bytes(10)], int_source=True)[0]  # a one-cell message
    bad = bytearray(good[:cut] + noise)
    if flip < len(bad):
        bad[flip] ^= 0xFF
    rx.on_frame(bad, len(bad), 0.0, port)  # must not raise
    rx.on_frame(good, len(good), 0.1, port)
    # Either the damage was seen (not RoCE, or a malformed message) or the message got through
    # (a cell whose headers survived takes its PSN: ICRC is not checked, see hosts.wire).
    assert rx.messages_total + rx.not_roce + sum(
        f.assembler.malformed for f in rx.flows.values()) >= 1
    for frame in port.frames_out():  # whatever was answered is itself well formed
        assert parse_roce(frame) is not None


def test_credit_grants_ride_on_acks_in_batches_of_ack_every() -> None:
    # A link whose rate counts packets charges a grant-only ACK a whole cell's slot: one per
    # granted cell would take as much of the reverse line as the data takes of the forward one.
    rate = 1000.0  # cells per second the downlink takes, and the sender's pace
    rx, port = _receiver(ack_every=8, ack_delay_s=8 / rate, credit_cells_per_s=rate,
                         credit_initial_cells=16)
    frames = _cells([bytes(PAYLOAD * 200)])
    t = 0.0
    for frame in frames[:160]:
        for k in range(4):  # the receiver's loop ticks a few times per cell
            rx.tick(t + k / (4 * rate))
        rx.on_frame(frame, len(frame), t, port)
        t += 1 / rate
    grants = [info.grant_psn for op, info in map(_decode, port.frames_out())
              if op == wire.OP_ACK and info.grant_psn is not None]
    assert grants[-1] >= 160 + 8  # the grant kept ahead of the cells that arrived
    # one ACK per 8 cells (each carrying the grant so far), not one per grant
    assert len(port.frames_out()) <= 160 / 8 + 3, len(port.frames_out())


class _QueuedPort(RecordingPort):
    """A port whose socket reads hand out queued frames (the loop's recv_into)."""

    def __init__(self, frames: list[bytearray]) -> None:
        super().__init__(0, "fake0", mac="02:00:00:00:00:02")
        self.queue = list(frames)
        self.sent_at: list[tuple[float, bytes]] = []
        self.clock = lambda: 0.0

    def send(self, frame: bytes | bytearray) -> bool:
        self.sent_at.append((self.clock(), bytes(frame)))
        return super().send(frame)

    def recv_into(self, buf: bytearray) -> int:
        if not self.queue:
            return 0
        frame = self.queue.pop(0)
        buf[:len(frame)] = frame
        return len(frame)


def test_the_loop_sleeps_until_something_is_due_not_on_a_fine_tick(monkeypatch) -> None:
    # An idle receiver must not wake thousands of times a second: 16 of them polling every
    # 200 us took a fat-tree emulation's two cores from its switches. The loop sleeps until
    # tick is next due (here a partial ACK batch's delay) or, with nothing due, a bounded while.
    import hosts.receiver as receiver

    clock = [0.0]
    waits: list[float] = []

    def fake_select(r: list, w: list, x: list, timeout: float) -> tuple[list, list, list]:
        waits.append(timeout)
        clock[0] += timeout  # nothing arrives: the whole wait passes
        return [], [], []

    monkeypatch.setattr(receiver.select, "select", fake_select)
    rx = Receiver(ReceiverConfig(ifaces=["fake0"], ack_every=8, ack_delay_s=0.05,
                                 duration_s=1.0), clock=lambda: clock[0])
    port = _QueuedPort(_cells([bytes(PAYLOAD * 20)])[:3])  # 3 cells: an ACK batch waits
    port.clock = lambda: clock[0]
    rx.ports = [port]
    rx.run()
    assert len(waits) <= 1.0 / receiver.IDLE_WAIT_S + 5, len(waits)
    assert max(waits) <= receiver.IDLE_WAIT_S
    # the partial batch was answered when its delay ran out, not a poll later
    acks = [t for t, f in port.sent_at if _decode(f)[0] == wire.OP_ACK]
    assert len(acks) == 1 and abs(acks[0] - 0.05) < 1e-9, acks


def test_poll_says_when_the_receiver_is_next_due_as_an_absolute_time() -> None:
    rx, port = _receiver(ack_every=4, ack_delay_s=0.002)
    rx.begin()
    assert rx.poll(0.0) == math.inf  # nothing waits for time: only a frame wakes it
    frame = _cells([bytes(PAYLOAD * 3)])[0]
    rx.on_frame(frame, len(frame), 0.0005, port)  # one cell of a batch of four
    assert rx.poll(0.0005) == pytest.approx(0.002)  # its partial batch waits out the delay
    assert not port.frames_out()
    assert rx.poll(0.002) == math.inf and len(port.frames_out()) == 1  # and is ACKed then
