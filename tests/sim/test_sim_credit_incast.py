"""Receiver-driven credit without loss by construction (`--credit-unscheduled 1`): a flow's
first cell is its request to send and the receiver keeps at most a round trip of granted
cells (plus two grant batches) on their way to it, so a 15:1 incast at 100 Gb/s cannot fill
the receiver's ToR port. With credit's default (a round trip of unscheduled cells per flow,
longer than a 64 KiB message), the same incast arrives at line rate and overflows it."""

from __future__ import annotations

import json
from pathlib import Path

from cellfabric.sim.cli import sim_main

INCAST = ["fat-tree", "--workload", "incast", "--senders", "15", "--size", "65536",
          "--count", "1", "--cc", "credit", "--spray", "spray"]
FRAME_BYTES = 1024 + 14 + 20 + 8 + 12 + 4  # a cell: payload, Ethernet, IPv4, UDP, BTH, ICRC
BUFFER_CELLS = 512 * 1024 // FRAME_BYTES  # the default 512 KiB per port: 484 cells


def _summary(tmp_path: Path, extra: list[str]) -> dict:
    assert sim_main([*INCAST, *extra, "--quiet", "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())["summary"]


def test_a_request_to_send_and_a_grant_window_make_an_incast_lossless(tmp_path: Path) -> None:
    # The bound, from the mechanism: cells on their way to the receiver never exceed the
    # window (a round trip of cells + 2 batches of 8) + per sender its request and one probe.
    # A cross-pod round trip at 100 Gb/s with 1 us hops: 6 links out and back, 12 us plus
    # serializations, under 14 us = 162 cells of 86.6 ns. No queue can exceed that sum.
    rtt_cells = 14e-6 / (FRAME_BYTES * 8 / 100e9)
    bound = rtt_cells + 2 * 8 + 15 * (1 + 1)
    assert bound < BUFFER_CELLS
    s = _summary(tmp_path, ["--credit-unscheduled", "1"])
    assert s["messages_completed"] == s["messages_total"] == 15
    assert s["cells_dropped"] == 0 and s["retransmitted_cells"] == 0
    assert s["peak_queue_depth"] <= bound


def test_credit_default_unscheduled_cells_overflow_the_same_incast(tmp_path: Path) -> None:
    s = _summary(tmp_path, [])
    assert s["messages_completed"] == 15
    assert s["cells_dropped"] > 0 and s["peak_queue_depth"] >= BUFFER_CELLS


def test_credit_unscheduled_rejects_zero_in_one_line(tmp_path: Path, capsys) -> None:
    assert sim_main([*INCAST, "--credit-unscheduled", "0", "--quiet",
                     "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--credit-unscheduled '0'" in err


def test_the_same_holds_at_the_emulations_settings(tmp_path: Path) -> None:
    # `--link-rate topology`: fat-tree.yaml's 64-packet queues, as `cellfabric run` has them.
    # The plan's round trip across 5 switches is 8 cell times per 3 switches (13.3, so 14),
    # the window 14 + 2 batches of 8 = 30, plus a request and a probe per sender: 60 < 64.
    s = _summary(tmp_path, ["--credit-unscheduled", "1", "--link-rate", "topology"])
    assert s["messages_completed"] == 15 and s["cells_dropped"] == 0
    assert s["peak_queue_depth"] <= 14 + 2 * 8 + 15 * 2
