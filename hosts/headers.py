"""Header layouts described once, as (field, bits) in wire order; everything else derives
from these tables: byte offsets, ``struct`` formats with the masks and shifts to split their
words, the Scapy layers' fields (hosts.layers) and INT hop encode/decode.

A field named ``rsv*`` is reserved (sent as zero). Field widths add up to whole bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from hosts import wire

_WORD_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


class Layout:
    """One header: fields in wire order, big-endian, MSB first."""

    def __init__(self, name: str, fields: Iterable[tuple[str, int]]) -> None:
        self.name = name
        self.fields = tuple(fields)
        self.bit_offset: dict[str, int] = {}
        bit = 0
        for field, width in self.fields:
            self.bit_offset[field] = bit
            bit += width
        if bit % 8:
            raise ValueError(f"{name}: fields add up to {bit} bits, not whole bytes")
        self.size = bit // 8
        self.words = self._words()
        self.struct = struct.Struct("!" + "".join(_WORD_CODES[w] for w, _ in self.words))

    def _words(self) -> list[tuple[int, list[tuple[str, int, int]]]]:
        """Fields grouped into 8/16/32/64-bit words, each as small as the fields after it
        allow: (word bits, [(field, shift, mask)])."""
        groups = _group(list(self.fields))
        if groups is None:
            raise ValueError(f"{self.name}: fields do not group into 8/16/32/64-bit words")
        words = []
        for group in groups:
            total = sum(w for _, w in group)
            parts, shift = [], total
            for f, w in group:
                shift -= w
                parts.append((f, shift, (1 << w) - 1))
            words.append((total, parts))
        return words

    def width(self, field: str) -> int:
        return dict(self.fields)[field]

    def byte_offset(self, field: str) -> int:
        """Offset of the byte holding the field's first bit."""
        return self.bit_offset[field] // 8

    def shift(self, field: str) -> int:
        """Right shift of the field within its byte-aligned word (see ``words``)."""
        for _, parts in self.words:
            for name, shift, _mask in parts:
                if name == field:
                    return shift
        raise KeyError(field)

    def unpack(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> dict[str, int]:
        out: dict[str, int] = {}
        for (_, parts), value in zip(self.words, self.struct.unpack_from(buf, offset),
                                     strict=True):
            for name, shift, mask in parts:
                out[name] = (value >> shift) & mask
        return out

    def pack(self, **values: int) -> bytes:
        """Missing fields are zero; values are cut to their widths."""
        words = []
        for _, parts in self.words:
            value = 0
            for name, shift, mask in parts:
                value |= (values.get(name, 0) & mask) << shift
            words.append(value)
        return self.struct.pack(*words)


def _group(fields: list[tuple[str, int]]) -> list[list[tuple[str, int]]] | None:
    if not fields:
        return []
    total = 0
    for i, (_, width) in enumerate(fields):
        total += width
        if total in _WORD_CODES:
            rest = _group(fields[i + 1:])
            if rest is not None:
                return [fields[:i + 1], *rest]
        if total > 64:
            break
    return None


# InfiniBand Base Transport Header (RoCEv2), 12 bytes.
BTH = Layout("BTH", (("opcode", 8), ("se", 1), ("migreq", 1), ("pad", 2), ("tver", 4),
                     ("pkey", 16), ("fecn", 1), ("becn", 1), ("rsv6", 6), ("dqpn", 24),
                     ("ackreq", 1), ("rsv7", 7), ("psn", 24)))
# ACK Extended Transport Header: syndrome and message sequence number.
AETH = Layout("AETH", (("syndrome", 8), ("msn", 24)))
# The fabric's selective-ACK block after the AETH (then ``bitmap_len`` bytes of bitmap).
SACK = Layout("SACK", (("version", 8), ("flags", 8), ("bitmap_len", 16), ("rsv1", 8),
                       ("base_psn", 24), ("rsv2", 8), ("grant_psn", 24)))

# INT-MD v2.1 per-hop metadata, per instruction bit (bit 0 = MSB of the bitmap). Bits not
# listed (9-14) are 4 bytes this fabric does not interpret.
INT_HOP = {
    wire.INT_BIT_NODE_ID: Layout("node id", (("node_id", 32),)),
    wire.INT_BIT_L1_PORTS: Layout("L1 ports", (("ingress_port", 16), ("egress_port", 16))),
    wire.INT_BIT_HOP_LATENCY: Layout("hop latency", (("hop_latency", 32),)),
    wire.INT_BIT_QUEUE: Layout("queue", (("queue_id", 8), ("queue_occupancy", 24))),
    wire.INT_BIT_INGRESS_TS: Layout("ingress ts", (("ingress_ts", 64),)),
    wire.INT_BIT_EGRESS_TS: Layout("egress ts", (("egress_ts", 64),)),
    wire.INT_BIT_L2_PORTS: Layout("L2 ports", (("rsv_l2_ingress", 32), ("rsv_l2_egress", 32))),
    wire.INT_BIT_TX_UTIL: Layout("tx util", (("tx_bytes", 32),)),
    wire.INT_BIT_BUFFER: Layout("buffer", (("rsv_buffer_id", 8), ("rsv_buffer_occ", 24))),
}
_OTHER_HOP = Layout("unknown", (("rsv", 32),))


def hop_layout(bit: int) -> Layout:
    return INT_HOP.get(bit, _OTHER_HOP)


def hop_bytes(bitmap: int) -> int:
    """Per-hop metadata bytes for an instruction bitmap (bits 0-14)."""
    return sum(hop_layout(bit).size for bit in range(15) if bitmap & (1 << (15 - bit)))
