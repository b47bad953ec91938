"""`cellfabric sweep --scheduler` on a real Dask cluster started here (a scheduler and two
worker processes on loopback, ports chosen by the OS, stopped by PID): the same per-task
summaries as the local executor for the same seeds; an interrupted sweep stops its tasks on
the workers and resumes with only the missing ones."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from sweep_helpers import records, rows, run_sweep, summaries, sweep_cmd, write_spec

from netlab.daskcluster import LocalDaskCluster

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster():
    with LocalDaskCluster(workers=2) as c:
        from distributed import Client

        with Client(c.address, set_as_default=False) as client:
            c.worker_addresses = set(client.scheduler_info()["workers"])
        yield c


def test_cluster_and_local_give_the_same_per_task_summaries(tmp_path, cluster):
    spec = write_spec(tmp_path / "grid.yaml", {
        "name": "grid", "options": {"topology": "leaf-spine", "fail-on": "spray=bad",
                                    "sleep": 0.2},
        "axes": {"spray": ["ecmp", "bad"], "load": [0.5, 1.0], "seed": [1, 2]}})
    local = run_sweep(spec, tmp_path / "local", "--workers", "2")
    remote = run_sweep(spec, tmp_path / "dask", "--scheduler", cluster.address)
    assert local.returncode == remote.returncode == 1, remote.stdout + remote.stderr
    assert "Dask scheduler" in remote.stdout and "2 workers" in remote.stdout
    on_cluster = summaries(tmp_path / "dask")
    assert len(on_cluster) == 8
    assert on_cluster == summaries(tmp_path / "local")
    recs = records(tmp_path / "dask").values()
    assert {r["executor"] for r in recs} == {"dask"}
    assert {r["worker"] for r in recs} == cluster.worker_addresses  # both workers took tasks
    failed = [r for r in rows(tmp_path / "dask").values() if r["status"] == "failed"]
    assert len(failed) == 4 and all("refusing spray=bad" in r["error"] for r in failed)


def test_real_sim_sweep_on_the_cluster_matches_local_processes(tmp_path, cluster):
    """The done-when test on real `cellfabric sim` tasks, a few seconds each: the emulation's
    packet rates and the spray modes the simulator's first cut completes (its ecmp and its
    default 100 Gb/s links do not finish yet)."""
    spec = write_spec(tmp_path / "sim.yaml", {
        "name": "simgrid", "mode": "sim",
        "options": {"topology": "leaf-spine", "link-rate": "topology", "size": 8192,
                    "count": 1, "quiet": True},
        "tasks": [{"spray": "spray", "seed": 1}, {"spray": "round-robin", "seed": 2}]},
        fake=False)
    local = run_sweep(spec, tmp_path / "local", "--workers", "2", timeout=200)
    remote = run_sweep(spec, tmp_path / "dask", "--scheduler", cluster.address, timeout=200)
    assert local.returncode == 0, local.stdout + local.stderr
    assert remote.returncode == 0, remote.stdout + remote.stderr
    on_cluster = summaries(tmp_path / "dask")
    assert len(on_cluster) == 2 and all(status == "ok" for status, _ in on_cluster.values())
    assert on_cluster == summaries(tmp_path / "local")
    assert {r["executor"] for r in records(tmp_path / "dask").values()} == {"dask"}
    table = rows(tmp_path / "dask")
    assert all(r["command"].startswith("cellfabric sim leaf-spine ") for r in table.values())
    assert all(r["messages_completed"] == r["messages_total"] == 4 for r in table.values())


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_interrupt_stops_tasks_on_workers_and_restart_runs_only_missing(tmp_path, cluster):
    log = tmp_path / "invocations.log"
    hold = tmp_path / "go"  # tasks of seeds 3-6 wait for it: only a cancel can end them early
    spec = write_spec(tmp_path / "s.yaml", {
        "options": {"sleep": 0.2, "log": str(log)},
        "axes": {"seed": [{"seed": 1}, {"seed": 2}] + [{"seed": n, "hold": str(hold)}
                                                       for n in range(3, 7)]}})
    res = tmp_path / "out"
    proc = subprocess.Popen(sweep_cmd(spec, res, "--scheduler", cluster.address),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = records(res) if (res / "tasks").exists() else {}
            running = [d for d in res.glob("tasks/*") if (d / "pid").exists()
                       and d.name not in done]
            if len(done) >= 2 and running:
                pids = [int((d / "pid").read_text()) for d in running]
                break
            time.sleep(0.05)
        assert pids, "no task got going on the cluster"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    done_first = {k for k, r in records(res).items() if r["status"] == "ok"}
    assert done_first and len(done_first) <= 2
    deadline = time.monotonic() + 15
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_pid_alive(p) for p in pids), "a cancelled task kept running on a worker"
    first = log.read_text().splitlines()
    hold.write_text("")

    again = run_sweep(spec, res, "--scheduler", cluster.address)
    assert again.returncode == 0, again.stdout
    second = log.read_text().splitlines()[len(first):]
    assert sorted(second) == sorted(set(rows(res)) - done_first)
    assert all(r["status"] == "ok" for r in rows(res).values())
