"""The plot worker (cellfabric.core.plotworker): `cellfabric sim` draws its PNGs in a spawned
process while it writes metrics.json. Its files must be the in-process path's, its failures
the in-process path's errors (never a hang), and no worker may outlive the report."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cellfabric.core import plotworker
from cellfabric.core.plots import FIGURES, write_plots
from cellfabric.core.plotworker import PlotWorker, PlotWorkerError, start_plot_worker
from cellfabric.core.report import RunMetrics, write_report

pytestmark = pytest.mark.timeout(120)  # a wait that never returns must fail, not hang CI

REPO = Path(__file__).resolve().parents[2]


def _records() -> list[dict]:
    return [{"link": f"l{i}-s1", "tier": "leaf-spine", "capacity_pps": 100,
             "directions": {f"l{i}->s1": {"queue": f"l{i}:1", "up": True, "cells": 10 + i,
                                          "other": 2}}}
            for i in range(4)]


def _metrics() -> RunMetrics:
    """Every section the plots read, and some they do not (which stay in the parent)."""
    m = RunMetrics(run={"name": "r1", "topology": "leaf-spine", "t0": 100.0})
    m.links["l1-s1"] = {"capacity_pps": 1000, "samples": [[100.5, 950, 0], [101.0, 970, 10]]}
    m.link_load = {"window_s": 1.0, "links": _records()}
    m.queues = {f"l{i}:1": [[100.1, 3], [100.2, 17 - i]] for i in range(4)}
    m.flows = {"h1->h3": {"samples": [[100.1, 400], [100.2, 500]], "bytes": 10**6}}
    m.messages = [{"src": "h1", "dst": "h3", "size": 8192, "fct_s": 0.01 * (i + 1),
                   "ideal_s": 0.008} for i in range(4)]
    m.messages.append({"src": "h2", "dst": "h4", "size": 8192, "fct_s": None, "ideal_s": 0.008})
    m.reorder = {f"h{i}": {"max_depth": 6, "p99_depth": 4} for i in range(1, 4)}
    m.drops = {"s1": {"queue_drops": 2}}
    return m


def _broken() -> RunMetrics:
    m = _metrics()
    # a figure only the reorder plot reads (the summary reads max_depth): it cannot draw None
    m.reorder["h1"]["p99_depth"] = None
    return m


def _gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state


def _no_worker_left(worker: PlotWorker) -> None:
    assert worker.pid is not None and all(pid is not None and _gone(pid) for pid in worker.pids)
    assert not [p for p in multiprocessing.active_children() if p.name == "cellfabric-plots"]


def test_worker_writes_the_same_files_as_the_in_process_path(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "worker"
    write_report(_metrics(), here)
    worker = PlotWorker()
    write_report(_metrics(), there, plots=worker)
    names = sorted(p.name for p in here.iterdir())
    assert names == sorted(p.name for p in there.iterdir())
    assert {"metrics.json", "report.html", "link_load.png", "queue_depth.png",
            "flow_rates.png", "completion_times.png", "reorder_depth.png"} <= set(names)
    for name in names:
        assert (here / name).read_bytes() == (there / name).read_bytes(), name
    _no_worker_left(worker)


def test_two_processes_share_the_figures(tmp_path: Path) -> None:
    """The queue-depth heatmap (most of the drawing at k=8) in one process, the rest in the
    other: each draws only its share, and the shares together are every figure."""
    worker = PlotWorker()
    assert len(set(worker.pids)) == 2
    write_report(_metrics(), tmp_path / "worker", plots=worker)
    _no_worker_left(worker)
    mine = ("queue_depth.png",)
    assert (None, mine) == plotworker.SHARES
    write_plots(_metrics(), tmp_path / "queues", only=mine)
    assert sorted(p.name for p in (tmp_path / "queues").iterdir()) == sorted(mine)
    rest = tuple(f for f in FIGURES if f not in mine)
    write_plots(_metrics(), tmp_path / "rest", only=rest)
    drawn = {p.name for p in (tmp_path / "rest").iterdir()}
    assert drawn == set(rest)
    for name in FIGURES:
        assert (tmp_path / "worker" / name).exists(), name


def test_the_worker_is_sent_only_what_the_plots_read(tmp_path: Path) -> None:
    """plot_inputs drops sections; drawing from it must give the full metrics' PNGs."""
    full, slim = tmp_path / "full", tmp_path / "slim"
    write_plots(_metrics(), full)
    sent = plotworker.plot_inputs(_metrics())
    assert not sent.links and not sent.drops and set(sent.messages[0]) == {"fct_s"}
    write_plots(sent, slim)
    for p in full.iterdir():
        assert p.read_bytes() == (slim / p.name).read_bytes(), p.name
    assert set(plotworker.FIGURE_SECTIONS) == set(FIGURES)
    # each figure drawn from only its own sections is the same figure
    for name in FIGURES:
        one = plotworker.plot_inputs(_metrics(), (name,))
        assert bool(one.queues) == (name == "queue_depth.png")
        assert bool(one.reorder) == (name == "reorder_depth.png")
        write_plots(one, tmp_path / name, only=(name,))
        assert (tmp_path / name / name).read_bytes() == (full / name).read_bytes(), name


