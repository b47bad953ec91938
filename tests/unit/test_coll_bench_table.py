"""bench/coll_bench.py's nccl-tests table: busbw by nccl-tests' definitions (worked by hand
here), each mode side by side with its drops and its time over the first mode's, and the
points runner that keeps every row in the points' order and writes what it has after each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import coll_bench


def _row(mode: str, workload: str, size: int, time_s: float, dropped: int = 0) -> dict:
    return {"mode": mode, "workload": workload, "size": size, "time_s": time_s,
            "nranks": 8, "messages": "10/10", "cells_dropped": dropped, "wall_s": 1.0}


def test_the_side_by_side_table_gives_busbw_drops_and_ratio_per_size() -> None:
    rows = [_row("static+ecmp", "allreduce-ring", 1 << 20, 200e-6, dropped=1234),
            _row("topology+spray", "allreduce-ring", 1 << 20, 100e-6),
            _row("static+ecmp", "all-to-all-coll", 4096, 50e-6),
            _row("topology+spray", "all-to-all-coll", 4096, 40e-6)]
    algo_of = {a.workload: a for a in coll_bench.ALGORITHMS.values()}
    text = coll_bench.side_by_side({"topology": "t", "rows": rows}, algo_of)
    lines = text.splitlines()
    assert lines[0].count("|") == 10  # collective, size, 3 per mode, one ratio
    (ring,) = [line for line in lines if line.startswith("| all-reduce")]
    cells = [c.strip() for c in ring.strip("|").split("|")]
    # 1 MiB in 200 us: algbw 5.24288 GB/s, busbw x 2(8-1)/8 = 9.175; in 100 us twice that
    assert cells[1:] == ["1 MiB", "200.0", "9.18", "1,234", "100.0", "18.35", "0", "0.50x"]
    (a2a,) = [line for line in lines if line.startswith("| all-to-all")]
    cells = [c.strip() for c in a2a.strip("|").split("|")]
    # 4 KiB in 50 us: algbw 0.08192, busbw x 7/8 = 0.0717; in 40 us 0.0896
    assert cells[1:] == ["4 KiB", "50.0", "0.07", "0", "40.0", "0.09", "0", "0.80x"]
    assert "t: 4 points, 4 with every message delivered" in text


def test_a_missing_point_is_a_dash_and_an_incomplete_run_says_so() -> None:
    rows = [_row("static+ecmp", "allreduce-ring", 1024, 3e-3),
            {**_row("topology+spray", "broadcast", 1024, 1e-3), "messages": "3/10"}]
    algo_of = {a.workload: a for a in coll_bench.ALGORITHMS.values()}
    text = coll_bench.side_by_side({"topology": "t", "complete": False, "rows": rows}, algo_of)
    (ring,) = [line for line in text.splitlines() if line.startswith("| all-reduce")]
    assert ring.rstrip(" |").endswith("| - | - | - | -")
    assert "2 points, 1 with every message delivered (run not complete)" in text


def test_points_come_back_in_order_and_the_file_is_rewritten_after_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def fake_run_one(topology, workload, size, spray, cc, channels, chunk, policy):
        out = tmp_path / "out.json"
        # what was written before this point: every point finished so far, not complete
        if out.exists():
            before = json.loads(out.read_text())
            seen.append(len(before["rows"]))
            assert before["complete"] is False
        return _row(f"{policy}+{spray}", workload, size, size * 1e-9)

    monkeypatch.setattr(coll_bench, "run_one", fake_run_one)
    points = [("t", "allreduce-ring", size, "ecmp", "none", 2, None, "static")
              for size in (4096, 1024, 65536)]
    rows = coll_bench._run_points(points, 1, tmp_path / "out.json", "t")
    assert [r["size"] for r in rows] == [4096, 1024, 65536]
    assert seen == [1, 2]
