"""The fabric's headline claims, measured on the emulated fabric, each beside its baseline from
the same `make bench` run.

    utilization  permutation on leaf-spine: goodput / bottleneck capacity, per spray mode
                 (ecmp is the baseline); goal: spraying >= 95%
    loss         incast 4:1, 8:1, 15:1 per rate control (none is the baseline; credit-rts is
                 credit whose first cell is the request to send, --credit-unscheduled 1):
                 cells dropped at switches (goal: 0 with rate control), peak queue, time to
                 drain
    latency      message completion time p50/p99 as slowdown over the ideal (size / bottleneck
                 share), and ring all-reduce step time (4 ranks on leaf-spine), per spray mode
    reordering   max and p99 reorder depth per spray mode
    failover     dual-homed hosts, a host link down mid-run: messages lost (goal: 0) and the
                 failover time hosts measured
    ft-*         the same on a k=4 fat-tree (20 switches, 16 hosts, 30 packets/s links):
                 cross-pod permutation per spray mode (ecmp the baseline) with the per-tier
                 balance of cells, 8:1 incast across pods per rate control (none the
                 baseline), ring all-reduce over 8 ranks in 4 pods per spray mode (ecmp the
                 baseline)

Figures are ratios to what the configured queue rates allow, so they do not depend on the
machine's speed; a run the machine could not keep up with is marked invalid, not counted.
Writes bench/results/fabric.json and PNG charts. Usage:
    python bench/fabric_bench.py [--quick] [--only utilization,loss,...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.core.report import RunMetrics, goodput_fraction  # noqa: E402
from cellfabric.core.workloads import (  # noqa: E402
    Step,
    Transfer,
    Workload,
    incast,
    permutation,
    ring_allreduce,
)
from cellfabric.emulation.runner import RunConfig, RunError, execute  # noqa: E402
from cellfabric.run_cli import parse_fail  # noqa: E402
from hosts.cc import names as cc_names  # noqa: E402
from topologies.generators import generate  # noqa: E402
from topologies.model import Topology, load_topology  # noqa: E402

SPRAYS = ["ecmp", "spray", "round-robin", "adaptive"]
CCS = list(cc_names())  # every registered rate control


def topo(name: str, **fabric: Any) -> Topology:
    t = load_topology(ROOT / "topologies" / f"{name}.yaml")
    t.fabric = replace(t.fabric, **fabric)
    return t


def hosts_of(t: Topology) -> list[str]:
    return sorted(t.hosts, key=lambda h: int(h[1:]))


def run(t: Topology, workload, tag: str, events=(),
        credit_unscheduled: int | None = None) -> RunMetrics:
    cfg = RunConfig(topo=t, target="embedded", workload=workload, cc=t.fabric.cc,
                    run_dir=RESULTS / "runs" / f"{time.strftime('%H%M%S')}-{tag}",
                    events=list(events), progress=False, step_timeout_s=180,
                    credit_unscheduled=credit_unscheduled)
    print(f"-- {tag}", flush=True)
    try:
        metrics, _ = execute(cfg)
    except RunError as exc:
        # e.g. another fabric on this machine took a port between the check and the bind:
        # once more, in a fresh run folder
        print(f"   {tag}: {exc}; running it again", flush=True)
        cfg.run_dir = cfg.run_dir.with_name(cfg.run_dir.name + "-again")
        metrics, _ = execute(cfg)
    return metrics


def figures(m: RunMetrics) -> dict[str, Any]:
    s = m.summary
    return {
        "valid": s["valid"], "invalid_reasons": m.run.get("invalid_reasons", []),
        "messages": f"{s['messages_completed']}/{s['messages_total']}",
        "messages_lost": s["messages_total"] - s["messages_completed"],
        "goodput_fraction": goodput_fraction(m),
        "cells_dropped": s["cells_dropped"], "peak_queue": s["peak_queue_depth"],
        "slowdown_p50": s["slowdown_p50"], "slowdown_p99": s["slowdown_p99"],
        "max_reorder_depth": s["max_reorder_depth"],
        "p99_reorder_depth": max((r.get("p99_depth", 0) for r in m.reorder.values()), default=0),
        "step_time_p50_s": s.get("step_time_p50_s"),
        "drain_s": max((x["fct_s"] or 0) for x in m.messages) if m.messages else None,
        # From the last ACK progress on the failed port to the last moved cell acknowledged:
        # detection plus recovery.
        "failover_s": [(f.get("since_last_progress_s") or 0.0) + (f.get("recovered_s") or 0.0)
                       for fl in m.flows.values() for f in fl.get("failovers", [])],
        # the busiest link direction's packets (cells and other) over its rate x the workload
        "max_link_load": (s.get("link_accounting") or {}).get("max_offered"),
        # per tier and direction: min/mean and max/mean of cells over its links
        "balance": {t: [b["min_over_mean"], b["max_over_mean"]]
                    for t, b in (s.get("link_accounting") or {}).get("tiers", {}).items()},
    }


FAT_TREE = "fat-tree:k=4,rate=30,depth=64"


def fat_tree(**fabric: Any) -> Topology:
    t = generate(FAT_TREE)
    t.fabric = replace(t.fabric, **fabric)
    return t


def cross_pod(t: Topology, size: int) -> Workload:
    """Host i to host i + 4 (the same place one pod on): every flow crosses the core."""
    hs = hosts_of(t)
    return Workload("cross-pod", (Step(tuple(Transfer(h, hs[(i + 4) % len(hs)], size, 1)
                                             for i, h in enumerate(hs))),))


def bench_ft_utilization(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in (["ecmp", "spray"] if quick else SPRAYS):
        t = fat_tree(spray=spray, cc="dcqcn")
        # 192 cells a flow, as the e2e test: a message is many cells (a 48-cell one reads its
        # loaded cross-pod latency, ~25 cell times here, as a quarter of its time)
        out[spray] = figures(run(t, cross_pod(t, 192 * 1024), f"ft-util-{spray}"))
    return out


def bench_ft_incast(quick: bool) -> dict[str, Any]:
    out = {}
    # credit-rts: credit whose first cell is the request to send (--credit-unscheduled 1)
    for cc in (["none", "hpcc"] if quick else [*CCS, "credit-rts"]):
        t = fat_tree(spray="spray", cc=cc.removesuffix("-rts"))
        hs = hosts_of(t)
        # 8 senders from the other three pods into h1, 24 cells each: 3x the host port's
        # 64-cell queue
        senders = [h for h in hs if t.hosts[h].ip.split(".")[1] != "1"][:8]
        wl = Workload("incast-8:1", (Step(tuple(Transfer(h, "h1", 24 * 1024, 1)
                                                for h in senders)),))
        out[f"8:1/{cc}"] = figures(run(t, wl, f"ft-incast8-{cc}",
                                       credit_unscheduled=1 if cc == "credit-rts" else None))
    return out


def bench_ft_allreduce(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in (["ecmp", "spray"] if quick else SPRAYS):
        t = fat_tree(spray=spray, cc="dcqcn")
        # 8 ranks, two per pod, ordered so that every ring hop leaves its pod
        ranks = ["h1", "h5", "h9", "h13", "h3", "h7", "h11", "h15"]
        wl = ring_allreduce(ranks, 256 * 1024)
        out[spray] = figures(run(t, wl, f"ft-allreduce-{spray}"))
    return out


def bench_utilization(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in SPRAYS:
        t = topo("leaf-spine", spray=spray, cc="dcqcn")
        hs = hosts_of(t)
        wl = permutation(hs, 128 * 1024 if not quick else 48 * 1024, 2,
                         cross_leaf={h: t.hosts[h].leaves[0] for h in hs})
        out[spray] = figures(run(t, wl, f"util-{spray}"))
    return out


def bench_loss(quick: bool) -> dict[str, Any]:
    out = {}
    cases = [(4, "leaf-spine-3x3"), (8, "leaf-spine-3x3"), (15, "leaf-spine-4x4")]
    if quick:
        cases = cases[:1]
    for n, name in cases:
        # Each sender's message is sized so that together they are 3x the receiver port's
        # 256-cell buffer: without rate control some must be dropped. (At 1.5x nothing was:
        # sprayed over the spines, an incast also queues in every spine's downlink queue.)
        size = max(16, 768 // n) * 1024
        for cc in [*CCS, "credit-rts"]:
            t = topo(name, cc=cc.removesuffix("-rts"))
            hs = hosts_of(t)
            wl = incast(hs, n, size, 1, receiver=hs[-1])
            out[f"{n}:1/{cc}"] = figures(run(
                t, wl, f"incast{n}-{cc}", credit_unscheduled=1 if cc == "credit-rts" else None))
    return out


def bench_allreduce(quick: bool) -> dict[str, Any]:
    out = {}
    for spray in (["ecmp", "spray"] if quick else SPRAYS):
        # 4 ranks ordered so that every ring hop crosses the spine layer: in every step the
        # 2 flows leaving a leaf share its 2 uplinks, as in a rail-less all-reduce.
        t = topo("leaf-spine", spray=spray, cc="dcqcn")
        wl = ring_allreduce(["h1", "h3", "h2", "h4"], 1024 * 1024)
        out[spray] = figures(run(t, wl, f"allreduce-{spray}"))
    return out


def bench_failover(quick: bool) -> dict[str, Any]:
    t = topo("dual-homed", cc="dcqcn")
    wl = permutation(hosts_of(t), 128 * 1024, 4)
    return {"l1-h1@0.5": figures(run(t, wl, "failover", events=parse_fail("l1-h1@0.5")))}


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or (isinstance(b, float) and math.isnan(b)):
        return None
    return a / b


def verdicts(res: dict[str, Any]) -> dict[str, Any]:
    v: dict[str, Any] = {}
    if "utilization" in res:
        u = res["utilization"]
        best = max((u[m]["goodput_fraction"] for m in SPRAYS[1:] if m in u and u[m]["valid"]),
                   default=0.0)
        v["utilization >= 95% with spraying"] = {
            "met": best >= 0.95, "best_spray": best, "ecmp": u.get("ecmp", {}).get(
                "goodput_fraction"), "ratio_vs_ecmp": ratio(best, u.get("ecmp", {}).get(
                    "goodput_fraction"))}
    if "loss" in res:
        per_cc: dict[str, dict[str, int]] = {}
        for key, f in res["loss"].items():
            case, cc = key.split("/")
            per_cc.setdefault(cc, {})[case] = f["cells_dropped"] if f["valid"] else -1
        lossless = sorted(cc for cc, d in per_cc.items() if cc != "none"
                          and all(n == 0 for n in d.values()))
        v["zero loss under incast with rate control"] = {
            "met": bool(lossless), "lossless_with": ",".join(lossless) or "none",
            **{f"drops_{cc}": sum(max(0, n) for n in d.values()) for cc, d in per_cc.items()}}
    if "allreduce" in res:
        a = res["allreduce"]
        if "ecmp" in a and "spray" in a:
            r = ratio(a["spray"]["step_time_p50_s"], a["ecmp"]["step_time_p50_s"])
            v["40% lower communication latency (all-reduce step, spray vs ecmp)"] = {
                "met": r is not None and r <= 0.6, "spray_over_ecmp": r}
    if "ft-utilization" in res:
        u = res["ft-utilization"]
        core = [min(u[m]["balance"].get(t, [0.0])[0] or 0.0
                    for t in ("spine-core up", "spine-core down"))
                for m in SPRAYS[1:] if m in u and u[m]["valid"]]
        best = max((u[m]["goodput_fraction"] for m in SPRAYS[1:] if m in u and u[m]["valid"]),
                   default=0.0)
        v["fat-tree: spraying uses every core link (min/mean >= 0.6)"] = {
            "met": bool(core) and min(core) >= 0.6, "worst_core_min_over_mean": min(core or [0.0]),
            "ecmp_core_min_over_mean": min(u.get("ecmp", {}).get("balance", {}).get(t, [0.0])[0]
                                           or 0.0 for t in ("spine-core up", "spine-core down")),
            "best_goodput": best, "ratio_vs_ecmp": ratio(best, u.get("ecmp", {}).get(
                "goodput_fraction"))}
    if "ft-allreduce" in res:
        a = res["ft-allreduce"]
        if "ecmp" in a and "spray" in a and a["ecmp"]["valid"] and a["spray"]["valid"]:
            r = ratio(a["spray"]["step_time_p50_s"], a["ecmp"]["step_time_p50_s"])
            v["fat-tree: 40% lower all-reduce step (spray vs ecmp)"] = {
                "met": r is not None and r <= 0.6, "spray_over_ecmp": r}
    if "failover" in res:
        f = next(iter(res["failover"].values()))
        v["no message lost on link failure"] = {"met": f["messages_lost"] == 0 and f["valid"],
                                                "lost": f["messages_lost"]}
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller scenarios")
    ap.add_argument("--only", default="utilization,loss,allreduce,failover,"
                                      "ft-utilization,ft-incast,ft-allreduce")
    args = ap.parse_args(argv)
    benches = {"utilization": bench_utilization, "loss": bench_loss,
               "allreduce": bench_allreduce, "failover": bench_failover,
               "ft-utilization": bench_ft_utilization, "ft-incast": bench_ft_incast,
               "ft-allreduce": bench_ft_allreduce}
    results: dict[str, Any] = {"machine": machine()}
    previous = RESULTS / "fabric.json"
    if args.only != ap.get_default("only") and previous.exists():
        # a partial run keeps the other scenarios' last results (and says when they were taken)
        # (the header figures, machine and duration, stay those of the last full run)
        results = json.loads(previous.read_text())
    start = time.time()
    for name in args.only.split(","):
        if name not in benches:
            print(f"fabric_bench: unknown scenario '{name}' (known: {', '.join(benches)})",
                  file=sys.stderr)
            return 2
        results[name] = benches[name](args.quick)
        results.setdefault("measured", {})[name] = time.strftime("%Y-%m-%d %H:%M")
    results["verdicts"] = verdicts(results)
    if args.only == ap.get_default("only"):
        results["duration_s"] = time.time() - start
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fabric.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(json.dumps(results["verdicts"], indent=1, default=str))
    return 0


def machine() -> dict[str, Any]:
    import os
    import platform

    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "date": time.strftime("%Y-%m-%d")}


if __name__ == "__main__":
    sys.exit(main())
