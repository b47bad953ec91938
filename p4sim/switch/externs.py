"""Stateful externs (counters, two-rate three-color meters, registers) and hash algorithms.

Hash algorithms follow BMv2's definitions: ``crc16`` is CRC-16/ARC (poly 0x8005, reflected,
init 0), ``crc32`` the zlib CRC, ``csum16`` the Internet checksum, ``identity`` the first 8 bytes
as a big-endian integer, ``xor16`` the XOR of 16-bit words (the tail zero-padded on the right).
"""

from __future__ import annotations

import binascii
import random
import sys
from collections.abc import Callable
from typing import Any

from p4sim.switch.api import ApiError, Code, MeterConfig

GREEN, YELLOW, RED = 0, 1, 2
_LITTLE = sys.byteorder == "little"


def _reflect(value: int, bits: int) -> int:
    out = 0
    for i in range(bits):
        if value >> i & 1:
            out |= 1 << (bits - 1 - i)
    return out


def _crc_table(poly: int, width: int) -> list[int]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for byte in range(256):
        rem = byte << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else (rem << 1)
        table.append(rem & mask)
    return table


def make_crc(poly: int, width: int, init: int, xor_out: int, reflect_in: bool,
             reflect_out: bool) -> Callable[[bytes], int]:
    table = _crc_table(poly, width)
    mask = (1 << width) - 1
    shift = width - 8
    refl8 = [_reflect(b, 8) for b in range(256)]

    def crc(data: bytes) -> int:
        rem = init
        for b in data:
            if reflect_in:
                b = refl8[b]
            rem = (table[(b ^ (rem >> shift)) & 0xFF] ^ (rem << 8)) & mask
        if reflect_out:
            rem = _reflect(rem, width)
        return rem ^ xor_out

    return crc


crc16 = make_crc(0x8005, 16, 0, 0, True, True)
crc_ccitt = make_crc(0x1021, 16, 0xFFFF, 0, False, False)
crc8_custom = make_crc(0x07, 8, 0, 0, False, False)


def crc32(data: bytes) -> int:
    return binascii.crc32(data) & 0xFFFFFFFF


def csum16(data: bytes) -> int:
    # The ones' complement sum does not depend on byte order (RFC 1071): sum native 16-bit
    # words in C, then swap the result into network order on little-endian hosts.
    if len(data) % 2:
        data += b"\x00"
    total = sum(memoryview(data).cast("H"))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    result = ~total & 0xFFFF
    if _LITTLE:
        result = ((result >> 8) | (result << 8)) & 0xFFFF
    return result


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def _xor_words(n: int) -> Callable[[bytes], int]:
    def xor(data: bytes) -> int:
        out = 0
        for i in range(0, len(data), n):
            out ^= int.from_bytes(data[i:i + n].ljust(n, b"\x00"), "big")
        return out
    return xor


class _RoundRobin:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, data: bytes) -> int:
        self.n += 1
        return self.n - 1


def hash_algorithm(name: str, rng: random.Random | None = None) -> Callable[[bytes], int] | None:
    """A fresh instance of the named BMv2 hash (None if unsupported); "random" draws from
    ``rng`` (default: a generator of its own, seeded from OS entropy)."""
    draw = (rng or random.Random()).getrandbits
    table: dict[str, Callable[[bytes], int]] = {
        "crc16": crc16, "crc16_custom": crc16, "crc32": crc32, "crc32_custom": crc32,
        "crcCCITT": crc_ccitt, "crc8_custom": crc8_custom, "csum16": csum16, "cksum16": csum16,
        "identity": identity, "xor16": _xor_words(2), "xor32": _xor_words(4),
        "random": lambda data: draw(32),
    }
    if name in ("round_robin", "round_robin_consistent"):
        return _RoundRobin()
    return table.get(name)


class CounterArray:
    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes


class Meter:
    """One RFC 2698 two-rate three-color marker (color-blind). Unconfigured meters mark GREEN."""

    __slots__ = ("clock", "config", "last", "tc", "tp")

    def __init__(self, clock: Any) -> None:
        self.clock = clock  # the data plane's clock, integer nanoseconds
        self.config: MeterConfig | None = None
        self.tc = self.tp = 0.0
        self.last = 0

    def configure(self, config: MeterConfig | None) -> None:
        self.config = config
        if config is not None:
            self.tc, self.tp = float(config.cburst), float(config.pburst)
        self.last = self.clock()

    def execute(self, units: int) -> int:
        cfg = self.config
        if cfg is None:
            return GREEN
        now = self.clock()
        elapsed = (now - self.last) / 1e9
        self.last = now
        self.tc = min(float(cfg.cburst), self.tc + elapsed * cfg.cir)
        self.tp = min(float(cfg.pburst), self.tp + elapsed * cfg.pir)
        if self.tp < units:
            return RED
        if self.tc < units:
            self.tp -= units
            return YELLOW
        self.tp -= units
        self.tc -= units
        return GREEN


class MeterArray:
    def __init__(self, name: str, size: int, by_bytes: bool, clock: Any) -> None:
        self.name = name
        self.size = size
        self.by_bytes = by_bytes
        self.meters = [Meter(clock) for _ in range(size)]

    def execute(self, index: int, nbytes: int) -> int:
        if not 0 <= index < self.size:
            return GREEN
        return self.meters[index].execute(nbytes if self.by_bytes else 1)


class RegisterArray:
    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self.mask = (1 << bitwidth) - 1
        self.values = [0] * size

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.values[index] = value & self.mask

    def read(self, index: int) -> int:
        return self.values[index] if 0 <= index < self.size else 0

    def set(self, index: int, value: int) -> None:
        """The control plane's write: a value wider than the register is refused."""
        if not isinstance(value, int) or value < 0 or value >> self.bitwidth:
            raise ApiError(Code.INVALID_ARGUMENT, f"register '{self.name}': value {value!r} "
                           f"does not fit in {self.bitwidth} bits")
        self.values[index] = value
