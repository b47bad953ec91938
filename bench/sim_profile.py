"""Where a `cellfabric sim` run's time goes, from a cProfile dump, split the way issue #23
asks: the switches' data plane, the hosts, the engine, the simulator's bookkeeping (wires,
SimSwitch, sampling, step start and end) and set-up + report (imports, compile, tables,
report, plots).

    python -m cProfile -o run.prof "$(command -v cellfabric)" sim ARGS...
    python bench/sim_profile.py run.prof [--top 25]

Each share is inclusive time of the entry points that own it, minus what they hand to
another share (a switch's transmit is bookkeeping, a host's send onto its wire too), so the
five add up to the whole run. cProfile slows small Python calls more than long ones: the
shares are for finding where the time goes, not for speed figures (bench/sim_bench.py).
"""

from __future__ import annotations

import argparse
import pstats
import sys
from typing import Any

# (file suffix, function name) of the entry points, as cProfile names them
ENGINE_RUN = ("cellfabric/sim/engine.py", "run")
# the traffic manager's next deadline: SimSwitch asks for it after an arrival (through
# dp.poll() before; nested calls are counted once)
# the switch hop in C (cellfabric/sim/hop.py) replaces receive and poll where it runs
HOP = [("cellfabric/sim/hop.py", "_hop_receive"), ("cellfabric/sim/hop.py", "_hop_poll")]
# the C fabric (cellfabric/sim/cfabric.py): a run's own time is C's (the hops, the switch
# wires and their heap, and the hosts too when they run in C: cellfabric.sim.chosts; profile
# with SimFabric.native_hosts off to see the hosts' share); what it hands over to Python is
# counted where it lands
C_FABRIC_RUN = ("cellfabric/sim/cfabric.py", "run")
DATA_PLANE = [("p4sim/switch/dataplane.py", "receive"), ("p4sim/switch/dataplane.py", "poll"),
              ("p4sim/switch/tm.py", "next_deadline"), *HOP]
SWITCH_TX = [("cellfabric/sim/net.py", "_transmit")]  # called from inside the data plane
# SimSwitch's next queue-service event, which the hop's entry points schedule themselves
SWITCH_SCHEDULE = ("cellfabric/sim/net.py", "_schedule")
HOSTS = [("cellfabric/sim/hostsim.py", "receive"), ("cellfabric/sim/hostsim.py", "_wake"),
         ("cellfabric/sim/hostsim.py", "start")]
ENGINE_OWN = [("cellfabric/sim/engine.py", "run"), ("cellfabric/sim/engine.py", "at"),
              ("~", "<built-in method _heapq.heappop>"),
              ("cellfabric/sim/engine.py", "_run_merged")]  # the loop with the C fabric on
SETUP_PARTS = {"bring-up (compile, tables)": ("cellfabric/sim/run.py", "bring_up"),
               "report and plots": ("cellfabric/core/report.py", "write_report"),
               "plots alone": ("cellfabric/core/plots.py", "write_plots"),
               "metrics (collect)": ("cellfabric/sim/run.py", "collect")}


def _matching(stats: dict, where: tuple[str, str]) -> list[tuple[Any, ...]]:
    path, name = where
    return [v for (f, _, fn), v in stats.items() if f.endswith(path) and fn == name]


def inclusive(stats: dict, wheres: list[tuple[str, str]]) -> float:
    """Inclusive time of the matching functions, each counted only where no other matching
    one called it (Program.receive runs inside SimHost.receive: both are hostsim's
    ``receive``)."""
    keys = {k for k in stats for w in wheres if k[0].endswith(w[0]) and k[2] == w[1]}
    total = 0.0
    for k in keys:
        callers = stats[k][4]
        inner = sum(c[3] for ck, c in callers.items() if ck in keys)
        total += stats[k][3] - inner
    return total


def called_from(stats: dict, callee: tuple[str, str], callers: list[tuple[str, str]]) -> float:
    """Inclusive time of ``callee`` in its calls from any of ``callers``."""
    total = 0.0
    for v in _matching(stats, callee):
        for (f, _, fn), c in v[4].items():
            if any(f.endswith(path) and fn == name for path, name in callers):
                total += c[3]
    return total


def own(stats: dict, wheres: list[tuple[str, str]]) -> float:
    return sum(v[2] for w in wheres for v in _matching(stats, w))


def host_tx_time(stats: dict) -> float:
    """HostWire.send's inclusive time: the one whose caller is SimNic.send (the two nest,
    and only the inner one is the wire)."""
    for (f, _, fn), v in stats.items():
        if f.endswith("cellfabric/sim/hostsim.py") and fn == "send" and any(
                c[2] == "send" and c[0] == f for c in v[4]):
            return v[3]
    return 0.0


def shares(stats: dict) -> dict[str, float]:
    total = max(v[3] for v in stats.values())  # the outermost frame's inclusive time
    engine = inclusive(stats, [ENGINE_RUN])
    dp = (inclusive(stats, DATA_PLANE) - inclusive(stats, SWITCH_TX)
          - called_from(stats, SWITCH_SCHEDULE, HOP) + own(stats, [C_FABRIC_RUN]))
    hosts = inclusive(stats, HOSTS) - host_tx_time(stats)
    engine_own = (own(stats, [ENGINE_OWN[0], ENGINE_OWN[2], ENGINE_OWN[3]])
                  + inclusive(stats, [ENGINE_OWN[1]]))
    return {"data plane": dp, "hosts": hosts, "engine (event loop, heap)": engine_own,
            "bookkeeping (wires, SimSwitch, sampler, steps)": engine - dp - hosts - engine_own,
            "set-up + report": total - engine, "total": total}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25, help="rows of the own-time table")
    args = ap.parse_args()
    st = pstats.Stats(args.profile)
    raw = st.stats  # type: ignore[attr-defined]
    parts = shares(raw)
    total = parts.pop("total")
    print(f"total {total:.1f} s (under cProfile)")
    for name, t in parts.items():
        print(f"  {name:<48} {t:8.1f} s  {100 * t / total:5.1f}%")
    for name, where in SETUP_PARTS.items():
        print(f"    {name:<46} {inclusive(raw, [where]):8.1f} s")
    print(f"\ntop {args.top} by own time:")
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])[:args.top]
    for (f, line, fn), v in rows:
        short = f.split("/work/", 1)[-1].split("site-packages/", 1)[-1]
        print(f"  {v[2]:7.2f} s own {v[3]:7.2f} s incl {v[1]:>9} calls  {short}:{line}({fn})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
