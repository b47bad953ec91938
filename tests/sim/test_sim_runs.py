"""`cellfabric sim` end to end: deterministic per seed, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

SMALL = ["leaf-spine", "--size", "16384", "--count", "1", "--quiet", "--cc", "dcqcn"]


def _metrics(results: Path, seed: int) -> dict:
    assert sim_main([*SMALL, "--seed", str(seed), "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    wall = data["run"].pop("wall_clock")  # the only figures allowed to differ
    assert wall["wall_s"] > 0
    return data


def test_one_seed_gives_identical_metrics_and_two_seeds_differ(tmp_path: Path) -> None:
    import threading

    before = threading.active_count()
    a = _metrics(tmp_path / "a", 1)
    # A run leaves no thread behind: each switch's P4Runtime device had a digest timer that
    # outlived its run, and a process simulating many runs (the sim bench) carried 582 of them.
    assert threading.active_count() == before
    b = _metrics(tmp_path / "b", 1)
    c = _metrics(tmp_path / "c", 2)
    assert a == b
    assert a["summary"]["messages_completed"] == a["summary"]["messages_total"] == 4
    assert c != a
    assert a["run"]["sim"]["events"] > 0 and a["run"]["sim"]["packets"] > 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--link-rate", "fast"], "--link-rate 'fast'"),
    (["--hop-delay", "soon"], "--hop-delay 'soon'"),
    (["--buffer", "lots"], "--buffer 'lots'"),
    (["--until", "-1"], "--until '-1'"),
    (["--fail", "l1-s9@1"], "s9"),
])
def test_bad_options_are_one_line_errors(tmp_path: Path, capsys, args: list[str],
                                         needle: str) -> None:
    assert sim_main([*SMALL, "--results", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cellfabric sim: error:") and needle in err
    assert len(err.splitlines()) == 1


def test_a_failed_host_link_moves_a_dual_homed_host_without_losing_a_message(
        tmp_path: Path) -> None:
    assert sim_main(["dual-homed", "--size", "131072", "--count", "1", "--quiet",
                     "--fail", "h1-l1@0.000005", "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    assert data["summary"]["messages_completed"] == data["summary"]["messages_total"] == 4
    failovers = [f for flow in data["flows"].values() for f in flow["failovers"]]
    assert [f["reason"] for f in failovers] == ["link down"]
    events = [e["event"] for e in data["run"]["events"]]
    assert "link h1-l1 down (injected)" in events
    assert any(e.startswith("link h1-l1 down: ") for e in events)  # the controller re-planned


def test_ecn_draws_come_from_the_run_seed(tmp_path: Path) -> None:
    """fabric.p4's random() (ECN marking between kmin and kmax) draws from each switch's own
    generator, seeded from --seed: at the topology's 64-cell queues an all-reduce marks cells
    by chance, the same seed gives the same marks, and the seed alone (the ring has no other
    randomness) changes them."""
    args = ["leaf-spine", "--workload", "allreduce", "--cc", "none", "--spray", "ecmp",
            "--size", "65536", "--count", "1", "--link-rate", "topology", "--quiet"]

    def marks(results: Path, seed: int) -> dict:
        assert sim_main([*args, "--seed", str(seed), "--results", str(results)]) == 0
        (run_dir,) = list(results.iterdir())
        data = json.loads((run_dir / "metrics.json").read_text())
        return {sw: d.get("ecn_marks", 0) for sw, d in data["drops"].items()}

    a, b = marks(tmp_path / "a", 4), marks(tmp_path / "b", 4)
    assert a == b and sum(a.values()) > 0
    assert any(marks(tmp_path / f"s{seed}", seed) != a for seed in (5, 6))
