"""Shared by the sweep tests: a SPEC around the stand-in task command, and running the real
`cellfabric sweep` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
FAKE = HERE / "sweep_fixtures" / "fake_cellfabric.py"
CELLFABRIC = Path(sys.executable).parent / "cellfabric"


def write_spec(path: Path, doc: dict[str, Any], fake: bool = True) -> Path:
    if fake:
        doc = {"program": [sys.executable, str(FAKE)], **doc}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def sweep_cmd(spec: Path, results: Path, *extra: str) -> list[str]:
    return [str(CELLFABRIC), "sweep", str(spec), "--results", str(results),
            "--progress-every", "1", *extra]


def run_sweep(spec: Path, results: Path, *extra: str, timeout: float = 120
              ) -> subprocess.CompletedProcess:
    return subprocess.run(sweep_cmd(spec, results, *extra), capture_output=True, text=True,
                          timeout=timeout)


def rows(results: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (results / "summary.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["task"]] = row
    return out


def records(results: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for f in (results / "tasks").glob("*/task.json"):
        rec = json.loads(f.read_text())
        out[rec["task"]] = rec
    return out


def summaries(results: Path, ignore: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """task id -> (status, the summary of its metrics.json), wall-clock keys left out."""
    out = {}
    for task_id, rec in records(results).items():
        summary = None
        if rec.get("metrics"):
            doc = json.loads((results / "tasks" / task_id / rec["metrics"]).read_text())
            summary = {k: v for k, v in doc["summary"].items()
                       if k not in ignore and "wall" not in k}
        out[task_id] = (rec["status"], summary)
    return out
