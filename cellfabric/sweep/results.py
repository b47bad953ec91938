"""The sweep's tidy table (one row per task: its parameters, status and every summary figure)
and the plots a researcher draws first, seeds as error bars."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from cellfabric.sweep.spec import REPLICATE, PlotSpec

FIXED = ["task", "group", "status", "rc", "duration_s", "worker", "error", "command"]


def goodput_fraction(metrics: dict[str, Any]) -> float | None:
    """Sum over flows of the ideal time over the time taken (bench/fabric_bench.py's figure):
    1.0 means every flow moved its bytes at its bottleneck share. None when no message has an
    ideal time; 0.0 when any message never completed."""
    by_flow: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for msg in metrics.get("messages") or []:
        by_flow[f"{msg.get('src')}->{msg.get('dst')}"].append(msg)
    ideal = taken = 0.0
    flows = metrics.get("flows") or {}
    for key, msgs in by_flow.items():
        if any(m.get("fct_s") is None for m in msgs):
            return 0.0
        if not all(m.get("ideal_s") for m in msgs):
            return None
        taken += (flows.get(key) or {}).get("flow_time_s") or max(m["fct_s"] for m in msgs)
        ideal += sum(m["ideal_s"] for m in msgs)
    return ideal / taken if taken else None


def figures(metrics: dict[str, Any]) -> dict[str, Any]:
    """Every figure of the run's summary, plus goodput_fraction when the run did not give one."""
    out = dict(metrics.get("summary") or {})
    if "goodput_fraction" not in out:
        out["goodput_fraction"] = goodput_fraction(metrics)
    return out


def make_row(task: Any, record: dict[str, Any] | None, metrics: dict[str, Any] | None,
             command: str) -> dict[str, Any]:
    record = record or {}
    duration = None
    if record.get("started") and record.get("ended"):
        duration = round(record["ended"] - record["started"], 3)
    row: dict[str, Any] = {
        "task": task.id, "group": task.group, "status": record.get("status", "not run"),
        "rc": record.get("rc"), "duration_s": duration, "worker": record.get("worker"),
        "error": record.get("error") or "", "command": command,
    }
    row.update(task.params)
    if metrics is not None:
        for key, value in figures(metrics).items():
            row.setdefault(key, value)
    return row


def write_table(rows: list[dict[str, Any]], out_dir: Path) -> tuple[Path, Path]:
    """summary.jsonl (values as they are, nested dicts kept) and summary.csv (scalars; a dict of
    numbers becomes its max and mean, say link_utilization_max; deeper nesting is left to the
    JSON lines)."""
    jsonl = out_dir / "summary.jsonl"
    with open(jsonl, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row, default=_json_default) + "\n")
    flat = [_flatten(r) for r in rows]
    columns: list[str] = []
    for row in flat:
        columns += [c for c in row if c not in columns]
    path = out_dir / "summary.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        for row in flat:
            writer.writerow({k: _cell(v) for k, v in row.items()})
    return path, jsonl


def _flatten(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            nums = [v for v in value.values() if isinstance(v, int | float) and _finite(v)]
            if nums or not value:  # a dict of dicts stays in summary.jsonl only
                out[f"{key}_max"] = max(nums) if nums else None
                out[f"{key}_mean"] = sum(nums) / len(nums) if nums else None
        else:
            out[key] = value
    return out


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, list):
        return json.dumps(value)
    return value


def _finite(v: float) -> bool:
    return not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def _json_default(value: Any) -> Any:
    return str(value)


def plot_series(rows: list[dict[str, Any]], plot: PlotSpec, param_names: list[str]
                ) -> dict[str, dict[Any, list[float]]]:
    """series label -> x -> the y of each seed, over the tasks that finished ok and have x, y
    and series. A parameter that still varies among tasks of one x and one series (other than
    the seed) joins the series label, so no two different experiments share a point; one that
    moves with x (an incast degree's topology and message size) does not."""
    usable = [r for r in rows if r.get("status") == "ok" and r.get(plot.x) is not None
              and (not plot.group or r.get("group") == plot.group)
              and r.get(plot.series) is not None and _number(r.get(plot.y)) is not None]
    skip = {plot.x, plot.y, plot.series, REPLICATE}
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in usable:
        cells[(json.dumps(r[plot.x], default=str), str(r[plot.series]))].append(r)
    varying = [k for k in param_names if k not in skip and any(
        len({json.dumps(r.get(k), default=str) for r in cell}) > 1 for cell in cells.values())]
    out: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in usable:
        label = " ".join([str(r[plot.series])] + [f"{k}={r.get(k)}" for k in varying])
        out[label][r[plot.x]].append(float(r[plot.y]))
    return out


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v):
        return None
    return float(v)


def write_plots(rows: list[dict[str, Any]], plots: list[PlotSpec], out_dir: Path,
                param_names: list[str]) -> tuple[list[Path], list[str]]:
    """One PNG per plot spec; a plot with no usable task is skipped with the reason."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written, skipped = [], []
    for plot in plots:
        series = plot_series(rows, plot, param_names)
        if not series:
            among = f" in group {plot.group}" if plot.group else ""
            skipped.append(f"{plot.filename()}: no finished task{among} has {plot.x}, "
                           f"{plot.series} and a numeric {plot.y}")
            continue
        xs_all = sorted({x for s in series.values() for x in s}, key=_sort_key)
        numeric = all(_number(x) is not None for x in xs_all)
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for label, points in sorted(series.items()):
            xs = sorted(points, key=_sort_key)
            pos = [float(x) if numeric else xs_all.index(x) for x in xs]
            means = [sum(points[x]) / len(points[x]) for x in xs]
            # max(0, ...): a mean of equal values can round a hair past them
            low = [max(0.0, m - min(points[x])) for m, x in zip(means, xs)]
            high = [max(0.0, max(points[x]) - m) for m, x in zip(means, xs)]
            ax.errorbar(pos, means, yerr=[low, high], marker="o", capsize=3, label=label)
        if numeric and plot.x == "load" and plot.y in ("goodput", "offered_load"):
            # both are fractions of the same link rate: goodput can only reach this line
            top = max(float(x) for x in xs_all)
            ax.plot([0, top], [0, top], ls="--", color="grey", lw=1, label="= offered load")
        if not numeric:
            ax.set_xticks(range(len(xs_all)), [str(x) for x in xs_all])
        seeds = max(len(v) for s in series.values() for v in s.values())
        ax.set_xlabel(plot.x)
        ax.set_ylabel(f"{plot.y}\n(mean of {seeds} seeds; bars: min to max)" if seeds > 1
                      else plot.y)
        ax.set_title(plot.title or f"{plot.y} vs {plot.x}, per {plot.series}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=plot.series, title_fontsize=7)
        fig.tight_layout()
        path = out_dir / plot.filename()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written, skipped


def _sort_key(x: Any) -> tuple[int, Any]:
    n = _number(x)
    return (0, n) if n is not None else (1, str(x))
