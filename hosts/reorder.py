"""Receiver-side reordering: cells by PSN back into order, then back into messages.

Memory bound: a ``ReorderBuffer`` holds at most ``window`` cells, namely those with sequence
numbers in [expected, expected + window). A cell beyond that range is dropped and counted
(``beyond_window``); it is not SACKed, so the sender retransmits it (SACK hole or timeout).
With the default window of 4096 cells of 1 KiB the buffer holds at most 4 MiB of payload.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from hosts import wire
from hosts.sack import BIT_REVERSE

DEFAULT_WINDOW = 4096


@dataclass
class ReorderStats:
    received: int = 0
    delivered: int = 0
    out_of_order: int = 0  # arrived while an earlier cell was still missing
    duplicates: int = 0
    beyond_window: int = 0
    max_depth: int = 0  # most cells held at once
    reorder_delay_max_s: float = 0.0
    reorder_delay_sum_s: float = 0.0
    reorder_delayed: int = 0  # cells that waited in the buffer
    depth_hist: dict[int, int] = field(default_factory=dict)  # depth at out-of-order arrivals

    def depth_percentile(self, q: float) -> int:
        """Depth not exceeded by fraction ``q`` of out-of-order arrivals (0 if none)."""
        total = sum(self.depth_hist.values())
        seen = 0
        for depth in sorted(self.depth_hist):
            seen += self.depth_hist[depth]
            if seen >= q * total:
                return depth
        return 0

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "depth_hist"}
        d["reorder_delay_avg_s"] = (
            self.reorder_delay_sum_s / self.reorder_delayed if self.reorder_delayed else 0.0)
        d["p99_depth"] = self.depth_percentile(0.99)
        return d


@dataclass
class ReorderBuffer:
    """Delivers items strictly in sequence order, each exactly once."""

    window: int = DEFAULT_WINDOW
    expected: int = 0  # next unbounded sequence number to deliver
    stats: ReorderStats = field(default_factory=ReorderStats)
    _held: dict[int, tuple[float, Any]] = field(default_factory=dict)
    _mask: int = 0  # bit i set: expected + i is held (kept in step for cheap SACK bitmaps)

    def unwrap(self, psn: int) -> int:
        return wire.psn_unwrap(psn, self.expected)

    def push_psn(self, psn: int, item: Any, now: float) -> list[tuple[int, float, Any]]:
        return self.push(self.unwrap(psn), item, now)

    def push(self, seq: int, item: Any, now: float) -> list[tuple[int, float, Any]]:
        """Accept a cell; return the (seq, arrival time, item) now deliverable, in order."""
        st = self.stats
        st.received += 1
        if seq < self.expected or seq in self._held:
            st.duplicates += 1
            return []
        if seq >= self.expected + self.window:
            st.beyond_window += 1
            return []
        if seq != self.expected:
            st.out_of_order += 1
            self._held[seq] = (now, item)
            self._mask |= 1 << (seq - self.expected)
            depth = len(self._held)
            st.max_depth = max(st.max_depth, depth)
            st.depth_hist[depth] = st.depth_hist.get(depth, 0) + 1
            return []
        out = [(seq, now, item)]
        first = self.expected
        self.expected += 1
        held = self._held
        while self.expected in held:
            arrived, held_item = held.pop(self.expected)
            delay = now - arrived
            st.reorder_delayed += 1
            st.reorder_delay_sum_s += delay
            st.reorder_delay_max_s = max(st.reorder_delay_max_s, delay)
            out.append((self.expected, arrived, held_item))
            self.expected += 1
        self._mask >>= self.expected - first
        st.delivered += len(out)
        return out

    def sack_bitmap(self, nbytes: int = wire.SACK_BITMAP_BYTES) -> bytes:
        """The wire SACK bitmap (bit i, MSB first, = expected + i held) without a Python loop."""
        low = self._mask & ((1 << (nbytes * 8)) - 1)
        return low.to_bytes(nbytes, "little").translate(BIT_REVERSE)

    def has(self, seq: int) -> bool:
        """Already delivered or held: a new arrival of ``seq`` would be a duplicate."""
        return seq < self.expected or seq in self._held

    @property
    def depth(self) -> int:
        return len(self._held)

    def held_seqs(self) -> list[int]:
        return sorted(self._held)


@dataclass
class Message:
    index: int
    length: int
    crc32: int
    data: bytes  # empty unless the assembler keeps data
    first_arrival: float
    completed: float


@dataclass
class MessageAssembler:
    """Turns in-order cells (opcode, payload) into whole messages, checking each length.

    The payload of the latest non-last cell is held back until the next cell shows whether
    it was cut short (a message ending within 4 bytes of a cell boundary, see cells.segment).
    """

    keep_data: bool = False
    malformed: int = 0
    _chunks: list[bytes] = field(default_factory=list)
    _held: bytes | None = None
    _crc: int = 0
    _len: int = 0
    _first: float | None = None
    _count: int = 0

    def add(self, opcode: int, payload: bytes, pad: int, arrived: float,
            now: float) -> Message | None:
        if opcode in (wire.OP_SEND_FIRST, wire.OP_SEND_ONLY_IMM) and self._held is not None:
            self.malformed += 1  # a new message began before the last one ended
            self._reset()
        if self._first is None or arrived < self._first:
            self._first = arrived
        if opcode not in wire.LAST_OPCODES:
            if self._held is not None:
                self._take(self._held)
            self._held = bytes(payload)
            return None
        if len(payload) < wire.IMMDT_LEN:
            return self._bad()
        (msg_len,) = struct.unpack_from("!I", payload, 0)
        held = self._held or b""
        tail = msg_len - self._len - len(held)
        room = len(payload) - wire.IMMDT_LEN
        if tail > room or tail <= -wire.IMMDT_LEN or (tail < 0 and not held) or \
                (-max(tail, 0)) % 4 != pad:
            return self._bad()
        if tail < 0:
            self._take(held[:len(held) + tail])
        else:
            self._take(held)
            self._take(payload[wire.IMMDT_LEN:wire.IMMDT_LEN + tail])
        msg = Message(self._count, msg_len, self._crc, b"".join(self._chunks),
                      self._first if self._first is not None else arrived, now)
        self._count += 1
        self._reset()
        return msg

    def _bad(self) -> None:
        self.malformed += 1
        self._reset()

    def _take(self, data: bytes) -> None:
        self._crc = zlib.crc32(data, self._crc)
        self._len += len(data)
        if self.keep_data:
            self._chunks.append(bytes(data))

    def _reset(self) -> None:
        self._chunks = []
        self._held = None
        self._crc = 0
        self._len = 0
        self._first = None