def test_a_plotting_error_in_the_worker_is_the_in_process_error(tmp_path: Path) -> None:
    with pytest.raises(Exception) as here:
        write_report(_broken(), tmp_path / "here")
    worker = PlotWorker()
    with pytest.raises(Exception) as there:
        write_report(_broken(), tmp_path / "worker", plots=worker)
    assert type(there.value) is type(here.value) is TypeError
    assert str(there.value) == str(here.value)
    assert "raised in the plot worker" in "".join(getattr(there.value, "__notes__", []))
    assert not (tmp_path / "worker" / "report.html").exists()
    _no_worker_left(worker)


def test_a_worker_that_dies_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    worker = PlotWorker()
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(PlotWorkerError, match="plot worker exited"):
        write_report(_metrics(), tmp_path, plots=worker)
    _no_worker_left(worker)


def test_no_worker_is_left_when_the_report_fails_in_the_parent(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").mkdir()  # writing metrics.json fails while the worker draws
    worker = PlotWorker()
    with pytest.raises(IsADirectoryError):
        write_report(_metrics(), tmp_path, plots=worker)
    _no_worker_left(worker)


def test_an_unused_worker_closes_without_a_run() -> None:
    with PlotWorker() as worker:
        pass
    _no_worker_left(worker)


def test_the_worker_exits_when_its_parent_dies(tmp_path: Path) -> None:
    script = ("import sys, time\n"
              "from cellfabric.core.plotworker import PlotWorker\n"
              "if __name__ == '__main__':\n"
              "    w = PlotWorker()\n"
              "    print(w.pid, flush=True)\n"
              "    time.sleep(600)\n")
    path = tmp_path / "parent.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
    finally:
        parent.kill()  # SIGKILL: no atexit, no finally; only the pipe's EOF tells the worker
        parent.wait()
    deadline = time.monotonic() + 60  # it may still be importing matplotlib
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid)


def test_the_environment_turns_the_worker_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plotworker.ENV_DISABLE, "0")
    assert start_plot_worker() is None
    monkeypatch.setenv(plotworker.ENV_DISABLE, "1")
    worker = start_plot_worker()
    assert worker is not None
    worker.close()
    _no_worker_left(worker)


def test_cellfabric_sim_starts_a_worker_and_leaves_none_even_when_the_run_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cellfabric.sim import run

    monkeypatch.delenv(plotworker.ENV_DISABLE, raising=False)
    seen: list[PlotWorker | None] = []

    def failing(cfg: object, plots: PlotWorker | None) -> None:
        seen.append(plots)
        raise RuntimeError("the simulation failed")

    monkeypatch.setattr(run, "_execute_sim", failing)
    big = SimpleNamespace(topo=SimpleNamespace(hosts=[f"h{i}" for i in range(64)]))
    with pytest.raises(RuntimeError, match="the simulation failed"):
        run.execute_sim(big)  # type: ignore[arg-type]
    assert isinstance(seen[0], PlotWorker)
    _no_worker_left(seen[0])
    # a small fabric's run is over before the worker's import would be: no worker
    small = SimpleNamespace(topo=SimpleNamespace(hosts=["h1", "h2"]))
    with pytest.raises(RuntimeError, match="the simulation failed"):
        run.execute_sim(small)  # type: ignore[arg-type]
    assert seen[1] is None


def test_workers_run_below_the_parent_so_its_simulation_keeps_a_core() -> None:
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    worker = PlotWorker()
    try:
        deadline = time.monotonic() + 30
        nice: list[int] = []
        while time.monotonic() < deadline:
            # the worker renices itself first thing; until then it has the parent's
            nice = [os.getpriority(os.PRIO_PROCESS, pid) for pid in worker.pids if pid]
            if nice and all(n == min(19, parent + plotworker.WORKER_NICE) for n in nice):
                break
            time.sleep(0.05)
        assert len(nice) == len(plotworker.SHARES)
        assert nice == [min(19, parent + plotworker.WORKER_NICE)] * len(nice)
        assert plotworker.WORKER_NICE > 0
    finally:
        worker.close()
    _no_worker_left(worker)
