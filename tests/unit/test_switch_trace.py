"""The per-packet trace (simple_switch's --log-console / --log-file / --log-level)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, f, hx, rd

from p4sim.switch import stages
from p4sim.switch.api import ActionCall, Exact, TableEntry
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.main import _tracer, parse_args
from p4sim.switch.trace import Tracer

STD = "standard_metadata"


def prog() -> Prog:
    p = Prog([("k1", 16), ("k2", 8)])
    fwd = p.action("fwd", [("port", 9)], [assign(f(STD, "egress_spec"), rd(0))])
    drop = p.action("to_port_2", [], [assign(f(STD, "egress_spec"), hx(2))])
    p.table("t", [("exact", ["probe", "k1"])], [fwd, drop], default=(drop, []))
    return p


def traced(level: str = "trace") -> tuple[DataPlane, io.StringIO, list[int]]:
    out, sent = io.StringIO(), []
    now = [0]
    dp = DataPlane(trace=Tracer(out, level), clock=lambda: now[0],
                   transmit=lambda port, fr: sent.append(port))
    dp.load_pipeline(prog().json())
    dp.table_insert("t", TableEntry((Exact(0x42),), ActionCall("fwd", (3,))))
    return dp, out, sent


def test_trace_shows_parser_tables_actions_queues_and_ports() -> None:
    dp, out, sent = traced()
    p = prog()
    dp.receive(1, p.frame(0x42, 0))
    dp.receive(1, p.frame(0x43, 0))
    dp.set_queue_rate(10, 2)
    dp.set_queue_depth(1, 2)
    for _ in range(3):
        dp.receive(1, p.frame(0x44, 0))
    log = out.getvalue().splitlines()
    assert sent == [3, 2, 2]
    text = "\n".join(log)
    for expected in (
        "[1] packet received on port 1, 25 bytes",
        "[1] parser state 'start' at byte 0",
        "[1] parser state 'parse_probe' at byte 14",
        "[1] table 't': looking up key {probe.k1=0x42}",
        "[1] table 't': hit entry (0x42) priority 0 -> fwd(0x3)",
        "[1] action fwd(0x3)",
        "[1] egress: port 3 queue 0, waited 0 us, 0 packet(s) left in the queue",
        "[1] transmitting 25 bytes on port 3",
        "[2] table 't': miss, default action",
        "[2] action to_port_2()",
        "[4] queue (2, 0): queued at depth 0",
        "[5] queue (2, 0): full, tail drop",
    ):
        assert expected in text, expected
    # Packet 3 found the paced queue idle and left at once; 4 waits (10 pps), 5 was dropped.
    assert "[3] transmitting 25 bytes on port 2" in text
    assert "[4] transmitting" not in text


def test_debug_level_leaves_out_trace_details() -> None:
    dp, out, _ = traced("debug")
    dp.receive(1, prog().frame(0x42, 0))
    text = out.getvalue()
    assert "hit entry (0x42)" in text and "[D]" in text
    assert "parser state" not in text and "looking up key" not in text and "[T]" not in text


def test_no_trace_means_the_plain_fused_path() -> None:
    dp = DataPlane(dataplane="python")  # the Python path's own functions (not native C)
    dp.load_pipeline(prog().json())
    flow = dp.flow
    assert flow is not None
    # No wrapper anywhere: the receive in use is the fused stage itself, the parser starts at
    # the generated state and the table's lookup is the exact index's own dict.get.
    assert flow.receive.__code__.co_filename == stages.__file__
    assert flow.receive.__code__.co_name == "receive"
    assert not {"to_egress", "egress"} & set(flow.receive.__code__.co_names)  # inlined
    assert flow.cp.parser_start.__code__.co_filename.startswith("p4sim-generated/parser_")
    dp2, _, _ = traced()
    assert dp2.flow is not None
    assert dp2.flow.receive.__code__.co_filename != stages.__file__


def test_command_line_log_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "switch.log"
    ns = parse_args(["-i", "0@a", "--no-p4", "--log-file", str(path), "-L", "debug"])
    assert "ignoring" not in capsys.readouterr().err
    tracer = _tracer(ns)
    assert isinstance(tracer, Tracer) and tracer.enabled("debug") and not tracer.enabled("trace")
    dp = DataPlane(trace=tracer)
    dp.load_pipeline(prog().json())
    dp.receive(1, prog().frame(0x43, 0))
    tracer.out.close()
    assert "table 't': miss, default action" in path.read_text()
    assert _tracer(parse_args(["--no-p4"])) is None
    assert _tracer(parse_args(["--no-p4", "--log-console", "--log-level", "off"])) is None
    assert isinstance(_tracer(parse_args(["--no-p4", "--log-console"])), Tracer)
