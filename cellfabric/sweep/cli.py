"""`cellfabric sweep SPEC.yaml [--scheduler ADDRESS [--tls-ca-file PEM --tls-cert PEM
--tls-key PEM]] [--workers N] [--results DIR]`; `cellfabric sweep --make-certs DIR`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from cellfabric.core.pki import DEFAULT_DAYS
from cellfabric.sweep.executors import DaskExecutor, ExecutorError, LocalExecutor
from cellfabric.sweep.runner import SweepBusy, run_sweep
from cellfabric.sweep.security import (
    SecurityError,
    client_tls,
    cluster_recipe,
    make_cluster_certs,
    plaintext_warning,
)
from cellfabric.sweep.spec import Spec, SpecError, load_spec


def _default_workers(modes: set[str]) -> int:
    # An emulation (`run`) uses every core of the machine by itself; simulations are one
    # process each.
    if "run" in modes:
        return 1
    return max(1, len(os.sched_getaffinity(0)))


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cellfabric sweep", description=(
        "Run a grid of `cellfabric sim` (or `run`) experiments, on local processes or on a "
        "running Dask cluster; restart the same command to run only what is not done."))
    ap.add_argument("spec", nargs="?", help="SPEC.yaml: a base experiment and the axes to vary")
    ap.add_argument("--scheduler", metavar="ADDRESS",
                    help="a running Dask scheduler, e.g. tls://10.0.0.5:8786 (default: local "
                         "processes, nothing to start); plain tcp:// beyond loopback warns")
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
    tls = ap.add_argument_group("TLS (each file defaults to its Dask config key, "
                                "distributed.comm.tls.ca-file, .client.cert, .client.key)")
    tls.add_argument("--tls-ca-file", metavar="PEM", help="the cluster's CA certificate")
    tls.add_argument("--tls-cert", metavar="PEM", help="this client's certificate from that CA")
    tls.add_argument("--tls-key", metavar="PEM", help="its private key")
    tls.add_argument("--make-certs", metavar="DIR",
                     help="create a cluster CA and scheduler, worker and client certificates "
                          "in DIR (keys 0600), print the commands that use them, and exit")
    tls.add_argument("--cert-days", type=int, default=DEFAULT_DAYS, metavar="N",
                     help=f"with --make-certs: days the certificates are valid "
                          f"(default {DEFAULT_DAYS})")
    return ap


def _make_certs(folder: Path, days: int) -> int:
    try:
        if days <= 0:
            raise SecurityError(f"--cert-days {days}: expected a positive number")
        make_cluster_certs(folder, days)
    except (SecurityError, OSError) as exc:
        print(f"cellfabric sweep: error: {exc}", file=sys.stderr)
        return 2
    print(f"cellfabric sweep: a cluster CA and certificates in {folder} (valid {days} days; "
          f"keep ca.key off the cluster, give workers ca.crt and worker.*, clients client.*)")
    for line in cluster_recipe(folder):
        print(f"  {line}")
    return 0


def _executor(args: argparse.Namespace, spec: Spec) -> DaskExecutor | LocalExecutor:
    if not args.scheduler:
        named = [f"--{n.replace('_', '-')}" for n in ("tls_ca_file", "tls_cert", "tls_key")
                 if getattr(args, n)]
        if named:
            raise SecurityError(f"{', '.join(named)}: only with --scheduler tls://...")
        return LocalExecutor(args.workers or _default_workers(spec.modes))
    tls = client_tls(args.scheduler, args.tls_ca_file, args.tls_cert, args.tls_key)
    warning = plaintext_warning(args.scheduler)
    if warning:
        print(f"cellfabric sweep: warning: {warning}", file=sys.stderr)
    return DaskExecutor(args.scheduler, connect_timeout_s=args.connect_timeout,
                        max_in_flight=args.workers, tls=tls)


def sweep_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.make_certs:
        return _make_certs(Path(args.make_certs), args.cert_days)
    if not args.spec:
        print("cellfabric sweep: error: SPEC.yaml is required (or --make-certs DIR)",
              file=sys.stderr)
        return 2
    for name, value in (("--workers", args.workers), ("--task-timeout", args.task_timeout)):
        if value is not None and value <= 0:
            print(f"cellfabric sweep: error: {name} {value:g}: expected a positive number",
                  file=sys.stderr)
            return 2
    try:
        spec = load_spec(args.spec)
        results = Path(args.results or Path("results") / "sweeps" / spec.name)
        executor = _executor(args, spec)
    except (SpecError, ExecutorError, SecurityError) as exc:
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
