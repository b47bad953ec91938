"""`p4sim conformance`: does a program behave on p4sim as on p4c + BMv2? Runs STF tests.

    p4sim conformance DIR|FILE... [--target embedded|bmv2|mixed-p4c-on-p4sim|mixed-p4sim-on-bmv2]
                      [-k PATTERN] [--json OUT] [--expected FILE] [--write-expected FILE]
                      [--timeout S] [-j N]

A test is a ``NAME.stf`` beside ``NAME.p4`` (a directory gives every such pair in it). Each test
runs in a forked child, so a hang or a crash is that test's result and the next starts clean;
``-j N`` runs N such children at once.
With ``--expected FILE`` (a list of known failures with reasons) the exit status is 1 only for a
test that fails but is not listed; a listed test that now passes is reported. ``--write-expected``
records the current failures as that list.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.connection as mp_connection
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from p4sim.conformance.runner import STATUSES, TARGETS, Result, run_test


def find_tests(paths: list[str]) -> list[tuple[Path, Path]]:
    tests: dict[str, tuple[Path, Path]] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            stfs = sorted(p.glob("*.stf"))
        elif p.suffix in (".stf", ".p4"):
            stfs = [p.with_suffix(".stf")]
        else:
            raise FileNotFoundError(f"{raw}: not a directory, .stf or .p4 file")
        for stf in stfs:
            p4 = stf.with_suffix(".p4")
            if not stf.is_file() or not p4.is_file():
                if p.is_dir():
                    continue
                raise FileNotFoundError(f"{raw}: needs both {p4.name} and {stf.name}")
            tests[str(stf)] = (p4, stf)
    return list(tests.values())


def _child(p4: Path, stf: Path, target: str, conn) -> None:
    # SIGTERM from the parent (a timeout) unwinds through run_test's cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        res = run_test(p4, stf, target)
    except BaseException as e:  # a result, never a traceback
        res = Result(p4.stem, "error", f"runner: {type(e).__name__}: {e}")
    conn.send(res)
    conn.close()


class _Running:
    """One test's forked child, its result pipe and when it started."""

    def __init__(self, index: int, p4: Path, stf: Path, target: str) -> None:
        ctx = multiprocessing.get_context("fork")
        self.index, self.p4 = index, p4
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child, args=(p4, stf, target, send), daemon=True)
        self.start = time.monotonic()
        self.proc.start()
        send.close()

    def finish(self, timeout: float) -> Result:
        """The child's result (it has sent it, died, or run out of time): the child is gone
        after this, killed if it has to be."""
        result = None
        if self.recv.poll(0):
            try:
                result = self.recv.recv()
            except EOFError:
                result = None
        self.recv.close()
        proc = self.proc
        proc.join(timeout=5 if result is not None else 0.1)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        if result is None:
            took = time.monotonic() - self.start
            status = "timeout" if took >= timeout else "error"
            why = (f"no result within {timeout:.0f} s" if status == "timeout"
                   else f"runner process died (exit {proc.exitcode})")
            result = Result(self.p4.stem, status, why, took)
        return result


def run_pool(tests: list[tuple[Path, Path]], target: str, timeout: float, jobs: int,
             on_result: Callable[[int, Result], None] | None = None) -> list[Result]:
    """Every test in its own forked child, at most ``jobs`` at once; results in test order.
    Each child has its own switch (p4sim's or BMv2 with its own ports and TCP ports), so
    children running side by side share nothing but the machine."""
    results: dict[int, Result] = {}
    waiting = list(enumerate(tests))
    waiting.reverse()  # pop() from the end takes them in order
    running: list[_Running] = []
    while waiting or running:
        while waiting and len(running) < max(1, jobs):
            index, (p4, stf) = waiting.pop()
            running.append(_Running(index, p4, stf, target))
        now = time.monotonic()
        first_deadline = min(r.start + timeout for r in running)
        ready = mp_connection.wait([r.recv for r in running],
                                   timeout=max(0.0, first_deadline - now))
        now = time.monotonic()
        for r in list(running):
            if r.recv in ready or now - r.start >= timeout:
                running.remove(r)
                results[r.index] = r.finish(timeout)
                if on_result is not None:
                    on_result(r.index, results[r.index])
    return [results[i] for i in range(len(tests))]


def _preload(target: str) -> None:
    """Import what every child needs once, before forking (no gRPC channel or server yet)."""
    import p4sim.conformance.compilers
    import p4sim.conformance.entries
    import p4sim.conformance.p4rt
    import p4sim.conformance.switches

    if TARGETS[target][1] == "p4sim":
        import p4sim.switch.dataplane
        import p4sim.switch.p4runtime.server
    if TARGETS[target][0] == "p4sim":
        import p4sim.backend.json_program
        import p4sim.backend.p4info
        import p4sim.frontend.typecheck  # noqa: F401


