"""Running one task and judging its results; the same code on the local executor and on a
Dask worker.

A task folder holds the command's own output (metrics.json somewhere below it, as `run` and
`sim` write it), its stdout.log and stderr.log, and the sweep's record task.json, written only
after the task ended. A task is done when its record says so, the command in the record is the
task's command and the metrics file it names parses with a summary: that is what a restarted
sweep checks before it skips a task.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netlab.hosts import stop_process

RECORD = "task.json"
RC_INVALID_RUN = 3  # `cellfabric run|sim`: metrics written, but the machine could not keep up
ERROR_TAIL = 1500


def resolve_program(argv: list[str]) -> list[str]:
    """`cellfabric` is the console script of the Python running this code, where there is one
    (a worker's venv), so the recorded command works as typed and the task runs the same code."""
    if argv and argv[0] == "cellfabric":
        beside = Path(sys.executable).parent / "cellfabric"
        if beside.exists():
            return [str(beside), *argv[1:]]
    return list(argv)


# Loaded here, not in the forked child: dlopen after fork in a threaded process can deadlock.
try:
    _LIBC: Any = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the thread that started it dies, so a
    killed sweep or worker leaves no task running on behind its back (Linux only)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(argv: list[str], task_dir: Path, cwd: str | None) -> subprocess.Popen:
    """Empty the task folder (a previous, unfinished attempt) and start the command in it."""
    if task_dir.exists():
        shutil.rmtree(task_dir)
    task_dir.mkdir(parents=True)
    workdir = cwd if cwd and Path(cwd).is_dir() else None
    with open(task_dir / "stdout.log", "wb") as out, open(task_dir / "stderr.log", "wb") as err:
        try:
            # Its own process group: a Ctrl-C at the terminal reaches the sweep, which then
            # stops each task exactly once.
            return subprocess.Popen(resolve_program(argv), stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, cwd=workdir, process_group=0,
                                    preexec_fn=_die_with_parent)
        except OSError as exc:
            err.write(f"cannot start {argv[0]}: {exc.strerror}\n".encode())
            raise


def find_metrics(task_dir: Path) -> Path | None:
    """The newest metrics.json under the task folder (`run` writes it one folder down)."""
    found = [p for p in task_dir.rglob("metrics.json") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def read_metrics(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict):
        return None
    return doc


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-ERROR_TAIL:].strip()


def judge(task_dir: Path, rc: int | None) -> dict[str, Any]:
    """Status, error and metrics location of an ended command."""
    metrics_path = find_metrics(task_dir)
    metrics = read_metrics(metrics_path) if metrics_path else None
    out: dict[str, Any] = {"rc": rc, "metrics": None, "error": ""}
    if metrics_path and metrics:
        out["metrics"] = str(metrics_path.relative_to(task_dir))
    if rc in (0, RC_INVALID_RUN) and metrics:
        run_valid = metrics["summary"].get("valid", True) is not False
        out["status"] = "ok" if run_valid and rc == 0 else "invalid"
        if out["status"] == "invalid":
            reasons = metrics.get("run", {}).get("invalid_reasons") or ["run marked invalid"]
            out["error"] = "; ".join(str(r) for r in reasons)[:ERROR_TAIL]
        return out
    out["status"] = "failed"
    why = _tail(task_dir / "stderr.log")
    if rc is None:
        why = why or "stopped before it ended"
    elif rc < 0:
        why = f"killed by signal {-rc}" + (f": {why}" if why else "")
    elif rc == 0:
        why = "exited 0 but wrote no readable metrics.json with a summary" + (
            f": {why}" if why else "")
    out["error"] = why or f"exit status {rc}, nothing on stderr"
    return out


def timed_out(outcome: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """A task stopped at its time limit failed, whatever it wrote before."""
    why = outcome.get("error") if outcome.get("status") == "failed" else ""
    return {**outcome, "status": "failed",
            "error": f"timed out after {timeout_s:g} s and was stopped" + (
                f"; {why}" if why else "")}


def run_task(argv: list[str], task_dir: str, cwd: str | None,
             cancelled: Callable[[], bool] | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:
    """Run one task to its end (blocking) and return its outcome, metrics text included so a
    client without the worker's file system can keep them."""
    folder = Path(task_dir)
    started = time.time()
    try:
        proc = start(argv, folder, cwd)
    except OSError:
        return {**judge(folder, None), "started": started, "ended": time.time(),
                "host": socket.gethostname()}
    rc: int | None = None
    late = False
    while rc is None:
        try:
            rc = proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            late = timeout_s is not None and time.time() - started > timeout_s
            if late or (cancelled is not None and cancelled()):
                stop(proc)
                rc = proc.returncode
    ended = time.time()
    outcome = {**judge(folder, rc), "started": started, "ended": ended,
               "host": socket.gethostname()}
    if late:
        assert timeout_s is not None
        outcome = timed_out(outcome, timeout_s)
    if outcome["metrics"]:
        outcome["metrics_text"] = (folder / outcome["metrics"]).read_text()
    return outcome


STOP_GRACE_S = 30.0  # `cellfabric run` stops its switches and removes its Mininet network


def stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S, signalled: bool = False) -> None:
    """One SIGINT (`run` and `sim` stop cleanly on it; a second could cut a teardown short),
    SIGKILL after the grace."""
    stop_process(proc, grace_s, None if signalled else signal.SIGINT)


def dask_task(argv: list[str], task_dir: str, cwd: str | None,
              timeout_s: float | None = None) -> dict[str, Any]:
    """The function a Dask worker runs: the task, stopped if the sweep cancels it."""
    from distributed import get_worker

    worker = get_worker()
    key = worker.get_current_task()

    def cancelled() -> bool:
        state = worker.state.tasks.get(key)
        return state is None or state.state in ("cancelled", "released", "forgotten")

    outcome = run_task(argv, task_dir, cwd, cancelled, timeout_s)
    outcome["worker"] = worker.address
    outcome["worker_pid"] = os.getpid()
    return outcome


def write_record(task_dir: Path, record: dict[str, Any]) -> None:
    """task.json, atomically: a sweep killed while writing it leaves no half record."""
    task_dir.mkdir(parents=True, exist_ok=True)
    tmp = task_dir / (RECORD + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
    os.replace(tmp, task_dir / RECORD)


def done_record(task_dir: Path, argv: list[str]) -> dict[str, Any] | None:
    """The record of a finished task whose results are still there and readable, else None."""
    try:
        record = json.loads((task_dir / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record.get("status") != "ok" or record.get("argv") != list(argv):
        return None
    metrics = record.get("metrics")
    if not metrics or read_metrics(task_dir / metrics) is None:
        return None
    return record
