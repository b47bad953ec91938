"""`cellfabric report RESULTS`: a run's (metrics.json) or a sweep's (summary.csv) results as
one self-contained HTML page, RESULTS/report.html (cellfabric.core.html)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellfabric.core.html import write_run_page, write_sweep_page


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric report", description=(
        "Write RESULTS/report.html: summary, plots, per-tier link tables, failures on a "
        "timeline and sampled journeys (a run), or the table and plots (a sweep)."))
    ap.add_argument("results", type=Path, help="a run's or a sweep's results folder")
    args = ap.parse_args(argv)
    folder: Path = args.results
    try:
        if (folder / "metrics.json").exists():
            path = write_run_page(folder)
        elif (folder / "summary.csv").exists():
            path = write_sweep_page(folder)
        else:
            print(f"cellfabric report: error: {folder}: neither a run (metrics.json) nor a "
                  "sweep (summary.csv)", file=sys.stderr)
            return 2
    except (OSError, json.JSONDecodeError, KeyError) as e:
        print(f"cellfabric report: error: {folder}: {e}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0
