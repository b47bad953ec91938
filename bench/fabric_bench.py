"""The fabric's headline claims, measured on the emulated fabric, each beside its baseline from
the same `make bench` run.

    utilization  permutation on leaf-spine: goodput / bottleneck capacity, per spray mode
                 (ecmp is the baseline); goal: spraying >= 95%
    loss         incast 4:1, 8:1, 15:1 per rate control (none is the baseline): cells dropped
                 at switches (goal: 0 with rate control), peak queue, time to drain
    latency      message completion time p50/p99 as slowdown over the ideal (size / bottleneck
                 share), and ring all-reduce step time (4 ranks on leaf-spine), per spray mode
    reordering   max and p99 reorder depth per spray mode
    failover     dual-homed hosts, a host link down mid-run: messages lost (goal: 0) and the
                 failover time hosts measured

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

from controlplane.topology import Topology, load_topology  # noqa: E402
from topologies.report import RunMetrics  # noqa: E402
from topologies.run_cli import parse_fail  # noqa: E402
from topologies.runner import RunConfig, execute  # noqa: E402
from topologies.workloads import incast, permutation, ring_allreduce  # noqa: E402

SPRAYS = ["ecmp", "spray", "round-robin", "adaptive"]
CCS = ["none", "dcqcn", "hpcc", "credit"]


def topo(name: str, **fabric: Any) -> Topology:
    t = load_topology(ROOT / "topologies" / f"{name}.yaml")
    t.fabric = replace(t.fabric, **fabric)
    return t


def hosts_of(t: Topology) -> list[str]:
    return sorted(t.hosts, key=lambda h: int(h[1:]))


def run(t: Topology, workload, tag: str, events=()) -> RunMetrics:
    cfg = RunConfig(topo=t, target="embedded", workload=workload, cc=t.fabric.cc,
                    run_dir=RESULTS / "runs" / f"{time.strftime('%H%M%S')}-{tag}",
                    events=list(events), progress=False, step_timeout_s=180)
    print(f"-- {tag}", flush=True)
    metrics, _ = execute(cfg)
    return metrics


def goodput_fraction(m: RunMetrics) -> float:
    """Sum of ideal flow times over sum of actual: 1.0 = every flow at its bottleneck share."""
    ideal = actual = 0.0
    by_flow: dict[str, list[dict[str, Any]]] = {}
    for msg in m.messages:
        by_flow.setdefault(f"{msg['src']}->{msg['dst']}", []).append(msg)
    for key, msgs in by_flow.items():
        if any(x["fct_s"] is None for x in msgs):
            return 0.0
        flow_time = m.flows.get(key, {}).get("flow_time_s") or max(x["fct_s"] for x in msgs)
        ideal += sum(x["ideal_s"] for x in msgs)
        actual += flow_time
    return ideal / actual if actual else 0.0


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
    }


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
        # Each sender's message is sized so that together they are 1.5x the receiver port's
        # 256-cell buffer: without rate control some must be dropped.
        size = max(16, 384 // n) * 1024
        for cc in CCS:
            t = topo(name, cc=cc)
            hs = hosts_of(t)
            wl = incast(hs, n, size, 1, receiver=hs[-1])
            out[f"{n}:1/{cc}"] = figures(run(t, wl, f"incast{n}-{cc}"))
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
    if "failover" in res:
        f = next(iter(res["failover"].values()))
        v["no message lost on link failure"] = {"met": f["messages_lost"] == 0 and f["valid"],
                                                "lost": f["messages_lost"]}
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller scenarios")
    ap.add_argument("--only", default="utilization,loss,allreduce,failover")
    args = ap.parse_args(argv)
    benches = {"utilization": bench_utilization, "loss": bench_loss,
               "allreduce": bench_allreduce, "failover": bench_failover}
    results: dict[str, Any] = {"machine": machine()}
    start = time.time()
    for name in args.only.split(","):
        results[name] = benches[name](args.quick)
    results["verdicts"] = verdicts(results)
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
