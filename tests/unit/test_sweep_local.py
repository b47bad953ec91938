"""`cellfabric sweep` on local processes, with a stand-in task command (same calling
convention as `cellfabric sim`): every task's record and re-runnable command, failed tasks
reported and kept, the tidy table and plots, and resuming after SIGINT or SIGKILL."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sweep_helpers import records, rows, run_sweep, sweep_cmd, write_spec

pytestmark = pytest.mark.timeout(180)


def grid(tmp_path: Path, **opts) -> Path:
    return write_spec(tmp_path / "grid.yaml", {
        "name": "grid",
        "options": {"topology": "leaf-spine", "fail-on": "spray=bad", **opts},
        "groups": [
            {"name": "util", "axes": {"spray": ["ecmp", "spray", "bad"], "load": [0.5, 1.0],
                                       "seed": [1, 2]}},
            {"name": "incast", "options": {"workload": "incast"},
             "axes": {"senders": [4, 8], "cc": ["none", "hpcc"], "seed": [1, 2]}},
        ]})


def test_sweep_runs_every_task_records_commands_and_reports_failures(tmp_path):
    spec = grid(tmp_path)
    res = tmp_path / "out"
    proc = run_sweep(spec, res, "--workers", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # some tasks failed
    table = rows(res)
    assert len(table) == 20
    failed = {k: r for k, r in table.items() if r["status"] == "failed"}
    assert len(failed) == 4 and all(r["spray"] == "bad" for r in failed.values())
    for task_id, r in failed.items():
        assert "refusing spray=bad" in r["error"]
        assert task_id in proc.stdout and r["command"] in proc.stdout  # reported with command
    ok = [r for r in table.values() if r["status"] == "ok"]
    assert len(ok) == 16 and all(isinstance(r["slowdown_p99"], float) for r in ok)
    # CSV: the same rows, nested figures as max/mean columns
    csv_text = (res / "summary.csv").read_text().splitlines()
    assert len(csv_text) == 21 and "link_utilization_max" in csv_text[0]
    assert (res / "goodput_vs_load_per_spray.png").stat().st_size > 5000
    assert (res / "slowdown_p99_vs_senders_per_cc.png").stat().st_size > 5000
    # every task's command is in commands.txt, and re-running one by hand gives its metrics
    cmds = (res / "commands.txt").read_text().splitlines()
    assert sorted(cmds) == sorted(r["command"] for r in table.values())
    one = ok[3]
    rec = records(res)[one["task"]]
    again = tmp_path / "by-hand"
    argv = shlex.split(one["command"])
    argv[argv.index("--results") + 1] = str(again)
    subprocess.run(argv, check=True, capture_output=True, cwd=rec["cwd"])
    by_hand = json.loads(next(again.rglob("metrics.json")).read_text())["summary"]
    kept = json.loads((res / "tasks" / one["task"] / rec["metrics"]).read_text())["summary"]
    assert by_hand == kept


def test_restart_reruns_only_failed_tasks_and_skips_done_ones(tmp_path):
    log = tmp_path / "invocations.log"
    spec = grid(tmp_path, log=str(log))
    res = tmp_path / "out"
    run_sweep(spec, res, "--workers", "2")
    first = log.read_text().splitlines()
    assert len(first) == 20
    proc = run_sweep(spec, res, "--workers", "2")
    second = log.read_text().splitlines()[len(first):]
    failed = {k for k, r in rows(res).items() if r["status"] == "failed"}
    assert sorted(second) == sorted(failed) and len(failed) == 4
    assert "16 already done" in proc.stdout


def test_invalid_run_is_kept_apart_from_failures(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", {"options": {"invalid": True},
                                             "axes": {"seed": [1]}})
    proc = run_sweep(spec, tmp_path / "out")
    assert proc.returncode == 3
    (row,) = rows(tmp_path / "out").values()
    assert row["status"] == "invalid" and row["valid"] is False


def test_broken_metrics_are_not_taken_as_done(tmp_path):
    log = tmp_path / "log"
    spec = write_spec(tmp_path / "s.yaml", {"options": {"log": str(log)},
                                             "axes": {"seed": [1, 2]}})
    res = tmp_path / "out"
    assert run_sweep(spec, res).returncode == 0
    task_id = sorted(records(res))[0]
    metrics = next((res / "tasks" / task_id).rglob("metrics.json"))
    metrics.write_text("{truncated")
    assert run_sweep(spec, res).returncode == 0
    assert log.read_text().splitlines()[2:] == [task_id]


def _wait_for(cond, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is not running
        return fh.read().split()[2] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_sweep_resumes_with_only_the_missing_tasks(tmp_path, sig):
    log, gate = tmp_path / "invocations.log", tmp_path / "gate"
    # The four ecmp tasks run first and finish; the four spray tasks then wait for a file the
    # test makes only for the second sweep, so the signal always finds the sweep mid-way,
    # however slow the machine (timing alone once let a loaded CI machine finish first).
    spec = write_spec(tmp_path / "s.yaml", {"options": {"sleep": 0.2, "log": str(log)},
                                             "axes": {"spray": ["ecmp", {"spray": "spray",
                                                                         "hold": str(gate)}],
                                                      "seed": [1, 2, 3, 4]}})
    res = tmp_path / "out"
    proc = subprocess.Popen(sweep_cmd(spec, res, "--workers", "2"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_for(lambda: len(records(res)) >= 4 if (res / "tasks").exists() else False)
        assert _wait_for(lambda: len(list((res / "tasks").glob("*spray=spray*/pid"))) >= 2)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "run the same command again" in out, out
    done_first = {k for k, r in records(res).items() if r["status"] == "ok"}
    assert len(done_first) == 4 and all("spray=ecmp" in k for k in done_first), done_first
    # the tasks that were running when the sweep stopped did not live on
    started = [d for d in (res / "tasks").iterdir() if (d / "pid").exists()]
    pids = [int((d / "pid").read_text()) for d in started if d.name not in done_first]
    assert _wait_for(lambda: not any(_alive(p) for p in pids), timeout=15)
    first = log.read_text().splitlines()

    gate.touch()
    again = run_sweep(spec, res, "--workers", "2")
    assert again.returncode == 0, again.stdout
    second = log.read_text().splitlines()[len(first):]
    table = rows(res)
    assert sorted(second) == sorted(set(table) - done_first)  # only the missing ones, once
    assert all(r["status"] == "ok" for r in table.values()) and len(table) == 8
    assert f"{len(done_first)} already done" in again.stdout


def test_task_over_its_time_limit_is_stopped_and_failed(tmp_path):
    hold = tmp_path / "never"
    spec = write_spec(tmp_path / "s.yaml", {"axes": {"seed": [{"seed": 1},
                                                              {"seed": 2, "hold": str(hold)}]}})
    proc = run_sweep(spec, tmp_path / "out", "--task-timeout", "3")
    assert proc.returncode == 1
    table = rows(tmp_path / "out")
    by_seed = {r["seed"]: r for r in table.values()}
    assert by_seed[1]["status"] == "ok"
    assert by_seed[2]["status"] == "failed" and "timed out after 3 s" in by_seed[2]["error"]
    pid = int(next((tmp_path / "out" / "tasks").glob("*seed=2*/pid")).read_text())
    assert not _alive(pid)


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "--workers 0: expected a positive number"),
    (["--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "1"],
     "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
])
def test_bad_command_line_gets_one_line(tmp_path, args, message):
    spec = write_spec(tmp_path / "s.yaml", {"axes": {"seed": [1]}})
    proc = run_sweep(spec, tmp_path / "out", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_spec_gets_one_line(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("axes:\n  seed: 1\n")
    proc = run_sweep(spec, tmp_path / "out")
    assert proc.returncode == 2 and "axes.seed: expected a non-empty list" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_second_sweep_in_the_same_folder_is_refused(tmp_path):
    hold = tmp_path / "go"
    spec = write_spec(tmp_path / "s.yaml", {"options": {"hold": str(hold)},
                                             "axes": {"seed": [1]}})
    res = tmp_path / "out"
    first = subprocess.Popen(sweep_cmd(spec, res), stdout=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: any(res.glob("tasks/*/pid")))
        second = run_sweep(spec, res)
        assert second.returncode == 2
        assert f"another sweep (pid {first.pid}) is running" in second.stderr
        hold.write_text("")
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0


def test_plots_take_seeds_with_equal_figures(tmp_path):
    from cellfabric.sweep.results import write_plots
    from cellfabric.sweep.spec import PlotSpec

    # three seeds with the same figure: (0.1 + 0.1 + 0.1) / 3 rounds above 0.1, which must not
    # become a negative error bar
    assert (0.1 + 0.1 + 0.1) / 3 > 0.1
    rows_ = [{"task": f"t{i}", "group": "g", "status": "ok", "spray": "spray", "load": 1,
              "seed": i, "goodput_fraction": 0.1} for i in range(3)]
    written, skipped = write_plots(rows_, [PlotSpec(x="load", y="goodput_fraction",
                                                    series="spray")], tmp_path, ["spray", "load",
                                                                                 "seed"])
    assert len(written) == 1 and not skipped


def test_plot_series_split_only_by_parameters_that_vary_within_a_point():
    from cellfabric.sweep.results import plot_series
    from cellfabric.sweep.spec import PlotSpec

    def row(senders, topo, cc, seed, y, count=1):
        return {"status": "ok", "group": "incast", "senders": senders, "topology": topo,
                "cc": cc, "seed": seed, "count": count, "slowdown_p99": y}

    rows_ = [row(4, "3x3", "none", 1, 1.0), row(4, "3x3", "none", 2, 3.0),
             row(15, "4x4", "none", 1, 2.0), row(4, "3x3", "hpcc", 1, 1.5)]
    plot = PlotSpec(x="senders", y="slowdown_p99", series="cc")
    params = ["senders", "topology", "cc", "seed", "count"]
    # the topology moves with the incast degree: one series per rate control
    assert plot_series(rows_, plot, params) == {"none": {4: [1.0, 3.0], 15: [2.0]},
                                                "hpcc": {4: [1.5]}}
    # a second message count at the same point is another experiment: its own series
    rows_.append(row(4, "3x3", "none", 1, 9.0, count=2))
    assert set(plot_series(rows_, plot, params)) == {"none count=1", "none count=2",
                                                     "hpcc count=1"}
