"""bench/sim_speed.py and the README's speed row: the htsim event counter finds the main loop
it patches, a missing anchor is a one-line error, and the row shows both simulators' figures
and their ratios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import sim_speed
from sim_table import _speed_row


def test_the_counter_replaces_exactly_the_main_loop() -> None:
    # the shape of htsim's main_eqds.cpp around its loop (a fact about the file, not its text)
    main = 'cout << "Starting simulation" << endl;\n    while (eventlist.doNextEvent()) {\n' \
           '    }\n\n    cout << "Done" << endl;\n'
    patched, n = sim_speed.HTSIM_MAIN_LOOP.subn(sim_speed.HTSIM_COUNTED_LOOP, main)
    assert n == 1
    assert "++cf_events" in patched and patched.count("doNextEvent") == 1
    assert patched.endswith('cout << "Done" << endl;\n')


def test_a_missing_htsim_anchor_is_a_one_line_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_speed, "HTSIM_ANCHOR", tmp_path / "nowhere")
    with pytest.raises(sim_speed.BenchError) as err:
        sim_speed.htsim_bin()
    assert "\n" not in str(err.value) and "nowhere" in str(err.value)


def test_the_speed_row_shows_both_simulators_and_the_ratios() -> None:
    cf = {"messages": "128/128", "virtual_s": 1.2e-4, "events": 1_600_000,
          "whole_command_s": 300.0, "engine_s": 240.0, "engine_events_per_s": 6667.0,
          "peak_rss_mib": 900.0}
    ht = {"wall_s": 2.0, "events": 3_600_000, "events_per_wall_s": 1.8e6,
          "flows_finished": "128/128"}
    row = _speed_row({"k": 8, "hosts": 128, "size": 1 << 20, "cellfabric": cf, "htsim": ht,
                      "ratios": {"whole_command_over_htsim": 150.0,
                                 "engine_over_htsim": 120.0}}, "today")
    for part in ("k=8", "128 hosts", "1024 KiB", "**300.0 s**", "engine 240.0 s", "**2.00 s**",
                 "3,600,000 events", "**150.00x**", "120.00x"):
        assert part in row, part
    assert "s (best of" not in row  # one run of cellfabric: no list of runs
    three = _speed_row({"k": 8, "hosts": 128, "size": 1 << 20, "htsim": ht,
                        "cellfabric": {**cf, "whole_command_runs_s": [310.0, 300.0, 305.5]},
                        "ratios": {}}, "today")
    assert "**300.0 s** (best of 3: 310.0, 300.0, 305.5 s)" in three
    failed = _speed_row({"k": 8, "hosts": 128, "size": 1 << 20, "cellfabric": cf,
                         "htsim": {"error": "htsim: no build.sh"}}, "today")
    assert "htsim: not run (htsim: no build.sh)" in failed


def test_the_timed_commands_keep_their_bytecode_as_a_users_shell_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("CF_BENCH_PROBE", "kept")
    env = sim_speed.user_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["CF_BENCH_PROBE"] == "kept" and env["PATH"]
    # every package the project installs is compiled before the timed commands
    root = Path(__file__).resolve().parents[2]
    assert all((root / p / "__init__.py").exists() for p in sim_speed.PACKAGES)


def test_the_two_simulators_take_turns_and_each_keeps_its_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []

    class FakeJob:
        def __init__(self, k: int, size: int) -> None:
            self.walls: list[float] = []

        def run_once(self) -> float:
            order.append("htsim")
            self.walls.append([1.5, 1.2, 1.4][len(self.walls)])
            return self.walls[-1]

        def result(self) -> dict:
            return {"wall_s": min(self.walls), "walls_s": self.walls, "events": 100,
                    "events_per_wall_s": 100 / min(self.walls)}

        def __exit__(self, *exc: object) -> None:
            order.append("cleanup")

    whole = iter([6.0, 5.4, 5.7])

    def fake_once(k: int, size: int, results: Path) -> dict:
        order.append("cellfabric")
        w = next(whole)
        return {"whole_command_s": w, "engine_s": w / 2, "events": 50,
                "engine_events_per_s": 50 / (w / 2)}

    monkeypatch.setattr(sim_speed, "HtsimJob", FakeJob)
    monkeypatch.setattr(sim_speed, "cellfabric_once", fake_once)
    monkeypatch.setattr(sim_speed, "CELLFABRIC_REPEATS", {8: 3})
    out = sim_speed.speed_section(8, 1 << 20, tmp_path)
    assert order == ["htsim", "cellfabric"] * 3 + ["cleanup"]
    assert out["htsim"]["wall_s"] == 1.2
    assert out["cellfabric"]["whole_command_s"] == 5.4
    assert out["cellfabric"]["whole_command_runs_s"] == [6.0, 5.4, 5.7]
    assert out["ratios"]["whole_command_over_htsim"] == pytest.approx(5.4 / 1.2)
