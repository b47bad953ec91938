"""What sampled tracing costs: the same `cellfabric sim` run untraced and with
``--trace-sample 100`` (1 packet in 100 recorded at every switch and host NIC), measured side
by side: both runs are brought up in one process and their engines advanced in turns of a few
thousand events each, so whatever else this shared machine does at a moment falls on both
alike (run one after the other, identical runs here took 2-5 s). Each turn is timed; a run's
time is the sum of its turns. The figure is the ratio of those times (goal: at most 1.10).
A third run, on its own after the pair, traces every packet (``--trace-sample 1``), to show where the cost lies: in the
records written, not in the hooks an unsampled packet passes.

    run      k=4 fat-tree (20 switches, 16 hosts), 100 Gb/s, permutation of SIZE per host
    time     the workload's (compile and bring-up are the same in every run: left out)

Usage: python bench/trace_bench.py [--size BYTES] [--turn EVENTS] [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cellfabric.core.workloads import permutation  # noqa: E402
from cellfabric.sim.hostsetup import SimSettings  # noqa: E402
from cellfabric.sim.run import SimConfig, SimRun  # noqa: E402
from topologies.generators import generate  # noqa: E402

SETTINGS = SimSettings(link_rate_bps=100_000_000_000, hop_delay_ns=1000,
                       buffer_bytes=512 * 1024, seed=1, scale_ecn=True)


PAIR_SAMPLE = 100  # --pair-sample: what the traced run of the pair samples (a check of the bench)


def make_run(size: int, sample: int, out: Path) -> SimRun:
    topo = generate("fat-tree:k=4")
    topo.fabric = replace(topo.fabric, spray="spray", cc="dcqcn")
    hosts = sorted(topo.hosts, key=lambda h: int("".join(c for c in h if c.isdigit())))
    cfg = SimConfig(topo=topo, workload=permutation(hosts, size, 1, seed=1), cc="dcqcn",
                    run_dir=out, settings=SETTINGS, progress=False, trace_sample=sample)
    run = SimRun(cfg)
    run.bring_up()
    return run


class Turns:
    """One run advanced a turn at a time. Each switch's random() has its own generator; any
    draw from the process's ``random`` module is kept with its run between turns too."""

    def __init__(self, run: SimRun) -> None:
        self.run = run
        self.wall = self.cpu = 0.0
        run.start_workload()
        self.rng = random.getstate()

    def done(self) -> bool:
        return self.run.finished or not self.run.engine.pending()

    def turn(self, events: int) -> None:
        random.setstate(self.rng)
        w, c = time.perf_counter(), time.process_time()
        self.run.engine.run(max_events=events)
        self.wall += time.perf_counter() - w
        self.cpu += time.process_time() - c
        self.rng = random.getstate()


def measure(size: int, turn: int, out: Path) -> dict[str, Turns]:
    """The pair side by side, then the run tracing every packet on its own (interleaved, its
    allocations would weigh on the pair's caches and garbage collections)."""
    runs = {name: Turns(make_run(size, sample, out / name))
            for name, sample in (("untraced", 0), ("sample 1/100", PAIR_SAMPLE))}
    order = list(runs.values())
    while not all(t.done() for t in order):
        for t in order:
            if not t.done():
                t.turn(turn)
        order.reverse()  # neither run always goes first
    every = runs["every packet"] = Turns(make_run(size, 1, out / "every"))
    while not every.done():
        every.turn(turn)
    for t in runs.values():
        t.run.finish_workload()
        t.run.tear_down()
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256 * 1024, help="bytes per host")
    ap.add_argument("--turn", type=int, default=500, help="events per turn")
    ap.add_argument("--rounds", type=int, default=5, help="whole measurements (median kept)")
    ap.add_argument("--quick", action="store_true", help="64 KiB, one round")
    ap.add_argument("--pair-sample", type=int, default=100, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global PAIR_SAMPLE
    PAIR_SAMPLE = args.pair_sample
    if args.quick:
        args.size, args.rounds = 64 * 1024, 1
    started = time.monotonic()
    ratios: dict[str, list[float]] = {}
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp:
            runs = measure(args.size, args.turn, Path(tmp))
            records = {name: sum(sum(1 for _ in p.open()) for p in
                                 (t.run.cfg.run_dir / "traces").glob("*.jsonl"))
                       if t.run.tracing else 0 for name, t in runs.items()}
        base = runs["untraced"]
        for name, t in runs.items():
            ratios.setdefault(f"{name} wall", []).append(t.wall / base.wall)
            ratios.setdefault(f"{name} cpu", []).append(t.cpu / base.cpu)
            print(f"  round {r + 1} {name:<13} wall {t.wall:6.2f} s, CPU {t.cpu:6.2f} s, "
                  f"{t.run.engine.events:,} events, {records[name]:,} records "
                  f"(ratio {t.wall / base.wall:5.3f})", flush=True)
    print(f"trace bench: k=4 fat-tree permutation of {args.size // 1024} KiB per host, runs "
          f"advanced in turns of {args.turn} events, median of {args.rounds} round(s); "
          f"{platform.python_implementation()} {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s in all")
    for name in ("sample 1/100", "every packet"):
        print(f"ratio {name:<12} / untraced (wall): "
              f"{statistics.median(ratios[name + ' wall']):5.3f}   (CPU: "
              f"{statistics.median(ratios[name + ' cpu']):5.3f})")
    ratio = statistics.median(ratios["sample 1/100 wall"])
    print(f"goal: sampled tracing (1/100) costs at most 10% of the run's time: "
          f"{'met' if ratio <= 1.10 else 'NOT met'} ({100 * (ratio - 1):+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
