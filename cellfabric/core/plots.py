"""A run's PNG plots, readable from a 4-host leaf-spine up to a k=8 fat-tree.

Link loads and queue depths are grouped by tier (host-leaf, leaf-spine, spine-core, each up and
down); a tier with many queues is a heatmap (queue x time), never a forest of lines; per-flow
rates beyond a few flows are a band (min-max, quartiles) with the median. Legends sit outside
the axes, never over the data.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellfabric.core.report import RunMetrics, accounting_of, percentile, span_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Titles are placed at y=1.0 (above the axes, with matplotlib's pad) rather than left to
# matplotlib's automatic placement, which measures every y tick label again at every layout
# and draw to move a title clear of top ticks or an axis offset text ("1e6"): none of these
# axes has either (the flow-rate plot's cells/s can have an offset text: it keeps the
# automatic placement).
MAX_LINES = 8  # more series than this become a heatmap or a band
MAX_LABELS = 64  # a tier of more link directions than this has no label per bar
REORDER_MANY_LABELS = 16  # host labels on a reorder figure of more than MAX_LABELS hosts
# y tick labels on a heatmap tier: every n-th queue, about this many. Each label is a tick of
# four artists laid out and drawn; at 24 they were a third of a k=8 queue-depth figure's time
HEATMAP_ROW_LABELS = 12
DPI = 90
# zlib level of the PNGs: 3 writes a k=8 queue-depth figure (720 x 5643 px) in half the time
# of PIL's default 6, for a file a quarter larger
PNG_COMPRESS_LEVEL = 3
# The shortest time axis: only a guard against a zero-width one. A floor of 1 ms once left a
# simulated 113 us run in a ninth of the queue-depth plot, the rest grey as "no sample".
MIN_SPAN_S = 1e-9


def new_figure(**kwargs: Any) -> Figure:
    """A figure on the Agg canvas, outside pyplot: pyplot's figure manager (and its import)
    only adds bookkeeping that a figure saved once and dropped never uses."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


# every figure write_plots may draw, in the order it draws them
FIGURES = ("link_load.png", "queue_depth.png", "flow_rates.png", "completion_times.png",
           "reorder_depth.png")


