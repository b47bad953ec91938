"""Central routing against BGP on every switch, side by side in one run: the same topology,
workload and failure, once with `--routing central` (the controller re-plans) and once with
`--routing bgp` (BFD detects, BGP withdraws, the route agents reprogram).

Printed per case: messages completed, message slowdown p50, reroute time (central: injection
to the controller's last write; bgp: injection to the agents' last write), and for bgp BFD's
detection and BGP's convergence time and how long BGP took to route every leaf at start.
Ratios (bgp / central) are of figures measured in this one run. Writes
bench/results/routing.json. Usage:
    python bench/routing_bench.py [--topology leaf-spine] [--fail l1-s1@0.3] [--size BYTES]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

from cellfabric.core.workloads import permutation  # noqa: E402
from cellfabric.emulation.runner import RunConfig, execute  # noqa: E402
from cellfabric.run_cli import parse_fail  # noqa: E402
from topologies.catalog import resolve_topology  # noqa: E402


def _case(topology: str, routing: str, fail: str, size: int, out: Path) -> dict[str, Any]:
    topo = resolve_topology(topology)
    hosts = sorted(topo.hosts, key=lambda h: int(h[1:]))
    cfg = RunConfig(topo=topo, target="embedded", workload=permutation(hosts, size, 2),
                    cc=topo.fabric.cc, run_dir=out / routing, routing=routing,
                    events=parse_fail(fail, topo), progress=False)
    m, _ = execute(cfg)
    (failure,) = m.run["failures"]
    return {"routing": routing, "completed": m.summary["messages_completed"],
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
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="routing-bench-") as tmp:
        cases = [_case(args.topology, r, args.fail, args.size, Path(tmp))
                 for r in ("central", "bgp")]
    for c in cases:
        print(f"{c['routing']:8s} messages {c['completed']}/{c['total']}  slowdown p50 "
              f"{_fmt(c['slowdown_p50'], 'x')}  reroute {_fmt(c['reroute_s'])}  BFD "
              f"{_fmt(c['detect_s'])}  BGP converged {_fmt(c['converge_s'])}  start "
              f"{_fmt(c['bgp_converged_s'], ' s')}{'  INVALID' if c['invalid'] else ''}")
    central, bgp = cases
    if central["reroute_s"] and bgp["reroute_s"]:
        print(f"reroute time bgp / central: {bgp['reroute_s'] / central['reroute_s']:.1f}x")
    if central["slowdown_p50"] and bgp["slowdown_p50"]:
        print(f"slowdown p50 bgp / central: {bgp['slowdown_p50'] / central['slowdown_p50']:.2f}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "routing.json").write_text(json.dumps(
        {"topology": args.topology, "fail": args.fail, "size": args.size, "cases": cases},
        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
