"""`cellfabric sweep`: a 16-task sweep's wall time on 1 vs 2 workers (the ratio), on local
processes and on a real Dask cluster on loopback (a scheduler and 1 or 2 worker processes), and
the scheduler's overhead per task.

    python bench/sweep_bench.py [--task cpu|sim|auto] [--tasks 16]

Tasks: `--task cpu` (default) a fixed amount of pure-Python work per task (about a second),
written as a metrics.json, so the figures measure the executors and not the simulator;
`--task sim` small `cellfabric sim` commands (leaf-spine, one 8 KiB message per host); `auto`
sim when a probe sim finishes within 120 s, else cpu. The scheduler's overhead per task: 16 no-op
tasks (each starts Python, writes its metrics.json and exits) on 1 worker, wall / tasks on the
Dask cluster minus the same on local processes: what the scheduler path adds to each task.
Wall times on this shared 2-core machine move with other load; the ratios are measured side
by side in one run, in interleaved rounds (each configuration keeps its fastest). Writes
bench/results/sweep.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.sweep.executors import DaskExecutor, LocalExecutor  # noqa: E402
from cellfabric.sweep.runner import run_sweep  # noqa: E402
from cellfabric.sweep.spec import parse_spec  # noqa: E402
from netlab.daskcluster import LocalDaskCluster  # noqa: E402

# A task that does a fixed amount of work (WORK iterations) and writes a metrics.json.
CPU_TASK = r"""
import json, sys, time
from pathlib import Path
args = sys.argv[1:]
res = Path(args[args.index("--results") + 1]); seed = int(args[args.index("--seed") + 1])
work = int(args[args.index("--work") + 1])
t0 = time.process_time(); acc = seed
for i in range(work):
    acc = (acc * 1103515245 + 12345) & 0x7fffffff
res.mkdir(parents=True, exist_ok=True)
(res / "metrics.json").write_text(json.dumps({"summary": {"acc": acc, "valid": True,
    "cpu_s": time.process_time() - t0}}))
"""
SIM_OPTIONS = {"topology": "leaf-spine", "size": 8192, "count": 1, "quiet": True,
               "link-rate": "topology"}


def spec_for(kind: str, tasks: int, work: int) -> Any:
    if kind == "sim":
        doc = {"name": "bench", "options": SIM_OPTIONS, "axes": {"seed": list(range(1, tasks + 1))}}
    else:
        doc = {"name": "bench", "program": [sys.executable, "-c", CPU_TASK],
               "options": {"work": work}, "axes": {"seed": list(range(1, tasks + 1))}}
    return parse_spec(doc, Path(f"{kind}.yaml"))


def timed(spec: Any, executor: Any, folder: Path) -> dict[str, Any]:
    out = io.StringIO()
    t0 = time.monotonic()
    rc = run_sweep(spec, folder, executor, out=out, progress_every_s=3600)
    wall = time.monotonic() - t0
    executor.close()
    recs = [json.loads(p.read_text()) for p in folder.glob("tasks/*/task.json")]
    inside = sum(r["ended"] - r["started"] for r in recs if r.get("started"))
    return {"rc": rc, "wall_s": wall, "tasks": len(recs), "inside_tasks_s": inside,
            "ok": sum(1 for r in recs if r["status"] == "ok")}


def probe_sim(timeout_s: float) -> bool:
    cmd = [str(Path(sys.executable).parent / "cellfabric"), "sim", "leaf-spine", "--size", "8192",
           "--count", "1", "--quiet", "--link-rate", "topology"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run([*cmd, "--results", tmp], capture_output=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0 and any(Path(tmp).rglob("metrics.json"))


def measure(kind: str, tasks: int, work: int, tmp: Path, rounds: int) -> dict[str, Any]:
    """Every configuration once per round, rounds interleaved (other load on this shared
    machine drifts); each configuration keeps its fastest round."""
    spec, noop = spec_for(kind, tasks, work), spec_for("cpu", tasks, 0)
    res: dict[str, Any] = {}

    def keep(name: str, run: dict[str, Any]) -> None:
        if name not in res or run["wall_s"] < res[name]["wall_s"]:
            res[name] = run

    for rnd in range(rounds):
        for workers in (1, 2):
            keep(f"local_{workers}", timed(spec, LocalExecutor(workers),
                                           tmp / f"r{rnd}-local{workers}"))
            with LocalDaskCluster(workers=workers) as cluster:
                keep(f"dask_{workers}", timed(spec, DaskExecutor(cluster.address),
                                              tmp / f"r{rnd}-dask{workers}"))
        keep("noop_local_1", timed(noop, LocalExecutor(1), tmp / f"r{rnd}-noop-local"))
        with LocalDaskCluster(workers=1) as cluster:
            keep("noop_dask_1", timed(noop, DaskExecutor(cluster.address),
                                      tmp / f"r{rnd}-noop-dask"))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=("cpu", "sim", "auto"), default="cpu")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--work", type=int, default=3_000_000, help="cpu task: loop iterations")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; fastest kept")
    args = ap.parse_args(argv)
    kind = args.task
    if kind == "auto":
        kind = "sim" if probe_sim(120) else "cpu"
        if kind == "cpu":
            print("sweep bench: a probe `cellfabric sim` did not finish in 120 s; "
                  "timing cpu tasks instead")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="cf-sweep-bench-") as tmp:
        res = measure(kind, args.tasks, args.work, Path(tmp), args.rounds)
    n = args.tasks
    fig = {
        "task": kind, "tasks": n, "rounds": args.rounds,
        "local_ratio_1_over_2_workers": res["local_1"]["wall_s"] / res["local_2"]["wall_s"],
        "dask_ratio_1_over_2_workers": res["dask_1"]["wall_s"] / res["dask_2"]["wall_s"],
        "dask_over_local_wall_2_workers": res["dask_2"]["wall_s"] / res["local_2"]["wall_s"],
        "scheduler_overhead_per_task_ms": 1000 * (res["noop_dask_1"]["wall_s"]
                                                  - res["noop_local_1"]["wall_s"]) / n,
        "noop_task_local_ms": 1000 * res["noop_local_1"]["wall_s"] / n,
        "noop_task_dask_ms": 1000 * res["noop_dask_1"]["wall_s"] / n,
    }
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "date": time.strftime("%Y-%m-%d"), "loadavg_1min_before": load_before,
                       "loadavg_1min_after": os.getloadavg()[0]},
           "runs": res, "figures": fig}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sweep.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{n}-task sweep, {kind} tasks (load average {load_before:.1f} before, "
          f"{out['machine']['loadavg_1min_after']:.1f} after, {os.cpu_count()} CPUs)")
    for k in ("local_1", "local_2", "dask_1", "dask_2", "noop_local_1", "noop_dask_1"):
        r = res[k]
        print(f"  {k:<13} wall {r['wall_s']:7.2f} s ({1000 * r['wall_s'] / n:6.0f} ms per task)"
              f"   {r['ok']}/{r['tasks']} ok   inside tasks {r['inside_tasks_s']:7.2f} s")
    for k, v in fig.items():
        if isinstance(v, float) and not k.startswith("noop_"):
            print(f"  {k:<40} {v:8.2f}")
    bad = [k for k, r in res.items() if r["ok"] != n]
    if bad:
        print(f"sweep bench: error: not every task finished ok in {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