def write_plots(m: RunMetrics, out_dir: Path,
                only: Collection[str] | None = None) -> list[Path]:
    """The run's PNGs (``only``: just these of FIGURES, for a worker drawing a share)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def wanted(name: str) -> bool:
        return only is None or name in only

    def save(fig: Figure, name: str) -> None:
        path = out_dir / name
        one_draw(fig, path)
        written.append(path)

    acct = accounting_of(m)
    if acct and acct.get("directions") and wanted("link_load.png"):
        save(_link_loads(acct), "link_load.png")
    if m.queues and wanted("queue_depth.png"):
        save(_queue_depths(m, acct), "queue_depth.png")
    # (no flow samples without rate control)
    if any(f.get("samples") for f in m.flows.values()) and wanted("flow_rates.png"):
        save(_flow_rates(m), "flow_rates.png")
    fcts = sorted(msg["fct_s"] for msg in m.messages if msg.get("fct_s") is not None)
    if fcts and wanted("completion_times.png"):
        fig = new_figure(figsize=(6, 3.5))
        ax = fig.subplots()
        ax.plot([1000 * f for f in fcts], [(i + 1) / len(fcts) for i in range(len(fcts))])
        ax.set_xlabel("message completion time (ms)")
        ax.set_ylabel("CDF")
        ax.set_title("Message completion times", y=1.0)
        save(fig, "completion_times.png")
    if m.reorder and wanted("reorder_depth.png"):
        save(_reorder_depths(m), "reorder_depth.png")
    return written


def _reorder_depths(m: RunMetrics) -> Figure:
    """Per receiving host, its deepest and 99th-percentile reorder buffer (cells)."""
    hosts = sorted(m.reorder, key=_natural)
    many = len(hosts) > MAX_LABELS
    # a bar pair per host: labelled each up to MAX_LABELS hosts; past that (a k=8 fabric's
    # 128) the labels would not be read, and 128 ticks and rotated labels on a 38-inch
    # figure were most of its drawing: a narrower figure, a label every so many hosts
    fig = new_figure(figsize=(max(6, 0.08 * len(hosts) + 2) if many
                              else max(6, 0.3 * len(hosts)), 3.5))
    ax = fig.subplots()
    x = range(len(hosts))
    # side by side: drawn over each other, an equal max would hide behind its p99
    _bars(ax, [i - 0.2 for i in x], [m.reorder[h].get("max_depth", 0) for h in hosts],
          width=0.4, color="C0", label="max")
    _bars(ax, [i + 0.2 for i in x], [m.reorder[h].get("p99_depth", 0) for h in hosts],
          width=0.4, color="C1", label="p99")
    shown = range(0, len(hosts), -(-len(hosts) // REORDER_MANY_LABELS)) if many else x
    ax.set_xticks(list(shown))
    ax.set_xticklabels([hosts[i] for i in shown])
    if many:
        ax.set_xlim(-0.6, len(hosts) - 0.4)
        ax.set_xlabel(f"{len(hosts)} hosts in name order (a label every {shown.step})",
                      fontsize=7)
    ax.set_ylabel("reorder depth (cells)")
    ax.set_title("Receiver reorder depth", y=1.0)
    ax.tick_params(axis="x", rotation=90, labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def one_draw(fig: Figure, path: Path) -> None:
    """Save ``fig`` drawing it once. ``savefig(bbox_inches="tight")`` draws a figure twice
    (once to measure it, once to paint it) and a constrained layout adds a third pass; here
    the constrained layout, which fits the labels and the legends outside the axes into the
    figure, runs once at the saving resolution, and then one draw paints it."""
    fig.set_dpi(DPI)
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    fig.get_layout_engine().execute(fig)
    fig.set_layout_engine("none")  # laid out: the draw below keeps it as it is
    # savefig would measure the figure once more before drawing it whenever a layout engine
    # is set (even the inert one left here); the canvas's own print draws it once
    fig.canvas.print_png(path, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})


def _bars(ax, x: Sequence[float], heights: Sequence[float], *, color: str, label: str,
          width: float = 0.8, bottom: Sequence[float] | None = None) -> None:
    """``ax.bar``'s bars as one collection: ax.bar adds every bar as a patch of its own, and
    at k=8 its 1536 patches took a quarter of the plots' time."""
    from matplotlib.collections import PolyCollection

    half = width / 2
    base = bottom if bottom is not None else [0.0] * len(heights)
    verts = [[(xi - half, b), (xi - half, b + h), (xi + half, b + h), (xi + half, b)]
             for xi, h, b in zip(x, heights, base, strict=True)]
    bars = PolyCollection(verts, facecolors=color, edgecolors="none", linewidths=0,
                          label=label)
    bars.sticky_edges.y.append(0)  # as ax.bar: the value axis starts at 0, no margin below
    ax.add_collection(bars)
    ax.autoscale_view()


def _natural(name: str) -> tuple[str, int]:
    digits = "".join(c for c in name if c.isdigit())
    return name.rstrip("0123456789"), int(digits or 0)