def load_expected(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return dict(doc.get("known_failures", {}))


def write_expected(path: str, target: str, results: list[Result]) -> None:
    failures = {r.name: {"status": r.status, "reason": r.reason}
                for r in sorted(results, key=lambda r: r.name) if r.status != "pass"}
    doc = {
        "about": "Known failures of p4c's v1model STF corpus on this target; regenerate with "
                 "`p4sim conformance CORPUS --target TARGET --write-expected FILE`.",
        "target": target, "tests": len(results),
        "passed": sum(r.status == "pass" for r in results), "known_failures": failures,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")


def _table(results: list[Result]) -> str:
    width = max([len(r.name) for r in results] + [4])
    lines = [f"{'test':<{width}}  {'result':<13}  {'time':>6}  reason"]
    for r in results:
        reason = r.reason if len(r.reason) <= 110 else r.reason[:107] + "..."
        lines.append(f"{r.name:<{width}}  {r.status:<13}  {r.seconds:5.1f}s  {reason}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4sim conformance",
                                 description="run p4c STF packet tests on a target")
    ap.add_argument("paths", nargs="+", metavar="DIR|FILE")
    ap.add_argument("--target", choices=list(TARGETS), default="embedded")
    ap.add_argument("-k", dest="pattern", default=None, help="only tests whose name matches")
    ap.add_argument("--json", dest="json_out", default=None, metavar="OUT")
    ap.add_argument("--expected", default=None, metavar="FILE",
                    help="known failures: exit 1 only for a failure not listed")
    ap.add_argument("--write-expected", default=None, metavar="FILE")
    ap.add_argument("--timeout", type=float, default=60.0, help="per test, seconds")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-test lines")
    ap.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                    help="run N tests at once, each in its own child (default 1; results are "
                         "listed in test order either way)")
    return ap


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: a whole number of tests, 1 or more")
    return n


def _check_tools(target: str) -> str | None:
    import shutil

    compiler, switch = TARGETS[target]
    need = (["p4c-bm2-ss"] if compiler == "p4c" else []) + \
        (["simple_switch_grpc"] if switch == "bmv2" else [])
    missing = [t for t in need if shutil.which(t) is None]
    if missing:
        return f"target {target} needs {' and '.join(missing)} on PATH"
    if switch == "bmv2" and (os.geteuid() != 0 or not os.path.exists("/dev/net/tun")):
        return f"target {target} needs root and /dev/net/tun (its ports are TUN devices)"
    return None


def _report(results: list[Result], expected: dict[str, dict] | None) -> int:
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    print(f"{len(results)} tests: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if expected is None:
        return 0 if counts["pass"] == len(results) else 1
    new = [r for r in results if r.status != "pass" and r.name not in expected]
    fixed = [r for r in results if r.status == "pass" and r.name in expected]
    for r in new:
        print(f"NEW FAILURE {r.name}: {r.status}: {r.reason}")
    if fixed:
        print(f"now passing, listed as known failures ({len(fixed)}; regenerate the list): "
              + ", ".join(r.name for r in fixed))
    return 1 if new else 0


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    problem = _check_tools(ns.target)
    if problem:
        print(f"p4sim conformance: error: {problem}", file=sys.stderr)
        return 2
    try:
        tests = find_tests(ns.paths)
        expected = load_expected(ns.expected) if ns.expected else None
    except (OSError, ValueError) as e:
        print(f"p4sim conformance: error: {e}", file=sys.stderr)
        return 2
    if ns.pattern:
        rx = re.compile(ns.pattern)
        tests = [t for t in tests if rx.search(t[0].stem)]
    if not tests:
        print("p4sim conformance: error: no tests (NAME.p4 beside NAME.stf) found",
              file=sys.stderr)
        return 2
    _preload(ns.target)
    start = time.monotonic()

    def progress(index: int, res: Result) -> None:
        if not ns.quiet:
            print(f"[{index + 1}/{len(tests)}] {res.status:<13} {res.name} ({res.seconds:.1f}s)"
                  f"{': ' + res.reason[:150] if res.reason else ''}", flush=True)

    results = run_pool(tests, ns.target, ns.timeout, ns.jobs, progress)
    elapsed = time.monotonic() - start
    print(_table(results))
    print(f"target {ns.target}, {elapsed:.0f} s")
    if ns.json_out:
        with open(ns.json_out, "w", encoding="utf-8") as f:
            json.dump({"target": ns.target, "seconds": round(elapsed, 1),
                       "counts": {s: sum(r.status == s for r in results) for s in STATUSES},
                       "tests": [r.as_json() for r in results]}, f, indent=1)
            f.write("\n")
    if ns.write_expected:
        write_expected(ns.write_expected, ns.target, results)
        print(f"wrote {ns.write_expected}")
    return _report(results, expected)


if __name__ == "__main__":
    sys.exit(main())
