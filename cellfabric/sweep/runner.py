"""The sweep loop: skip what is done, hand the rest to an executor, record every outcome, show
progress, and write the table and plots at the end (also when interrupted)."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from cellfabric.core.html import write_sweep_page
from cellfabric.sweep import task as taskmod
from cellfabric.sweep.executors import Job
from cellfabric.sweep.results import make_row, write_plots, write_table
from cellfabric.sweep.spec import Spec, Task

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 3, 130


@dataclass
class Progress:
    total: int
    skipped: int = 0
    ok: int = 0
    invalid: int = 0
    failed: int = 0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def finished_now(self) -> int:
        return self.ok + self.invalid + self.failed

    def line(self, name: str, running: int) -> str:
        done = self.skipped + self.ok + self.invalid
        left = self.total - done - self.failed
        elapsed = time.monotonic() - self.started_at
        eta = "-"
        if self.finished_now:
            eta = _duration(elapsed / self.finished_now * max(0, left))
        skipped = f" ({self.skipped} already done)" if self.skipped else ""
        invalid = f", {self.invalid} invalid" if self.invalid else ""
        return (f"sweep {name}: {done}/{self.total} done{skipped}{invalid}, {running} running, "
                f"{self.failed} failed, {max(0, left - running)} waiting; "
                f"elapsed {_duration(elapsed)}, ETA {eta}")


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def task_dir(results: Path, task: Task) -> Path:
    return results / "tasks" / task.id


def write_plan(spec: Spec, results: Path) -> None:
    """sweep.json (every task: id, parameters, command) and commands.txt (one per line), so any
    cell of the grid can be re-run by hand."""
    results.mkdir(parents=True, exist_ok=True)
    plan = {"name": spec.name, "spec": str(spec.path.resolve()), "cwd": os.getcwd(),
            "tasks": [{"id": t.id, "group": t.group, "params": t.params,
                       "command": t.command_line(task_dir(results, t))} for t in spec.tasks]}
    (results / "sweep.json").write_text(json.dumps(plan, indent=1) + "\n")
    (results / "commands.txt").write_text(
        "".join(f"{t.command_line(task_dir(results, t))}\n" for t in spec.tasks))


class SweepBusy(RuntimeError):
    pass


def lock_folder(results: Path) -> TextIO:
    """Hold DIR/sweep.lock for the sweep's lifetime: two sweeps in one folder would run the
    same tasks into the same task folders."""
    results.mkdir(parents=True, exist_ok=True)
    fh = open(results / "sweep.lock", "a+")  # noqa: SIM115 (held until the sweep ends)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise SweepBusy(f"{results}: another sweep (pid {holder}) is running in this folder"
                        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def run_sweep(spec: Spec, results: Path, executor: Any, out: TextIO = sys.stdout,
              progress_every_s: float = 5.0, task_timeout_s: float | None = None) -> int:
    results = results.resolve()
    lock = lock_folder(results)
    try:
        return _run_locked(spec, results, executor, out, progress_every_s, task_timeout_s)
    finally:
        lock.close()


def _run_locked(spec: Spec, results: Path, executor: Any, out: TextIO,
                progress_every_s: float, task_timeout_s: float | None) -> int:
    write_plan(spec, results)
    todo: list[Task] = []
    progress = Progress(total=len(spec.tasks))
    for t in spec.tasks:
        if taskmod.done_record(task_dir(results, t), list(t.argv)):
            progress.skipped += 1
        else:
            todo.append(t)
    print(f"sweep {spec.name}: {len(spec.tasks)} tasks, {progress.skipped} already done, "
          f"{len(todo)} to run on {executor.describe()}; results in {results}", file=out,
          flush=True)
    by_id = {t.id: t for t in spec.tasks}
    interrupted = False
    last_print, changed = 0.0, False
    try:
        while todo or executor.in_flight():
            while todo and executor.free_slots() > 0:
                t = todo.pop(0)
                executor.submit(make_job(t, results, task_timeout_s))
            since = time.monotonic() - last_print
            if since >= progress_every_s or (changed and since >= 1.0):
                print(progress.line(spec.name, executor.running()), file=out, flush=True)
                last_print, changed = time.monotonic(), False
            for job, outcome in executor.poll(0.5):
                _record(by_id[job.task_id], job, outcome, executor.name, progress, out)
                changed = True
    except KeyboardInterrupt:
        interrupted = True
        executor.cancel_all()
    return _finish(spec, results, progress, interrupted, out)


def make_job(t: Task, results: Path, timeout_s: float | None = None) -> Job:
    folder = task_dir(results, t)
    return Job(task_id=t.id, command=t.command(folder), task_dir=folder, cwd=os.getcwd(),
               timeout_s=timeout_s)


def _record(t: Task, job: Any, outcome: dict[str, Any], executor: str, progress: Progress,
            out: TextIO) -> None:
    record = {"task": t.id, "group": t.group, "params": t.params, "argv": list(t.argv),
              "command": t.command_line(job.task_dir), "cwd": job.cwd, "executor": executor,
              **{k: v for k, v in outcome.items() if k != "metrics_text"}}
    taskmod.write_record(job.task_dir, record)
    status = outcome.get("status")
    if status == "ok":
        progress.ok += 1
    elif status == "invalid":
        progress.invalid += 1
        print(f"  task {t.id}: run invalid: {outcome.get('error')}", file=out, flush=True)
    else:
        progress.failed += 1
        print(f"  task {t.id} FAILED: {_one_line(outcome.get('error', ''))}\n"
              f"    command: {record['command']}", file=out, flush=True)


def _one_line(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else "(no error text)"


def _finish(spec: Spec, results: Path, progress: Progress, interrupted: bool,
            out: TextIO) -> int:
    rows = []
    for t in spec.tasks:
        folder = task_dir(results, t)
        record = _read_record(folder)
        metrics = None
        if record and record.get("metrics"):
            metrics = taskmod.read_metrics(folder / record["metrics"])
        if record and record.get("argv") != list(t.argv):
            record = None  # a record of another command (the SPEC changed): not this task's
        rows.append(make_row(t, record, metrics, t.command_line(folder)))
    csv_path, jsonl = write_table(rows, results)
    params = list(dict.fromkeys(k for t in spec.tasks for k in t.params))
    plots, skipped = write_plots(rows, spec.plots, results, params)
    page = write_sweep_page(results, spec.name)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in
              ("ok", "invalid", "failed", "not run")}
    word = "interrupted" if interrupted else "finished"
    print(f"sweep {spec.name} {word}: {len(rows)} tasks: {counts['ok']} ok, "
          f"{counts['invalid']} invalid, {counts['failed']} failed, {counts['not run']} not run "
          f"({progress.skipped} were already done); "
          f"wall {_duration(time.monotonic() - progress.started_at)}", file=out)
    print(f"  table: {csv_path} and {jsonl.name} (one row per task)", file=out)
    for p in plots:
        print(f"  plot: {p}", file=out)
    print(f"  page: {page}", file=out)
    for s in skipped:
        print(f"  plot skipped: {s}", file=out)
    for r in rows:
        if r["status"] in ("failed", "invalid"):
            print(f"  {r['status'].upper()} {r['task']}: {_one_line(r['error'])}\n"
                  f"    command: {r['command']}", file=out)
    if interrupted:
        print("  run the same command again to run only the tasks not done", file=out)
    out.flush()
    if interrupted:
        return EXIT_INTERRUPTED
    if counts["failed"] or counts["not run"]:
        return EXIT_FAILED
    return EXIT_INVALID if counts["invalid"] else EXIT_OK


def _read_record(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / taskmod.RECORD).read_text())
    except (OSError, ValueError):
        return None
