"""The structured packet trace (p4sim.switch.jsontrace): one JSON record per sampled packet,
its sampling by packet identity, and `p4sim switch --trace-file`."""

from __future__ import annotations

import io
import json
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, f, hx, rd

from p4sim.switch.api import ActionCall, Exact, TableEntry
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.jsontrace import JsonTracer
from p4sim.switch.main import main as switch_main
from p4sim.switch.tracesample import TraceSampler, identity_hash, packet_identity

STD = "standard_metadata"


def prog() -> Prog:
    p = Prog([("k1", 16), ("k2", 8)])
    fwd = p.action("fwd", [("port", 9)], [assign(f(STD, "egress_spec"), rd(0))])
    other = p.action("to_port_2", [], [assign(f(STD, "egress_spec"), hx(2))])
    p.table("t", [("exact", ["probe", "k1"])], [fwd, other], default=(other, []))
    return p


def traced(sampler: TraceSampler | None = None) -> tuple[DataPlane, io.StringIO, list[int]]:
    out, sent = io.StringIO(), []
    dp = DataPlane(trace=JsonTracer(out, "s1", sampler), clock=lambda: 5000,
                   transmit=lambda port, fr: sent.append(port))
    dp.load_pipeline(prog().json())
    dp.table_insert("t", TableEntry((Exact(0x42),), ActionCall("fwd", (3,))))
    return dp, out, sent


