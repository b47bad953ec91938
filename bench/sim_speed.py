"""`bench/sim_bench.py --only speed`: htsim and `cellfabric sim` on the same fat-tree
permutation, side by side in one run, on this machine.

    htsim       built from ../shared/anchors/htsim with its build.sh (cached where build.sh
                puts it), run with its README's command (EQDS, spraying over 256 paths, 1 KB
                packets), best of 3; its events are counted by a second binary whose only
                change is a counter in the main loop (the timed binary is the pristine one)
    cellfabric  the whole command as a user types it (`cellfabric topo fat-tree --k K -o F`,
                then `cellfabric sim F --workload permutation ...`: imports, compile, set-up,
                run, report and plots), and its engine alone (metrics.json's wall clock)

The two take turns (htsim, cellfabric, htsim, ...): both meet the same moments of a shared
machine. Both at 100 Gb/s; k=8 is 128 hosts, k=16 is 1024. Nothing here asserts a time: the
figures and their ratios are written to the results JSON, and the README's table is made from
it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HTSIM_ANCHOR = Path(os.environ.get("HTSIM_ANCHOR", ROOT.parent / "shared" / "anchors" / "htsim"))
HTSIM_REPEATS = 3
# cellfabric's runs of the k=8 job, the best kept, as htsim's are (the machine is shared: a
# single run measured the neighbours as much as the simulator); k=16 runs once (minutes)
CELLFABRIC_REPEATS = {8: 3}
PERMUTATION_SEED = 13  # htsim's README: gen_permutation.py ... 0 13
# the main loop of htsim's main_eqds.cpp, which the counting binary adds a counter to
HTSIM_MAIN_LOOP = re.compile(r"while\s*\(\s*eventlist\.doNextEvent\(\)\s*\)\s*\{\s*\}")
HTSIM_COUNTED_LOOP = ("unsigned long long cf_events = 0; "
                      "while (eventlist.doNextEvent()) { ++cf_events; } "
                      "std::cerr << \"cellfabric-bench-events \" << cf_events << std::endl;")


# the project's packages (pyproject.toml), compiled to bytecode before the timed commands
PACKAGES = ("cellfabric", "controlplane", "hosts", "netlab", "p4sim", "topologies")


class BenchError(RuntimeError):
    """A step of the bench could not run; its message is one line."""


def _run(cmd: list[str], cwd: Path, what: str,
         env: dict[str, str] | None = None) -> tuple[float, str, str]:
    """Run ``cmd``; (wall seconds, stdout, stderr). A failure is a one-line BenchError."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise BenchError(f"{what}: exit {p.returncode}: {tail[0]}")
    return wall, p.stdout, p.stderr


def htsim_bin() -> Path:
    """The folder holding htsim's binaries, built once by the anchor's build.sh."""
    build = HTSIM_ANCHOR / "build.sh"
    if not build.exists():
        raise BenchError(f"htsim: no {build}")
    _, out, _ = _run(["bash", str(build)], ROOT, "htsim build.sh")
    return Path(out.strip().splitlines()[-1])


def counting_htsim(bin_dir: Path) -> Path:
    """htsim_eqds with an event counter in its main loop, built beside it (once): the same
    objects and flags as the Makefile's htsim_eqds, main_eqds.cpp with the counter added."""
    exe = bin_dir / "htsim_eqds_counted"
    if exe.exists():
        return exe
    src = (bin_dir / "main_eqds.cpp").read_text()
    patched, n = HTSIM_MAIN_LOOP.subn(HTSIM_COUNTED_LOOP, src)
    if n != 1:
        raise BenchError("htsim: main_eqds.cpp's main loop not found (another htsim version?)")
    (bin_dir / "main_eqds_counted.cpp").write_text(patched)
    flags = ["-Wall", "-std=c++11", "-O2", f"-I{bin_dir.parent}", f"-I{bin_dir}"]
    _run(["g++", *flags, "-c", "main_eqds_counted.cpp", "-o", "main_eqds_counted.o"],
         bin_dir, "htsim: compiling the counting main")
    objs = ["firstfit.o", "main_eqds_counted.o", "vl2_topology.o", "fat_tree_topology.o",
            "fat_tree_switch.o", "bcube_topology.o", "connection_matrix.o",
            "oversubscribed_fat_tree_topology.o", "shortflows.o", "star_topology.o",
            "multihomed_fat_tree_topology.o"]
    _run(["g++", *flags, *objs, "-L..", "-lhtsim", "-o", exe.name], bin_dir,
         "htsim: linking the counting binary")
    return exe


