"""The report's plots: each figure drawn once, laid out so that what sits outside the axes
(legends) stays in the image, and nothing drawn that shows nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from cellfabric.core import plots
from cellfabric.core.report import RunMetrics, link_accounting


def _records(directions: int) -> list[dict]:
    return [{"link": f"l{i}-s1", "tier": "leaf-spine", "capacity_pps": 100,
             "directions": {f"l{i}->s1": {"queue": f"l{i}:1", "up": True, "cells": 10 + i,
                                          "other": 2}}}
            for i in range(directions)]


def _metrics(samples: bool = True) -> RunMetrics:
    m = RunMetrics(run={"name": "r1", "t0": 0.0})
    m.link_load = {"window_s": 1.0, "links": _records(4)}
    m.queues = {f"l{i}:1": [[0.1, 3], [0.2, 17 - i]] for i in range(4)}
    m.flows = {"h1->h3": {"samples": [[0.1, 400], [0.2, 500]] if samples else [],
                          "bytes": 10**6}}
    m.messages = [{"src": "h1", "dst": "h3", "fct_s": 0.01 * (i + 1)} for i in range(4)]
    m.reorder = {f"h{i}": {"max_depth": 6, "p99_depth": 4} for i in range(1, 4)}
    return m


def test_every_figure_is_drawn_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    draws: list[Figure] = []
    draw = Figure.draw

    def counted(self: Figure, renderer: object) -> None:
        draws.append(self)
        draw(self, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    written = plots.write_plots(_metrics(), tmp_path)
    assert sorted(p.name for p in written) == ["completion_times.png", "flow_rates.png",
                                               "link_load.png", "queue_depth.png",
                                               "reorder_depth.png"]
    assert len(draws) == len(written)  # savefig(bbox_inches="tight") drew each twice
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_legend_outside_the_axes_stays_in_the_image(tmp_path: Path) -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="a rather long legend label")
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plots.one_draw(fig, tmp_path / "f.png")
    box, page = legend.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and box.y1 <= page.y1
    plt.close(fig)


def test_a_tier_of_many_links_has_no_tick_per_bar() -> None:
    for n, ticks in ((plots.MAX_LABELS, plots.MAX_LABELS), (plots.MAX_LABELS + 1, 0)):
        fig = plots._link_loads(link_accounting(_records(n), 1.0))
        assert len(fig.axes[0].get_xticks()) == ticks
        assert len(fig.axes[0].get_xticklabels()) == ticks


def test_a_reorder_figure_of_many_hosts_labels_some_in_name_order() -> None:
    """Up to MAX_LABELS hosts every bar pair has its host's name; past that, a label every
    so many hosts (the first host first, in natural name order) on a narrower figure."""
    def figure(n: int) -> Figure:
        m = RunMetrics(run={"t0": 0.0})
        m.reorder = {f"h{i}": {"max_depth": i, "p99_depth": 1} for i in range(n, 0, -1)}
        return plots._reorder_depths(m)

    few = figure(plots.MAX_LABELS)
    labels = [t.get_text() for t in few.axes[0].get_xticklabels()]
    assert labels == [f"h{i}" for i in range(1, plots.MAX_LABELS + 1)]
    many = figure(2 * plots.MAX_LABELS)
    labels = [t.get_text() for t in many.axes[0].get_xticklabels()]
    step = 2 * plots.MAX_LABELS // plots.REORDER_MANY_LABELS
    assert labels == [f"h{i}" for i in range(1, 2 * plots.MAX_LABELS + 1, step)]
    assert list(many.axes[0].get_xticks()) == list(range(0, 2 * plots.MAX_LABELS, step))
    assert many.get_size_inches()[0] < few.get_size_inches()[0]
    assert many.axes[0].get_xlim() == (-0.6, 2 * plots.MAX_LABELS - 0.4)  # every bar shown


def test_no_rate_plot_when_no_flow_has_rate_samples(tmp_path: Path) -> None:
    written = plots.write_plots(_metrics(samples=False), tmp_path)
    assert "flow_rates.png" not in [p.name for p in written]
    assert "link_load.png" in [p.name for p in written]


def test_the_plots_are_made_without_pyplot(tmp_path: Path) -> None:
    """pyplot (its import and its figure manager) is for interactive figures; a run's report
    draws on the Agg canvas directly, in a process that never imported pyplot."""
    (tmp_path / "m.json").write_text(json.dumps(asdict(_metrics())))
    code = ("import json, sys; from pathlib import Path; "
            "from cellfabric.core import plots; from cellfabric.core.report import RunMetrics; "
            "d = Path(sys.argv[1]); m = RunMetrics(**json.loads((d / 'm.json').read_text())); "
            "w = plots.write_plots(m, d / 'out'); "
            "print(len(w), 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["5", "False"]


def _heatmap_metrics(name_len: int) -> RunMetrics:
    """Two tiers of 40 queues each (heatmaps), link directions named ``name_len`` long."""
    m = RunMetrics(run={"name": "r", "t0": 0.0})
    links = []
    for tier, up in (("leaf-spine", True), ("spine-core", False)):
        for i in range(40):
            a, b = f"{tier[0]}{i}", "x" * max(1, name_len - 6) + str(i)
            links.append({"link": f"{a}-{b}", "tier": tier, "capacity_pps": 100,
                          "directions": {f"{a}->{b}": {"queue": f"{a}:{i + 1}", "up": up,
                                                       "cells": 5, "other": 1}}})
    m.link_load = {"window_s": 1.0, "links": links}
    m.queues = {d["queue"]: [[0.01 * t, (t * 7 + n) % 13] for t in range(50)]
                for n, lk in enumerate(links) for d in lk["directions"].values()}
    return m


@pytest.mark.parametrize("name_len", [8, 40])
def test_a_heatmap_queue_figure_laid_out_without_constrained_layout_keeps_its_text_apart(
        tmp_path: Path, name_len: int) -> None:
    m = _heatmap_metrics(name_len)
    fig = plots._queue_depths(m, link_accounting(m.link_load["links"], 1.0))
    plots.one_draw(fig, tmp_path / "q.png")
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 2
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]
    for t in texts:  # nothing cut off at the image's edges
        box = t.get_window_extent(renderer)
        assert page.x0 <= box.x0 and box.x1 <= page.x1 + 0.5, t.get_text()
        assert page.y0 <= box.y0 and box.y1 <= page.y1 + 0.5, t.get_text()
    for ax in heat:
        ticks = [lb.get_window_extent(renderer) for lb in ax.get_yticklabels() if lb.get_text()]
        ylabel = ax.yaxis.label.get_window_extent(renderer)
        assert ticks and max(b.x1 for b in ticks) <= ax.bbox.x0  # labels left of the axes
        assert ylabel.x1 <= min(b.x0 for b in ticks)  # and the axis label left of them
    upper, lower = heat
    xticks = [lb.get_window_extent(renderer) for lb in upper.get_xticklabels() if lb.get_text()]
    title = lower.title.get_window_extent(renderer)
    assert min(b.y0 for b in xticks) >= title.y1  # the panel above's ticks clear this title
    suptitle = fig._suptitle.get_window_extent(renderer)
    assert suptitle.y0 >= upper.title.get_window_extent(renderer).y1


def test_a_heatmap_tier_labels_every_third_of_its_40_queues_by_their_links() -> None:
    """40 queues a tier: a label every 3rd row (rows 0, 3, ..., 39), each the link direction
    its queue sends on; the title counts the tier's queues and its deepest sample."""
    m = _heatmap_metrics(8)
    acct = link_accounting(m.link_load["links"], 1.0)
    fig = plots._queue_depths(m, acct)
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 2
    tiers = (("leaf-spine up", "l"), ("spine-core down", "s"))
    for ax, (tier, first) in zip(heat, tiers, strict=True):
        rows = [round(t) for t in ax.get_yticks()]
        assert rows == list(range(0, 40, 3))
        labels = [t.get_text() for t in ax.get_yticklabels()]
        # queue "l7:8" sends on direction "l7->xx7" (rows in the queues' natural order)
        assert labels == [f"{first}{r}->xx{r}" for r in rows]
        assert ax.get_title(loc="left").startswith(f"{tier}: 40 queues, 40 ever non-empty, "
                                                   "deepest 12 packets")
