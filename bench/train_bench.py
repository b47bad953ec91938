"""A training iteration's communication time in `cellfabric sim`, modes side by side from
one run: spray modes (`--spray ecmp,spray`) or channel policies each with a spray mode
(`--policies static+ecmp,topology+spray,dynamic+spray`). Per mode, the `iteration` section
of the run's metrics.json (communication time, slowest rank, the time per kind of
collective: TP, PP, DP, EP) and the ratio of its time to the first mode's. With `--fail
LINK@T` every mode is run again with that failure: its time then, and the penalty (the
failed run's communication time minus the same mode's without the failure). Virtual time
only, so no figure depends on this machine. Writes bench/results/train.json. Usage:
    python bench/train_bench.py [--topology fat-tree:k=4] [--model SPEC]
        [--spray ecmp,spray | --policies POLICY+SPRAY,...] [--fail LINK@T]
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


def run_one(args: argparse.Namespace, spray: str, policy: str | None = None,
            fail: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="train-bench-") as tmp:
        argv = [args.topology, "--workload", f"train:{args.model}", "--spray", spray,
                "--cc", args.cc, "--channels", str(args.channels), "--quiet",
                "--results", tmp]
        argv += ["--gpus-per-server", str(args.gpus_per_server)] if args.gpus_per_server else []
        argv += ["--channel-policy", policy] if policy else []
        argv += ["--fail", fail] if fail else []
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
    moved = sum(st.get("moved", 0) for st in
                data["run"].get("channel_scheduler", {}).get("steps", []))
    return {"spray": spray, "policy": policy, "mode": f"{policy}+{spray}" if policy else spray,
            "fail": fail, "communication_time_s": it["communication_time_s"],
            "slowest_rank": it["slowest_rank"], "collective_time_s_by_kind": by_kind,
            "collectives": len(it["collectives"]), "steps": it["steps"],
            "messages": f"{s['messages_completed']}/{s['messages_total']}",
            "cells_dropped": s.get("cells_dropped", 0), "sends_moved": moved,
            "wall_s": data["run"]["wall_clock"]["wall_s"]}


def _modes(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    if not args.policies:
        return [(None, spray) for spray in args.spray.split(",")]
    out: list[tuple[str | None, str]] = []
    for item in args.policies.split(","):
        policy, sep, spray = item.partition("+")
        if not sep or not policy or not spray:
            raise SystemExit(f"train_bench: --policies '{item}': expected POLICY+SPRAY")
        out.append((policy, spray))
    return out


def _line(r: dict, base: float, first: str) -> str:
    k, slow = r["collective_time_s_by_kind"], r["slowest_rank"]
    return (f"{r['mode']:>16} {1e6 * r['communication_time_s']:>10.1f} "
            f"{r['communication_time_s'] / base:>8.2f}x "
            f"{slow['rank']:>4} {1e6 * slow['time_s']:>9.1f} us "
            + " ".join(f"{1e6 * k.get(x, 0.0):>9.1f}" for x in ("tp", "pp", "dp", "ep"))
            + f"  {r['messages']}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topology", default="fat-tree:k=4")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--spray", default="ecmp,spray")
    ap.add_argument("--policies", default=None, metavar="POLICY+SPRAY,...",
                    help="compare --channel-policy placements, each with a spray mode")
    ap.add_argument("--fail", default=None, metavar="LINK@T",
                    help="run every mode again with this --fail: its time and penalty")
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--gpus-per-server", type=int, default=None,
                    help="default: the topology's servers, else 2")
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "train.json")
    args = ap.parse_args(argv)
    if args.gpus_per_server is None and not args.topology.startswith("rail"):
        args.gpus_per_server = 2
    modes = _modes(args)
    rows = [run_one(args, spray, policy) for policy, spray in modes]
    failed = [run_one(args, spray, policy, args.fail) for policy, spray in modes] \
        if args.fail else []
    base, first = rows[0]["communication_time_s"], rows[0]["mode"]
    print(f"## {args.topology}, train:{args.model}, --cc {args.cc}, "
          f"--gpus-per-server {args.gpus_per_server or 'topology'}, "
          f"--channels {args.channels}")
    header = (f"{'mode':>16} {'comm us':>10} {'vs ' + first:>9} {'slowest rank':>16} "
              f"{'tp us':>9} {'pp us':>9} {'dp us':>9} {'ep us':>9}  messages")
    print(header)
    for r in rows:
        print(_line(r, base, first))
    if failed:
        print(f"\n## with --fail {args.fail}; penalty = its time minus the same mode's without")
        print(header + "  penalty us  sends moved")
        for r, ok in zip(failed, rows, strict=True):
            r["penalty_s"] = r["communication_time_s"] - ok["communication_time_s"]
            print(_line(r, base, first)
                  + f"  {1e6 * r['penalty_s']:>10.1f}  {r['sends_moved']:>11}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"topology": args.topology, "model": args.model,
                                    "cc": args.cc, "channels": args.channels,
                                    "fail": args.fail, "rows": rows, "failed": failed},
                                   indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