class HtsimJob:
    """htsim's README command on a k-ary fat-tree (k^3/4 hosts), ready to run: ``run_once``
    times one run, ``result`` gives the best wall time, the events (from the counting binary)
    and the flows finished. A context manager: its folder goes at the end."""

    def __init__(self, k: int, size: int) -> None:
        self.bin_dir = htsim_bin()
        self.hosts = k ** 3 // 4
        self._tmp = tempfile.TemporaryDirectory(prefix="htsim-bench-")
        self.work = Path(self._tmp.name)
        self.walls: list[float] = []
        self.out = ""
        _run([sys.executable, str(self.bin_dir / "connection_matrices" / "gen_permutation.py"),
              "perm.cm", str(self.hosts), str(self.hosts), str(size), "0",
              str(PERMUTATION_SEED)], self.work, "htsim: gen_permutation.py")
        self.args = ["-tm", "perm.cm", "-nodes", str(self.hosts), "-conns", str(self.hosts),
                     "-linkspeed", "100000", "-mtu", "1024", "-strat", "ecmp_host", "-paths",
                     "256", "-cwnd", "50", "-q", "35", "-end", "5000",
                     "-o", "log.dat"]  # -o: a real file

    def __enter__(self) -> HtsimJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def run_once(self) -> float:
        wall, self.out, _ = _run([str(self.bin_dir / "htsim_eqds"), *self.args], self.work,
                                 "htsim_eqds")
        self.walls.append(wall)
        return wall

    def result(self) -> dict[str, Any]:
        _, _, err = _run([str(counting_htsim(self.bin_dir)), *self.args], self.work,
                         "htsim_eqds (counted)")
        found = re.search(r"cellfabric-bench-events (\d+)", err)
        finished = len(re.findall(r"^Flow .* finished at", self.out, re.M))
        events = int(found.group(1)) if found else None
        best = min(self.walls)
        return {"wall_s": best, "walls_s": self.walls, "events": events,
                "events_per_wall_s": events / best if events else None,
                "flows_finished": f"{finished}/{self.hosts}",
                "command": "htsim_eqds " + " ".join(self.args)}


def user_env() -> dict[str, str]:
    """The environment of a user's shell: Python keeps its compiled bytecode. Some machines
    (CI images, this one) set PYTHONDONTWRITEBYTECODE, which makes every command compile the
    project's sources again (about 0.5 s of CPU per process here); no user pays that twice."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cellfabric_best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The best of the runs (whole command), with every run's time."""
    best = min(runs, key=lambda r: r["whole_command_s"])
    return {**best, "whole_command_runs_s": [r["whole_command_s"] for r in runs],
            "engine_runs_s": [r["engine_s"] for r in runs]}


