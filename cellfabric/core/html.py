"""One self-contained HTML page per run (and per sweep): ``report.html`` next to metrics.json.

Nothing is fetched from elsewhere: the plots are embedded as ``data:`` URIs, the style and the
little script are inline, and the page opens from a file with the network off. A run's page:
the summary figures, every plot, the per-tier link tables, the failures on a timeline, and
the journeys of the sampled cells (when the run was traced, cellfabric.core.journeys). A
sweep's page: its table (summary.csv's rows) and its plots.
"""

from __future__ import annotations

import base64
import csv
import json
import math
from html import escape
from pathlib import Path
from typing import Any

from cellfabric.core.journeys import (
    TraceError,
    describe_decision,
    dropped_journeys,
    journeys,
    load_traces,
)

PAGE = "report.html"
MAX_JOURNEYS = 12  # on the page; `cellfabric trace` shows all of them

_STYLE = """
body{font-family:sans-serif;margin:1.5em;max-width:1200px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;
text-align:right;font-size:.9em}th{background:#f4f4f4}td.l,th.l{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.drop{color:#b00;font-weight:bold}
details{margin:.4em 0}summary{cursor:pointer}.note{color:#666;font-size:.9em}
"""

# Fills the counts from the embedded data, so a page whose script broke is visibly incomplete.
_SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('page-data').textContent);
  var n = document.getElementById('journey-count');
  if (n) { n.textContent = String(data.journeys) + ' sampled journeys, ' +
           String(data.drops) + ' sampled drops'; }
  document.querySelectorAll('details.journey').forEach(function(d, i){
    d.dataset.index = String(i);
  });
  document.body.dataset.ready = '1';
})();
"""


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return escape(json.dumps(value))[:200]
    return escape(str(value))


def _png(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{escape(path.stem)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(path.name)}</figcaption></figure>")


def _table(head: list[str], rows: list[list[Any]], cls: str = "", left: int = 1) -> str:
    def cell(tag: str, i: int, v: Any) -> str:
        return f'<{tag}{" class=l" if i < left else ""}>{_fmt(v)}</{tag}>'
    out = [f'<table class="{cls}"><tr>' + "".join(cell("th", i, h) for i, h in enumerate(head))
           + "</tr>"]
    out += ["<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows]
    return "\n".join(out) + "</table>"


def _summary(m: dict[str, Any]) -> str:
    s = m.get("summary", {})
    rows = [f'<tr data-figure="{escape(k)}"><td class=l>{escape(k)}</td><td>{_fmt(v)}</td></tr>'
            for k, v in s.items() if not isinstance(v, dict)]
    return '<table id="summary"><tr><th class=l>figure</th><th>value</th></tr>' \
        + "".join(rows) + "</table>"


def _link_tables(m: dict[str, Any]) -> str:
    directions = (m.get("summary", {}).get("link_accounting") or {}).get("directions", {})
    if not directions:
        return '<p class="note">no per-link accounting in this run</p>'
    tiers: dict[str, list[list[Any]]] = {}
    for name, d in sorted(directions.items()):
        tiers.setdefault(d.get("tier", "?"), []).append(
            [name, d.get("queue"), d.get("cells"), d.get("other"), d.get("control", 0),
             d.get("offered")])
    return "".join(f'<h3>{escape(tier)}</h3>' + _table(
        ["direction", "queue", "cells", "other", "NOS frames (off the line)",
         "offered (of capacity)"], rows, "links", 2)
        for tier, rows in tiers.items())


def _timeline(m: dict[str, Any]) -> str:
    run = m.get("run", {})
    events = [e for e in run.get("events", []) if isinstance(e, dict)]
    end = max([run.get("sim", {}).get("virtual_time_s") or 0.0]
              + [float(e.get("t", 0.0)) for e in events]) or 1.0
    marks = []
    for e in events:
        x = 10 + 980 * float(e.get("t", 0.0)) / end
        colour = "#b00" if "down" in str(e.get("event")) else "#06c"
        marks.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="8" y2="40" stroke="{colour}" '
                     f'stroke-width="2"><title>{_fmt(e.get("t"))} s: {_fmt(e.get("event"))}'
                     "</title></line>")
    svg = ('<svg id="timeline" width="1000" height="60" viewBox="0 0 1000 60">'
           '<line x1="10" x2="990" y1="40" y2="40" stroke="#888"/>' + "".join(marks)
           + f'<text x="10" y="56" font-size="11">0 s</text><text x="930" y="56" '
           f'font-size="11">{end:.3g} s</text></svg>')
    rows = [[e.get("t"), e.get("event")] for e in events]
    return svg + (_table(["t (s)", "event"], rows, "events", 2) if rows
                  else '<p class="note">no failures or control-plane events</p>')


def _journey_html(j: dict[str, Any]) -> str:
    cell = j.get("cell") or {}
    title = (f"{j['src']} &rarr; {escape(str(j['dst']))} psn {cell.get('psn', '?')} "
             f"qpn {cell.get('qpn', '?')}")
    if "one_way_ns" in j:
        b = j["breakdown"]
        title += (f": one-way {j['one_way_ns'] / 1000:.3f} us = links {b['links_ns'] / 1000:.3f}"
                  f" + queues {b['queue_waits_ns'] / 1000:.3f} + NIC {b['nic_wait_ns'] / 1000:.3f}"
                  " us")
    elif "span_ns" in j:
        b = j["breakdown"]
        title += (f": switches {j['span_ns'] / 1000:.3f} us = links {b['links_ns'] / 1000:.3f}"
                  f" + queues {b['queue_waits_ns'] / 1000:.3f} + switch "
                  f"{b['processing_ns'] / 1000:.3f} us")
    elif "dropped" in j:
        d = j["dropped"]
        title += (f': <span class="drop">dropped at {escape(d["switch"])}: '
                  f"{escape(str(d.get('reason')))}</span>")
    elif "lost" in j:
        title += f": lost {escape(j['lost'])}"
    rows = []
    for h in j["hops"]:
        picks = "; ".join(describe_decision(d) for d in h["decisions"] if d["ev"] == "choice")
        rows.append([h["switch"], h["in_port"], h["t_in"], h["link_in_ns"], h["depth"],
                     h["queue_wait_ns"], h["out_port"], h.get("peer"), picks,
                     h.get("drop", {}).get("reason", "")])
    table = _table(["switch", "in port", "t in (ns)", "link (ns)", "queue depth", "wait (ns)",
                    "out port", "to", "selector choice", "drop"], rows, "hops")
    return f'<details class="journey" open><summary>{title}</summary>{table}</details>'


def _journeys(run_dir: Path) -> tuple[str, int, int]:
    try:
        tr = load_traces(run_dir)
    except TraceError:
        return ('<p class="note">not traced (run with <code>--trace-sample N</code>; '
                "<code>cellfabric trace</code> follows one cell)</p>", 0, 0)
    found = journeys(tr, limit=MAX_JOURNEYS)
    dropped = [j for j in journeys(tr) if "dropped" in j][:MAX_JOURNEYS]
    shown = found + [j for j in dropped if j not in found]
    drops = dropped_journeys(tr)
    note = (f'<p class="note">1 packet in {tr.index.get("sample_every", "?")} traced at every '
            f"switch ({len(tr.sends)} sampled sends); times in "
            f'{escape(tr.index.get("clock", "virtual ns"))}. '
            '<span id="journey-count"></span></p>')
    return note + _missing_fields(tr.lacks) + "".join(_journey_html(j) for j in shown), \
        len(shown), len(drops)


def _missing_fields(lacks: dict[str, list[str]]) -> str:
    """Which record fields the switches' traces did not give (a real BMv2's log has no queue
    depth, for one): those columns are empty for them."""
    if not lacks:
        return ""
    by_fields: dict[tuple[str, ...], list[str]] = {}
    for switch, missing in sorted(lacks.items()):
        by_fields.setdefault(tuple(missing), []).append(switch)
    items = "".join(f"<li>{escape(', '.join(sw))}: {escape(', '.join(missing))}</li>"
                    for missing, sw in by_fields.items())
    return (f'<div id="missing-fields"><p class="note">From BMv2\'s own log, which does not '
            f"give these fields:</p><ul>{items}</ul></div>")


def _page(title: str, body: str, data: dict[str, Any]) -> str:
    blob = json.dumps(data).replace("</", "<\\/")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body><h1>{escape(title)}</h1>{body}"
            f'<script type="application/json" id="page-data">{blob}</script>'
            f"<script>{_SCRIPT}</script></body></html>\n")


def write_run_page(run_dir: Path, sections: dict[str, Any] | None = None) -> Path:
    """``run_dir/report.html`` from the run's metrics.json, PNGs and traces. The page reads
    only metrics.json's ``run`` and ``summary``: a caller that has them as metrics.json holds
    them (``sections``, decoded from the same JSON) spares the page decoding the whole file
    (k=8: 5.5 MB, 0.17 CPU s, nearly all of it samples the page never shows)."""
    m = sections if sections is not None else json.loads((run_dir / "metrics.json").read_text())
    run = m.get("run", {})
    head = " &middot; ".join(f"{escape(k)} <b>{_fmt(run.get(k))}</b>" for k in (
        "topology", "target", "workload", "cc", "spray", "cell_size"))
    journey_html, n_journeys, n_drops = _journeys(run_dir)
    body = (f"<p>{head}</p><h2>Summary</h2>{_summary(m)}"
            "<h2>Plots</h2>" + "".join(_png(p) for p in sorted(run_dir.glob("*.png")))
            + f"<h2>Links per tier</h2>{_link_tables(m)}"
            + f"<h2>Failures and events</h2>{_timeline(m)}"
            + f"<h2>Sampled journeys</h2>{journey_html}")
    path = run_dir / PAGE
    path.write_text(_page(f"cellfabric run {run.get('name', run_dir.name)}", body,
                          {"journeys": n_journeys, "drops": n_drops}))
    return path


def write_sweep_page(results: Path, title: str = "") -> Path:
    """``results/report.html``: the sweep's table (summary.csv) and its plots."""
    table = '<p class="note">no summary.csv</p>'
    csv_path = results / "summary.csv"
    if csv_path.exists():
        with csv_path.open() as fh:
            rows = list(csv.reader(fh))
        if rows:
            table = _table(rows[0], rows[1:], "sweep")
    body = (f"<h2>Table</h2>{table}<h2>Plots</h2>"
            + "".join(_png(p) for p in sorted(results.glob("*.png"))))
    path = results / PAGE
    path.write_text(_page(f"cellfabric sweep {title or results.name}", body,
                          {"journeys": 0, "drops": 0}))
    return path