def _by_tier(acct: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    tiers: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for label, d in acct["directions"].items():
        tiers.setdefault(d["tier"], []).append((label, d))
    for rows in tiers.values():
        rows.sort(key=lambda kv: _natural(kv[0].split("->")[0]) + _natural(kv[0].split("->")[1]))
    return dict(sorted(tiers.items()))


def _link_loads(acct: dict[str, Any]) -> Figure:
    """Per tier: each link direction's cells and other packets as a share of what its rate
    allowed over the whole workload window (stacked bars, 100% = the link's rate)."""
    tiers = _by_tier(acct)
    widest = max(len(rows) for rows in tiers.values())
    fig = new_figure(layout="constrained",
                     figsize=(max(7, 0.16 * widest + 2), 2.2 * len(tiers) + 0.6))
    axes = fig.subplots(len(tiers), 1, squeeze=False)
    for ax, (tier, rows) in zip(axes[:, 0], tiers.items(), strict=True):
        x = range(len(rows))
        cells, other = zip(*(_load_split(d) for _, d in rows), strict=True)
        _bars(ax, x, cells, color="#3b7dd8", label="cells (data)")
        _bars(ax, x, other, bottom=cells, color="#f0a030", label="other (ACK, CNP, ...)")
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of rate")
        b = acct["tiers"].get(tier, {})
        balance = (f"  cells min/mean {b['min_over_mean']:.2f}, max/mean "
                   f"{b['max_over_mean']:.2f}" if b.get("mean_cells") else "")
        ax.set_title(f"{tier}: {len(rows)} link directions{balance}", fontsize=9, loc="left",
                     y=1.0)
        if len(rows) <= MAX_LABELS:
            ax.set_xticks(list(x))
            ax.set_xticklabels([label for label, _ in rows], rotation=90, fontsize=6)
        else:  # too many to read: no labels, and no tick per bar (a tick is four artists)
            ax.set_xticks([])
        ax.set_xlim(-0.6, len(rows) - 0.4)
    axes[0, 0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                      frameon=False)
    fig.suptitle(f"Link load over the whole workload ({span_text(acct['window_s'])})")
    return fig


def _load_split(d: dict[str, Any]) -> tuple[float, float]:
    """A direction's load in % of its rate as (cells, other): its ``offered`` (exact line time
    in the simulator) split in the proportion of what it carried."""
    carried = d["cells"] + d["other"]
    if not carried or d.get("offered") is None:
        return 0.0, 0.0
    total = 100 * d["offered"]
    return total * d["cells"] / carried, total * d["other"] / carried


def _queue_tiers(m: RunMetrics, acct: dict[str, Any]) -> dict[str, list[str]]:
    tier_of = {d["queue"]: d["tier"] for d in acct.get("directions", {}).values()
               if d.get("queue")} if acct else {}
    tiers: dict[str, list[str]] = {}
    for key in m.queues:
        tiers.setdefault(tier_of.get(key, "queues"), []).append(key)
    return {t: sorted(keys, key=lambda k: (*_natural(k.split(":")[0]), int(k.split(":")[1])))
            for t, keys in sorted(tiers.items())}


def _queue_depths(m: RunMetrics, acct: dict[str, Any]) -> Figure:
    """Per tier: a heatmap of depth (queue x time), or lines for a tier of few queues."""
    t0 = float(m.run.get("t0", 0.0))
    tiers = _queue_tiers(m, acct)
    last = max((t for s in m.queues.values() for t, _ in s), default=None)
    t_end = (last - t0) if last is not None else 1.0
    deepest = {k: max((v for _, v in s), default=0) for k, s in m.queues.items()}
    heights = [max(1.6, 0.09 * len(k) + 0.9) for k in tiers.values()]
    names = _queue_names(acct)
    size = (8, sum(heights) + 0.6)
    # heatmaps only (no legends beside the axes): a fixed layout, measured from the labels
    fixed = all(len(keys) > MAX_LINES for keys in tiers.values())
    if fixed:
        fig = new_figure(figsize=size, dpi=DPI)
        axes = _stacked_axes(fig, heights, _label_margin_in(fig, tiers, names))
    else:
        fig = new_figure(figsize=size, layout="constrained")
        axes = list(fig.subplots(len(tiers), 1, squeeze=False,
                                 gridspec_kw={"height_ratios": heights})[:, 0])
    peak = max(deepest.values(), default=1) or 1
    image = None
    for ax, (tier, keys) in zip(axes, tiers.items(), strict=True):
        busy = [k for k in keys if deepest[k]]
        if len(keys) <= MAX_LINES:
            for k in keys:
                ax.plot([t - t0 for t, _ in m.queues[k]], [v for _, v in m.queues[k]],
                        label=names.get(k, k), linewidth=1)
            ax.set_ylabel("packets")
            if busy:
                ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                          frameon=False)
        else:
            image = _heatmap(ax, m, keys, t0, t_end, peak, names)
            ax.set_ylabel("queue", fontsize=7)
        ax.set_xlim(0, max(t_end, MIN_SPAN_S))
        ax.set_title(f"{tier}: {len(keys)} queues, {len(busy)} ever non-empty, deepest "
                     f"{max((deepest[k] for k in keys), default=0)} packets",
                     fontsize=9, loc="left", y=1.0)
    axes[-1].set_xlabel("time (s)")
    width, height = size
    if fixed:
        cax = fig.add_axes(((width - _QD_RIGHT_IN + 0.15) / width, 0.3, 0.12 / width, 0.4))
        fig.colorbar(image, cax=cax, label="queue depth (packets)")
        fig.suptitle("Queue depth over time", y=1 - 0.12 / height, va="top")
        # laid out here: an inert engine, so that one_draw adds no layout of its own
        from matplotlib.layout_engine import PlaceHolderLayoutEngine

        fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True,
                                                      colorbar_gridspec=True))
    else:
        if image is not None:
            fig.colorbar(image, ax=axes, label="queue depth (packets)", fraction=0.03)
        fig.suptitle("Queue depth over time")
    return fig


