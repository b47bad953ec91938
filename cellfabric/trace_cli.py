"""`cellfabric trace RESULTS --flow SRC-DST [--psn N] [--json]`: each sampled cell's journey
across the fabric, hop by hop, from the run's structured traces (cellfabric.core.journeys)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cellfabric.core.journeys import TraceError, describe_decision, journeys, load_traces


def _us(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.3f} us"


def format_journey(j: dict[str, Any], verbose: bool = False) -> str:
    ident, cell = j["id"], j.get("cell") or {}
    psn = cell.get("psn", f"{cell['psn_low16']} (mod 2^16)" if "psn_low16" in cell else "?")
    head = (f"cell {j['src']} -> {j['dst']} psn {psn} qpn {cell.get('qpn', '?')}"
            f" ({ident['src']}:{ident['sport']} -> {ident['dst']}:{ident['dport']}), "
            f"sent at {_us(j['t_send'])}")
    lines = [head] + ([f"  {j['src']:<6} NIC wait {_us(j['nic_wait_ns'])}"]
                      if "span_ns" not in j else [])
    for h in j["hops"]:
        changes = ", ".join(f"{k} {v[0]}->{v[1]}" if isinstance(v, list) else f"{k} {v:+d}"
                            for k, v in h["changes"].items())
        lines.append(
            f"  {h['switch']:<6} link {_us(h['link_in_ns'])}, in port {h['in_port']} at "
            f"{_us(h['t_in'])}, queue depth {h['depth']}, wait {_us(h['queue_wait_ns'])}, "
            f"out port {h['out_port']}" + (f" to {h['peer']}" if h.get("peer") else "")
            + (f" [{changes}]" if changes else ""))
        picks = [describe_decision(d) for d in h["decisions"]
                 if verbose or d["ev"] in ("choice", "error")]
        lines += [f"           {p}" for p in picks]
        if "drop" in h:
            d = h["drop"]
            code = f" ({d['code_name']})" if d.get("code_name") else ""
            lines.append(f"  DROPPED at {h['switch']} in {d['stage']}: {d['reason']}{code}")
    if "span_ns" in j:
        b = j["breakdown"]
        lines.append(f"  first switch in to last switch out {_us(j['span_ns'])} = links "
                     f"{_us(b['links_ns'])} + queues {_us(b['queue_waits_ns'])} + switch "
                     f"{_us(b['processing_ns'])} (no host records: the host links are not in it)")
    if "lost" in j:
        lines.append(f"  lost {j['lost']}")
    if "t_recv" in j:
        b = j["breakdown"]
        off = abs(b["sum_ns"] - j["one_way_ns"]) / j["one_way_ns"] if j["one_way_ns"] else 0.0
        lines.append(f"  {j['dst']:<6} link {_us(j['link_out_ns'])}, received at "
                     f"{_us(j['t_recv'])}")
        lines.append(f"  one-way {_us(j['one_way_ns'])} = NIC {_us(b['nic_wait_ns'])} + links "
                     f"{_us(b['links_ns'])} + queues {_us(b['queue_waits_ns'])} + switch "
                     f"{_us(b['processing_ns'])} ({100 * off:.2f}% off)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cellfabric trace", description=(
        "Follow sampled cells across the fabric: every switch's trace records joined into "
        "each cell's journey (run `cellfabric sim --trace-sample N` first)."))
    ap.add_argument("results", type=Path, help="a run's results folder")
    ap.add_argument("--flow", default=None, metavar="SRC-DST",
                    help="host names, e.g. h1-h6 (default: every flow)")
    ap.add_argument("--psn", type=int, default=None, help="only the cell of this PSN")
    ap.add_argument("--limit", type=int, default=20, help="at most this many journeys "
                    "(default 20; 0: all)")
    ap.add_argument("--verbose", action="store_true", help="every table and action per hop")
    ap.add_argument("--json", action="store_true", help="journeys as JSON, for scripts")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    src = dst = None
    if args.flow:
        src, sep, dst = args.flow.partition("-")
        if not sep or not src or not dst:
            print(f"cellfabric trace: error: --flow '{args.flow}': expected SRC-DST, e.g. h1-h6",
                  file=sys.stderr)
            return 2
    try:
        found = journeys(load_traces(args.results), src, dst, args.psn, args.limit or None)
    except (TraceError, OSError) as e:
        print(f"cellfabric trace: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    if not found:
        print("no sampled cell matches (a cell is traced only if the sample kept it)")
        return 1
    print("\n\n".join(format_journey(j, args.verbose) for j in found))
    return 0
