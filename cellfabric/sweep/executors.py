"""Where tasks run: local processes (default, nothing to start) or a running Dask cluster.

Both take the same jobs (a command line and a task folder) and hand back the same outcome
dicts (see task.run_task), so a sweep's results do not depend on where it ran.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellfabric.sweep import task as taskmod
from cellfabric.sweep.security import ClientTls, connect_error, probe_tls


class ExecutorError(RuntimeError):
    pass


@dataclass
class Job:
    task_id: str
    command: list[str]
    task_dir: Path
    cwd: str
    timeout_s: float | None = None


class LocalExecutor:
    """Up to `workers` task processes at once, started and watched from this thread (so each
    child's parent-death signal is tied to the sweep itself)."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._running: dict[str, tuple[Job, subprocess.Popen | None, float]] = {}
        self._failed_to_start: list[tuple[Job, dict[str, Any]]] = []

    def describe(self) -> str:
        return f"local processes, {self.workers} at a time"

    def free_slots(self) -> int:
        return self.workers - len(self._running)

    def submit(self, job: Job) -> None:
        started = time.time()
        try:
            proc = taskmod.start(job.command, job.task_dir, job.cwd)
        except OSError:
            outcome = {**taskmod.judge(job.task_dir, None), "started": started,
                       "ended": time.time(), "host": socket.gethostname(), "worker": "local"}
            self._failed_to_start.append((job, outcome))
            return
        self._running[job.task_id] = (job, proc, started)

    def running(self) -> int:
        return len(self._running)

    def in_flight(self) -> int:
        return len(self._running) + len(self._failed_to_start)

    def poll(self, wait_s: float) -> list[tuple[Job, dict[str, Any]]]:
        deadline = time.monotonic() + wait_s
        while True:
            finished, self._failed_to_start = self._failed_to_start, []
            for task_id, (job, proc, started) in list(self._running.items()):
                assert proc is not None
                late = job.timeout_s is not None and time.time() - started > job.timeout_s
                if late:
                    taskmod.stop(proc)
                rc = proc.poll()
                if rc is None:
                    continue
                del self._running[task_id]
                outcome = {**taskmod.judge(job.task_dir, rc), "started": started,
                           "ended": time.time(), "host": socket.gethostname(),
                           "worker": "local"}
                if late:
                    assert job.timeout_s is not None
                    outcome = taskmod.timed_out(outcome, job.timeout_s)
                finished.append((job, outcome))
            if finished or time.monotonic() >= deadline:
                return finished
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def cancel_all(self) -> None:
        # Signal every task first, so their teardowns run side by side, then wait for each.
        for _job, proc, _ in self._running.values():
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for _job, proc, _ in self._running.values():
            if proc is not None:
                taskmod.stop(proc, signalled=True)
        self._running.clear()

    def close(self) -> None:
        self.cancel_all()


class DaskExecutor:
    """Every task submitted to a running Dask scheduler at once; its workers pull them. Start
    workers with `--nthreads 1` per core you give them: each task is a CPU-bound process."""

    name = "dask"

    def __init__(self, address: str, connect_timeout_s: float = 20.0,
                 max_in_flight: int | None = None, tls: ClientTls | None = None) -> None:
        try:
            from distributed import Client
        except ImportError as exc:
            raise ExecutorError(f"--scheduler needs Dask distributed ({exc})") from None
        security = None
        if tls is not None:
            probe_tls(address, tls, connect_timeout_s)
            security = tls.security()
        try:
            self.client = Client(address, timeout=connect_timeout_s, set_as_default=False,
                                 security=security)
        except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
            # RuntimeError: Dask's config requires encryption and the address is not tls://;
            # ValueError: tornado's "IOStream is not idle", a plaintext answer to TLS.
            raise ExecutorError(connect_error(address, exc, tls)) from None
        self.address = address
        self.max_in_flight = max_in_flight
        self._futures: dict[str, tuple[Job, Any]] = {}
        self._sweep_tag = uuid.uuid4().hex[:8]

    def describe(self) -> str:
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        threads = sum(w.get("nthreads", 1) for w in workers.values())
        return (f"Dask scheduler {self.address}: {len(workers)} workers, {threads} threads")

    def free_slots(self) -> int:
        if self.max_in_flight is None:
            return 1 << 30
        return self.max_in_flight - len(self._futures)

    def submit(self, job: Job) -> None:
        # A fresh key per sweep: a key left over from an interrupted client must not match.
        key = f"cellfabric-sweep-{job.task_id}-{self._sweep_tag}"
        future = self.client.submit(taskmod.dask_task, job.command, str(job.task_dir), job.cwd,
                                    job.timeout_s, key=key, pure=False)
        self._futures[key] = (job, future)

    def in_flight(self) -> int:
        """Submitted and not handed back yet (queued on the cluster counts)."""
        return len(self._futures)

    def running(self) -> int:
        try:
            processing = self.client.processing()
        except (OSError, TimeoutError):
            return 0
        threads = {addr: w.get("nthreads", 1)
                   for addr, w in self.client.scheduler_info().get("workers", {}).items()}
        ours = set(self._futures)
        # A worker holds a few tasks queued beyond its threads; only nthreads can be running.
        return sum(min(threads.get(addr, 1), sum(1 for k in keys if k in ours))
                   for addr, keys in processing.items())

    def poll(self, wait_s: float) -> list[tuple[Job, dict[str, Any]]]:
        # Future.done() is the client's own state (no round trip to the scheduler).
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not any(
                f.done() for _, f in self._futures.values()):
            time.sleep(0.05)
        finished = []
        for key, (job, future) in list(self._futures.items()):
            if not future.done():
                continue
            del self._futures[key]
            finished.append((job, self._outcome(job, future)))
        return finished

    @staticmethod
    def _outcome(job: Job, future: Any) -> dict[str, Any]:
        if future.status == "finished":
            outcome = future.result()
            _keep_metrics_here(job.task_dir, outcome)
            return outcome
        # The task never returned: its worker died (KilledWorker) or the cluster lost it.
        try:
            exc = future.exception(timeout=5)
        except Exception as err:
            exc = err
        return {"status": "failed", "rc": None, "metrics": None, "started": None,
                "ended": time.time(), "error": f"{type(exc).__name__}: {exc}",
                "worker": None}

    def cancel_all(self) -> None:
        if self._futures:
            self.client.cancel([f for _, f in self._futures.values()], force=True)
        self._futures.clear()

    def close(self) -> None:
        self.cancel_all()
        self.client.close()


def _keep_metrics_here(task_dir: Path, outcome: dict[str, Any]) -> None:
    """A worker on another machine wrote its metrics there; keep a copy in our task folder."""
    text = outcome.pop("metrics_text", None)
    rel = outcome.get("metrics")
    if text is None or not rel:
        return
    local = task_dir / rel
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
