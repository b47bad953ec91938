"""A rate control is one registry entry: this file alone registers a new one (a fixed half of
the line rate) and `cellfabric sim` runs it, with no other file knowing its name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main
from hosts.cc import CcAlgorithm, RateController, register, unregister


class HalfRate(RateController):
    def rate_bps(self) -> float:
        return self.line_rate_bps / 2


@pytest.fixture
def halfrate() -> Iterator[None]:
    register(CcAlgorithm("halfrate", lambda rate, _: HalfRate(rate, name="halfrate")))
    yield
    unregister("halfrate")


def _one_flow(results: Path, cc: str) -> dict:
    # one message across an idle leaf-spine: nothing queues, so pacing alone sets its time
    assert sim_main(["leaf-spine", "--workload", "incast", "--senders", "1", "--cc", cc,
                     "--size", "262144", "--count", "1", "--seed", "1", "--quiet",
                     "--results", str(results / cc)]) == 0
    (path,) = (results / cc).glob("*/metrics.json")
    return json.loads(path.read_text())


def test_a_registered_algorithm_runs_in_the_simulator(tmp_path: Path, halfrate: None) -> None:
    half, full = _one_flow(tmp_path, "halfrate"), _one_flow(tmp_path, "none")
    assert half["run"]["cc"] == "halfrate"
    (msg_half,), (msg_full,) = half["messages"], full["messages"]
    # 257 cells at half the line take twice as long, less the idle path's fixed latency
    # (a few cell times and hop delays, the same in both runs)
    fixed = msg_full["base_latency_s"]
    ratio = (msg_half["fct_s"] - fixed) / (msg_full["fct_s"] - fixed)
    assert ratio == pytest.approx(2.0, rel=0.03)
    assert half["summary"]["retransmitted_cells"] == 0


def test_an_unknown_algorithm_is_a_one_line_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sim_main(["leaf-spine", "--cc", "halfrate", "--results", str(tmp_path)])
    assert "invalid choice: 'halfrate'" in capsys.readouterr().err
