"""Byte-string and controller-header bit packing rules of the P4Runtime server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4sim.switch.p4runtime.codec import (
    P4RTError,
    pack_bits,
    to_bytes,
    to_int,
    to_port,
    unpack_bits,
)


@given(st.integers(min_value=1, max_value=128).flatmap(
    lambda w: st.tuples(st.just(w), st.integers(min_value=0, max_value=(1 << w) - 1))))
def test_canonical_roundtrip(width_value):
    width, value = width_value
    encoded = to_bytes(value)
    assert to_int(encoded, width) == value
    assert len(encoded) == max(1, (value.bit_length() + 7) // 8)  # shortest form
    assert to_int(b"\x00\x00" + encoded, width) == value  # padded form accepted too


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=0, max_value=8))
def test_values_wider_than_bitwidth_rejected(width, extra):
    with pytest.raises(P4RTError) as exc:
        to_int(to_bytes(1 << (width + extra)), width)
    assert exc.value.code == 3  # INVALID_ARGUMENT
    assert f"{width} bits" in exc.value.message


fields_strategy = st.lists(
    st.integers(min_value=1, max_value=40).flatmap(
        lambda w: st.tuples(st.integers(min_value=0, max_value=(1 << w) - 1), st.just(w))),
    min_size=1, max_size=6)


@given(fields_strategy)
def test_pack_unpack_roundtrip_msb_first(fields):
    packed = pack_bits(fields)
    nbits = sum(w for _, w in fields)
    assert len(packed) == (nbits + 7) // 8
    assert unpack_bits(packed + b"payload", [w for _, w in fields]) == [v for v, _ in fields]
    # the first field occupies the most significant bits of the first byte
    first_value, first_width = fields[0]
    as_int = int.from_bytes(packed, "big") >> (len(packed) * 8 - nbits)
    assert as_int >> (nbits - first_width) == first_value


def test_pack_known_layout():
    # 9-bit port 3 then 7 bits of padding: 0000 0001 1000 0000
    assert pack_bits([(3, 9), (0, 7)]) == b"\x01\x80"


@pytest.mark.parametrize("raw, port", [(b"\x05", 5), (b"\x00\x00\x01\xfe", 510)])
def test_port_bytes(raw, port):
    assert to_port(raw) == port


@pytest.mark.parametrize("raw, code", [(b"", 3), (b"\x01" * 5, 12), (b"\x00", 3)])
def test_bad_port_bytes(raw, code):
    with pytest.raises(P4RTError) as exc:
        to_port(raw)
    assert exc.value.code == code
