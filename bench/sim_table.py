"""The README's simulator table, from bench/results/sim.json (`bench/sim_bench.py`): the
text between ``<!-- sim-bench:start -->`` and ``<!-- sim-bench:end -->``. Nothing here is
typed by hand; every figure but wall time is virtual time."""

from __future__ import annotations

from typing import Any

SIM_START, SIM_END = "<!-- sim-bench:start -->", "<!-- sim-bench:end -->"


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, int | float) else "-"


def _us(v: Any) -> str:
    return f"{v * 1e6:.1f} us" if isinstance(v, int | float) else "-"


def _x(v: Any) -> str:
    return f"{v:.2f}x" if isinstance(v, int | float) else "-"


def _when(res: dict[str, Any], name: str) -> str:
    return res.get("measured", {}).get(name) or res.get("machine", {}).get("date", "?")


def _speed_row(s: dict[str, Any], when: str) -> str:
    """cellfabric sim beside htsim on one fat-tree permutation (bench/sim_speed.py)."""
    if "cellfabric" not in s:  # a result from before htsim ran beside it
        return (f"| speed: k={s['k']} fat-tree permutation of {s['size'] >> 10} KiB per host "
                f"({when}) | {s['messages']} messages, {_us(s['virtual_s'])} simulated, "
                f"{s['events']:,} events; **{s['wall_s']:.0f} s wall**, "
                f"{s['events_per_wall_s']:,.0f} events/s |")
    cf, ht, r = s["cellfabric"], s.get("htsim") or {}, s.get("ratios") or {}
    if ht.get("wall_s"):
        events = f"{ht['events']:,} events, " if ht.get("events") else ""
        rate = (f", {ht['events_per_wall_s']:,.0f} events/s"
                if ht.get("events_per_wall_s") else "")
        htsim = (f"htsim (EQDS, 256 paths, best of 3): {ht['flows_finished']} flows, "
                 f"{events}**{ht['wall_s']:.2f} s**{rate}; ratios: whole command "
                 f"**{_x(r.get('whole_command_over_htsim'))}**, engine "
                 f"{_x(r.get('engine_over_htsim'))} htsim's time (goal: 5x)")
    else:
        htsim = f"htsim: not run ({ht.get('error', 'no result')})"
    runs = cf.get("whole_command_runs_s") or [cf["whole_command_s"]]
    best = (f" (best of {len(runs)}: " + ", ".join(f"{w:.1f}" for w in runs) + " s)"
            if len(runs) > 1 else "")
    return (f"| speed: k={s['k']} fat-tree ({s['hosts']} hosts) permutation of "
            f"{s['size'] >> 10} KiB per host, beside htsim in the same run ({when}) | "
            f"cellfabric: {cf['messages']} messages, {_us(cf['virtual_s'])} simulated, "
            f"{cf['events']:,} events; whole command **{cf['whole_command_s']:.1f} s**{best}, "
            f"engine {cf['engine_s']:.1f} s ({cf['engine_events_per_s']:,.0f} events/s), "
            f"peak memory {cf['peak_rss_mib']:,.0f} MiB; {htsim} |")


def _rows(res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("speed", "speed_k16"):
        if key in res:
            out.append(_speed_row(res[key], _when(res, key)))
    if "utilization" in res:
        u = res["utilization"]
        out.append(f"| utilization: k=4 permutation to other edges, 512 KiB per host (2 MiB "
                   f"where named), no rate control "
                   f"({_when(res, 'utilization')}) | goodput / bottleneck capacity: "
                   + ", ".join(f"{mode} **{_pct(f['goodput_fraction'])}** "
                               f"({f['cells_dropped']} drops, peak queue {f['peak_queue']})"
                               for mode, f in u.items()) + " (goal: spray >= 95%) |")
    if "incast" in res:
        cases: dict[str, list[str]] = {}
        for key, f in res["incast"].items():
            n, cc = key.split("/")
            cases.setdefault(n, []).append(
                f"{cc} **{f['cells_dropped']}** / {f['peak_queue']}")
        for n, cells in cases.items():
            out.append(f"| incast {n}, 64 KiB per sender, spray ({_when(res, 'incast')}) | "
                       f"cells dropped / peak queue in cells (512 KiB holds 484 cells, fewer with "
                       f"HPCC's INT): "
                       + ", ".join(cells) + " (goal: zero with rate control) |")
    if "credit" in res:
        c = res["credit"]
        pairs = sorted({key.split("/")[0] for key in c})
        cells = [f"{p}: slowdown p50 {_x(c.get(p + '/credit', {}).get('slowdown_p50'))} "
                 f"default, {_x(c.get(p + '/credit-rts', {}).get('slowdown_p50'))} rts"
                 for p in pairs]
        out.append(f"| what credit-rts costs where nothing is congested, k=4 "
                   f"({_when(res, 'credit')}) | " + "; ".join(cells) + " |")
    if "allreduce" in res:
        a = res["allreduce"]
        cells = []
        for size, tail in (("4 MiB", ""), ("1 MiB", "-1MiB")):
            sp, ec = (a.get(m + tail, {}).get("step_time_p50_s") for m in ("spray", "ecmp"))
            if sp and ec:
                cells.append(f"{size}: spray {_us(sp)}, ecmp {_us(ec)}, "
                             f"**{100 * (1 - sp / ec):.0f}% lower** with spray")
        out.append(f"| ring all-reduce, k=4, 16 ranks across pods ({_when(res, 'allreduce')}) "
                   f"| step time p50: " + "; ".join(cells) + " (goal: 40% lower) |")
    return out


def sim_section(res: dict[str, Any]) -> list[str]:
    st = res.get("machine", {}).get("settings", {})
    head = (f"`bench/sim_bench.py` ({'quick' if res.get('machine', {}).get('quick') else 'full'}"
            f"; {st.get('link_rate_bps', 0) / 1e9:.0f} Gb/s, {st.get('hop_delay_ns', 0)} ns "
            f"per hop, {st.get('buffer_bytes', 0) >> 10} KiB per port, seed "
            f"{st.get('seed', '?')}; credit-rts = `--cc credit --credit-unscheduled 1`):")
    return [head, "", "| scenario (measured) | figures |", "|---|---|", *_rows(res)]