# A heatmap-only queue-depth figure's layout, in inches: the constrained layout measured
# every tick label of every panel twice over, a third of the figure's drawing at k=8. The
# left margin is measured from the labels shown; the rest is the text the figure always has
# (suptitle; per panel a 9 pt title and the time axis's tick labels; the colorbar's ticks and
# label on the right).
_QD_TOP_IN, _QD_GAP_IN, _QD_BOTTOM_IN, _QD_RIGHT_IN = 0.55, 0.55, 0.5, 1.1


def _shown_labels(keys: list[str]) -> list[str]:
    """The queues of a heatmap tier that get a y tick label (about HEATMAP_ROW_LABELS)."""
    return keys[::_label_step(keys)]


def _label_step(keys: list[str]) -> int:
    return max(1, len(keys) // HEATMAP_ROW_LABELS)


def _label_margin_in(fig: Figure, tiers: dict[str, list[str]], names: dict[str, str]) -> float:
    """Inches left of the axes for the widest tick label shown, the 'queue' label and pads."""
    from matplotlib.font_manager import FontProperties

    renderer = fig.canvas.get_renderer()
    tick, label = FontProperties(size=5), FontProperties(size=7)
    widest = max((renderer.get_text_width_height_descent(names.get(k, k), tick, ismath=False)[0]
                  for keys in tiers.values() for k in _shown_labels(keys)), default=0.0)
    tall = renderer.get_text_width_height_descent("queue", label, ismath=False)[1]
    return 0.08 + widest / fig.dpi + 0.06 + tall / fig.dpi + 0.08


def _stacked_axes(fig: Figure, heights: list[float], left_in: float) -> list[Any]:
    """One axes per tier, top to bottom, sharing the height left by the fixed margins in
    the proportions of ``heights``."""
    width, height = fig.get_size_inches()
    room = height - _QD_TOP_IN - _QD_BOTTOM_IN - _QD_GAP_IN * (len(heights) - 1)
    scale = room / sum(heights)
    axes, top = [], height - _QD_TOP_IN
    for h in heights:
        bottom = top - h * scale
        axes.append(fig.add_axes((left_in / width, bottom / height,
                                  (width - left_in - _QD_RIGHT_IN) / width, h * scale / height)))
        top = bottom - _QD_GAP_IN
    return axes


def _queue_names(acct: dict[str, Any]) -> dict[str, str]:
    """Queue 'switch:port' -> the link direction it sends on ('l1->s2')."""
    return {d["queue"]: label for label, d in (acct or {}).get("directions", {}).items()
            if d.get("queue")}


def depth_grid(series: list[list[list[float]]], t0: float, t_end: float,
               bins: int) -> list[list[float | None]]:
    """Per queue, the deepest sample in each of ``bins`` equal intervals of [t0, t0 + t_end];
    None where no sample fell (a monitor that fell behind: BMv2's register reads through
    simple_switch_CLI took 16 s for one round of 20 switches once), never a made-up 0."""
    width = max(t_end, MIN_SPAN_S) / bins
    grid: list[list[float | None]] = [[None] * bins for _ in series]
    for row, samples in enumerate(series):
        for t, v in samples:
            col = min(bins - 1, max(0, int((t - t0) / width)))
            old = grid[row][col]
            grid[row][col] = v if old is None else max(old, v)
    return grid


def _heatmap(ax, m: RunMetrics, keys: list[str], t0: float, t_end: float, peak: float,
             names: dict[str, str]):
    import matplotlib as mpl
    import numpy as np

    # one column per sampling interval at most: finer bins would only show sampling gaps
    samples = max((len(m.queues[k]) for k in keys), default=1)
    bins = max(10, min(120, samples))
    grid = depth_grid([m.queues[k] for k in keys], t0, t_end, bins)
    masked = np.ma.masked_invalid(np.array([[np.nan if v is None else v for v in row]
                                            for row in grid], dtype=float))
    cmap = mpl.colormaps["magma_r"].with_extremes(bad="#d0d0d0")  # grey: no sample there
    width = max(t_end, MIN_SPAN_S) / bins
    image = ax.imshow(masked, aspect="auto", interpolation="nearest", cmap=cmap,
                      extent=(0, bins * width, len(keys) - 0.5, -0.5), vmin=0, vmax=peak)
    ax.set_yticks(range(0, len(keys), _label_step(keys)))
    ax.set_yticklabels([names.get(k, k) for k in _shown_labels(keys)], fontsize=5)
    gaps = sum(1 for col in zip(*grid, strict=True) if all(v is None for v in col))
    if gaps:
        ax.text(1.0, 1.02, f"grey: no sample ({gaps} of {bins} intervals)", fontsize=6,
                ha="right", va="bottom", transform=ax.transAxes)
    return image


def _flow_rates(m: RunMetrics) -> Figure:
    t0 = float(m.run.get("t0", 0.0))
    fig = new_figure(figsize=(8, 3.5))
    ax = fig.subplots()
    series = {k: f.get("samples", []) for k, f in sorted(m.flows.items()) if f.get("samples")}
    if len(series) <= MAX_LINES:
        for key, samples in series.items():
            ax.plot([t - t0 for t, _ in samples], [v for _, v in samples], label=key)
        if series:
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    elif series:
        _rate_band(ax, series, t0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sending rate (cells/s)")
    ax.set_title(f"Per-flow rate over time ({len(m.flows)} flows)")
    return fig


def _rate_band(ax, series: dict[str, list[list[float]]], t0: float) -> None:
    """Every flow's rate sampled on one time grid (the last value before each grid point):
    min-max and quartile bands with the median."""
    t_lo = min(s[0][0] for s in series.values()) - t0
    t_hi = max(s[-1][0] for s in series.values()) - t0
    grid = [t_lo + (t_hi - t_lo) * i / 100 for i in range(101)]
    cols: list[list[float]] = [[] for _ in grid]
    for samples in series.values():
        j = 0
        for i, t in enumerate(grid):
            while j + 1 < len(samples) and samples[j + 1][0] - t0 <= t:
                j += 1
            if samples[0][0] - t0 <= t <= samples[-1][0] - t0:
                cols[i].append(samples[j][1])
    pts = [(t, c) for t, c in zip(grid, cols, strict=True) if c]
    ts = [t for t, _ in pts]
    ax.fill_between(ts, [min(c) for _, c in pts], [max(c) for _, c in pts], color="#9cc3f0",
                    alpha=0.5, label="min-max")
    ax.fill_between(ts, [percentile(c, 25) for _, c in pts], [percentile(c, 75) for _, c in pts],
                    color="#3b7dd8", alpha=0.5, label="25-75%")
    ax.plot(ts, [percentile(c, 50) for _, c in pts], color="#123e7a", label="median")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
