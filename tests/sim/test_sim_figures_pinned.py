"""A seeded small run's key figures, pinned: the simulator's own speed-ups (engine, wires,
host dispatch, report) must not move a figure where they leave the event order as it was.

The expected values were recorded from `cellfabric sim` before those speed-ups (main at
60b2063, 2026-12-02), not computed by the code under test. A change that reorders events on
purpose (and keeps the physics: tests/sim/test_sim_exact.py) updates them and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

K4_SPRAY = (["fat-tree:k=4", "--workload", "permutation", "--spray", "spray", "--cc", "none",
             "--size", "32768", "--count", "1", "--link-rate", "100G", "--seed", "3"],
            {"events": 5297, "packets": 3360, "virtual_time_s": 1.6058e-05, "peak": 9,
             "messages_completed": 16, "messages_total": 16, "fct_p50_s": 1.5696e-05,
             "fct_p99_s": 1.6058e-05, "cells_dropped": 0, "retransmitted_cells": 0,
             "slowdown_p50": 1.0324589599357132, "slowdown_p99": 1.0467948183069797,
             "max_reorder_depth": 5, "goodput_fraction": 0.9635587034917618,
             "cells_sent": 528, "duplicate_cells": 0})
LEAF_SPINE_DCQCN = (["leaf-spine", "--size", "16384", "--count", "1", "--cc", "dcqcn",
                     "--seed", "1"],
                    {"events": 530, "packets": 336, "virtual_time_s": 1.0119e-05, "peak": 6,
                     "messages_completed": 4, "messages_total": 4, "fct_p50_s": 9.945e-06,
                     "fct_p99_s": 1.0119e-05, "cells_dropped": 0, "retransmitted_cells": 0,
                     "slowdown_p50": 1.0184206645694063, "slowdown_p99": 1.0362391860007862,
                     "max_reorder_depth": 2, "goodput_fraction": 0.9668649634125024,
                     "cells_sent": 68, "duplicate_cells": 0})


def key_figures(results: Path, args: list[str]) -> dict:
    assert sim_main([*args, "--quiet", "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    m = json.loads((run_dir / "metrics.json").read_text())
    s, sim = m["summary"], m["run"]["sim"]
    return {"events": sim["events"], "packets": sim["packets"],
            "virtual_time_s": sim["virtual_time_s"],
            "peak": max(sim["peak_queue_packets"].values()),
            **{k: s[k] for k in K4_SPRAY[1] if k in s}}


@pytest.mark.parametrize(("args", "expected"), [K4_SPRAY, LEAF_SPINE_DCQCN],
                         ids=["k4-spray-none", "leaf-spine-dcqcn"])
def test_a_seeded_run_keeps_its_recorded_figures(tmp_path: Path, args: list[str],
                                                 expected: dict) -> None:
    assert key_figures(tmp_path, args) == expected
