"""`cellfabric sim` at data-center settings (100 Gb/s links, 1 us per hop, 512 KiB buffers):
the simulator's speed and the fabric's headline figures, each beside its baseline.

    speed        k=8 fat-tree (80 switches, 128 hosts), permutation of 1 MiB per host, beside
                 htsim on the same job in the same run (bench/sim_speed.py): both wall times
                 (cellfabric's whole command and its engine alone), events, events/s and
                 the ratios (goal: within 5x of htsim); --k 16 runs the 1024-host fat-tree
                 instead (goal: under 10 minutes, under 4 GiB), kept as speed_k16
    utilization  k=4 fat-tree permutation of 512 KiB per host (and 2 MiB with spray), goodput
                 / bottleneck capacity, spray vs ecmp (goal: >= 95% with spraying)
    incast       15:1 (k=4) and 63:1 (k=8) incast per rate control: cells dropped and exact peak
                 queue (goal: zero loss with rate control; none is the baseline); credit-rts
                 is credit with --credit-unscheduled 1 (a request to send, a grant window)
    credit       what credit-rts costs beside credit's default: a lone flow of 64 KiB and
                 2 MiB across pods, and the k=4 spray permutation of 512 KiB (FCT slowdown)
    allreduce    ring all-reduce of 4 MiB (and 1 MiB) over the k=4 fat-tree's 16 hosts, every
                 hop leaving its pod: step time, spray vs ecmp
                 (goal: >= 40% lower with spraying)

Every figure is virtual time, so it does not depend on this machine; only the speed section
is wall-clock. Writes bench/results/sim.json. Usage:
    python bench/sim_bench.py [--quick] [--only speed,utilization,incast,credit,allreduce]
                              [--k 8|16] [--out F]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.core.report import goodput_fraction  # noqa: E402
from cellfabric.core.workloads import incast, permutation, ring_allreduce, ring_order  # noqa: E402
from cellfabric.run_cli import pods_of_leaves  # noqa: E402
from cellfabric.sim.hostsetup import SimSettings  # noqa: E402
from cellfabric.sim.run import SimConfig, execute_sim  # noqa: E402
from hosts.cc import algorithm as cc_algorithm  # noqa: E402
from hosts.cc import names as cc_names  # noqa: E402
from topologies.generators import generate  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_speed import speed_section  # noqa: E402

SETTINGS = SimSettings(link_rate_bps=100_000_000_000, hop_delay_ns=1000,
                       buffer_bytes=512 * 1024, seed=1, scale_ecn=True)
# every registered rate control, and each that grants credits once more as NAME-rts: its
# first cell only a request to send (--credit-unscheduled 1)
CCS = [*cc_names(), *(f"{n}-rts" for n in cc_names() if cc_algorithm(n).grants)]
RTS_CELLS = 1


def cc_of(name: str) -> tuple[str, int | None]:
    """A bench rate-control name -> (--cc, --credit-unscheduled)."""
    return (name.removesuffix("-rts"), RTS_CELLS) if name.endswith("-rts") else (name, None)


def fat_tree(k: int, spray: str, cc: str):
    t = generate(f"fat-tree:k={k}")
    t.fabric = replace(t.fabric, spray=spray, cc=cc_of(cc)[0])
    return t


def hosts_of(t) -> list[str]:
    return sorted(t.hosts, key=lambda h: int("".join(c for c in h if c.isdigit()) or 0))


def sim(t, workload, tag: str, progress: bool = False,
        unscheduled: int | None = None) -> dict[str, Any]:
    run_dir = ROOT / "results" / "sim-bench" / tag  # run folders: not part of the results
    cfg = SimConfig(topo=t, workload=workload, cc=t.fabric.cc, run_dir=run_dir,
                    settings=SETTINGS, progress=progress, credit_unscheduled=unscheduled)
    m, _ = execute_sim(cfg)
    s, simfig, wall = m.summary, m.run["sim"], m.run["wall_clock"]
    out = {"messages": f"{s['messages_completed']}/{s['messages_total']}",
           "goodput_fraction": goodput_fraction(m), "cells_dropped": s["cells_dropped"],
           "peak_queue": s["peak_queue_depth"], "slowdown_p50": s["slowdown_p50"],
           "slowdown_p99": s["slowdown_p99"], "fct_p50_s": s["fct_p50_s"],
           "retransmitted_cells": s["retransmitted_cells"],
           "step_time_p50_s": s.get("step_time_p50_s"), "virtual_s": simfig["virtual_time_s"],
           "events": simfig["events"], "packets": simfig["packets"],
           "wall_s": wall["wall_s"], "events_per_wall_s": wall["events_per_wall_s"],
           "wall_s_per_sim_ms": wall["wall_s_per_sim_ms"]}
    print(f"  {tag}: {json.dumps(out)}", flush=True)
    return out


def speed(quick: bool, k: int = 8) -> dict[str, Any]:
    """htsim and `cellfabric sim` on one fat-tree permutation, side by side (bench/sim_speed)."""
    k, size = (4, 256 * 1024) if quick else (k, 1 << 20)
    return speed_section(k, size, ROOT / "results" / "sim-bench")


def utilization(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in ("ecmp", "spray"):
        t = fat_tree(4, spray, "none")
        hs = hosts_of(t)
        wl = permutation(hs, 128 * 1024 if quick else 512 * 1024, 1,
                         cross_leaf={h: t.hosts[h].leaves[0] for h in hs})
        out[spray] = sim(t, wl, f"util-{spray}")
    if not quick:  # a longer message: what is left is per cell (ACKs), not the tail's queueing
        t = fat_tree(4, "spray", "none")
        hs = hosts_of(t)
        wl = permutation(hs, 2 << 20, 1, cross_leaf={h: t.hosts[h].leaves[0] for h in hs})
        out["spray-2MiB"] = sim(t, wl, "util-spray-2MiB")
    return out


def incasts(quick: bool) -> dict[str, Any]:
    out = {}
    cases = [(4, 15)] if quick else [(4, 15), (8, 63)]
    for k, n in cases:
        for cc in CCS:
            t = fat_tree(k, "spray", cc)
            hs = hosts_of(t)
            out[f"{n}:1/{cc}"] = sim(t, incast(hs, n, 64 * 1024, 1), f"incast{n}-{cc}",
                                     unscheduled=cc_of(cc)[1])
    return out


def credit_cost(quick: bool) -> dict[str, Any]:
    """credit vs credit-rts where nothing is congested: the round trip a request costs."""
    out: dict[str, Any] = {}
    for cc in ("credit", "credit-rts"):
        t = fat_tree(4, "spray", cc)
        hs = hosts_of(t)
        for size in (64 * 1024, 2 << 20):  # incast of one: h1 alone to the last pod's h16
            out[f"lone-{size // 1024}KiB/{cc}"] = sim(t, incast(hs, 1, size, 1),
                                                      f"lone{size}-{cc}",
                                                      unscheduled=cc_of(cc)[1])
        size = 128 * 1024 if quick else 512 * 1024
        wl = permutation(hs, size, 1, cross_leaf={h: t.hosts[h].leaves[0] for h in hs})
        out[f"permutation-{size // 1024}KiB/{cc}"] = sim(t, wl, f"perm-{cc}",
                                                         unscheduled=cc_of(cc)[1])
    return out


def allreduce(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in ("ecmp", "spray"):
        t = fat_tree(4, spray, "none")
        # ranks interleaved over leaves and pods, as a collective library lays a ring over
        # a fabric: every hop crosses the core
        ranks = ring_order(hosts_of(t), {h: t.hosts[h].leaves[0] for h in t.hosts},
                           pods_of_leaves(t))
        out[spray] = sim(t, ring_allreduce(ranks, (1 if quick else 4) << 20),
                         f"allreduce-{spray}")
        if not quick:  # 64 KiB chunks: each step is mostly its idle path's round trip
            out[f"{spray}-1MiB"] = sim(t, ring_allreduce(ranks, 1 << 20),
                                       f"allreduce-{spray}-1MiB")
    return out


SECTIONS = {"speed": speed, "utilization": utilization, "incast": incasts,
            "credit": credit_cost, "allreduce": allreduce}


def verdicts(r: dict[str, Any]) -> dict[str, Any]:
    v: dict[str, Any] = {}
    if "utilization" in r:
        v["spray_utilization"] = r["utilization"]["spray"]["goodput_fraction"]
        v["ecmp_utilization"] = r["utilization"]["ecmp"]["goodput_fraction"]
    if "incast" in r:
        # a rate control is lossless when every incast it ran dropped nothing
        ccs = {key.split("/")[1] for key in r["incast"]}
        v["lossless_with"] = sorted(
            cc for cc in ccs - {"none"}
            if all(x["cells_dropped"] == 0 for key, x in r["incast"].items()
                   if key.split("/")[1] == cc))
    if "allreduce" in r:
        a, b = (r["allreduce"][m]["step_time_p50_s"] for m in ("spray", "ecmp"))
        v["allreduce_spray_over_ecmp"] = a / b if a and b else None
    if "speed" in r and "cellfabric" in r["speed"]:
        v["k8_wall_minutes"] = r["speed"]["cellfabric"]["whole_command_s"] / 60
        v["k8_over_htsim"] = r["speed"].get("ratios", {}).get("whole_command_over_htsim")
    if "speed_k16" in r and "cellfabric" in r["speed_k16"]:
        v["k16_wall_minutes"] = r["speed_k16"]["cellfabric"]["whole_command_s"] / 60
    return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--k", type=int, choices=(8, 16), default=8,
                    help="speed: the fat-tree's k (16: 1024 hosts, kept as speed_k16)")
    ap.add_argument("--out", type=Path, default=RESULTS / "sim.json",
                    help="results JSON (sections already in it are kept)")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = args.out
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results["machine"] = {"python": platform.python_version(), "date": time.strftime("%F"),
                          "quick": args.quick, "settings": SETTINGS.__dict__}
    for name in args.only.split(","):
        if name not in SECTIONS:
            print(f"sim_bench: unknown section '{name}'", file=sys.stderr)
            return 2
        print(f"[{name}]", flush=True)
        key = name
        if name == "speed":
            key = "speed_k16" if args.k == 16 and not args.quick else "speed"
            results[key] = speed(args.quick, args.k)
        else:
            results[name] = SECTIONS[name](args.quick)
        results.setdefault("measured", {})[key] = time.strftime("%F %H:%M UTC", time.gmtime())
        results["verdicts"] = verdicts(results)
        path.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results["verdicts"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