def records(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_record_has_parser_path_table_action_queue_and_egress() -> None:
    dp, out, sent = traced()
    dp.receive(1, prog().frame(0x42, 0))
    (rec,) = records(out)
    assert sent == [3]
    assert rec["switch"] == "s1" and rec["in_port"] == 1 and rec["len"] == 25
    assert [e["headers"] for e in rec["ingress"] if e["ev"] == "parser"] == [["ethernet", "probe"]]
    table = next(e for e in rec["ingress"] if e["ev"] == "table")
    assert table["table"] == "t" and table["hit"] and table["key"] == {"probe.k1": 0x42}
    assert table["entry"] == ["0x42"] and table["action"] == "fwd(0x3)"
    assert {"ev": "action", "name": "fwd", "args": [3]} in rec["ingress"]
    (copy,) = rec["copies"]
    assert copy["port"] == 3 and copy["depth"] == 0 and copy["wait_ns"] == 0
    assert rec["t_in"] == copy["t_out"] == 5000 and copy["out_len"] == 25  # one instant


def test_a_queued_packet_records_its_depth_and_a_full_queue_its_tail_drop() -> None:
    dp, out, sent = traced()
    dp.set_queue_rate(10, 2)  # 10 pps to port 2, room for one waiting packet
    dp.set_queue_depth(1, 2)
    for _ in range(3):
        dp.receive(1, prog().frame(0x44, 0))  # misses: default action to port 2
    recs = records(out)
    # The first left at once, the third found the queue full; the second still waits.
    assert len(recs) == 2 and sent == [2]
    assert recs[0]["copies"][0]["port"] == 2 and "drop" not in recs[0]
    miss = next(e for e in recs[0]["ingress"] if e["ev"] == "table")
    assert miss["hit"] is False and "entry" not in miss
    drop = recs[1]["drop"]
    assert drop["stage"] == "queue" and drop["port"] == 2
    assert drop["reason"] == "tail drop: queue (2, 0) full"


def _ipv4(src: str, dst: str, ident: int, ttl: int = 64, tos: int = 2, sport: int = 1000,
          dport: int = 4791) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 28, ident, 0, ttl, 17, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return bytes(12) + b"\x08\x00" + ip + struct.pack("!HHHH", sport, dport, 8, 0)


def test_sampling_keeps_the_same_packets_whatever_a_hop_changed() -> None:
    sampler = TraceSampler(every=10)
    kept = [i for i in range(2000) if sampler.wants(_ipv4("10.0.0.1", "10.0.0.2", i))]
    assert 100 < len(kept) < 300  # about 1 in 10
    for i in kept[:20]:  # TTL and ECN differ at the next hop: the decision does not
        assert sampler.wants(_ipv4("10.0.0.1", "10.0.0.2", i, ttl=60, tos=3))
    frame = _ipv4("10.1.2.3", "10.4.5.6", 77, sport=5)
    assert packet_identity(frame) == {"src": "10.1.2.3", "dst": "10.4.5.6", "proto": 17,
                                      "ip_id": 77, "sport": 5, "dport": 4791}
    assert identity_hash(bytes(40)) is None  # not IPv4: never sampled by hash


def test_a_filter_keeps_only_matching_packets() -> None:
    sampler = TraceSampler(1, TraceSampler.parse_filter("src=10.0.0.1, dport=4791"))
    assert sampler.wants(_ipv4("10.0.0.1", "10.0.0.9", 1))
    assert not sampler.wants(_ipv4("10.0.0.2", "10.0.0.9", 1))
    assert not sampler.wants(_ipv4("10.0.0.1", "10.0.0.9", 1, dport=53))
    for bad, word in (("src", "NAME=VALUE"), ("ttl=3", "NAME=VALUE"), ("src=10.0.0", "bad value")):
        with pytest.raises(ValueError, match=word):
            TraceSampler.parse_filter(bad)


def test_unsampled_packets_leave_no_record() -> None:
    sampler = TraceSampler(1, {"src": "10.9.9.9"})
    dp, out, sent = traced(sampler)
    dp.receive(1, prog().frame(0x42, 0))  # not IPv4: no match
    assert sent == [3] and out.getvalue() == ""


def test_switch_trace_options_report_bad_input_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "prog.json"
    path.write_bytes(prog().json())
    code = switch_main(["--trace-file", str(tmp_path / "t.jsonl"), "--trace-filter", "port=1",
                        str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("p4sim switch: error: trace filter 'port=1'")
    assert len(err.splitlines()) == 1
    code = switch_main(["--trace-file", str(tmp_path / "t.jsonl"), "--trace-sample", "0",
                        str(path)])
    assert code == 2 and "at least 1" in capsys.readouterr().err
    code = switch_main(["--trace-file", str(tmp_path / "no" / "t.jsonl"), str(path)])
    assert code == 1 and "cannot open log file" in capsys.readouterr().err


def test_the_per_packet_sampler_decides_as_the_identity_hash() -> None:
    sampler = TraceSampler(every=7)
    fast = sampler.fast()
    frames = [_ipv4("10.0.0.1", "10.0.0.2", i, sport=i * 13) for i in range(500)]
    assert [fast(f) for f in frames] == [identity_hash(f) % 7 == 0 for f in frames]
    assert fast(bytes(40)) is False


def test_switch_trace_options_make_a_tracer_writing_the_file(tmp_path: Path) -> None:
    from p4sim.switch.main import _tracer, parse_args

    path = tmp_path / "t.jsonl"
    tracer = _tracer(parse_args(["--no-p4", "--device-id", "3", "--trace-file", str(path)]))
    assert isinstance(tracer, JsonTracer)
    dp = DataPlane(trace=tracer, transmit=lambda port, fr: None)
    dp.load_pipeline(prog().json())
    dp.receive(1, prog().frame(0x43, 0))
    tracer.out.close()
    (rec,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert rec["switch"] == "device 3" and rec["copies"][0]["port"] == 2


def _closure_functions(fn: object) -> set[str]:
    """The names of every function reachable from ``fn`` through closure cells."""
    names, todo, seen = set(), [fn], set()
    while todo:
        g = todo.pop()
        if id(g) in seen or not callable(g):
            continue
        seen.add(id(g))
        names.add(getattr(g, "__name__", ""))
        for cell in getattr(g, "__closure__", None) or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:
                continue
    return names


def test_the_fast_paths_table_nodes_never_hold_a_traced_lookup() -> None:
    """A sampled packet walks traced twins: the nodes every other packet runs are not
    changed, not even while the sampled packet is in the switch (swapping them per packet
    undid CPython's specialisation of the fast path)."""
    seen_in_flight: list[set[str]] = []
    out = io.StringIO()
    dp = DataPlane(trace=JsonTracer(out, "s1", TraceSampler()), clock=lambda: 5000,
                   transmit=lambda port, fr: seen_in_flight.append(
                       _closure_functions(dp.flow.ingress)))
    dp.load_pipeline(prog().json())
    dp.table_insert("t", TableEntry((Exact(0x42),), ActionCall("fwd", (3,))))
    before = _closure_functions(dp.flow.ingress)
    dp.receive(1, prog().frame(0x42, 0))
    assert len(records(out)) == 1 and seen_in_flight  # sampled, and sent while traced
    assert "plain_node" in before and "traced_lookup" not in before
    assert all(names == before for names in seen_in_flight)
