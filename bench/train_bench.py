"""A training iteration's communication time in `cellfabric sim`, every spray mode side by
side from one run: the `iteration` section of each run's metrics.json (communication time,
slowest rank, the time per kind of collective: TP, PP, DP, EP) and the ratio to the first
mode's. Virtual time only, so no figure depends on this machine. Writes
bench/results/train.json. Usage:
    python bench/train_bench.py [--topology fat-tree:k=4] [--model SPEC] [--spray ecmp,spray]
        [--cc dcqcn] [--gpus-per-server 2] [--channels 1] [--out F]
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

from cellfabric.sim.cli import sim_main  # noqa: E402

DEFAULT_MODEL = "layers=4,hidden=256,seq=512,tp=2,pp=2,dp=4,micro_batches=2,bucket=1MiB"


def run_one(args: argparse.Namespace, spray: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="train-bench-") as tmp:
        argv = [args.topology, "--workload", f"train:{args.model}", "--spray", spray,
                "--cc", args.cc, "--gpus-per-server", str(args.gpus_per_server),
                "--channels", str(args.channels), "--quiet", "--results", tmp]
        with contextlib.redirect_stdout(io.StringIO()):  # each run's own summary
            code = sim_main(argv)
        if code != 0:
            raise SystemExit(f"train_bench: `cellfabric sim {' '.join(argv)}` failed")
        (run_dir,) = list(Path(tmp).iterdir())
        data = json.loads((run_dir / "metrics.json").read_text())
    it, s = data["iteration"], data["summary"]
    by_kind: dict[str, float] = {}
    for row in it["collectives"]:  # labels start with tp, pp, dp or ep
        kind = row["label"].split()[0]
        by_kind[kind] = by_kind.get(kind, 0.0) + (row["time_s"] or 0.0)
    return {"spray": spray, "communication_time_s": it["communication_time_s"],
            "slowest_rank": it["slowest_rank"], "collective_time_s_by_kind": by_kind,
            "collectives": len(it["collectives"]), "steps": it["steps"],
            "messages": f"{s['messages_completed']}/{s['messages_total']}",
            "cells_dropped": s.get("cells_dropped", 0),
            "wall_s": data["run"]["wall_clock"]["wall_s"]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topology", default="fat-tree:k=4")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--spray", default="ecmp,spray")
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--gpus-per-server", type=int, default=2)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "train.json")
    args = ap.parse_args(argv)
    rows = [run_one(args, spray) for spray in args.spray.split(",")]
    base = rows[0]["communication_time_s"]
    print(f"## {args.topology}, train:{args.model}, --cc {args.cc}, "
          f"--gpus-per-server {args.gpus_per_server}, --channels {args.channels}")
    print(f"{'spray':>8} {'comm us':>10} {'vs ' + rows[0]['spray']:>9} {'slowest rank':>16} "
          f"{'tp us':>9} {'pp us':>9} {'dp us':>9} {'ep us':>9}  messages")
    for r in rows:
        k, slow = r["collective_time_s_by_kind"], r["slowest_rank"]
        print(f"{r['spray']:>8} {1e6 * r['communication_time_s']:>10.1f} "
              f"{r['communication_time_s'] / base:>8.2f}x "
              f"{slow['rank']:>4} {1e6 * slow['time_s']:>9.1f} us "
              + " ".join(f"{1e6 * k.get(x, 0.0):>9.1f}" for x in ("tp", "pp", "dp", "ep"))
              + f"  {r['messages']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"topology": args.topology, "model": args.model,
                                    "cc": args.cc, "rows": rows}, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
