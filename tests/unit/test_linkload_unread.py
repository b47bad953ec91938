"""Frames a switch's interface received but its pipeline never counted (cellfabric.core.linkload)."""

from __future__ import annotations

import re

from cellfabric.core.linkload import unread_frames
from cellfabric.core.report import RunMetrics, format_summary, summarize


def _snap(rx: dict) -> dict:
    return {"t": 0.0, "ports": {}, "rx": rx}


def test_unread_frames_is_kernel_received_minus_pipeline_counted() -> None:
    # (port_rx of the program, rx_packets of the kernel) per (switch, port)
    before = _snap({("l1", 1): (10, 12), ("l1", 2): (0, 3), ("s1", 1): (5, None)})
    after = _snap({("l1", 1): (110, 180), ("l1", 2): (50, 53), ("s1", 1): (9, 40)})
    # l1:1: the kernel took 168 frames, the pipeline saw 100; l1:2 agrees; s1:1 has no kernel
    # count before (interface unreadable) and is left out rather than guessed
    assert unread_frames(before, after) == {"l1": {1: 68, 2: 0}}


def test_frames_read_between_the_two_reads_never_count_as_unread() -> None:
    before = _snap({("l1", 1): (10, 10)})
    after = _snap({("l1", 1): (25, 20)})  # pipeline counted 5 more than the kernel's snapshot
    assert unread_frames(before, after) == {"l1": {1: 0}}


def test_summary_prints_unread_frames_only_where_measured() -> None:
    m = RunMetrics(run={"name": "r", "target": "bmv2"})
    m.drops = {"l1": {"unread_frames": 68}, "s1": {"unread_frames": 0}}
    s = summarize(m)
    assert s["frames_unread_by_switches"] == 68
    assert re.search(r"frames switches did not read +68\n", format_summary(m))
    m.drops = {"l1": {"unread_frames": 68}, "s1": {}}  # one switch unmeasured: unknown
    assert summarize(m)["frames_unread_by_switches"] is None
    assert "did not read" not in format_summary(RunMetrics(run={"name": "r"}))
