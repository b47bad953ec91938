"""`cellfabric topo`: write a generated topology as YAML (to stdout or a file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topologies.generators import (
    DEFAULT_DEPTH,
    DEFAULT_RATE_PPS,
    clos,
    fat_tree,
    leaf_spine,
    to_yaml,
)
from topologies.model import SPRAY_MODES, TopologyError, parse_topology


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric topo", description=(
        "Generate a topology file. The same fabrics can be named directly wherever a topology "
        "is asked for, e.g. `cellfabric run fat-tree:k=4` or "
        "`cellfabric run clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2`."))
    sub = ap.add_subparsers(dest="kind", required=True)
    ft = sub.add_parser("fat-tree", help="k-ary fat-tree (k=4: 20 switches, 16 hosts)")
    ft.add_argument("--k", type=int, required=True)
    cl = sub.add_parser("clos", help="three-tier Clos: pods of leaves and aggs, core planes")
    for key in ("pods", "leaves", "aggs", "cores", "hosts"):
        cl.add_argument(f"--{key}", type=int, required=True)
    ls = sub.add_parser("leaf-spine", help="two tiers: every leaf to every spine")
    for key in ("leaves", "spines", "hosts"):
        ls.add_argument(f"--{key}", type=int, required=True)
    for p in (ft, cl, ls):
        p.add_argument("--rate", type=int, default=DEFAULT_RATE_PPS,
                       help=f"queue rate of every link, packets/s (default {DEFAULT_RATE_PPS})")
        p.add_argument("--depth", type=int, default=DEFAULT_DEPTH,
                       help=f"queue depth, packets (default {DEFAULT_DEPTH})")
        p.add_argument("--spray", choices=SPRAY_MODES, default="spray")
        p.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)
    common = {"rate_pps": args.rate, "depth": args.depth, "spray": args.spray}
    try:
        if args.kind == "fat-tree":
            data = fat_tree(args.k, **common)
        elif args.kind == "clos":
            data = clos(args.pods, args.leaves, args.aggs, args.cores, args.hosts, **common)
        else:
            data = leaf_spine(args.leaves, args.spines, args.hosts, **common)
        parse_topology(data, f"cellfabric topo {args.kind}")  # validate before writing
        text = to_yaml(data)
        if args.output:
            Path(args.output).write_text(text)
        else:
            sys.stdout.write(text)
    except TopologyError as exc:
        print(f"cellfabric topo: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cellfabric topo: error: {args.output}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0
