"""INT collector: Telemetry Report v2.0 parsing (built with Scapy layers) and the summaries."""

from __future__ import annotations

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from hosts import wire
from hosts.collector import Collector, ReportError, parse_report, summarize
from hosts.layers import (
    INTMD,
    HopRecord,
    INTShim,
    TelemetryReportGroup,
    TelemetryReportINT,
    encode_hop,
)


def _int_frame(hops: list[HopRecord]) -> bytes:
    stack = b"".join(encode_hop(wire.INT_INSTRUCTIONS, h) for h in hops)
    shim = INTShim(length=(12 + len(stack)) // 4)
    md = INTMD(remaining_hops=wire.INT_MAX_HOPS - len(hops), stack=stack)
    return bytes(Ether() / IP(tos=wire.INT_DSCP << 2) / UDP(dport=wire.ROCE_UDP_PORT)
                 / shim / md / BTH(psn=1, icrc=0))


def test_switch_sink_report_gives_own_and_stack_hops() -> None:
    upstream = [HopRecord(node_id=2, ingress_port=1, egress_port=3, hop_latency=40, queue_id=0,
                          queue_occupancy=9, ingress_ts=100, egress_ts=140, tx_bytes=5000)]
    own_bits = wire.int_bitmap(wire.INT_BIT_L1_PORTS, wire.INT_BIT_HOP_LATENCY,
                               wire.INT_BIT_QUEUE)
    own = encode_hop(own_bits, HopRecord(ingress_port=4, egress_port=1, hop_latency=12,
                                         queue_id=0, queue_occupancy=2))
    inner = _int_frame(upstream)
    report = (TelemetryReportGroup(node_id=7, seq=5)
              / TelemetryReportINT(rep_md_bits=own_bits, md_len=len(own) // 4,
                                   report_len=2 + len(own) // 4 + len(inner) // 4 + 1,
                                   metadata=own)
              / Raw(inner + bytes(-len(inner) % 4)))
    recs = parse_report(bytes(report))
    assert [(r["source"], r["node_id"]) for r in recs] == [("sink", 7), ("stack", 2)]
    assert recs[0]["hop_latency"] == 12 and recs[0]["queue_occupancy"] == 2
    assert recs[1]["egress_port"] == 3 and recs[1]["tx_bytes"] == 5000 and recs[0]["seq"] == 5


def test_bad_reports_are_refused() -> None:
    with pytest.raises(ReportError, match="version 1"):
        parse_report(bytes([0x10, 0, 0, 0, 0, 0, 0, 1]))
    with pytest.raises(ReportError, match="shorter"):
        parse_report(b"\x20")
    c = Collector("127.0.0.1", 0, records_path=None)  # type: ignore[arg-type]
    c.ingest(b"\x20")
    assert c.malformed == 1 and c.reports == 0


def test_summary_per_switch_and_link() -> None:
    recs = [
        {"node_id": 1, "egress_port": 2, "queue_occupancy": 4, "hop_latency": 10,
         "tx_bytes": 0, "egress_ts": 0},
        {"node_id": 1, "egress_port": 2, "queue_occupancy": 8, "hop_latency": 30,
         "tx_bytes": 125_000, "egress_ts": 1000},  # 125 kB in 1000 us = 1 Gb/s
        {"node_id": 1, "egress_port": 3, "queue_occupancy": 0, "hop_latency": 5},
    ]
    out = summarize(recs, link_bps=2e9)
    link = out["links"]["1:2"]
    assert link["queue_occupancy_max"] == 8 and link["queue_occupancy_avg"] == 6
    assert link["hop_latency_us_max"] == 30 and link["hop_latency_us_avg"] == 20
    assert link["tx_bps"] == pytest.approx(1e9) and link["utilization"] == pytest.approx(0.5)
    sw = out["switches"]["1"]
    assert sw["records"] == 3 and sw["queue_occupancy_max"] == 8
    assert sw["hop_latency_us_avg"] == pytest.approx(15)
