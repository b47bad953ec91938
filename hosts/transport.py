"""Sender-side reliability without I/O: PSNs, what is in flight where, ACK/SACK/NAK handling,
retransmission on SACK holes and on timeout, message completion.

Sequence numbers are unbounded integers here (the wire carries the low 24 bits). A message is
complete only when the cumulative ACK has passed its last cell, i.e. every cell is acknowledged.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from hosts import wire
from hosts.cells import cell_count, cell_payload, pad_count, plan_cell
from hosts.sack import AckInfo


@dataclass
class OutMessage:
    index: int
    data: bytes
    first_seq: int
    end_seq: int  # one past the last cell
    cells: int
    queued_at: float
    first_sent: float | None = None
    completed: float | None = None


@dataclass(slots=True)
class InFlight:
    sent_at: float
    port: int
    tx_count: int


@dataclass
class TransportStats:
    cells_sent: int = 0
    cells_new: int = 0
    retx_sack: int = 0
    retx_nak: int = 0
    retx_timeout: int = 0
    retx_failover: int = 0
    acks: int = 0
    naks: int = 0
    bad_acks: int = 0
    messages_done: int = 0


@dataclass
class SenderTransport:
    payload_len: int = wire.CELL_PAYLOAD_DEFAULT
    rto_s: float = 0.05  # minimum (and initial) retransmission timeout
    sack_holdoff_s: float = 0.005
    max_inflight_cells: int = 1024
    start_seq: int = 0
    stats: TransportStats = field(default_factory=TransportStats)
    messages: deque[OutMessage] = field(default_factory=deque)
    done: list[OutMessage] = field(default_factory=list)
    inflight: dict[int, InFlight] = field(default_factory=dict)  # in (re)send order
    sacked: set[int] = field(default_factory=set)
    retx: deque[int] = field(default_factory=deque)
    grant: int | None = None  # credit mode: may send seq < grant

    def __post_init__(self) -> None:
        self.snd_una = self.start_seq  # lowest unacknowledged
        self.snd_nxt = self.start_seq  # next never-sent
        self.next_seq = self.start_seq  # next to assign to a new message
        self._msg_index = 0
        self._retx_queued: set[int] = set()
        self._last_hole_scan = float("-inf")
        self.acked_ports: set[int] = set()
        self._last_msg: OutMessage | None = None
        self.srtt: float | None = None
        self.rttvar = 0.0  # ports whose cells the last ACK acknowledged

    # -- messages ----------------------------------------------------------------------------
    def add_message(self, data: bytes, now: float) -> OutMessage:
        n = cell_count(len(data), self.payload_len)
        msg = OutMessage(self._msg_index, data, self.next_seq, self.next_seq + n, n, now)
        self._msg_index += 1
        self.next_seq = msg.end_seq
        self.messages.append(msg)
        return msg

    def _message_of(self, seq: int) -> OutMessage:
        last = self._last_msg
        if last is not None and last.first_seq <= seq < last.end_seq:
            return last
        i = bisect.bisect_right(self.messages, seq, key=lambda m: m.first_seq) - 1
        if i < 0 or seq >= self.messages[i].end_seq:
            raise KeyError(seq)
        self._last_msg = self.messages[i]
        return self._last_msg

    def cell(self, seq: int) -> tuple[int, bytes | memoryview, int]:
        """(opcode, payload, pad count) of cell ``seq``."""
        msg = self._message_of(seq)
        index = seq - msg.first_seq
        if 0 < index < msg.cells - 1:
            # A middle cell (nearly every cell of a long message): what plan_cell and
            # cell_payload give for it, without building its plan. Only the one before a
            # last cell that carries nothing but the ImmDt can be short: that one still
            # takes the general path.
            offset = index * self.payload_len
            end = offset + self.payload_len
            if end <= len(msg.data):
                return wire.OP_SEND_MIDDLE, memoryview(msg.data)[offset:end], 0
        plan = plan_cell(len(msg.data), self.payload_len, index, msg.cells)
        return plan.opcode, cell_payload(msg.data, plan, self.payload_len), pad_count(plan)

    @property
    def idle(self) -> bool:
        return not self.messages

    # -- what to send next -------------------------------------------------------------------
    def next_to_send(self, window_bytes: float | None = None) -> int | None:
        """The next sequence number to transmit (retransmissions first), or None."""
        while self.retx:
            seq = self.retx[0]
            if seq < self.snd_una or seq in self.sacked:
                self.retx.popleft()
                self._retx_queued.discard(seq)
                continue
            return seq
        seq = self.snd_nxt
        if seq >= self.next_seq:
            return None
        if seq - self.snd_una >= self.max_inflight_cells:
            return None
        if self.grant is not None and seq >= self.grant:
            return None
        if window_bytes is not None and len(self.inflight) * self.payload_len >= window_bytes:
            return None
        return seq

    def on_sent(self, seq: int, now: float, port: int) -> None:
        old = self.inflight.pop(seq, None)
        self.inflight[seq] = InFlight(now, port, (old.tx_count if old else 0) + 1)
        self.stats.cells_sent += 1
        if self.retx and self.retx[0] == seq:
            self.retx.popleft()
            self._retx_queued.discard(seq)
        if seq == self.snd_nxt:
            self.snd_nxt += 1
            self.stats.cells_new += 1
            msg = self._message_of(seq)
            if msg.first_sent is None:
                msg.first_sent = now

    def _queue_retx(self, seq: int) -> bool:
        if seq in self._retx_queued or seq < self.snd_una or seq in self.sacked:
            return False
        self._retx_queued.add(seq)
        self.retx.append(seq)
        return True

    # -- feedback ------------------------------------------------------------------------------
    def on_ack(self, ack: AckInfo, now: float) -> list[int]:
        """Apply an ACK; return the sequence numbers newly acknowledged (cumulative or SACK)."""
        cum = wire.psn_unwrap(ack.cum_psn, self.snd_una - 1)
        if cum >= self.snd_nxt or cum < self.snd_una - 1 - self.max_inflight_cells:
            self.stats.bad_acks += 1
            return []
        self.stats.acks += 1
        self.acked_ports.clear()
        newly: list[int] = []
        for seq in range(self.snd_una, cum + 1):
            fl = self.inflight.pop(seq, None)
            if fl is not None:
                self.acked_ports.add(fl.port)
                if seq == cum and fl.tx_count == 1:  # Karn: only never-resent cells time RTT
                    self._rtt_sample(now - fl.sent_at)
            if fl is not None or seq not in self.sacked:
                newly.append(seq)
            self.sacked.discard(seq)
        self.snd_una = max(self.snd_una, cum + 1)
        base = wire.psn_unwrap(ack.base_psn, self.snd_una)
        top = None
        sacked, snd_una, snd_nxt = self.sacked, self.snd_una, self.snd_nxt
        for off in ack.sacked_offsets():  # ascending: the last one kept is the top
            seq = base + off
            if seq < snd_una or seq >= snd_nxt:
                continue
            top = seq
            if seq not in sacked:
                sacked.add(seq)
                fl = self.inflight.pop(seq, None)
                if fl is not None:
                    self.acked_ports.add(fl.port)
                    newly.append(seq)
        if ack.grant_psn is not None:
            self.grant = wire.psn_unwrap(ack.grant_psn, self.snd_nxt)
        if ack.syndrome == wire.AETH_NAK_SEQ:
            self.stats.naks += 1
            fl = self.inflight.get(self.snd_una)
            if fl is not None and now - fl.sent_at >= self.sack_holdoff_s and \
                    self._queue_retx(self.snd_una):
                self.stats.retx_nak += 1
        if top is not None and now - self._last_hole_scan >= self.sack_holdoff_s / 4:
            self._last_hole_scan = now
            self._retx_holes(top, now)
        self._complete(now)
        return newly

    def _retx_holes(self, top: int, now: float) -> None:
        """Cells below the highest SACKed one that are still missing after the hold-off."""
        limit = now - self.sack_holdoff_s
        for seq in range(self.snd_una, top):
            fl = self.inflight.get(seq)
            if fl is not None and fl.sent_at <= limit and self._queue_retx(seq):
                self.stats.retx_sack += 1

    def _complete(self, now: float) -> None:
        while self.messages and self.messages[0].end_seq <= self.snd_una:
            msg = self.messages.popleft()
            msg.completed = now
            msg.data = b""  # the bytes are no longer needed; keep the record small
            if self._last_msg is msg:
                self._last_msg = None
            self.done.append(msg)
            self.stats.messages_done += 1

    def _rtt_sample(self, rtt: float) -> None:
        # RFC 6298 smoothing; the RTO never drops below the configured rto_s.
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt

    @property
    def rto(self) -> float:
        if self.srtt is None:
            return self.rto_s
        return max(self.rto_s, self.srtt + 4 * self.rttvar)

    def check_timeouts(self, now: float) -> int:
        """Queue every cell unacknowledged for longer than the RTO; returns how many."""
        limit = now - self.rto
        count = 0
        for seq, fl in self.inflight.items():
            if fl.sent_at > limit:
                break  # in send order: the rest are younger
            if self._queue_retx(seq):
                count += 1
        self.stats.retx_timeout += count
        return count

    def fail_port(self, port: int) -> list[int]:
        """A port died: queue everything in flight on it for retransmission elsewhere."""
        moved = [seq for seq, fl in self.inflight.items() if fl.port == port]
        for seq in moved:
            if self._queue_retx(seq):
                self.stats.retx_failover += 1
        return moved
