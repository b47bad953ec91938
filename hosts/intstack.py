"""Plain decoders and encoders of INT metadata stacks, without Scapy (``hosts.layers`` has
the Scapy layers and re-exports these): hosts and the simulator read INT blocks on the
per-frame path, and importing Scapy cost the simulator 0.5 CPU s."""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass

from hosts import wire
from hosts.headers import hop_layout


@dataclass
class HopRecord:
    """One hop's INT metadata; None where the instruction bitmap did not ask for it."""

    node_id: int | None = None
    ingress_port: int | None = None
    egress_port: int | None = None
    hop_latency: int | None = None
    queue_id: int | None = None
    queue_occupancy: int | None = None
    ingress_ts: int | None = None
    egress_ts: int | None = None
    tx_bytes: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)


def _bits(bitmap: int) -> list[int]:
    return [bit for bit in range(15) if bitmap & (1 << (15 - bit))]


def decode_hop(bitmap: int, data: bytes) -> HopRecord:
    """Decode one hop's metadata in instruction-bit order (layouts: hosts.headers.INT_HOP)."""
    rec = HopRecord()
    off = 0
    for bit in _bits(bitmap):
        layout = hop_layout(bit)
        for name, value in layout.unpack(data, off).items():
            if not name.startswith("rsv"):
                setattr(rec, name, value)
        off += layout.size
    return rec


def encode_hop(bitmap: int, rec: HopRecord) -> bytes:
    """Encode one hop's metadata (missing values become the all-ones 'invalid' value)."""
    out = bytearray()
    for bit in _bits(bitmap):
        layout = hop_layout(bit)
        values = {}
        for name, width in layout.fields:
            value = None if name.startswith("rsv") else getattr(rec, name)
            values[name] = (1 << width) - 1 if value is None else value
        out += layout.pack(**values)
    return bytes(out)


def decode_stack(bitmap: int, hop_ml: int, stack: bytes) -> list[HopRecord]:
    """All hops of a metadata stack, newest (closest to the sink) first."""
    size = hop_ml * 4
    if size == 0:
        return []
    return [decode_hop(bitmap, stack[i:i + size]) for i in range(0, len(stack) - size + 1, size)]


def parse_int_block(data: bytes) -> tuple[int, int, list[HopRecord]] | None:
    """Parse raw shim + INT-MD + stack bytes: (total length, bitmap, hops), or None if bad."""
    if len(data) < wire.INT_SHIM_LEN + wire.INT_MD_HEADER_LEN:
        return None
    int_type = data[0] >> 4
    total = wire.INT_SHIM_LEN + data[1] * 4
    if int_type != wire.INT_TYPE_MD or total > len(data) or total < 16:
        return None
    hop_ml = data[6] & 0x1F
    (bitmap,) = struct.unpack_from("!H", data, 8)
    return total, bitmap, decode_stack(bitmap, hop_ml, data[16:total])