def cellfabric_once(k: int, size: int, results: Path) -> dict[str, Any]:
    """The user's two commands, timed as a whole, and the engine's figures from metrics.json.
    The project's bytecode is compiled first, as an install does and as any earlier run
    leaves it (``user_env``)."""
    exe = Path(sys.executable).with_name("cellfabric")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cellfabric"]
    env = user_env()
    _run([sys.executable, "-m", "compileall", "-q", *PACKAGES], ROOT, "compileall", env)
    results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cf-speed-", dir=results) as tmp:
        work = Path(tmp)
        topo_wall, _, _ = _run([*cmd, "topo", "fat-tree", "--k", str(k), "-o", f"ft{k}.yaml"],
                               work, "cellfabric topo", env)
        sim_args = [f"ft{k}.yaml", "--workload", "permutation", "--spray", "spray", "--cc",
                    "none", "--size", str(size), "--count", "1", "--link-rate", "100G",
                    "--quiet", "--results", str(work / "runs")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        sim_wall, _, _ = _run([*cmd, "sim", *sim_args], work, "cellfabric sim", env)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        (run_dir,) = list((work / "runs").iterdir())
        m = json.loads((run_dir / "metrics.json").read_text())
    s, simfig, wall = m["summary"], m["run"]["sim"], m["run"]["wall_clock"]
    whole = topo_wall + sim_wall
    return {"messages": f"{s['messages_completed']}/{s['messages_total']}",
            "goodput_fraction": s.get("goodput_fraction"), "cells_dropped": s["cells_dropped"],
            "virtual_s": simfig["virtual_time_s"], "events": simfig["events"],
            "packets": simfig["packets"], "whole_command_s": whole, "topo_s": topo_wall,
            "engine_s": wall["wall_s"], "events_per_wall_s": simfig["events"] / whole,
            "engine_events_per_s": wall["events_per_wall_s"],
            # ru_maxrss of the children so far: the sim's own peak unless an earlier child
            # (the htsim build, never this large) peaked higher
            "peak_rss_mib": max(before, peak_kib) / 1024,
            "command": "cellfabric sim " + " ".join(sim_args[:-2])}


def speed_section(k: int, size: int, results: Path) -> dict[str, Any]:
    """Both simulators on one job, their runs taken in turns (htsim, cellfabric, htsim, ...)
    so that both meet the same moments of a shared machine, whose speed drifts by a fifth
    within minutes; the best of each, and the ratios of their figures."""
    cf_repeats = CELLFABRIC_REPEATS.get(k, 1)
    print(f"  htsim k={k} (build cached after the first time) and cellfabric k={k} (the "
          f"whole command as a user runs it), in turns: best of {HTSIM_REPEATS} and of "
          f"{cf_repeats}", flush=True)
    ht: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = []
    job: HtsimJob | None = None
    try:
        job = HtsimJob(k, size)
    except BenchError as e:
        print(f"  {e}", flush=True)
        ht = {"error": str(e)}
    try:
        for turn in range(max(HTSIM_REPEATS, cf_repeats)):
            if job is not None and ht is None and turn < HTSIM_REPEATS:
                try:
                    job.run_once()
                except BenchError as e:
                    print(f"  {e}", flush=True)
                    ht = {"error": str(e)}
            if turn < cf_repeats:
                runs.append(cellfabric_once(k, size, results))
        if job is not None and ht is None:
            try:
                ht = job.result()
            except BenchError as e:
                ht = {"error": str(e)}
    finally:
        if job is not None:
            job.__exit__()
    cf = cellfabric_best(runs)
    print(f"  htsim: {json.dumps(ht)}", flush=True)
    print(f"  cellfabric: {json.dumps(cf)}", flush=True)
    out: dict[str, Any] = {"k": k, "hosts": k ** 3 // 4, "size": size, "cellfabric": cf,
                           "htsim": ht}
    if ht and ht.get("wall_s"):
        out["ratios"] = {
            "whole_command_over_htsim": cf["whole_command_s"] / ht["wall_s"],
            "engine_over_htsim": cf["engine_s"] / ht["wall_s"],
            "htsim_events_per_s_over_engine": (ht["events_per_wall_s"]
                                               / cf["engine_events_per_s"]
                                               if ht.get("events_per_wall_s") else None),
            "events_cellfabric_over_htsim": (cf["events"] / ht["events"]
                                             if ht.get("events") else None)}
    return out
