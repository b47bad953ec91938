"""P4Runtime byte strings <-> integers, and the error type every handler raises.

The rules follow what the P4Runtime reference implementation (p4lang/PI) accepts: a byte string
is read as a big-endian unsigned integer that must fit the P4Info bitwidth; shorter strings and
strings padded with leading zero bytes are accepted, and values are returned in canonical form
(the shortest string, at least one byte).
"""

from __future__ import annotations

# The google.rpc codes the handlers answer with (they import them from here).
from google.rpc.code_pb2 import (  # noqa: F401
    ALREADY_EXISTS,
    FAILED_PRECONDITION,
    INTERNAL,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OK,
    OUT_OF_RANGE,
    PERMISSION_DENIED,
    RESOURCE_EXHAUSTED,
    UNIMPLEMENTED,
    UNKNOWN,
)

# The error space PI puts in every p4.v1.Error it reports for BMv2 (simple_switch).
ERROR_SPACE = "ALL-sswitch-p4org"


class P4RTError(Exception):
    """A failed update or request: a google.rpc code and a one-line message."""

    def __init__(self, code: int, message: str, plain: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.plain = plain  # PI answers it without a details trailer

    def again(self) -> P4RTError:
        """A new instance to raise for a module-level one: raising one instance again chains
        each raise's frames onto its traceback, which then keeps all of them alive."""
        return P4RTError(self.code, self.message, self.plain)


def to_int(value: bytes, bitwidth: int) -> int:
    """Decode a P4Runtime byte string, rejecting values wider than ``bitwidth`` bits."""
    number = int.from_bytes(value, "big")
    if number.bit_length() > bitwidth:
        raise P4RTError(INVALID_ARGUMENT,
                        f"Bytestring provided does not fit within {bitwidth} bits")
    return number


def to_bytes(number: int) -> bytes:
    """Canonical P4Runtime byte string: shortest big-endian encoding, at least one byte."""
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def to_port(value: bytes) -> int:
    """A port given as bytes (``Replica.port``, ``watch_port``), with PI's checks."""
    if not value:
        raise P4RTError(INVALID_ARGUMENT, "Port must not be the empty string")
    if len(value) > 4:
        raise P4RTError(UNIMPLEMENTED,
                        f"Got port of {len(value)} bytes, but only 4 bytes are supported")
    port = int.from_bytes(value, "big")
    if port == 0 or port >= 1 << 31:  # PI reads it as a signed 32-bit value that must be > 0
        raise P4RTError(INVALID_ARGUMENT, "Port must be non-negative.")
    return port


def port_bytes(port: int, nbytes: int) -> bytes:
    """Inverse of ``to_port`` for read-back, keeping the width the client used."""
    return port.to_bytes(nbytes, "big")


def pack_bits(fields: list[tuple[int, int]]) -> bytes:
    """Concatenate (value, bitwidth) fields MSB-first into whole bytes (zero padded at the end),
    the layout of a BMv2 header such as the packet_in/packet_out controller header."""
    total = 0
    nbits = 0
    for value, width in fields:
        total = (total << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = (-nbits) % 8
    return (total << pad).to_bytes((nbits + pad) // 8, "big") if nbits else b""


def unpack_bits(data: bytes, widths: list[int]) -> list[int]:
    """Inverse of ``pack_bits``: ``data`` must hold at least ``sum(widths)`` bits."""
    nbits = sum(widths)
    nbytes = (nbits + 7) // 8
    total = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - nbits)
    values = []
    shift = nbits
    for width in widths:
        shift -= width
        values.append((total >> shift) & ((1 << width) - 1))
    return values
