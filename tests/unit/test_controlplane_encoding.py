"""Value parsing and canonical P4Runtime encoding (controlplane.encoding)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.encoding import (
    Match,
    decode,
    encode,
    encode_value,
    format_match,
    parse_int,
    parse_match,
)
from controlplane.errors import EncodeError


@pytest.mark.parametrize(("text", "width", "expected"), [
    ("10.0.0.1", 32, 0x0A000001),
    ("255.255.255.255", 32, 0xFFFFFFFF),
    ("00:11:22:33:44:55", 48, 0x001122334455),
    ("0:1:2:3:4:5", 48, 0x000102030405),
    ("aa-bb-cc-dd-ee-ff", 48, 0xAABBCCDDEEFF),
    ("2001:db8::1", 128, 0x20010DB8000000000000000000000001),
    ("0x1ff", 9, 511),
    ("0b101", 3, 5),
    ("42", 8, 42),
    (7, 3, 7),
])
def test_parse_int_accepts_every_notation(text: str | int, width: int, expected: int) -> None:
    assert parse_int(text, width, "f") == expected


@pytest.mark.parametrize(("value", "width", "needle"), [
    (512, 9, "does not fit in 9 bits (max 511)"),
    ("10.0.0.1", 16, "does not fit in 16 bits"),
    ("300.0.0.1", 32, "cannot parse value '300.0.0.1'"),
    ("hello", 8, "cannot parse value 'hello'"),
    (-1, 8, "negative"),
    ("", 8, "empty value"),
    (1.5, 8, "unsupported value"),
])
def test_parse_int_errors_name_field_and_value(value: object, width: int, needle: str) -> None:
    with pytest.raises(EncodeError) as info:
        parse_int(value, width, "table T: match field f")  # type: ignore[arg-type]
    msg = str(info.value)
    assert msg.startswith("table T: match field f: ")
    assert needle in msg
    assert "\n" not in msg


def test_canonical_encoding_strips_leading_zeros() -> None:
    assert encode(0, 32) == b"\x00"
    assert encode(1, 32) == b"\x01"
    assert encode(0x0A000001, 32) == b"\x0a\x00\x00\x01"
    assert encode(0x100, 9) == b"\x01\x00"
    assert encode_value("0.0.0.7", 32, "f") == b"\x07"


@given(st.integers(min_value=1, max_value=128).flatmap(
    lambda w: st.tuples(st.just(w), st.integers(min_value=0, max_value=(1 << w) - 1))))
def test_encode_decode_round_trip_is_minimal(width_value: tuple[int, int]) -> None:
    width, value = width_value
    data = encode(value, width)
    assert decode(data) == value
    assert len(data) == 1 or data[0] != 0  # canonical: no leading zero byte


def test_lpm_prefix_masks_host_bits_and_wildcards() -> None:
    assert parse_match("lpm", "10.1.2.3/8", 32, "f") == Match("lpm", 0x0A000000, prefix_len=8)
    assert parse_match("lpm", "10.1.2.3", 32, "f") == Match("lpm", 0x0A010203, prefix_len=32)
    assert parse_match("lpm", ("192.168.0.0", 16), 32, "f") == Match("lpm", 0xC0A80000,
                                                                     prefix_len=16)
    assert parse_match("lpm", "0.0.0.0/0", 32, "f") is None
    with pytest.raises(EncodeError, match=r"prefix length 33 out of range 0\.\.32"):
        parse_match("lpm", "10.0.0.0/33", 32, "f")
    with pytest.raises(EncodeError, match="bad prefix length"):
        parse_match("lpm", "10.0.0.0/x", 32, "f")


def test_ternary_value_is_masked_and_zero_mask_is_dont_care() -> None:
    assert parse_match("ternary", "10.0.0.5&&&255.255.255.0", 32, "f") == Match(
        "ternary", 0x0A000000, mask=0xFFFFFF00)
    assert parse_match("ternary", "0x0f", 8, "f") == Match("ternary", 0x0F, mask=0xFF)
    assert parse_match("ternary", "1&&&0", 8, "f") is None
    with pytest.raises(EncodeError, match=r"f \(mask\): value 256 does not fit in 8 bits"):
        parse_match("ternary", "1&&&256", 8, "f")


def test_range_and_optional_and_exact() -> None:
    assert parse_match("range", "80..443", 16, "f") == Match("range", 80, high=443)
    assert parse_match("range", "0..65535", 16, "f") is None  # full range == don't care
    with pytest.raises(EncodeError, match="empty range"):
        parse_match("range", "10..5", 16, "f")
    assert parse_match("optional", "*", 9, "f") is None
    assert parse_match("optional", 3, 9, "f") == Match("optional", 3)
    with pytest.raises(EncodeError, match="exact match field cannot be a wildcard"):
        parse_match("exact", "*", 9, "f")
    with pytest.raises(EncodeError, match="unsupported match type 'selector'"):
        parse_match("selector", 1, 9, "f")


def test_format_match_renders_addresses() -> None:
    assert format_match(Match("lpm", 0x0A000000, prefix_len=8), 32, "hdr.ipv4.dstAddr") == \
        "10.0.0.0/8"
    assert format_match(Match("exact", 0x001122334455), 48, "hdr.ethernet.dstAddr") == \
        "00:11:22:33:44:55"
    assert format_match(Match("range", 80, high=443), 16, "dport") == "80..443"
