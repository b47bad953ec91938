"""Collectives in `cellfabric sim`, reported as nccl-tests reports them: per collective and
size, the time, algbw and busbw, for every spray mode side by side from one run.

The collective's time is the sum of its steps' virtual times (cellfabric.collectives.lower:
one step per level of the schedule's DAG, each waiting for the one before). Every figure is
virtual time, so it does not depend on this machine. Writes bench/results/coll.json and
prints one table per collective and mode. Usage:
    python bench/coll_bench.py [--topology fat-tree:k=4] [--sizes 65536,1048576]
        [--workloads allreduce-ring,allreduce-tree,...] [--spray ecmp,spray] [--channels 2]
        [--cc dcqcn] [--chunk-size BYTES] [--out F]
        [--policies static+ecmp,topology+spray,dynamic+spray] [--jobs N]
    python bench/coll_bench.py --markdown bench/results/coll_rail128.json

--policies compares channel scheduling policies (--channel-policy) with spray modes instead
of --spray's plain lowering: NCCL-like static channels over ECMP against the scheduler's
topology or dynamic placement over spraying, side by side from one run.

--jobs N runs N points at once, each in a process of its own (largest sizes first); the
rows are written to --out after every point (``"complete": false`` until the last), so a
long table keeps what it has if it is stopped. Wall-clock fields then count a shared
machine; the times are virtual and do not change.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.collectives import ALGORITHMS  # noqa: E402
from cellfabric.collectives.lower import collective_time_s  # noqa: E402
from cellfabric.collectives.perf import PerfRow, format_table  # noqa: E402
from cellfabric.sim.cli import sim_main  # noqa: E402

DEFAULT_WORKLOADS = "allreduce-ring,allreduce-tree,allreduce-hier,reduce-scatter,all-gather," \
                    "all-to-all-coll,broadcast"


def run_one(topology: str, workload: str, size: int, spray: str, cc: str,
            channels: int, chunk: int | None, policy: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="coll-bench-") as tmp:
        argv = [topology, "--workload", workload, "--size", str(size), "--spray", spray,
                "--cc", cc, "--channels", str(channels), "--quiet", "--results", tmp]
        argv += ["--chunk-size", str(chunk)] if chunk else []
        argv += ["--channel-policy", policy] if policy else []
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # each run's own summary
            code = sim_main(argv)
        command_s = time.perf_counter() - t0
        if code != 0:
            raise SystemExit(f"coll_bench: `cellfabric sim {' '.join(argv)}` failed")
        (run_dir,) = list(Path(tmp).iterdir())
        data = json.loads((run_dir / "metrics.json").read_text())
    s = data["summary"]
    return {"workload": workload, "size": size, "spray": spray, "cc": cc, "policy": policy,
            "mode": f"{policy}+{spray}" if policy else spray,
            "channels": channels, "chunk_size": chunk, "time_s": collective_time_s(data),
            "messages": f"{s['messages_completed']}/{s['messages_total']}",
            "cells_dropped": s.get("cells_dropped", 0),
            "nranks": len({m["src"] for m in data["messages"]} | {m["dst"] for m in
                                                                   data["messages"]}),
            "wall_s": data["run"]["wall_clock"]["wall_s"], "command_wall_s": command_s}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topology", default="fat-tree:k=4")
    ap.add_argument("--sizes", default="65536,1048576")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--spray", default="ecmp,spray")
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=None,
                    help="pipelining chunk in bytes (default: one chunk per step)")
    ap.add_argument("--policies", default=None, metavar="POLICY+SPRAY,...",
                    help="compare --channel-policy placements, each with a spray mode "
                         "(e.g. static+ecmp,topology+spray,dynamic+spray); replaces --spray")
    ap.add_argument("--out", type=Path, default=RESULTS / "coll.json")
    ap.add_argument("--jobs", type=int, default=1,
                    help="points run at once, each in its own process (default 1: in this one)")
    ap.add_argument("--markdown", type=Path, default=None, metavar="RESULTS.json",
                    help="print an earlier run's results as one markdown table, the modes "
                         "side by side, and run nothing")
    args = ap.parse_args(argv)
    algo_of = {a.workload: a for a in ALGORITHMS.values()}
    if args.markdown:
        print(side_by_side(json.loads(args.markdown.read_text()), algo_of))
        return 0
    modes = _modes(args.policies, args.spray)
    points = [(args.topology, workload, int(size), spray, args.cc, args.channels,
               args.chunk_size, policy)
              for policy, spray in modes for workload in args.workloads.split(",")
              for size in args.sizes.split(",")]
    rows = _run_points(points, args.jobs, args.out, args.topology)
    for mode in dict.fromkeys(r["mode"] for r in rows):
        print(f"\n## {args.topology}, {mode}, --cc {args.cc}, "
              f"--channels {args.channels}, --chunk-size {args.chunk_size or 'none'}")
        print(format_table(PerfRow(algo_of[r["workload"]].collective,
                                   algo_of[r["workload"]].name, r["nranks"], r["size"],
                                   r["time_s"]) for r in rows if r["mode"] == mode))
    if args.policies:
        print(_ratios(rows, modes))
    print("\n" + side_by_side({"topology": args.topology, "rows": rows}, algo_of))
    _write(args.out, args.topology, rows, complete=True)
    print(f"\nwrote {args.out}")
    return 0


def _run_points(points: list[tuple], jobs: int, out: Path, topology: str) -> list[dict]:
    """Every point's row, in the points' order; --out rewritten as each one ends."""
    done: dict[int, dict] = {}

    def finished(i: int, r: dict) -> None:
        done[i] = r
        print(f"  {r['mode']:15} {r['workload']:18} {r['size']:>9} B  "
              f"{r['time_s'] * 1e6:9.1f} us  {r['messages']} messages, "
              f"wall {r['wall_s']:.1f} s  [{len(done)}/{len(points)}]", flush=True)
        _write(out, topology, [done[k] for k in sorted(done)], complete=False)

    if jobs <= 1:
        for i, point in enumerate(points):
            finished(i, run_one(*point))
    else:
        # a process per point (spawned: a forked pool cannot retire its workers), the
        # largest first so the long ones do not end the run alone
        order = sorted(range(len(points)), key=lambda i: -points[i][2])
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
            futures = {pool.submit(run_one, *points[i]): i for i in order}
            for fut in as_completed(futures):
                finished(futures[fut], fut.result())
    return [done[i] for i in range(len(points))]


def _write(out: Path, topology: str, rows: list[dict], complete: bool) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"topology": topology, "complete": complete, "rows": rows},
                              indent=1) + "\n")


def side_by_side(results: dict, algo_of: dict) -> str:
    """One markdown row per collective and size: each mode's time, busbw (nccl-tests'
    definitions) and cells dropped at switches (each resent after its timeout, inside the
    time), and each later mode's time over the first's."""
    rows = results["rows"]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    by = {(r["mode"], r["workload"], r["size"]): r for r in rows}
    head = ["collective (algorithm)", "size"]
    for mode in modes:
        head += [f"{mode} time (us)", f"{mode} busbw (GB/s)", f"{mode} cells dropped"]
    head += [f"{mode} / {modes[0]}" for mode in modes[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload in dict.fromkeys(r["workload"] for r in rows):
        algo = algo_of[workload]
        for size in sorted({r["size"] for r in rows if r["workload"] == workload}):
            cells = [f"{algo.collective} ({algo.name})", _size(size)]
            got = [by.get((mode, workload, size)) for mode in modes]
            for r in got:
                if r is None:
                    cells += ["-", "-", "-"]
                    continue
                perf = PerfRow(algo.collective, algo.name, r["nranks"], size, r["time_s"])
                cells += [f"{r['time_s'] * 1e6:.1f}", f"{perf.busbw:.2f}",
                          f"{r['cells_dropped']:,}"]
            base = got[0]
            cells += [f"{r['time_s'] / base['time_s']:.2f}x" if r and base else "-"
                      for r in got[1:]]
            lines.append("| " + " | ".join(cells) + " |")
    incomplete = [r for r in rows if r["messages"].split("/")[0] != r["messages"].split("/")[1]]
    lines.append(f"\n{results['topology']}: {len(rows)} points, "
                 f"{len(rows) - len(incomplete)} with every message delivered"
                 + ("" if results.get("complete", True) else " (run not complete)"))
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def _modes(policies: str | None, sprays: str) -> list[tuple[str | None, str]]:
    if not policies:
        return [(None, spray) for spray in sprays.split(",")]
    out = []
    for item in policies.split(","):
        policy, sep, spray = item.partition("+")
        if not sep:
            raise SystemExit(f"coll_bench: --policies '{item}': expected POLICY+SPRAY")
        out.append((policy, spray))
    return out


def _ratios(rows: list[dict], modes: list[tuple[str | None, str]]) -> str:
    """Each mode's time over the first mode's (the baseline), per collective and size."""
    base = f"{modes[0][0]}+{modes[0][1]}"
    time_of = {(r["mode"], r["workload"], r["size"]): r["time_s"] for r in rows}
    lines = [f"\n## time relative to {base} (same run)"]
    for (mode, workload, size), t in time_of.items():
        if mode != base:
            ref = time_of[(base, workload, size)]
            lines.append(f"  {mode:15} {workload:18} {size:>9} B  {t / ref:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
