"""`cellfabric topo`: write a generated topology as YAML (to stdout or a file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topologies.generators import DEFAULT_DEPTH, DEFAULT_RATE_PPS, GENERATORS, to_yaml
from topologies.model import SPRAY_MODES, TopologyError, parse_topology


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric topo", description=(
        "Generate a topology file. The same fabrics can be named directly wherever a topology "
        "is asked for, e.g. `cellfabric run fat-tree:k=4` or "
        "`cellfabric run clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2`."))
    sub = ap.add_subparsers(dest="kind", required=True)
    for name, gen in GENERATORS.items():
        p = sub.add_parser(name, help=gen.help)
        for key in gen.required:
            p.add_argument(f"--{key}", type=int, required=True)
        p.add_argument("--rate", type=int, default=DEFAULT_RATE_PPS,
                       help=f"queue rate of every link, packets/s (default {DEFAULT_RATE_PPS})")
        p.add_argument("--depth", type=int, default=DEFAULT_DEPTH,
                       help=f"queue depth, packets (default {DEFAULT_DEPTH})")
        for opt in gen.options:
            p.add_argument(f"--{opt.key}", type=int if opt.integer else str, help=opt.help)
        p.add_argument("--spray", choices=SPRAY_MODES, default="spray")
        p.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)
    gen = GENERATORS[args.kind]
    try:
        given = {opt.kwarg: getattr(args, opt.kwarg) for opt in gen.options
                 if getattr(args, opt.kwarg) is not None}
        data = gen.func(**{key: getattr(args, key) for key in gen.required}, **given,
                        rate_pps=args.rate, depth=args.depth, spray=args.spray)
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
