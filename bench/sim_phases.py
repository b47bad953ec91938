"""CPU seconds per phase of one `cellfabric sim` command, as a user runs it.

    python bench/sim_phases.py [--repeat N] -- TOPOLOGY --workload permutation ...

The command runs as a child process (`python -m cellfabric.cli sim ... --results TMP`); each
progress line it prints that starts a phase ("[1/4] compiling", "[2/4] ... installing tables",
"[3/4] workload", "[4/4] report", "  results: ...") is stamped with the CPU time (user + sys)
of the child and of the children it has waited for (the compiler), read from /proc/PID/stat
when the line arrives; the total comes from the child's rusage when it exits. CPU time, not wall time, because the machine is shared: a neighbour's
load stretches wall time but barely moves the CPU seconds this process spends. The phases:

    imports   interpreter start, imports, argument parsing, topology and workload
    compile   compiling fabric.p4 (or finding it cached), one DataPlane per switch
    tables    the FabricController's plan and every P4Runtime write
    engine    the workload on the discrete-event engine
    report    metrics, metrics.json, the plots, report.html and the summary
    exit      the interpreter's exit after the last line (freeing what the run built)

Nothing here asserts a time. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a progress line's start -> the phase that begins when it is printed
MARKERS = [("[1/4]", "compile"), ("[2/4]", "tables"), ("[3/4]", "engine"),
           ("[4/4]", "report"), ("results:", "exit")]
PHASES = ["imports", "compile", "tables", "engine", "report", "exit"]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float:
    """user + sys CPU seconds of a running process and of the children it has waited for
    (the compiler runs as one): fields 14-17 of /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICK


def run_once(sim_args: list[str]) -> dict[str, float]:
    """One run; CPU seconds per phase and in all, and the peak RSS in MiB."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    with tempfile.TemporaryDirectory(prefix="sim-phases-") as tmp:
        cmd = [sys.executable, "-m", "cellfabric.cli", "sim", *sim_args, "--results", tmp]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        marks: list[tuple[str, float]] = [("imports", 0.0)]
        for line in proc.stdout:
            text = line.strip()
            phase = next((p for m, p in MARKERS if text.startswith(m)), None)
            if phase is not None:
                marks.append((phase, cpu_of(proc.pid)))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"sim_phases: the command exited {proc.returncode}: {' '.join(cmd)}")
    total = usage.ru_utime + usage.ru_stime
    out = dict.fromkeys(PHASES, 0.0)
    for (phase, t0), (_, t1) in zip(marks, [*marks[1:], ("end", total)], strict=True):
        out[phase] += t1 - t0
    out["total"] = total
    out["user"], out["sys"] = usage.ru_utime, usage.ru_stime
    out["peak_rss_mib"] = usage.ru_maxrss / 1024
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs, one after the other")
    ap.add_argument("sim_args", nargs=argparse.REMAINDER,
                    help="after --: cellfabric sim's arguments")
    args = ap.parse_args()
    sim_args = [a for a in args.sim_args if a != "--"] if args.sim_args[:1] == ["--"] \
        else args.sim_args
    if not sim_args:
        ap.error("give cellfabric sim's arguments after --")
    print("run  " + "  ".join(f"{p:>8}" for p in [*PHASES, "total"]) + "   (CPU s)  peak RSS")
    for i in range(args.repeat):
        r = run_once(sim_args)
        load = os.getloadavg()[0]
        print(f"{i + 1:>3}  " + "  ".join(f"{r[p]:8.2f}" for p in [*PHASES, "total"])
              + f"   {r['peak_rss_mib']:.0f} MiB  (load {load:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
