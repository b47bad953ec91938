"""Collectives in `cellfabric sim`, reported as nccl-tests reports them: per collective and
size, the time, algbw and busbw, for every spray mode side by side from one run.

The collective's time is the sum of its steps' virtual times (cellfabric.collectives.lower:
one step per level of the schedule's DAG, each waiting for the one before). Every figure is
virtual time, so it does not depend on this machine. Writes bench/results/coll.json and
prints one table per collective and mode. Usage:
    python bench/coll_bench.py [--topology fat-tree:k=4] [--sizes 65536,1048576]
        [--workloads allreduce-ring,allreduce-tree,...] [--spray ecmp,spray] [--channels 2]
        [--cc dcqcn] [--chunk-size BYTES] [--out F]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
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
            channels: int, chunk: int | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="coll-bench-") as tmp:
        argv = [topology, "--workload", workload, "--size", str(size), "--spray", spray,
                "--cc", cc, "--channels", str(channels), "--quiet", "--results", tmp]
        argv += ["--chunk-size", str(chunk)] if chunk else []
        with contextlib.redirect_stdout(io.StringIO()):  # each run's own summary
            code = sim_main(argv)
        if code != 0:
            raise SystemExit(f"coll_bench: `cellfabric sim {' '.join(argv)}` failed")
        (run_dir,) = list(Path(tmp).iterdir())
        data = json.loads((run_dir / "metrics.json").read_text())
    s = data["summary"]
    return {"workload": workload, "size": size, "spray": spray, "cc": cc,
            "channels": channels, "chunk_size": chunk, "time_s": collective_time_s(data),
            "messages": f"{s['messages_completed']}/{s['messages_total']}",
            "cells_dropped": s.get("cells_dropped", 0),
            "nranks": len({m["src"] for m in data["messages"]} | {m["dst"] for m in
                                                                   data["messages"]}),
            "wall_s": data["run"]["wall_clock"]["wall_s"]}


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
    ap.add_argument("--out", type=Path, default=RESULTS / "coll.json")
    args = ap.parse_args(argv)
    algo_of = {a.workload: a for a in ALGORITHMS.values()}
    rows = []
    for spray in args.spray.split(","):
        for workload in args.workloads.split(","):
            for size in (int(x) for x in args.sizes.split(",")):
                r = run_one(args.topology, workload, size, spray, args.cc, args.channels,
                            args.chunk_size)
                rows.append(r)
                print(f"  {spray:6} {workload:18} {size:>9} B  {r['time_s'] * 1e6:9.1f} us  "
                      f"{r['messages']} messages, wall {r['wall_s']:.1f} s", flush=True)
    for spray in args.spray.split(","):
        print(f"\n## {args.topology}, --spray {spray}, --cc {args.cc}, "
              f"--channels {args.channels}, --chunk-size {args.chunk_size or 'none'}")
        print(format_table(PerfRow(algo_of[r["workload"]].collective,
                                   algo_of[r["workload"]].name, r["nranks"], r["size"],
                                   r["time_s"]) for r in rows if r["spray"] == spray))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"topology": args.topology, "rows": rows}, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
