"""`cellfabric sim`: `cellfabric run`'s options and defaults, on the discrete-event engine."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from cellfabric.core.workloads import WorkloadError
from controlplane.errors import ControlPlaneError
from netlab.targets import ToolchainError
from topologies.model import TopologyError

DEFAULT_LINK_RATE = "100G"
DEFAULT_HOP_DELAY = "1us"
# Per egress port, like a shallow-buffer data-center switch (16 MB shared by 32 x 100G ports).
DEFAULT_BUFFER = "512KiB"

_RATE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[kKmMgGtT]?)(?:bps|b/s)?$")
_TIME = re.compile(r"^(?P<n>\d+(?:\.\d+)?(?:e-?\d+)?)\s*(?P<u>s|ms|us|ns)?$")
_BYTES = re.compile(r"^(?P<n>\d+)\s*(?P<u>|B|[kKmMgG]i?B?)$")
_RATE_UNIT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME_UNIT = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def parse_link_rate(text: str) -> int:
    """'100G', '400G', '25Gbps' -> bits per second; 'topology' -> 0 (packet mode)."""
    if text.strip() == "topology":
        return 0
    m = _RATE.match(text.strip())
    if not m or float(m["n"]) <= 0:
        raise ValueError(f"--link-rate '{text}': expected bits per second like 100G or 25G, "
                         "or 'topology' for the topology's own packet rates")
    return int(float(m["n"]) * _RATE_UNIT[m["u"].lower()])


def parse_duration(text: str, option: str) -> float:
    """'1us', '500ns', '2ms', '0.5' (seconds) -> seconds."""
    m = _TIME.match(text.strip())
    if not m:
        raise ValueError(f"{option} '{text}': expected a time like 1us, 500ns, 2ms or 0.5s")
    return float(m["n"]) * _TIME_UNIT[m["u"]]


_BYTE_UNIT = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3,
              "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def parse_bytes(text: str) -> int:
    """'512KiB', '1MiB', '65536', '256k' -> bytes (k = 1000, Ki = 1024)."""
    m = _BYTES.match(text.strip())
    if not m or int(m["n"]) <= 0:
        raise ValueError(f"--buffer '{text}': expected a positive size like 512KiB, 1MiB "
                         "or 65536")
    return int(m["n"]) * _BYTE_UNIT[m["u"].removesuffix("B").lower()]


def _parser() -> argparse.ArgumentParser:
    from cellfabric.run_cli import add_workload_options

    ap = argparse.ArgumentParser(prog="cellfabric sim", description=(
        "Run a workload through the fabric in simulated time: the same fabric.p4, controller "
        "plan and host transports on a discrete-event engine, deterministic per seed."))
    add_workload_options(ap)
    ap.add_argument("--link-rate", default=DEFAULT_LINK_RATE,
                    help=f"bits per second of every link (default {DEFAULT_LINK_RATE}); "
                         "'topology': the topology's packet rates and depths, as `run` uses")
    ap.add_argument("--hop-delay", default=DEFAULT_HOP_DELAY,
                    help=f"propagation delay per link (default {DEFAULT_HOP_DELAY})")
    ap.add_argument("--buffer", default=DEFAULT_BUFFER,
                    help=f"buffer bytes per egress port (default {DEFAULT_BUFFER})")
    ap.add_argument("--ecn", choices=("link-rate", "topology"), default="link-rate",
                    help="ECN marking with --link-rate in bits/s: 'link-rate' = DCQCN's profile "
                         "(5 KB / 200 KB / 1%% at 40 Gb/s) scaled to the link rate (default); "
                         "'topology' = the topology file's thresholds in cells")
    ap.add_argument("--until", default=None, help="virtual time limit, e.g. 10ms (default none)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--trace-sample", type=int, default=0, metavar="N",
                    help="trace 1 packet in N at every switch and host NIC to "
                         "RESULTS/traces/*.jsonl (see `cellfabric trace`; default 0: off)")
    return ap


def sim_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        from cellfabric.run_cli import parse_credit_unscheduled, prepare_scheduled_workload
        from cellfabric.sim.hostsetup import SimSettings
        from cellfabric.sim.run import SimConfig, execute_sim, format_sim_summary, run_name
        from netlab.targets import resolve_target

        settings = SimSettings(
            link_rate_bps=parse_link_rate(args.link_rate),
            hop_delay_ns=round(parse_duration(args.hop_delay, "--hop-delay") * 1e9),
            buffer_bytes=parse_bytes(args.buffer), seed=args.seed,
            until_s=parse_duration(args.until, "--until") if args.until else None,
            scale_ecn=args.ecn == "link-rate")
        topo, workload, events, scheduler = prepare_scheduled_workload(args)
        cfg = SimConfig(topo=topo, workload=workload, cc=topo.fabric.cc, run_dir=Path("."),
                        settings=settings, target=resolve_target(args.target), events=events,
                        progress=not args.quiet,
                        credit_unscheduled=parse_credit_unscheduled(args.credit_unscheduled),
                        trace_sample=max(0, args.trace_sample), scheduler=scheduler)
        cfg.run_dir = Path(args.results) / f"{time.strftime('%Y%m%d-%H%M%S')}-{run_name(cfg)}"
        metrics, path = execute_sim(cfg)
    except (TopologyError, WorkloadError, ToolchainError, ValueError,
            ControlPlaneError) as exc:
        print(f"cellfabric sim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cellfabric sim: interrupted", file=sys.stderr)
        return 130
    print()
    print(format_sim_summary(metrics))
    print(f"  results: {path.parent}")
    return 0
