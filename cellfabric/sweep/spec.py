"""A sweep SPEC: a base experiment and the axes to vary, expanded into tasks.

Each task is one ordinary command line (`cellfabric sim ...` or `cellfabric run ...`) plus the
`--results FOLDER` the sweep gives it. The SPEC (YAML)::

    name: headline                 # default: the file's stem; names the results folder
    mode: sim                      # sim | run (per group too)
    program: cellfabric            # the command before the mode (default cellfabric)
    options: {workload: permutation, size: 131072}   # defaults for every task
    groups:                        # or, for one group: axes / tasks at the top level
      - name: utilization
        options: {topology: leaf-spine}
        axes:                      # cartesian product of every axis
          spray: [ecmp, spray]
          seed: [1, 2, 3]
      - name: incast
        tasks:                     # an explicit list (each entry x the axes' product)
          - {workload: incast, senders: 4, topology: leaf-spine-3x3}
        axes: {cc: [none, hpcc]}
    plots:                         # optional; default: the two below
      - {x: load, y: goodput, series: spray}
      - {x: senders, y: slowdown_p99, series: cc, group: incast, file: incast.png}

An axis value may itself be a mapping, to vary several options together (one incast degree
with its topology and message size). Options become flags: `topology` is the positional
argument, `key: value` is `--key value`, `true` is a bare `--key`, a list repeats the flag.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MODES = ("sim", "run")
REPLICATE = "seed"
# `run`/`sim` --load: goodput (payload delivered over each flow's interval, as a fraction of the
# host's link rate) against the configured offered load
LOAD_PLOT = {"x": "load", "y": "goodput", "series": "spray", "file": "goodput_vs_load_per_spray.png",
             "title": "goodput vs offered load, per spray mode"}
DEFAULT_PLOTS = (LOAD_PLOT, {"x": "senders", "y": "slowdown_p99", "series": "cc"})
_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")
_GROUP_KEYS = {"name", "mode", "options", "axes", "tasks"}
_TOP_KEYS = _GROUP_KEYS | {"groups", "program", "plots"}
_PLOT_KEYS = {"x", "y", "series", "group", "file", "title"}


class SpecError(ValueError):
    """A SPEC problem, as one line naming the file, the field and the value."""


@dataclass(frozen=True)
class Task:
    id: str
    group: str
    params: dict[str, Any]
    argv: tuple[str, ...]  # the command without --results

    def command(self, results_dir: Path | str) -> list[str]:
        return [*self.argv, "--results", str(results_dir)]

    def command_line(self, results_dir: Path | str) -> str:
        return shlex.join(self.command(results_dir))


@dataclass
class PlotSpec:
    x: str
    y: str
    series: str
    group: str = ""  # only this group's tasks (default: every task that has x, y and series)
    file: str = ""
    title: str = ""

    def filename(self) -> str:
        return self.file or f"{self.y}_vs_{self.x}_per_{self.series}.png"


@dataclass
class Spec:
    name: str
    path: Path
    tasks: list[Task]
    plots: list[PlotSpec] = field(default_factory=list)
    modes: set[str] = field(default_factory=set)


def load_spec(path: Path | str) -> Spec:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise SpecError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse_spec(doc, path)


def parse_spec(doc: Any, path: Path) -> Spec:
    ctx = _Ctx(path)
    if not isinstance(doc, dict):
        ctx.fail("", doc, "expected a mapping with 'axes', 'tasks' or 'groups'")
    ctx.unknown_keys("", doc, _TOP_KEYS)
    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        ctx.fail("name", name, "expected letters, digits, '.', '_' or '-'")
    program = doc.get("program", ["cellfabric"])
    if isinstance(program, str):
        program = shlex.split(program)
    if not isinstance(program, list) or not program or not all(isinstance(p, str) for p in program):
        ctx.fail("program", program, "expected a command (string or list of strings)")
    if "groups" in doc:
        groups = doc["groups"]
        if not isinstance(groups, list) or not groups:
            ctx.fail("groups", groups, "expected a non-empty list of groups")
        overlap = {"axes", "tasks"} & set(doc)
        if overlap:
            ctx.fail(sorted(overlap)[0], doc[sorted(overlap)[0]],
                     "put axes and tasks inside the groups when 'groups' is given")
    else:
        groups = [{"name": "main", **{k: doc[k] for k in ("axes", "tasks") if k in doc}}]
    base = ctx.options("options", doc.get("options", {}))
    mode = doc.get("mode", "sim")
    tasks: list[Task] = []
    seen_groups: set[str] = set()
    for gi, group in enumerate(groups):
        where = f"groups[{gi}]" if "groups" in doc else ""
        tasks += _expand_group(ctx, where, group, base, mode, program, seen_groups)
    ids = [t.id for t in tasks]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:
        ctx.fail("groups", dup, "two tasks with the same command; remove the duplicate")
    return Spec(name=name, path=path, tasks=tasks,
                plots=with_load_plot(_plots(ctx, doc.get("plots")), tasks),
                modes={t.argv[len(program)] for t in tasks})


def with_load_plot(plots: list[PlotSpec], tasks: list[Task]) -> list[PlotSpec]:
    """A sweep that varies the offered load (`load`) always gets goodput vs load per spray
    mode, whatever else its SPEC plots."""
    loads = {repr(t.params.get("load")) for t in tasks if t.params.get("load") is not None}
    if len(loads) < 2 or any(p.x == "load" and p.y == "goodput" for p in plots):
        return plots
    return [*plots, PlotSpec(**LOAD_PLOT)]


def _expand_group(ctx: _Ctx, where: str, group: Any, base: dict[str, Any], mode: Any,
                  program: list[str], seen: set[str]) -> list[Task]:
    if not isinstance(group, dict):
        ctx.fail(where, group, "expected a mapping")
    ctx.unknown_keys(where, group, _GROUP_KEYS)
    name = group.get("name", f"g{len(seen)}")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name) or name in seen:
        ctx.fail(ctx.join(where, "name"), name, "expected a unique name of letters, digits, _ or -")
    seen.add(name)
    mode = group.get("mode", mode)
    if mode not in MODES:
        ctx.fail(ctx.join(where, "mode"), mode, f"expected one of {', '.join(MODES)}")
    options = {**base, **ctx.options(ctx.join(where, "options"), group.get("options", {}))}
    explicit = group.get("tasks", [{}])
    if not isinstance(explicit, list) or not explicit:
        ctx.fail(ctx.join(where, "tasks"), explicit, "expected a non-empty list of mappings")
    entries = [ctx.options(ctx.join(where, f"tasks[{i}]"), e) for i, e in enumerate(explicit)]
    axes = group.get("axes", {})
    if not isinstance(axes, dict):
        ctx.fail(ctx.join(where, "axes"), axes, "expected a mapping of axis name to values")
    axis_values = [ctx.axis(ctx.join(where, f"axes.{k}"), k, v) for k, v in axes.items()]
    if "tasks" not in group and not axes:
        ctx.fail(where or "axes", group, "a group needs 'axes' or 'tasks'")
    tasks = []
    for entry in entries:
        for combo in itertools.product(*axis_values):
            params = dict(options)
            varied = dict(entry)
            for chosen in combo:
                varied.update(chosen)
            params.update(varied)
            argv = [*program, mode, *_flags(params)]
            tasks.append(Task(id=_task_id(name, varied, argv), group=name, params=params,
                              argv=tuple(argv)))
    return tasks


def _flags(params: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if params.get("topology") is not None:
        out.append(str(params["topology"]))
    for key, value in params.items():
        if key in ("topology", "results") or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        values = value if isinstance(value, list) else [value]
        for v in values:
            out += [flag] if v is True else [flag, _text(v)]
    return out


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _task_id(group: str, varied: dict[str, Any], argv: list[str]) -> str:
    """Readable (group and the varied values) and unique (a hash of the whole command)."""
    slug = "-".join(f"{k}={_text(v)}" for k, v in varied.items())
    slug = re.sub(r"[^A-Za-z0-9=._-]+", "_", slug)[:80]
    digest = hashlib.sha1("\0".join(argv).encode()).hexdigest()[:8]
    return "-".join(p for p in (group, slug, digest) if p)


def _plots(ctx: _Ctx, raw: Any) -> list[PlotSpec]:
    if raw is None:
        return [PlotSpec(**p) for p in DEFAULT_PLOTS]
    if not isinstance(raw, list):
        ctx.fail("plots", raw, "expected a list of {x, y, series}")
    out = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or not {"x", "y", "series"} <= set(p):
            ctx.fail(f"plots[{i}]", p, "expected a mapping with x, y and series")
        ctx.unknown_keys(f"plots[{i}]", p, _PLOT_KEYS)
        out.append(PlotSpec(**{k: str(v) for k, v in p.items()}))
    return out


class _Ctx:
    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def join(where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def fail(self, where: str, value: Any, why: str) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise SpecError(f"{self.path}: {where or 'top level'}: {why} (got {shown})")

    def unknown_keys(self, where: str, doc: dict[str, Any], allowed: set[str]) -> None:
        for key in doc:
            if key not in allowed:
                self.fail(self.join(where, str(key)), doc[key],
                          f"unknown field; expected one of {', '.join(sorted(allowed))}")

    def options(self, where: str, doc: Any) -> dict[str, Any]:
        if not isinstance(doc, dict):
            self.fail(where, doc, "expected a mapping of option to value")
        for key, value in doc.items():
            if not isinstance(key, str) or not _KEY.match(key):
                self.fail(where, key, "an option name is lower-case letters, digits, - or _")
            if key == "results":
                self.fail(self.join(where, key), value, "the sweep gives each task its folder")
            if not _is_scalar(value) and not (isinstance(value, list)
                                               and all(_is_scalar(v) for v in value)):
                self.fail(self.join(where, key), value, "expected a value or a list of values")
        return dict(doc)

    def axis(self, where: str, name: str, values: Any) -> list[dict[str, Any]]:
        if not isinstance(values, list) or not values:
            self.fail(where, values, "expected a non-empty list of values")
        out = []
        for i, v in enumerate(values):
            if isinstance(v, dict):
                out.append(self.options(f"{where}[{i}]", v))
            elif _is_scalar(v):
                if not _KEY.match(name):
                    self.fail(where, name, "an option name is lower-case letters, digits, - or _")
                out.append({name: v})
            else:
                self.fail(f"{where}[{i}]", v, "expected a value or a mapping of options")
        if len({repr(sorted(o.items())) for o in out}) != len(out):
            self.fail(where, values, "a value appears twice")
        return out


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None
