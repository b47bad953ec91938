"""HPCC's per-hop capacity B on links whose rate counts packets (the emulation's links): a cell
takes one slot of such a link however many INT hop records it has gathered, so INT's tx bytes
of a hop are measured against the rate times the frame as it left that hop."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hosts import wire
from hosts.layers import HopRecord, encode_hop, int_source_block
from hosts.sender import Sender, SenderConfig


def _sender(**kw: float) -> Sender:
    cfg = SenderConfig(ifaces=["x"], dst_macs=["00:00:00:00:00:01"], src_ip="10.0.0.1",
                       dst_ip="10.0.0.2", msg_size=4096, count=1, cc="hpcc", int_source=True,
                       rate_bps=24 * 1082 * 8, cc_params={"base_rtt_s": 0.5,
                                                           "nic_bytes_per_s": 24 * 1082}, **kw)
    port = SimpleNamespace(ifname="x", sent=0, send_errors=0, up=True, events=[])
    return Sender(cfg, clock=lambda: 0.0, ports=[port])  # type: ignore[list-item]


def _block(hops: int) -> tuple[bytes, int]:
    """An INT stack as a cell carries it after ``hops`` switches (newest record first)."""
    records = [encode_hop(wire.INT_INSTRUCTIONS, HopRecord(
        node_id=10 + h, ingress_port=1, egress_port=2, hop_latency=0, queue_id=0,
        queue_occupancy=0, ingress_ts=0, egress_ts=1000, tx_bytes=0)) for h in range(hops)]
    head = bytearray(int_source_block())
    head[1] += sum(len(r) for r in records) // 4
    return bytes(head) + b"".join(reversed(records)), len(records[0])


def test_packet_rate_links_count_each_hops_frame_with_its_records() -> None:
    s = _sender(link_pps=30.0)
    s.begin()
    block, record_len = _block(3)
    hops = s._int_hops(block)
    assert [h.key[0] for h in hops] == [12, 11, 10]  # newest first
    frame = s.frame_len
    # the cell left switch 10 with one record, 11 with two, 12 with three
    assert [h.link_bytes_per_s for h in hops] == pytest.approx(
        [30 * (frame + 3 * record_len), 30 * (frame + 2 * record_len), 30 * (frame + record_len)])


def test_bit_rate_links_keep_one_capacity_in_bytes() -> None:
    s = _sender(link_bps=100e9)
    s.begin()
    hops = s._int_hops(_block(3)[0])
    assert [h.link_bytes_per_s for h in hops] == [100e9 / 8] * 3
