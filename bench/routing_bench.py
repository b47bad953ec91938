"""Central routing against BGP on every switch, side by side in one run: the same topology,
workload and failure, once with `--routing central` (the controller re-plans) and once with
`--routing bgp` (BFD detects, BGP withdraws, the route agents reprogram).

Printed per case: messages completed, message slowdown p50, reroute time (central: injection
to the controller's last write; bgp: injection to the agents' last write), and for bgp BFD's
detection and BGP's convergence time and how long BGP took to route every leaf at start.
Ratios (bgp / central) are of figures measured in this one run. Writes
bench/results/routing.json (the default case) or routing-TOPOLOGY-CC.json (any other topology
or --cc), with the load average before each case: on a shared machine BFD's timers compete
for the CPU with the emulated switches. Usage:
    python bench/routing_bench.py [--topology leaf-spine] [--fail l1-s1@0.3] [--size BYTES]
        [--cc credit|hpcc|...] [--bfd-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.core.workloads import permutation  # noqa: E402
from cellfabric.emulation.runner import RunConfig, RunError, execute  # noqa: E402
from cellfabric.run_cli import parse_fail  # noqa: E402
from topologies.catalog import resolve_topology  # noqa: E402


def _case(topology: str, routing: str, fail: str, size: int, out: Path, cc: str | None,
          bfd_ms: int) -> dict[str, Any]:
    topo = resolve_topology(topology)
    hosts = sorted(topo.hosts, key=lambda h: int(h[1:]))
    load = os.getloadavg()[0]
    cfg = RunConfig(topo=topo, target="embedded", workload=permutation(hosts, size, 2),
                    cc=cc or topo.fabric.cc, run_dir=out / routing, routing=routing,
                    events=parse_fail(fail, topo), progress=False, bfd_ms=bfd_ms)
    m, _ = execute(cfg)
    (failure,) = m.run["failures"]
    return {"routing": routing, "cc": cfg.cc, "load_avg_1m": round(load, 1),
            "load_avg_1m_after": round(os.getloadavg()[0], 1),
            "bfd_ms": bfd_ms if routing == "bgp" else None,
            "lost": m.summary["messages_total"] - m.summary["messages_completed"],
            "completed": m.summary["messages_completed"],
            "total": m.summary["messages_total"], "slowdown_p50": m.summary["slowdown_p50"],
            "reroute_s": failure.get("reroute_s"), "detect_s": failure.get("detect_s"),
            "converge_s": failure.get("converge_s"),
            "bgp_converged_s": (m.run.get("bgp") or {}).get("converged_s"),
            "invalid": m.run["invalid_reasons"]}


def _fmt(v: float | None, unit: str = "ms") -> str:
    if v is None:
        return "-"
    return f"{1000 * v:.0f} ms" if unit == "ms" else f"{v:.2f}{unit}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="leaf-spine")
    ap.add_argument("--fail", default="l1-s1@0.3")
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--cc", default=None, help="default: the topology's")
    ap.add_argument("--bfd-ms", type=int, default=300, help="BFD interval of the bgp case")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="routing-bench-") as tmp:
        try:
            cases = [_case(args.topology, r, args.fail, args.size, Path(tmp), args.cc,
                           args.bfd_ms) for r in ("central", "bgp")]
        except RunError as err:  # e.g. BGP never converged: one line, no results written
            print(f"routing bench: {err}", file=sys.stderr)
            return 1
    for c in cases:
        print(f"{c['routing']:8s} (load {c['load_avg_1m']}-{c['load_avg_1m_after']}) messages {c['completed']}/"
              f"{c['total']}, {c['lost']} lost  slowdown p50 "
              f"{_fmt(c['slowdown_p50'], 'x')}  reroute {_fmt(c['reroute_s'])}  BFD "
              f"{_fmt(c['detect_s'])}  BGP converged {_fmt(c['converge_s'])}  start "
              f"{_fmt(c['bgp_converged_s'], ' s')}{'  INVALID' if c['invalid'] else ''}")
    central, bgp = cases
    if central["reroute_s"] and bgp["reroute_s"]:
        print(f"reroute time bgp / central: {bgp['reroute_s'] / central['reroute_s']:.1f}x")
    if central["slowdown_p50"] and bgp["slowdown_p50"]:
        print(f"slowdown p50 bgp / central: {bgp['slowdown_p50'] / central['slowdown_p50']:.2f}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = ("routing.json" if args.topology == "leaf-spine" and args.cc is None
            else f"routing-{re.sub(r'[^A-Za-z0-9.]+', '-', args.topology)}-{cases[0]['cc']}.json")
    (RESULTS / name).write_text(json.dumps(
        {"topology": args.topology, "fail": args.fail, "size": args.size,
         "bfd_ms": args.bfd_ms, "cases": cases}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
