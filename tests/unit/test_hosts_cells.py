"""Cells on the wire: segmentation and padding, patched templates read back by Scapy, the SACK
encoding round trip, INT metadata encoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hosts import wire
from hosts.cells import (
    CellTemplate,
    UdpFramer,
    cell_count,
    cell_payload,
    message_bytes,
    message_crc,
    message_crc_of,
    pad_count,
    parse_roce,
    segment,
)
from hosts.layers import INTMD, HopRecord, ImmDt, SackBlock, decode_stack, dissect, encode_hop
from hosts.sack import decode_ack, encode_ack, encode_cnp


@pytest.mark.parametrize(("size", "cells", "last_data", "pad"), [
    (0, 1, 0, 0),        # empty message: one cell with only the ImmDt
    (60, 1, 60, 0),      # fills a single 64-byte cell exactly (4 + 60)
    (61, 2, 0, 0),       # one byte too many: first cell short, last holds only the ImmDt
    (64, 2, 0, 0),
    (65, 2, 1, 3),       # last cell carries 1 data byte: 3 bytes of pad to the 4-byte granule
    (130, 3, 2, 2),
])
def test_segmentation_and_pad_count(size: int, cells: int, last_data: int, pad: int) -> None:
    plans = segment(size, 64)
    assert len(plans) == cells == cell_count(size, 64)
    assert plans[-1].length == last_data and pad_count(plans[-1]) == pad
    assert plans[-1].opcode == (wire.OP_SEND_ONLY_IMM if cells == 1 else wire.OP_SEND_LAST_IMM)
    assert sum(p.length for p in plans) == size
    msg = message_bytes(0, size)
    for p in plans:
        assert len(cell_payload(msg, p, 64)) == 64  # fixed-length cells
    assert struct.unpack("!I", cell_payload(msg, plans[-1], 64)[:4])[0] == size


def test_bad_cell_size_is_refused() -> None:
    with pytest.raises(ValueError, match="cell payload length 30"):
        segment(100, 30)


@settings(max_examples=30, deadline=None)
@given(psn=st.integers(0, wire.PSN_MOD - 1), opcode=st.sampled_from(sorted(wire.DATA_OPCODES)),
       pad=st.integers(0, 3), int_source=st.booleans())
def test_patched_template_reads_back_in_scapy(psn: int, opcode: int, pad: int,
                                              int_source: bool) -> None:
    tpl = CellTemplate("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
                       qpn=77, payload_len=128, int_source=int_source)
    payload = bytes(range(128))
    frame = bytes(tpl.frame(psn, opcode, payload, pad))
    pkt = dissect(frame)
    ip = pkt[IP]
    rebuilt = IP(bytes(ip)[:20])
    del rebuilt.chksum  # Scapy recomputes it from scratch
    assert IP(bytes(rebuilt)).chksum == ip.chksum  # the incrementally patched checksum is right
    assert ip.tos & 3 == wire.ECN_ECT0 and ip.id == psn & 0xFFFF
    assert (ip.tos >> 2 == wire.INT_DSCP) == int_source and (INTMD in pkt) == int_source
    bth = pkt[BTH]
    assert (bth.psn, bth.opcode, bth.padcount, bth.dqpn) == (psn, opcode, pad, 77)
    assert pkt[UDP].dport == wire.ROCE_UDP_PORT and len(frame) == tpl.frame_len
    f = parse_roce(frame)
    assert f is not None and (f.psn, f.opcode, f.qpn, f.pad) == (psn, opcode, 77, pad)
    assert frame[f.body_off:f.body_end] == payload
    if opcode in wire.LAST_OPCODES:
        assert ImmDt in pkt


@settings(max_examples=100, deadline=None)
@given(cum=st.integers(-1, 3 * wire.PSN_MOD), gaps=st.sets(st.integers(1, 255), max_size=40),
       grant=st.one_of(st.none(), st.integers(0, wire.PSN_MOD - 1)), nak=st.booleans())
def test_sack_round_trip(cum: int, gaps: set[int], grant: int | None, nak: bool) -> None:
    sacked = sorted(cum + g for g in gaps)
    int_block = b"\x10\x0c\x00\x00" + bytes(48) if gaps and len(gaps) % 2 else None
    body = encode_ack(5, cum, 9, sacked, grant, int_block, nak=nak)
    framer = UdpFramer("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.2", "10.0.0.1",
                       49152, wire.ROCE_UDP_PORT)
    frame = framer.frame(body)
    f = parse_roce(frame)
    ack = decode_ack(frame, f.psn, f.body_off, f.body_end)
    assert ack.cum_psn == cum % wire.PSN_MOD
    assert [(ack.base_psn + o) % wire.PSN_MOD for o in ack.sacked_offsets()] == \
        [s % wire.PSN_MOD for s in sacked]
    assert ack.grant_psn == (None if grant is None else grant)
    assert ack.syndrome == (wire.AETH_NAK_SEQ if nak else wire.AETH_ACK) and ack.msn == 9
    assert ack.int_block == int_block
    pkt = Ether(frame)  # and Scapy agrees on the layout
    assert pkt[AETH].syndrome == ack.syndrome and pkt[SackBlock].base_psn == ack.base_psn
    assert pkt[SackBlock].bitmap == ack.bitmap


def test_cnp_layout() -> None:
    frame = UdpFramer("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.2", "10.0.0.1",
                      49152, wire.ROCE_UDP_PORT).frame(encode_cnp(42))
    pkt = Ether(frame)
    assert pkt[BTH].opcode == wire.OP_CNP and pkt[BTH].becn == 1 and pkt[BTH].dqpn == 42
    assert CNPPadding in pkt


def test_int_hops_encode_decode_and_instruction_layout() -> None:
    assert wire.INT_INSTRUCTIONS == 0xFD00 and wire.INT_HOP_ML == 9
    hops = [HopRecord(node_id=n, ingress_port=1, egress_port=n + 2, hop_latency=7 * n,
                      queue_id=0, queue_occupancy=3 * n, ingress_ts=1000 + n,
                      egress_ts=1007 + n, tx_bytes=(1 << 32) - n) for n in (2, 1)]
    stack = b"".join(encode_hop(wire.INT_INSTRUCTIONS, h) for h in hops)
    assert len(stack) == 2 * wire.INT_HOP_ML * 4
    assert decode_stack(wire.INT_INSTRUCTIONS, wire.INT_HOP_ML, stack) == hops
    # a hop that lacks a value writes the spec's all-ones "invalid" value
    partial = encode_hop(wire.int_bitmap(wire.INT_BIT_NODE_ID, wire.INT_BIT_HOP_LATENCY),
                         HopRecord(node_id=5))
    assert partial == struct.pack("!I", 5) + b"\xff\xff\xff\xff"


def test_parse_roce_rejects_non_roce_and_truncated_frames() -> None:
    tpl = CellTemplate("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2", 1, 64)
    frame = bytes(tpl.frame(1, wire.OP_SEND_MIDDLE, bytes(64)))
    assert parse_roce(frame[:40]) is None
    other = bytes(Ether() / IP() / UDP(dport=53))
    assert parse_roce(other) is None


@pytest.mark.parametrize("int_source", [False, True])
@pytest.mark.parametrize("qpn, payload_len, sport", [(7, 256, 49152), (0xABCDEF, 1024, 65535),
                                                     (1, 0, 1)])
def test_templates_are_the_bytes_scapy_built(int_source: bool, qpn: int, payload_len: int,
                                             sport: int) -> None:
    """CellTemplate and UdpFramer build their headers with struct (no Scapy import): the
    bytes are the ones the Scapy expressions they replaced built."""
    from scapy.packet import Raw

    from hosts.cells import UdpFramer
    from hosts.layers import int_source_block

    macs, ips = ("02:00:00:00:01:0a", "0a:1b:2c:3d:4e:5f"), ("10.0.1.2", "192.168.200.7")
    tpl = CellTemplate(*macs, *ips, qpn, payload_len=payload_len, sport=sport,
                       int_source=int_source)
    dscp = wire.INT_DSCP if int_source else 0
    pkt = (Ether(src=macs[0], dst=macs[1])
           / IP(src=ips[0], dst=ips[1], tos=wire.tos(wire.ECN_ECT0, dscp), flags="DF", id=0)
           / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0))
    if int_source:
        pkt = pkt / Raw(int_source_block())
    pkt = pkt / BTH(opcode=0, dqpn=qpn, psn=0, icrc=0) / Raw(bytes(payload_len))
    assert tpl.template == bytes(pkt)
    framer = UdpFramer(*macs, *ips, sport, 4321, tos_byte=0x8A)
    hdr = (Ether(src=macs[0], dst=macs[1]) / IP(src=ips[0], dst=ips[1], tos=0x8A, flags="DF",
                                                id=0) / UDP(sport=sport, dport=4321, chksum=0))
    assert bytes(framer.header) == bytes(hdr)


@pytest.mark.parametrize("size", [0, 1, 263, 264, 265, 264 * 256 - 1, 264 * 256,
                                  264 * 256 + 1, 3 * 264 * 256 + 17, 1048576, 100003])
@pytest.mark.parametrize("index,seed", [(0, 0), (7, 3), (65537, 2**32 - 1)])
def test_message_crc_of_is_the_crc_of_the_message(size: int, index: int, seed: int) -> None:
    assert message_crc_of(index, size, seed) == message_crc(message_bytes(index, size, seed))
