"""Values <-> P4Runtime bytestrings.

Users give values as ints, numeric strings ("42", "0x2a"), IPv4 ("10.0.0.1"), IPv6 ("2001:db8::1")
or MAC ("00:11:22:33:44:55") strings; match keys add LPM prefixes ("10.0.0.0/8"), ternaries
("value&&&mask") and ranges ("lo..hi"). Everything is checked against the field's bitwidth and
encoded in P4Runtime's canonical form: big-endian, no leading zero bytes, at least one byte.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from controlplane.errors import EncodeError

_MAC_RE = re.compile(r"^[0-9a-fA-F]{1,2}([:-][0-9a-fA-F]{1,2}){5}$")

Value = int | str | bytes


def parse_int(value: Value, bitwidth: int, what: str) -> int:
    """Parse one scalar value and check that it fits in ``bitwidth`` bits."""
    if isinstance(value, bool):
        n = int(value)
    elif isinstance(value, int):
        n = value
    elif isinstance(value, bytes):
        n = int.from_bytes(value, "big")
    elif isinstance(value, str):
        n = _parse_str(value.strip(), what)
    else:
        raise EncodeError(f"{what}: unsupported value {value!r} (type {type(value).__name__})")
    if n < 0:
        raise EncodeError(f"{what}: negative value {value!r} not allowed")
    if bitwidth > 0 and n >> bitwidth:
        raise EncodeError(f"{what}: value {value} does not fit in {bitwidth} bits "
                          f"(max {(1 << bitwidth) - 1})")
    return n


def _parse_str(text: str, what: str) -> int:
    if not text:
        raise EncodeError(f"{what}: empty value")
    n = _text_value(text)
    if n is None:
        raise EncodeError(f"{what}: cannot parse value {text!r} (expected int, 0x.., IPv4, "
                          "IPv6 or MAC)")
    return n


@functools.lru_cache(maxsize=65536)
def _text_value(text: str) -> int | None:
    """The value a non-empty text names, None if none. Kept by text: a fabric's plan names
    the same addresses for many switches, and ipaddress takes ~8 us to parse one."""
    try:
        if text.lower().startswith(("0x", "0b", "0o")):
            return int(text, 0)
        if text.isdigit():
            return int(text, 10)
    except ValueError:
        pass
    if _MAC_RE.match(text):
        return int("".join(p.zfill(2) for p in re.split(r"[:-]", text)), 16)
    if "." in text or ":" in text:
        try:
            return int(ipaddress.ip_address(text))
        except ValueError:
            pass
    return None


def encode(n: int, bitwidth: int) -> bytes:
    """Canonical bytestring of a non-negative int (already range-checked)."""
    del bitwidth  # canonical form does not depend on the width
    return n.to_bytes(max(1, (n.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


def encode_value(value: Value, bitwidth: int, what: str) -> bytes:
    return encode(parse_int(value, bitwidth, what), bitwidth)


# ---- match keys -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """A parsed match key for one field; ``kind`` is the P4Info match type name in lowercase.
    ``None`` for the whole match means "don't care" (the field is omitted from the entry)."""

    kind: str
    value: int
    mask: int = 0  # ternary
    prefix_len: int = 0  # lpm
    high: int = 0  # range (value is the low end)


def _all_ones(bitwidth: int) -> int:
    return (1 << bitwidth) - 1


def parse_match(kind: str, value: Any, bitwidth: int, what: str) -> Match | None:
    """Parse a user value for a match field of type ``kind`` (exact, lpm, ternary, range,
    optional). Returns None for a don't-care key (ternary mask 0, lpm /0, full range, "*")."""
    if isinstance(value, Match):
        return value
    if isinstance(value, str) and value.strip() == "*":
        if kind == "exact":
            raise EncodeError(f"{what}: exact match field cannot be a wildcard '*'")
        return None
    if kind in ("exact", "optional"):
        return Match(kind, parse_int(value, bitwidth, what))
    if kind == "lpm":
        if isinstance(value, tuple):
            v, plen = value
        elif isinstance(value, str) and "/" in value:
            v, _, p = value.rpartition("/")
            try:
                plen = int(p)
            except ValueError:
                raise EncodeError(f"{what}: bad prefix length in {value!r}") from None
        else:
            v, plen = value, bitwidth
        if not 0 <= plen <= bitwidth:
            raise EncodeError(f"{what}: prefix length {plen} out of range 0..{bitwidth}")
        n = parse_int(v, bitwidth, what)
        if plen == 0:
            return None
        # P4Runtime forbids bits set beyond the prefix; masking them is what users mean.
        mask = _all_ones(bitwidth) ^ _all_ones(bitwidth - plen)
        return Match("lpm", n & mask, prefix_len=plen)
    if kind == "ternary":
        v, m = _two_parts(value, "&&&", _all_ones(bitwidth))
        n = parse_int(v, bitwidth, what)
        mask = parse_int(m, bitwidth, what + " (mask)")
        if mask == 0:
            return None
        return Match("ternary", n & mask, mask=mask)
    if kind == "range":
        lo, hi = _two_parts(value, "..", None)
        hi = lo if hi is None else hi
        low = parse_int(lo, bitwidth, what + " (low)")
        high = parse_int(hi, bitwidth, what + " (high)")
        if low > high:
            raise EncodeError(f"{what}: empty range {value!r} (low > high)")
        if low == 0 and high == _all_ones(bitwidth):
            return None
        return Match("range", low, high=high)
    raise EncodeError(f"{what}: unsupported match type {kind!r}")


def _two_parts(value: Any, sep: str, default: Any) -> tuple[Any, Any]:
    """A (value, mask) or (low, high) given as a tuple or as text around ``sep``; a lone value
    gets ``default`` as its second part."""
    if isinstance(value, tuple):
        return value[0], value[1]
    if isinstance(value, str) and sep in value:
        first, _, second = value.partition(sep)
        return first, second
    return value, default


# ---- formatting for humans --------------------------------------------------------------------


def format_value(n: int, bitwidth: int, name: str = "") -> str:
    """Readable rendering: MAC for 48-bit, IPv4 for 32-bit address-like names, IPv6 for 128."""
    lname = name.lower()
    if bitwidth == 48 and ("mac" in lname or "addr" in lname or "eth" in lname):
        return ":".join(f"{b:02x}" for b in n.to_bytes(6, "big"))
    if bitwidth == 32 and ("addr" in lname or "ip" in lname or lname.endswith(("dst", "src"))):
        return str(ipaddress.IPv4Address(n))
    if bitwidth == 128 and ("addr" in lname or "ip" in lname):
        return str(ipaddress.IPv6Address(n))
    return str(n) if n < 1 << 16 else hex(n)


def format_match(m: Match, bitwidth: int, name: str = "") -> str:
    v = format_value(m.value, bitwidth, name)
    if m.kind == "lpm":
        return f"{v}/{m.prefix_len}"
    if m.kind == "ternary":
        return f"{v}&&&{format_value(m.mask, bitwidth, name)}"
    if m.kind == "range":
        return f"{v}..{format_value(m.high, bitwidth, name)}"
    return v
