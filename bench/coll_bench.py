"""Collectives in `cellfabric sim`, reported as nccl-tests reports them: per collective and
size, the time, algbw and busbw, for every spray mode side by side from one run.

The collective's time is the sum of its steps' virtual times (cellfabric.collectives.lower:
one step per level of the schedule's DAG, each waiting for the one before). Every figure is
virtual time, so it does not depend on this machine. Writes bench/results/coll.json and
prints one table per collective and mode. Usage:
    python bench/coll_bench.py [--topology fat-tree:k=4] [--sizes 65536,1048576]
        [--workloads allreduce-ring,allreduce-tree,...] [--spray ecmp,spray] [--channels 2]
        [--cc dcqcn] [--chunk-size BYTES] [--out F]
        [--policies static+ecmp,topology+spray,dynamic+spray]

--policies compares channel scheduling policies (--channel-policy) with spray modes instead
of --spray's plain lowering: NCCL-like static channels over ECMP against the scheduler's
topology or dynamic placement over spraying, side by side from one run.
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
            channels: int, chunk: int | None, policy: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="coll-bench-") as tmp:
        argv = [topology, "--workload", workload, "--size", str(size), "--spray", spray,
                "--cc", cc, "--channels", str(channels), "--quiet", "--results", tmp]
        argv += ["--chunk-size", str(chunk)] if chunk else []
        argv += ["--channel-policy", policy] if policy else []
        with contextlib.redirect_stdout(io.StringIO()):  # each run's own summary
            code = sim_main(argv)
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
    ap.add_argument("--policies", default=None, metavar="POLICY+SPRAY,...",
                    help="compare --channel-policy placements, each with a spray mode "
                         "(e.g. static+ecmp,topology+spray,dynamic+spray); replaces --spray")
    ap.add_argument("--out", type=Path, default=RESULTS / "coll.json")
    args = ap.parse_args(argv)
    algo_of = {a.workload: a for a in ALGORITHMS.values()}
    modes = _modes(args.policies, args.spray)
    rows = []
    for policy, spray in modes:
        for workload in args.workloads.split(","):
            for size in (int(x) for x in args.sizes.split(",")):
                r = run_one(args.topology, workload, size, spray, args.cc, args.channels,
                            args.chunk_size, policy)
                rows.append(r)
                print(f"  {r['mode']:15} {workload:18} {size:>9} B  "
                      f"{r['time_s'] * 1e6:9.1f} us  {r['messages']} messages, "
                      f"wall {r['wall_s']:.1f} s", flush=True)
    for mode in dict.fromkeys(r["mode"] for r in rows):
        print(f"\n## {args.topology}, {mode}, --cc {args.cc}, "
              f"--channels {args.channels}, --chunk-size {args.chunk_size or 'none'}")
        print(format_table(PerfRow(algo_of[r["workload"]].collective,
                                   algo_of[r["workload"]].name, r["nranks"], r["size"],
                                   r["time_s"]) for r in rows if r["mode"] == mode))
    if args.policies:
        print(_ratios(rows, modes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"topology": args.topology, "rows": rows}, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


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
