"""A run's report: metrics.json, PNG plots and the summary table printed at the end.

The runner fills a ``RunMetrics`` (plain dicts and lists, so it is the JSON as-is); this module
derives the headline figures from it, writes the plots with matplotlib's Agg backend and prints
the summary. Figures are ratios to what the configuration allows (link capacity in packets per
second, ideal message time at the bottleneck rate), so they do not depend on the machine's speed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topologies.validity import queue_drops_measured, retransmission_totals


@dataclass
class RunMetrics:
    run: dict[str, Any] = field(default_factory=dict)
    # link name -> {"capacity_pps": int, "samples": [[t, pps_a_to_b, pps_b_to_a], ...]}
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "switch:port" -> [[t, depth_packets], ...]
    queues: dict[str, list[list[float]]] = field(default_factory=dict)
    # "src->dst" -> {"samples": [[t, cells_per_s]], "bytes": int}
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    # one per message: {"src", "dst", "size", "fct_s", "ideal_s", "step"}
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
    summary: dict[str, Any] = field(default_factory=dict)


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
    s["duplicate_cells"] = sum(int(r.get("duplicates", 0)) for r in m.reorder.values())
    if queue_drops_measured(m.drops):
        s["cells_dropped"] = sum(d.get("queue_drops", 0) for d in m.drops.values())
    else:
        # No queue-drop counter (BMv2): 0 only when the hosts prove it (nothing retransmitted).
        s["cells_dropped"] = 0 if m.flows and retx == 0 else None
    s["peak_queue_depth"] = max((max((v for _, v in samples), default=0)
                                 for samples in m.queues.values()), default=None)
    reorder = [r.get("max_depth", 0) for r in m.reorder.values()]
    s["max_reorder_depth"] = max(reorder, default=0)
    if m.steps:
        times = [st["duration_s"] if st["duration_s"] is not None else math.inf
                 for st in m.steps]
        s["step_time_p50_s"] = percentile(times, 50)
        s["step_time_max_s"] = max(times)
    s["valid"] = not m.run.get("invalid_reasons")
    return s


def busiest_link_utilization(m: RunMetrics) -> dict[str, float]:
    """Per link and direction: mean pps over the busy period / capacity."""
    out: dict[str, float] = {}
    for name, link in m.links.items():
        cap = link.get("capacity_pps") or 0
        samples = link.get("samples", [])
        if not cap or not samples:
            continue
        a, b = name.split("-", 1)
        for idx, label in ((1, f"{a}->{b}"), (2, f"{b}->{a}")):
            busy = [row[idx] for row in samples if row[idx] > 0]
            out[label] = (sum(busy) / len(busy) / cap) if busy else 0.0
    return out


def write_plots(m: RunMetrics, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig, name: str) -> None:
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    util = busiest_link_utilization(m)
    if util:
        fig, ax = plt.subplots(figsize=(max(6, len(util) * 0.45), 3.5))
        labels = sorted(util)
        ax.bar(labels, [100 * util[k] for k in labels], color="#3b7dd8")
        ax.axhline(95, color="#c0392b", linestyle="--", linewidth=1, label="95% goal")
        ax.set_ylabel("utilization while busy (%)")
        ax.set_ylim(0, 110)
        ax.tick_params(axis="x", rotation=70, labelsize=7)
        ax.legend(loc="lower right", fontsize=7)
        ax.set_title("Per-link utilization")
        save(fig, "link_utilization.png")

    if m.queues:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        t0 = _t0(m)
        for key, samples in sorted(m.queues.items()):
            if any(v for _, v in samples):
                ax.plot([t - t0 for t, _ in samples], [v for _, v in samples], label=key)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("queue depth (packets)")
        ax.set_title("Queue depth over time")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
        save(fig, "queue_depth.png")

    if m.flows:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        t0 = _t0(m)
        for key, flow in sorted(m.flows.items()):
            samples = flow.get("samples", [])
            ax.plot([t - t0 for t, _ in samples], [v for _, v in samples], label=key)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("sending rate (cells/s)")
        ax.set_title("Per-flow rate over time")
        ax.legend(fontsize=6, ncol=2)
        save(fig, "flow_rates.png")

    fcts = sorted(msg["fct_s"] for msg in m.messages if msg.get("fct_s") is not None)
    if fcts:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([1000 * f for f in fcts], [(i + 1) / len(fcts) for i in range(len(fcts))])
        ax.set_xlabel("message completion time (ms)")
        ax.set_ylabel("CDF")
        ax.set_title("Message completion times")
        save(fig, "completion_times.png")

    if m.reorder:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        hosts = sorted(m.reorder)
        ax.bar(hosts, [m.reorder[h].get("max_depth", 0) for h in hosts], label="max")
        ax.bar(hosts, [m.reorder[h].get("p99_depth", 0) for h in hosts], label="p99")
        ax.set_ylabel("reorder depth (cells)")
        ax.set_title("Receiver reorder depth")
        ax.legend(fontsize=7)
        save(fig, "reorder_depth.png")
    return written


def _t0(m: RunMetrics) -> float:
    return float(m.run.get("t0", 0.0))


def write_report(m: RunMetrics, run_dir: Path) -> Path:
    m.summary = summarize(m)
    m.summary["link_utilization"] = busiest_link_utilization(m)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "metrics.json"
    path.write_text(json.dumps(asdict(m), indent=1, default=_json_default) + "\n")
    write_plots(m, run_dir)
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
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
    util = s.get("link_utilization") or busiest_link_utilization(m)
    if util:
        top = max(util.values())
        rows.append(("busiest link utilization", f"{100 * top:.1f}%"))
    if "step_time_p50_s" in s:
        rows.append(("all-reduce step p50 / max",
                     f"{_ms(s['step_time_p50_s'])} / {_ms(s['step_time_max_s'])}"))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    t0 = float(run.get("t0") or 0.0)
    events = [e for e in run.get("events", []) if "injected" in e.get("event", "")
              or e.get("event", "").startswith("link ")]
    for e in events:
        lines.append(f"  event at {e['t'] - t0:6.2f}s: {e['event']}")
    failovers = [f for flow in m.flows.values() for f in flow.get("failovers", [])]
    for f in failovers:
        took = (f.get("since_last_progress_s") or 0.0) + (f.get("recovered_s") or 0.0)
        lines.append(f"  host failover on {f.get('port', '?')} ({f.get('reason', '?')}): "
                     f"{1000 * took:.1f} ms from last progress to recovery")
    reasons = run.get("invalid_reasons") or []
    if reasons:
        lines.append("  RUN INVALID: the machine could not keep up with the configured rates:")
        lines += [f"    - {r}" for r in reasons]
    else:
        lines.append("  run valid: every switch kept up with its configured rates")
    return "\n".join(lines)


def _known(v: object, unknown: str) -> str:
    return unknown if v is None else str(v)


def _ms(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{1000 * v:.1f} ms"


def _x(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"
