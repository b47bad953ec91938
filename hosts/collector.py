"""INT collector: Telemetry Report v2.0 over UDP in, per-hop records (JSON lines) out, and a
summary per switch and per link (switch, egress port): queue occupancy, hop latency,
utilization (from consecutive tx-byte counters over egress timestamps, see hosts.wire).

A report's hops come from two places: the sink's own metadata (RepMdBits, reported by a
switch sink) and the INT-MD stack inside the truncated packet (upstream hops, or all hops when
a host is the sink). Malformed reports are counted and skipped.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hosts import wire
from hosts.intstack import HopRecord, decode_hop, parse_int_block


class ReportError(ValueError):
    pass


def parse_report(data: bytes) -> list[dict[str, Any]]:
    """Hop records (dicts) of one Telemetry Report packet (UDP payload)."""
    if len(data) < 8:
        raise ReportError(f"report of {len(data)} bytes is shorter than its 8-byte header")
    word0, node_id = struct.unpack_from("!II", data, 0)
    if word0 >> 28 != 2:
        raise ReportError(f"telemetry report version {word0 >> 28}, expected 2")
    seq = word0 & 0x3FFFFF
    records: list[dict[str, Any]] = []
    off = 8
    while off + 4 <= len(data):
        b0, rep_len, md_len, _flags = struct.unpack_from("!BBBB", data, off)
        rep_type, in_type = b0 >> 4, b0 & 0xF
        end = len(data) if rep_len == 0xFF else off + 4 + rep_len * 4
        if end > len(data):
            raise ReportError(f"report length {rep_len} words runs past the packet")
        body = off + 4
        if rep_type == 1:
            if body + 8 > end:
                raise ReportError("INT report shorter than its 8-byte main contents")
            (md_bits,) = struct.unpack_from("!H", data, body)
            md = data[body + 8:body + 8 + md_len * 4]
            inner = body + 8 + md_len * 4
            if md_len:
                # RepMdBits bit 0 is reserved: the node id is the group header's.
                own = decode_hop(md_bits & 0x7FFF, md)
                own.node_id = node_id
                records.append(_record(own, node_id, seq, "sink", 0))
            if in_type == 3:
                for i, hop in enumerate(_stack_from_frame(data[inner:end])):
                    records.append(_record(hop, node_id, seq, "stack", i))
        off = end
    return records


def _stack_from_frame(frame: bytes) -> list[HopRecord]:
    if len(frame) < 14 + 20 + 8 + 16 or frame[12:14] != b"\x08\x00":
        return []
    ihl = (frame[14] & 0x0F) * 4
    if frame[15] >> 2 != wire.INT_DSCP or frame[23] != 17:
        return []
    parsed = parse_int_block(frame[14 + ihl + 8:])
    return parsed[2] if parsed else []


def _record(hop: HopRecord, reporter: int, seq: int, source: str, index: int) -> dict[str, Any]:
    rec = hop.as_dict()
    rec.update(reporter=reporter, seq=seq, source=source, hop_index=index)
    return rec


def summarize(records: Iterable[dict[str, Any]], link_bps: float = 0.0) -> dict[str, Any]:
    """Per switch and per link: max/avg queue occupancy and hop latency, utilization."""
    switches: dict[int, dict[str, Any]] = {}
    links: dict[tuple[int, int], dict[str, Any]] = {}
    last_tx: dict[tuple[int, int], tuple[int, int]] = {}
    for rec in records:
        node = rec.get("node_id")
        if node is None:
            continue
        key = (node, rec.get("egress_port") or 0)
        for table, k in ((switches, node), (links, key)):
            agg = table.setdefault(k, {"records": 0, "q_max": 0, "q_sum": 0, "q_n": 0,
                                       "lat_max": 0, "lat_sum": 0, "lat_n": 0,
                                       "bytes": 0, "time_us": 0})
            agg["records"] += 1
            if rec.get("queue_occupancy") is not None:
                agg["q_max"] = max(agg["q_max"], rec["queue_occupancy"])
                agg["q_sum"] += rec["queue_occupancy"]
                agg["q_n"] += 1
            if rec.get("hop_latency") is not None:
                agg["lat_max"] = max(agg["lat_max"], rec["hop_latency"])
                agg["lat_sum"] += rec["hop_latency"]
                agg["lat_n"] += 1
        tx, ts = rec.get("tx_bytes"), rec.get("egress_ts")
        if tx is not None and ts is not None:
            prev = last_tx.get(key)
            if prev is not None and ts > prev[1]:
                links[key]["bytes"] += (tx - prev[0]) % (1 << 32)
                links[key]["time_us"] += ts - prev[1]
            if prev is None or ts > prev[1]:
                last_tx[key] = (tx, ts)
    return {"switches": {str(k): _finish(v, 0.0) for k, v in sorted(switches.items())},
            "links": {f"{k[0]}:{k[1]}": _finish(v, link_bps) for k, v in sorted(links.items())}}


def _finish(agg: dict[str, Any], link_bps: float) -> dict[str, Any]:
    out = {
        "records": agg["records"],
        "queue_occupancy_max": agg["q_max"],
        "queue_occupancy_avg": agg["q_sum"] / agg["q_n"] if agg["q_n"] else None,
        "hop_latency_us_max": agg["lat_max"],
        "hop_latency_us_avg": agg["lat_sum"] / agg["lat_n"] if agg["lat_n"] else None,
    }
    if agg["time_us"]:
        bps = agg["bytes"] * 8 / (agg["time_us"] * wire.INT_TIME_UNIT_NS * 1e-9)
        out["tx_bps"] = bps
        if link_bps:
            out["utilization"] = bps / link_bps
    return out


class Collector:
    def __init__(self, bind: str, port: int, records_path: Path, link_bps: float = 0.0,
                 duration_s: float = 0.0, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # stamps each record ("t"): a simulator's is virtual
        self.addr = (bind, port)
        self.records_path = records_path
        self.link_bps = link_bps
        self.duration_s = duration_s
        self.sock: socket.socket | None = None
        self.records: list[dict[str, Any]] = []
        self.reports = 0
        self.malformed = 0

    def open(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(self.addr)
        self.sock.settimeout(0.1)

    def close(self) -> None:
        if self.sock:
            self.sock.close()

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        start = time.monotonic()
        self.records_path.parent.mkdir(parents=True, exist_ok=True)
        with self.records_path.open("a") as out:
            while not should_stop():
                if self.duration_s and time.monotonic() - start >= self.duration_s:
                    break
                try:
                    data, _ = self.sock.recvfrom(65535)
                except TimeoutError:
                    continue
                self.ingest(data, out)
        return self.metrics(time.monotonic() - start)

    def ingest(self, data: bytes, out: Any = None) -> None:
        try:
            recs = parse_report(data)
        except ReportError:
            self.malformed += 1
            return
        self.reports += 1
        now = self.clock()
        for rec in recs:
            rec["t"] = now
            if out is not None:
                out.write(json.dumps(rec) + "\n")
        self.records.extend(recs)

    def metrics(self, elapsed: float) -> dict[str, Any]:
        return {"role": "collect", "elapsed_s": elapsed, "reports": self.reports,
                "malformed_reports": self.malformed, "records": len(self.records),
                **summarize(self.records, self.link_bps)}
