"""`cellfabric sweep SPEC.yaml [--scheduler ADDRESS] [--workers N] [--results DIR]`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from cellfabric.sweep.executors import DaskExecutor, ExecutorError, LocalExecutor
from cellfabric.sweep.runner import SweepBusy, run_sweep
from cellfabric.sweep.spec import SpecError, load_spec


def _default_workers(modes: set[str]) -> int:
    # An emulation (`run`) uses every core of the machine by itself; simulations are one
    # process each.
    if "run" in modes:
        return 1
    return max(1, len(os.sched_getaffinity(0)))


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def sweep_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric sweep", description=(
        "Run a grid of `cellfabric sim` (or `run`) experiments, on local processes or on a "
        "running Dask cluster; restart the same command to run only what is not done."))
    ap.add_argument("spec", help="SPEC.yaml: a base experiment and the axes to vary")
    ap.add_argument("--scheduler", metavar="ADDRESS",
                    help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: local "
                         "processes, nothing to start)")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="local: tasks at once (default: one per core for sim, 1 for run); "
                         "with --scheduler: at most N tasks in flight (default: all)")
    ap.add_argument("--results", default=None, metavar="DIR",
                    help="sweep folder (default results/sweeps/NAME); the same folder resumes")
    ap.add_argument("--connect-timeout", type=float, default=20.0, metavar="S",
                    help="with --scheduler: seconds to wait for the scheduler (default 20)")
    ap.add_argument("--task-timeout", type=float, default=None, metavar="S",
                    help="stop a task after S seconds and count it failed (default: no limit)")
    ap.add_argument("--progress-every", type=float, default=5.0, metavar="S",
                    help="seconds between progress lines (default 5)")
    args = ap.parse_args(argv)
    for name, value in (("--workers", args.workers), ("--task-timeout", args.task_timeout)):
        if value is not None and value <= 0:
            print(f"cellfabric sweep: error: {name} {value:g}: expected a positive number",
                  file=sys.stderr)
            return 2
    try:
        spec = load_spec(args.spec)
        results = Path(args.results or Path("results") / "sweeps" / spec.name)
        if args.scheduler:
            executor = DaskExecutor(args.scheduler, connect_timeout_s=args.connect_timeout,
                                    max_in_flight=args.workers)
        else:
            executor = LocalExecutor(args.workers or _default_workers(spec.modes))
    except (SpecError, ExecutorError) as exc:
        print(f"cellfabric sweep: error: {exc}", file=sys.stderr)
        return 2
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    # Ctrl-C must stop a sweep even when started from a shell that ignores SIGINT for it
    # (a background job of a script), as it stops `cellfabric run`.
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run_sweep(spec, results, executor, progress_every_s=args.progress_every,
                         task_timeout_s=args.task_timeout)
    except SweepBusy as exc:
        print(f"cellfabric sweep: error: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        executor.close()
