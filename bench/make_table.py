"""Write the README's results section from what `make bench` just measured.

Reads bench/results/fabric.json (the headline claims) and the component benches' printed
summaries (bench/results/<name>.txt), and replaces the text between the README's
``<!-- bench:start -->`` and ``<!-- bench:end -->`` markers. Nothing here is typed by hand.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from sim_table import SIM_END, SIM_START, sim_section  # noqa: E402

RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def pct(v: Any) -> str:
    return "-" if not isinstance(v, int | float) or math.isnan(v) else f"{100 * v:.1f}%"


def num(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if not isinstance(v, int | float) or math.isnan(v) else fmt.format(v)


def fabric_section(res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    m = res.get("machine", {})
    out.append(f"Measured by `make bench` on {m.get('date', '?')}: {m.get('cpus', '?')} CPUs, "
               f"Python {m.get('python', '?')}, embedded target; {res.get('duration_s', 0) / 60:.1f}"
               " min for the fabric scenarios. Figures are ratios to what the configured queue "
               "rates allow. A run the machine could not keep up with is marked invalid.")
    if res.get("measured"):
        out.append("")
        out.append("Scenarios measured later by a partial run (`fabric_bench.py --only ...`): "
                   + ", ".join(f"{k} {v}" for k, v in res["measured"].items())
                   + "; the others are from the full run above.")
    out.append("")
    out.append("| goal | met | measured |")
    out.append("|---|---|---|")
    for goal, v in res.get("verdicts", {}).items():
        detail = ", ".join(f"{k}={num(x) if isinstance(x, float) else x}"
                           for k, x in v.items() if k != "met")
        out.append(f"| {goal} | {'yes' if v.get('met') else 'no'} | {detail} |")
    if "utilization" in res:
        out += ["", "Utilization (permutation, leaf-spine), per spray mode:", "",
                "| spray | goodput / capacity | slowdown p50 | slowdown p99 | max reorder | "
                "p99 reorder | cells dropped | valid |", "|---|---|---|---|---|---|---|---|"]
        for mode, f in res["utilization"].items():
            out.append(f"| {mode} | {pct(f['goodput_fraction'])} | {num(f['slowdown_p50'])} | "
                       f"{num(f['slowdown_p99'])} | {f['max_reorder_depth']} | "
                       f"{f['p99_reorder_depth']} | {f['cells_dropped']} | {f['valid']} |")
    if "loss" in res:
        out += ["", "Incast, per rate control:", "", *_incast_rows(res["loss"])]
    if "allreduce" in res:
        out += ["", "Ring all-reduce (1 MiB over 4 ranks, leaf-spine, every hop crossing the spines), per spray mode:", "",
                "| spray | step time p50 (s) | slowdown p99 | valid |", "|---|---|---|---|"]
        for mode, f in res["allreduce"].items():
            out.append(f"| {mode} | {num(f['step_time_p50_s'], '{:.3f}')} | "
                       f"{num(f['slowdown_p99'])} | {f['valid']} |")
    out += fat_tree_section(res)
    if "failover" in res:
        out += ["", "Failover (dual-homed hosts, host link down mid-run):", ""]
        for key, f in res["failover"].items():
            times = [t for t in f["failover_s"] if isinstance(t, int | float)]
            took = f"{1000 * max(times):.0f} ms" if times else "-"
            out.append(f"- `{key}`: messages {f['messages']}, lost {f['messages_lost']}, "
                       f"recovery {took}, valid {f['valid']}")
    return out


def _incast_rows(rows: dict[str, dict[str, Any]]) -> list[str]:
    """An incast table: one row per incast and rate control."""
    out = ["| incast / cc | cells dropped | peak queue | time to drain (s) | messages | valid |",
           "|---|---|---|---|---|---|"]
    for key, f in rows.items():
        out.append(f"| {key} | {f['cells_dropped']} | {f['peak_queue']} | "
                   f"{num(f['drain_s'])} | {f['messages']} | {f['valid']} |")
    return out


def _balance(f: dict[str, Any], tier: str) -> str:
    b = f.get("balance", {}).get(tier)
    return "-" if not b or b[0] is None else f"{b[0]:.2f} / {b[1]:.2f}"


def fat_tree_section(res: dict[str, Any]) -> list[str]:
    """The k=4 fat-tree scenarios (bench_ft_*), each beside its baseline."""
    out: list[str] = []
    when = res.get("measured", {})
    if "ft-utilization" in res:
        out += ["", "Fat-tree k=4 (20 switches, 16 hosts, 30 packets/s links), cross-pod "
                f"permutation, per spray mode (measured {when.get('ft-utilization', '?')}); "
                "cells per link as min/mean / max/mean over the tier's links:", "",
                "| spray | goodput / capacity | slowdown p50 | slowdown p99 | edge->agg | "
                "agg->core | core->agg | busiest link | cells dropped | valid |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for mode, f in res["ft-utilization"].items():
            out.append(f"| {mode} | {pct(f['goodput_fraction'])} | {num(f['slowdown_p50'])} | "
                       f"{num(f['slowdown_p99'])} | {_balance(f, 'leaf-spine up')} | "
                       f"{_balance(f, 'spine-core up')} | {_balance(f, 'spine-core down')} | "
                       f"{pct(f.get('max_link_load'))} | {f['cells_dropped']} | {f['valid']} |")
    if "ft-incast" in res:
        out += ["", f"Fat-tree incast 8:1 across pods into h1, spray, per rate control "
                f"(measured {when.get('ft-incast', '?')}):", "", *_incast_rows(res["ft-incast"])]
    if "ft-allreduce" in res:
        out += ["", "Fat-tree ring all-reduce (256 KiB over 8 ranks, every hop leaving its pod), "
                f"per spray mode (measured {when.get('ft-allreduce', '?')}):", "",
                "| spray | step time p50 (s) | slowdown p99 | valid |", "|---|---|---|---|"]
        for mode, f in res["ft-allreduce"].items():
            out.append(f"| {mode} | {num(f['step_time_p50_s'], '{:.3f}')} | "
                       f"{num(f['slowdown_p99'])} | {f['valid']} |")
    return out


def summary_plot(res: dict[str, Any], path: Path) -> bool:
    """One figure of the three headline comparisons, each beside its baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("utilization", "loss", "allreduce", "ft-utilization") if k in res]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, key in zip(axes, panels, strict=True):
        data = res[key]
        if key == "utilization":
            names = list(data)
            ax.bar(names, [100 * data[n]["goodput_fraction"] for n in names], color="#3b7dd8")
            ax.axhline(95, color="#c0392b", linestyle="--", linewidth=1, label="95% goal")
            ax.set_ylabel("goodput / capacity (%)")
            ax.set_title("Permutation: utilization")
            ax.legend(fontsize=7)
        elif key == "loss":
            names = list(data)
            ax.bar(range(len(names)), [data[n]["cells_dropped"] for n in names],
                   color=["#c0392b" if n.endswith("/none") else "#3b7dd8" for n in names])
            ax.set_xticks(range(len(names)), names, rotation=70, fontsize=7)
            ax.set_ylabel("cells dropped at switches")
            ax.set_title("Incast: loss per rate control")
        elif key == "ft-utilization":
            names = list(data)
            x = range(len(names))
            core = [(data[n].get("balance", {}).get("spine-core up") or [0])[0] or 0
                    for n in names]
            ax.bar([i - 0.2 for i in x], [100 * data[n]["goodput_fraction"] for n in names],
                   width=0.4, color="#3b7dd8", label="goodput / capacity (%)")
            ax.bar([i + 0.2 for i in x], [100 * c for c in core], width=0.4, color="#f0a030",
                   label="least-loaded agg->core link (% of mean)")
            ax.set_xticks(list(x), names)
            ax.set_ylim(0, 110)
            ax.set_title("Fat-tree k=4: cross-pod permutation")
            ax.legend(fontsize=7, loc="upper left")
        else:
            names = list(data)
            ax.bar(names, [data[n]["step_time_p50_s"] or 0 for n in names], color="#3b7dd8")
            ax.set_ylabel("step time p50 (s)")
            ax.set_title("Ring all-reduce step time")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def component_section() -> list[str]:
    out: list[str] = []
    for name in ("compiler", "switch", "controlplane", "hosts", "sweep"):
        path = RESULTS / f"{name}.txt"
        if not path.exists():
            continue
        # the switch bench's figures run to 25 lines (three paths over veths, BMv2 among them)
        keep = 30 if name == "switch" else 12
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()][-keep:]
        out += ["", f"`bench/{name}_bench.py`:", "", "```", *lines, "```"]
    return out


def _replace(text: str, start: str, end: str, body: list[str]) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + start + "\n" + "\n".join(body) + "\n" + end + tail


def main() -> int:
    fabric = RESULTS / "fabric.json"
    body: list[str] = []
    if fabric.exists():
        res = json.loads(fabric.read_text())
        # Verdicts are re-derived from the measurements, so the table and the rule agree.
        sys.path.insert(0, str(ROOT / "bench"))
        from fabric_bench import verdicts

        res["verdicts"] = verdicts(res)
        fabric.write_text(json.dumps(res, indent=1, default=str) + "\n")
        body += fabric_section(res)
        if summary_plot(res, RESULTS / "fabric_summary.png"):
            body += ["", "![headline comparisons](bench/results/fabric_summary.png)"]
    body += component_section()
    text = README.read_text()
    if START not in text or END not in text:
        print("make_table: README has no bench markers", file=sys.stderr)
        return 1
    text = _replace(text, START, END, body)
    sim = RESULTS / "sim.json"
    if sim.exists() and SIM_START in text and SIM_END in text:
        text = _replace(text, SIM_START, SIM_END, sim_section(json.loads(sim.read_text())))
    README.write_text(text)
    print(f"make_table: README results section rewritten ({len(body)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
