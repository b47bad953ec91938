"""A stand-in for `cellfabric sim|run` in the sweep's tests: same calling convention (mode,
topology, --key value flags, --results DIR), writes DIR/RUN/metrics.json with a summary that
depends only on its arguments (deterministic per seed), like the real commands do.

Test knobs: --sleep S (take that long), --hold FILE (wait until FILE exists, at most 120 s),
--fail-on K=V (exit 2 with an error when option K has value V), --log FILE (append the results
folder's name per invocation), --invalid (exit 3, valid false). Writes RESULTS/pid first.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def parse(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    positional, flags = [], {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                flags[a[2:]] = argv[i + 1]
                i += 2
                continue
            flags[a[2:]] = "true"
        else:
            positional.append(a)
        i += 1
    return positional, flags


def main() -> int:
    positional, flags = parse(sys.argv[1:])
    results = Path(flags.pop("results"))
    log = flags.pop("log", None)
    key = " ".join(positional + [f"{k}={v}" for k, v in sorted(flags.items())
                                 if k not in ("sleep", "fail-on", "hold")])
    results.mkdir(parents=True, exist_ok=True)
    (results / "pid").write_text(str(os.getpid()))
    if log:
        with open(log, "a") as fh:
            fh.write(f"{results.name}\n")
    time.sleep(float(flags.get("sleep", 0)))
    hold = flags.get("hold")
    deadline = time.monotonic() + 120
    while hold and not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    fail = flags.get("fail-on")
    if fail:
        k, _, v = fail.partition("=")
        if flags.get(k) == v:
            print(f"fake: error: refusing {k}={v}", file=sys.stderr)
            return 2
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    load = float(flags.get("load", 1.0))
    ideal = 0.010
    fct = ideal * (1.0 + load * (1 + h % 7) / 10.0)
    messages = [{"src": "h1", "dst": "h2", "size": 1024, "fct_s": fct, "ideal_s": ideal}]
    summary = {"messages_completed": 1, "messages_total": 1, "fct_p50_s": fct,
               "slowdown_p99": fct / ideal + int(flags.get("senders", 0)) * 0.1,
               "cells_dropped": h % 3, "valid": "invalid" not in flags,
               "link_utilization": {"a->b": 0.5, "b->a": (h % 100) / 100}}
    if "load" in flags:  # as `run --load`: the offered load and the goodput below it
        summary.update(load=load, offered_load=load, goodput=load * ideal / fct)
    run_dir = results / f"fake-{positional[0] if positional else 'x'}"
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = {"run": {"name": run_dir.name, "argv": sys.argv[1:], "pid": os.getpid()},
           "messages": messages, "flows": {}, "summary": summary}
    (run_dir / "metrics.json").write_text(json.dumps(doc, indent=1))
    print(f"fake run {key}: slowdown {summary['slowdown_p99']:.3f}")
    return 3 if "invalid" in flags else 0


if __name__ == "__main__":
    sys.exit(main())
