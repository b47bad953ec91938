"""Compile-time benchmark for `p4sim compile`: p4src/fabric.p4 (if present) and the largest
compiler test program, with their size in lines (after #include) and the time per phase.
Goal: under 1 s on one core. Prints numbers only; no assertions."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from p4sim.backend.json_program import build_json  # noqa: E402
from p4sim.backend.p4info import build_p4info  # noqa: E402
from p4sim.frontend.lexer import tokenize  # noqa: E402
from p4sim.frontend.parser import parse  # noqa: E402
from p4sim.frontend.preprocess import preprocess  # noqa: E402
from p4sim.frontend.typecheck import typecheck  # noqa: E402

GOAL_S = 1.0


def phases(path: str) -> tuple[dict[str, float], int, int]:
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    pp = preprocess(path, [], {})
    t["preprocess"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    toks = tokenize(pp)
    t["lex"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    prog = parse(toks)
    t["parse"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    checker = typecheck(prog)
    t["typecheck"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, builder = build_json(checker, prog, pp.sources, path)
    t["bmv2 json"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_p4info(builder.control_plane_model())
    t["p4info"] = time.perf_counter() - t0
    own = len(pp.sources[path])
    total = sum(len(v) for v in pp.sources.values())
    return t, own, total


def bench(label: str, path: str, runs: int = 5) -> None:
    results = [phases(path) for _ in range(runs)]
    totals = [sum(r[0].values()) for r in results]
    _, own, total = results[0]
    best = min(range(runs), key=lambda i: totals[i])
    med = statistics.median(totals)
    print(f"{label}: {os.path.relpath(path, ROOT)}  {own} lines ({total} with includes)")
    print(f"  compile median {med * 1000:.0f} ms, best {totals[best] * 1000:.0f} ms over "
          f"{runs} runs; goal {GOAL_S * 1000:.0f} ms -> {med / GOAL_S:.2f}x of budget")
    print("  phases (best run): " + ", ".join(f"{k} {v * 1000:.0f} ms"
                                              for k, v in results[best][0].items()))
    # The whole command as a user runs it: interpreter start, imports, writing both files.
    exe = os.path.join(os.path.dirname(sys.executable), "p4sim")
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([exe, "compile", path, "-o", os.path.join(tmp, "o.json"),
                            "--p4runtime-files", os.path.join(tmp, "o.p4info.txtpb")],
                           check=True)
            walls.append(time.perf_counter() - t0)
    print(f"  `p4sim compile` end to end: median {statistics.median(walls) * 1000:.0f} ms "
          f"-> {statistics.median(walls) / GOAL_S:.2f}x of budget")


def main() -> None:
    fabric = os.path.join(ROOT, "p4src", "fabric.p4")
    if os.path.isfile(fabric):
        bench("fabric", fabric)
    else:
        print("fabric: p4src/fabric.p4 not present")
    progs = os.path.join(ROOT, "tests", "unit", "p4progs")
    largest = max((os.path.join(progs, f) for f in os.listdir(progs) if f.endswith(".p4")),
                  key=os.path.getsize)
    bench("largest test program", largest)


if __name__ == "__main__":
    main()
