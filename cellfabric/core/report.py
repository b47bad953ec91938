"""A run's report: metrics.json, PNG plots (cellfabric.core.plots) and the summary printed at the end.

The runner fills a ``RunMetrics`` (plain dicts and lists, so it is the JSON as-is); this module
derives the headline figures from it and prints the summary. Figures are ratios to what the configuration allows (link capacity in packets per
second, ideal message time at the bottleneck rate plus the idle path's latency), so they do not
depend on the machine's speed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellfabric.core.jsonfast import dumps_indent1
from cellfabric.core.validity import (
    duplicate_totals,
    no_cell_lost,
    queue_drops_measured,
    retransmission_totals,
)

if TYPE_CHECKING:
    from cellfabric.core.plotworker import PlotWorker


@dataclass
class RunMetrics:
    run: dict[str, Any] = field(default_factory=dict)
    # link name -> {"capacity_pps": int, "samples": [[t, pps_a_to_b, pps_b_to_a], ...]}
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "switch:port" -> [[t, depth_packets], ...]
    queues: dict[str, list[list[float]]] = field(default_factory=dict)
    # "src->dst" -> {"samples": [[t, cells_per_s]], "bytes": int}
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    # one per message: {"src", "dst", "size", "fct_s", "ideal_s", "base_latency_s", "step",
    # "share" (flows through its bottleneck), "bottleneck" (that host), "work_s" (the time
    # its cells take of that host's link), "own_s" (its cells at its own pace, alone)}
    messages: list[dict[str, Any]] = field(default_factory=list)
    # host -> {"max_depth", "p99_depth", "out_of_order", "duplicates", "p99_delay_s"}
    reorder: dict[str, dict[str, Any]] = field(default_factory=dict)
    # switch -> {"queue_drops": n, "<reason>": n, ...}
    drops: dict[str, dict[str, int]] = field(default_factory=dict)
    # switch -> {"configured_pps": n, "offered_pps": n, "measured_pps": n}
    service: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)  # all-reduce step times
    # INT collector summary (switch-sink runs): per switch / per link occupancy, latency
    telemetry: dict[str, Any] = field(default_factory=dict)
    # {"window_s": seconds, "links": [linkload.link_totals records]}: what every link direction
    # carried over the whole workload; link_accounting() derives loads and balance from it
    link_load: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    # train:/trace: workloads: communication time, per collective, slowest rank
    # (cellfabric.collectives.iteration.iteration_section)
    iteration: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summarize(m: RunMetrics) -> dict[str, Any]:
    """The headline figures of a run, derived from its raw metrics."""
    s: dict[str, Any] = {}
    fcts = [msg["fct_s"] for msg in m.messages if msg.get("fct_s") is not None]
    slowdowns = [msg["fct_s"] / msg["ideal_s"] for msg in m.messages
                 if msg.get("fct_s") is not None and msg.get("ideal_s")]
    s["messages_completed"] = len(fcts)
    s["messages_total"] = len(m.messages)
    s["fct_p50_s"] = percentile(fcts, 50)
    s["fct_p99_s"] = percentile(fcts, 99)
    s["slowdown_p50"] = percentile(slowdowns, 50)
    s["slowdown_p99"] = percentile(slowdowns, 99)
    retx, sent = retransmission_totals(m.flows)
    s["retransmitted_cells"], s["cells_sent"] = retx, sent
    # what the flow figures (cells sent, retransmits, goodput fraction) count over
    s["flow_figures_over"] = _flow_interval(m)
    s["duplicate_cells"] = duplicate_totals(m.reorder)
    if queue_drops_measured(m.drops):
        s["cells_dropped"] = sum(d.get("queue_drops", 0) for d in m.drops.values())
    else:
        # No queue-drop counter (BMv2): 0 only when the hosts prove it (nothing resent, or
        # every resent cell received twice: validity.no_cell_lost).
        s["cells_dropped"] = (0 if m.flows and no_cell_lost(retx, s["duplicate_cells"])
                              else None)
    # Frames that reached a switch's interface but never its pipeline (the kernel dropped them
    # from a receive socket or libpcap ring the switch read too slowly); None if not measured.
    unread = [d["unread_frames"] for d in m.drops.values() if "unread_frames" in d]
    s["frames_unread_by_switches"] = (sum(unread) if m.drops and len(unread) == len(m.drops)
                                      else None)
    s["peak_queue_depth"] = max((max((v for _, v in samples), default=0)
                                 for samples in m.queues.values()), default=None)
    reorder = [r.get("max_depth", 0) for r in m.reorder.values()]
    s["max_reorder_depth"] = max(reorder, default=0)
    if m.steps:
        times = [st["duration_s"] if st["duration_s"] is not None else math.inf
                 for st in m.steps]
        s["step_time_p50_s"] = percentile(times, 50)
        s["step_time_max_s"] = max(times)
    s.update(offered_load(m))
    s["valid"] = not m.run.get("invalid_reasons")
    return s


def _flow_interval(m: RunMetrics) -> str:
    steps = {msg.get("step", 0) for msg in m.messages}
    return (f"every flow of all {len(steps)} steps ({len(m.flows)} flow records)"
            if len(steps) > 1 else f"the workload's {len(m.flows)} flows")


def offered_load(m: RunMetrics) -> dict[str, Any]:
    """Under offered load (``--load``): ``load``, the configured fraction of each sending
    host's link rate; ``offered_load``, what the arrival processes actually offered (message
    bytes over each flow's arrival window); ``goodput``, the bytes delivered over each flow's
    goodput interval (its start to the later of its window's end and its last message
    acknowledged). Per sending host the sum over its flows as a fraction of its link rate,
    then the mean over sending hosts. The interval contains the window, so goodput never
    exceeds offered_load. Empty for back-to-back runs."""
    offered: dict[str, float] = {}
    goodput: dict[str, float] = {}
    configured: dict[str, float] = {}
    for key, flow in m.flows.items():
        rec = flow.get("load")
        if not rec:
            continue
        src, bits = key.split("->")[0], 8 / rec["link_bps"]
        configured[src] = configured.get(src, 0.0) + rec["configured"]
        offered[src] = offered.get(src, 0.0) + (
            rec["offered_bytes"] * bits / rec["window_s"] if rec.get("window_s")
            else rec["configured"])  # the sender wrote nothing: what it was asked to offer
        goodput[src] = goodput.get(src, 0.0) + (
            rec["delivered_bytes"] * bits / rec["interval_s"] if rec.get("interval_s") else 0.0)
    if not offered:
        return {}
    hosts = len(offered)
    load = m.run.get("load") or round(sum(configured.values()) / hosts, 9)
    return {"load": load, "offered_load": sum(offered.values()) / hosts,
            "goodput": sum(goodput.values()) / hosts, "loaded_hosts": hosts}


@dataclass
class _Bottleneck:
    """The flows of one step that share a bottleneck, for goodput_fraction."""

    work: float = 0.0  # all of their cells at the bottleneck's pace (s)
    base: float = float("inf")  # least idle-path latency
    slot: float = float("inf")  # least slot of one cell at the pace
    # per member: (first cell on the senders' common clock or None, flow time, its own
    # cells at its own pace)
    members: list[tuple[float | None, float, float]] = field(default_factory=list)

    def ideal_and_actual(self) -> tuple[float, float]:
        starts = [s for s, _, _ in self.members]
        if None in starts:  # no common clock: they are taken to start together
            return self.work - self.slot + self.base, max(t for _, t, _ in self.members)
        first = min(starts)  # type: ignore[type-var]
        # From the first start to the last finish; the work cannot finish sooner, nor can a
        # member that started d later finish sooner than d plus its own cells at its pace.
        actual = max(s + t for s, t, _ in self.members) - first  # type: ignore[operator]
        floor = max(self.work, max(s - first + own for s, _, own in self.members))  # type: ignore[operator]
        return floor - self.slot + self.base, actual


def goodput_fraction(m: RunMetrics) -> float:
    """Headline utilization: goodput over bottleneck capacity. Flows that share a bottleneck
    (the host whose link gave them their share, ``bottleneck`` in each message) form a group;
    a group's ideal is all of its cells at the bottleneck's rate (``work_s``: the whole link
    when several senders share it) plus once the idle path's latency, its actual time the
    span from its first member's first cell to its last member's end (with the senders'
    ``flow_start_s``; without, the slowest member's flow time: they start together). A member
    that started late bounds the ideal too: it cannot end before its start plus its own cells
    at its pace (sender processes start a little apart). The figure is the sum of the ideals
    over the sum of the actual times: 1.0 = every bottleneck busy from the first cell to the
    last, as a flow alone on an idle fabric goes. A flow's time starts when its first cell
    leaves, so the first of the work's slots (``slot_s``) is not waited for: N cells at the
    pace take N - 1 slots from the first departure to the last (counting N let a paced flow
    over a fast idle path read 100.02%). 0.0 when a flow did not finish."""
    by_flow: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for msg in m.messages:
        key = msg.get("flow") or f"{msg['src']}->{msg['dst']}"
        by_flow.setdefault((msg.get("step", 0), key), []).append(msg)
    steps = {step for step, _ in by_flow}
    # Messages name their flow's record (hostmetrics.flow_key, one per step and channel);
    # older metrics kept one record per src->dst pair, the last step's
    keyed = all("flow" in msg for msg in m.messages)
    groups: dict[tuple[int, str], _Bottleneck] = {}
    for (step, key), msgs in by_flow.items():
        if any(x["fct_s"] is None for x in msgs):
            return 0.0
        rec = m.flows.get(key, {}) if keyed or len(steps) == 1 else {}
        flow_time = rec.get("flow_time_s") or max(x["fct_s"] for x in msgs)
        base = min(x.get("base_latency_s") or 0.0 for x in msgs)
        # a message's cells at its own pace (``own_s``; older metrics: its ideal less the
        # idle path, per share)
        paced = [x["own_s"] if x.get("own_s") is not None
                 else (x["ideal_s"] - (x.get("base_latency_s") or 0.0)) / (x.get("share") or 1)
                 for x in msgs]
        g = groups.setdefault((step, msgs[0].get("bottleneck") or key), _Bottleneck())
        g.work += sum(x["work_s"] if x.get("work_s") is not None else own
                      for x, own in zip(msgs, paced, strict=True))
        g.base = min(g.base, base)
        g.slot = min(g.slot, min(x.get("slot_s") or 0.0 for x in msgs))
        g.members.append((rec.get("flow_start_s"), flow_time, sum(paced)))
    totals = [g.ideal_and_actual() for g in groups.values()]
    actual = sum(a for _, a in totals)
    return sum(i for i, _ in totals) / actual if actual else 0.0


def link_accounting(records: list[dict[str, Any]], window_s: float) -> dict[str, Any]:
    """Per link direction and per tier, from what every direction carried over a window.

    ``records``: per link {"link", "tier", "capacity_pps", "directions": {"x->y": {"queue",
    "up", "cells", "other"[, "control", "line_s"]}}}. Per direction: cells, other packets,
    offered = (cells + other) / (capacity x window), the share of the link's rate it used over
    the whole window (both of the port's queues count against the one rate; the switch's own
    control frames, served off the line, are passed through beside it); with ``line_s`` (the seconds the
    line spent sending what it carried, known exactly in the simulator) offered = line_s /
    window instead. Per tier and direction (up/down): the balance of cells over its links,
    min/mean and max/mean (1.0 = even). A pure function of counts, so the emulated runner and
    the simulator report the same figures.

    ``window_s`` must run until every counted packet has left its line: a packet is counted
    when it starts to leave, so a window that ends at the last departure misses that packet's
    own time on the line, and a link busy for the whole window would read n / (n - 1) of its
    rate (callers add the last packet's slot: ``linkload.last_slot_s``)."""
    directions: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[int]] = {}
    for rec in records:
        cap = rec.get("capacity_pps") or 0
        for label, d in rec.get("directions", {}).items():
            packets = d["cells"] + d["other"]
            if d.get("line_s") is not None and window_s > 0:
                offered = d["line_s"] / window_s
            else:
                offered = packets / (cap * window_s) if cap and window_s > 0 else None
            tier = f"{rec['tier']} {'up' if d['up'] else 'down'}"
            directions[label] = {"link": rec["link"], "tier": tier, "queue": d.get("queue"),
                                 "cells": d["cells"], "other": d["other"],
                                 "control": d.get("control", 0),
                                 "capacity_packets": cap * window_s if cap else None,
                                 "offered": offered}
            groups.setdefault(tier, []).append(d["cells"])
    tiers = {}
    for tier, cells in sorted(groups.items()):
        mean = sum(cells) / len(cells)
        tiers[tier] = {"links": len(cells), "mean_cells": mean,
                       "min_over_mean": min(cells) / mean if mean else None,
                       "max_over_mean": max(cells) / mean if mean else None}
    offered = [d["offered"] for d in directions.values() if d["offered"] is not None]
    return {"window_s": window_s, "directions": directions, "tiers": tiers,
            "max_offered": max(offered, default=None)}


def accounting_of(m: RunMetrics) -> dict[str, Any]:
    if not m.link_load:
        return {}
    return link_accounting(m.link_load.get("links", []), float(m.link_load.get("window_s", 0)))


def write_report(m: RunMetrics, run_dir: Path, exact: dict[str, Any] | None = None,
                 plots: PlotWorker | None = None) -> Path:
    """``exact``: summary figures a caller measured exactly (the simulator's peak queue),
    in place of the ones derived from samples. ``plots``: a started plot worker that draws
    the PNGs while this process writes metrics.json (closed here, whatever happens); without
    one they are drawn here."""
    try:
        return _write_report(m, run_dir, exact, plots)
    finally:
        if plots is not None:
            plots.close()


def _write_report(m: RunMetrics, run_dir: Path, exact: dict[str, Any] | None,
                  plots: PlotWorker | None) -> Path:
    if plots is not None:
        # first: the figures below only read the sections the worker is sent (pickled now),
        # and it draws while they are derived and metrics.json is written
        plots.submit(m, run_dir)
    m.summary = summarize(m)
    m.summary["goodput_fraction"] = goodput_fraction(m)
    acct = accounting_of(m)
    if acct:
        m.summary["link_accounting"] = acct
    m.summary.update(exact or {})
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "metrics.json"
    # the sections as they are: asdict() would deep-copy every sample list first (0.45 CPU s
    # at k=8) for an encoder that only reads them (nested dataclasses: _json_default)
    sections = {f.name: getattr(m, f.name) for f in fields(m)}
    # json.dumps(sections, indent=1, default=_json_default)'s text, in 40% of its time
    path.write_text(dumps_indent1(sections, _json_default) + "\n")
    if plots is not None:
        plots.wait()
    else:
        from cellfabric.core.plots import write_plots

        write_plots(m, run_dir)
    from cellfabric.core.html import write_run_page

    # report.html: the run as one page (after the plots it embeds), from the two sections it
    # shows as metrics.json has them
    page = json.loads(dumps_indent1({"run": m.run, "summary": m.summary}, _json_default))
    write_run_page(run_dir, page)
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def format_summary(m: RunMetrics) -> str:
    s = m.summary or summarize(m)
    run = m.run
    lines = [
        f"run {run.get('name', '?')}: {run.get('topology', '?')} on {run.get('target', '?')}, "
        f"workload {run.get('workload', '?')}, cc {run.get('cc', '?')}, "
        f"spray {run.get('spray', '?')}",
    ]
    rows = [
        ("messages completed", f"{s['messages_completed']}/{s['messages_total']}"),
        ("message time p50 / p99", f"{_ms(s['fct_p50_s'])} / {_ms(s['fct_p99_s'])}"),
        ("slowdown vs ideal p50 / p99", f"{_x(s['slowdown_p50'])} / {_x(s['slowdown_p99'])}"),
        ("cells dropped at switches", _known(s["cells_dropped"], "unknown (no queue-drop "
                                             "counter on this target)")),
        ("peak queue depth (packets)", _known(s["peak_queue_depth"], "unknown (not sampled)")),
        ("cells retransmitted", f"{s['retransmitted_cells']}"
         + (f" of {s['cells_sent']} sent ({100 * s['retransmitted_cells'] / s['cells_sent']:.1f}%)"
            if s.get("cells_sent") else "") + f", {s['duplicate_cells']} duplicates received"),
        ("max reorder depth (cells)", str(s["max_reorder_depth"])),
    ]
    if s.get("frames_unread_by_switches") is not None:  # measured by the emulation only
        rows.insert(4, ("frames switches did not read", str(s["frames_unread_by_switches"])))
    if s.get("offered_load") is None:
        rows.append(("goodput / bottleneck capacity",
                     f"{100 * s.get('goodput_fraction', goodput_fraction(m)):.1f}%"))
    else:
        # Under offered load the flows are idle between arrivals: time busy over ideal time
        # (goodput_fraction, still in metrics.json) is no utilization; these two are.
        rows.append(("offered load per host", f"{100 * s['load']:.1f}% of its link configured, "
                     f"{100 * s['offered_load']:.1f}% offered by the arrivals"))
        rows.append(("goodput per host", f"{100 * s['goodput']:.1f}% of its link (payload, "
                     "flow start to last ACK or arrival window end)"))
    acct = s.get("link_accounting") or accounting_of(m)
    if acct and acct.get("directions"):
        busiest = max(acct["directions"].items(), key=lambda kv: kv[1]["offered"] or 0)
        control = busiest[1].get("control") or 0
        rows.append((f"busiest link over {span_text(acct['window_s'])}",
                     f"{busiest[0]} {100 * (busiest[1]['offered'] or 0):.1f}% of its rate "
                     f"({busiest[1]['cells']} cells + {busiest[1]['other']} other"
                     + (f"; {control} NOS frames beside, off the line" if control else "")
                     + ")"))
        for tier, b in acct["tiers"].items():
            if b["links"] > 1 and b["mean_cells"]:
                rows.append((f"cells per link, {tier}",
                             f"min {b['min_over_mean']:.2f} / max {b['max_over_mean']:.2f} "
                             f"x mean over {b['links']} links"))
    bgp = run.get("bgp")
    if bgp:  # --routing bgp (cellfabric.nos)
        rows.append(("routing", f"bgp: {bgp.get('sessions')} sessions, every switch forwarded "
                     f"every host prefix {bgp.get('converged_s', 0):.1f} s after FRR "
                     f"started; {bgp.get('messages_lost', 0)} messages lost"))
        health = bgp.get("routes_during_workload") or {}
        if health:  # route churn or holes while cells were in flight explain lost messages
            holes = sorted(n for n, h in health.items() if h.get("missing_prefixes")
                           or h.get("failed"))
            rows.append(("routes during workload", (
                f"{sum(h.get('write_batches', 0) for h in health.values())} agent write "
                f"batches, {sum(h.get('deletes', 0) for h in health.values())} deletes; "
                f"switches not forwarding every host prefix at the end: "
                f"{', '.join(holes) or 'none'}")))
    if "step_time_p50_s" in s:
        rows.append(("all-reduce step p50 / max",
                     f"{_ms(s['step_time_p50_s'])} / {_ms(s['step_time_max_s'])}"))
    sched = run.get("channel_scheduler")
    if sched:  # --channel-policy
        rows.append(("channel scheduler", _scheduler_text(sched)))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    t0 = float(run.get("t0") or 0.0)
    events = [e for e in run.get("events", []) if "injected" in e.get("event", "")
              or e.get("event", "").startswith("link ")]
    for e in events:
        lines.append(f"  event at {_elapsed(e['t'] - t0)}: {e['event']}")
    failovers = [f for flow in m.flows.values() for f in flow.get("failovers", [])]
    for f in failovers:
        took = (f.get("since_last_progress_s") or 0.0) + (f.get("recovered_s") or 0.0)
        lines.append(f"  host failover on {f.get('port', '?')} ({f.get('reason', '?')}): "
                     f"{1000 * took:.1f} ms from last progress to recovery")
    if m.iteration:
        from cellfabric.collectives.iteration import format_iteration

        lines.append(format_iteration(m.iteration))
    reasons = run.get("invalid_reasons") or []
    if reasons:
        lines.append("  RUN INVALID: the machine could not keep up with the configured rates:")
        lines += [f"    - {r}" for r in reasons]
    else:
        lines.append("  run valid: every switch kept up with its configured rates")
    return "\n".join(lines)


def _scheduler_text(sched: dict) -> str:
    """The policy and what it did: the sends it moved off failed links and from which step
    on it planned around them (the steps before a failure keep their paths)."""
    steps = sched.get("steps") or []
    text = sched.get("policy", "?")
    if not steps:
        return text + ": rank order, paths by the fabric's hash"
    moved = sum(st.get("moved", 0) for st in steps)
    down = [st["step"] for st in steps if st.get("down")]
    text += (f": {len(steps)} steps placed, at most "
             f"{max(st.get('shared_uplinks', 0) for st in steps)} uplinks shared by two sends")
    if down:
        text += (f"; links down from step {down[0]}: {moved} sends moved off them")
    return text


def span_text(seconds: float) -> str:
    """A window's length in a unit that shows it (the simulator's are microseconds)."""
    if seconds >= 1.0:
        return f"{seconds:.1f} s"
    if seconds >= 1e-3:
        return f"{1e3 * seconds:.1f} ms"
    return f"{1e6 * seconds:.1f} us"


def _known(v: object, unknown: str) -> str:
    return unknown if v is None else str(v)


def _ms(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{1000 * v:.1f} ms"


def _elapsed(v: float) -> str:
    """A time since the run began in a unit that shows it: the simulator's events come
    microseconds in, the emulation's seconds."""
    if abs(v) >= 0.1:
        return f"{v:.2f} s"
    if abs(v) >= 1e-4:
        return f"{1e3 * v:.3f} ms"
    return f"{1e6 * v:.3f} us"


def _x(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"
