"""ACK/SACK/NAK/grant and CNP bodies (UDP payloads), encoded and decoded without Scapy.

Layout (see hosts.wire): BTH(ACK, psn = cumulative ACK) / AETH / SACK block / [INT echo] /
ICRC. Sequence numbers inside the hosts are unbounded integers; only the wire has 24 bits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hosts import wire
from hosts.cells import bth_bytes
from hosts.headers import AETH, SACK

_SACK_HEAD = SACK.struct  # version, flags, bitmap length, rsv1|base PSN, rsv2|grant PSN
_PSN_MASK = (1 << SACK.width("base_psn")) - 1
_AETH = AETH.struct
# byte -> the same byte with its bit order reversed (LSB-first integer bits <-> MSB-first wire)
BIT_REVERSE = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


@dataclass
class AckInfo:
    cum_psn: int  # last PSN received in order (24-bit)
    syndrome: int
    msn: int
    base_psn: int  # first PSN the bitmap describes (24-bit)
    bitmap: bytes
    grant_psn: int | None  # 24-bit, credit mode only
    int_block: bytes | None

    def sacked_offsets(self) -> list[int]:
        """Offsets i (from base_psn) whose bit is set, ascending."""
        mask = int.from_bytes(self.bitmap.translate(BIT_REVERSE), "little")
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out


def encode_bitmap(offsets: Iterable[int], nbytes: int = wire.SACK_BITMAP_BYTES) -> bytes:
    """Bitmap with bit i (MSB first) set for each offset i < nbytes*8; others ignored."""
    bits = bytearray(nbytes)
    limit = nbytes * 8
    for off in offsets:
        if 0 <= off < limit:
            bits[off >> 3] |= 0x80 >> (off & 7)
    return bytes(bits)


def encode_ack(qpn: int, cum_seq: int, msn: int, sacked: Iterable[int] = (),
               grant_seq: int | None = None, int_block: bytes | None = None,
               nak: bool = False, bitmap_bytes: int = wire.SACK_BITMAP_BYTES,
               bitmap: bytes | None = None) -> bytes:
    """UDP payload of an ACK. ``cum_seq``: last in-order sequence number (expected - 1);
    ``sacked``: sequence numbers received beyond it, or ``bitmap`` already encoded."""
    base = cum_seq + 1
    if bitmap is None:
        bitmap = encode_bitmap((s - base for s in sacked), bitmap_bytes)
    flags = (wire.SACK_F_INT_ECHO if int_block else 0) | (
        wire.SACK_F_GRANT if grant_seq is not None else 0)
    grant = (grant_seq or 0) & 0xFFFFFF
    syndrome = wire.AETH_NAK_SEQ if nak else wire.AETH_ACK
    return b"".join((
        bth_bytes(wire.OP_ACK, qpn, cum_seq),
        AETH.pack(syndrome=syndrome, msn=msn),
        _SACK_HEAD.pack(wire.SACK_VERSION, flags, len(bitmap), base & _PSN_MASK, grant),
        bitmap,
        int_block or b"",
        bytes(wire.ICRC_LEN),
    ))


def decode_ack(buf: bytes | bytearray | memoryview, psn: int, body_off: int,
               body_end: int) -> AckInfo | None:
    """Decode what follows the BTH of an ACK (``psn`` from the BTH); None if malformed."""
    if body_end - body_off < AETH.size + _SACK_HEAD.size:
        return None
    (aeth,) = _AETH.unpack_from(buf, body_off)
    version, flags, blen, base, grant = _SACK_HEAD.unpack_from(buf, body_off + AETH.size)
    start = body_off + AETH.size + _SACK_HEAD.size
    if version != wire.SACK_VERSION or start + blen > body_end:
        return None
    bitmap = bytes(buf[start:start + blen])
    int_block = bytes(buf[start + blen:body_end]) if flags & wire.SACK_F_INT_ECHO else None
    return AckInfo(
        cum_psn=psn, syndrome=aeth >> 24, msn=aeth & 0xFFFFFF, base_psn=base & _PSN_MASK,
        bitmap=bitmap, grant_psn=(grant & _PSN_MASK) if flags & wire.SACK_F_GRANT else None,
        int_block=int_block,
    )


def encode_cnp(qpn: int) -> bytes:
    """UDP payload of a CNP: BTH (opcode 0x81, becn) + 16 reserved bytes + ICRC."""
    return bth_bytes(wire.OP_CNP, qpn, 0, becn=True) + bytes(16) + bytes(wire.ICRC_LEN)
