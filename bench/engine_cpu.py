"""CPU seconds of a `cellfabric` command's event loop: runs the command in this process with
Engine.run timed by process_time (user + sys of this process), then prints that and the whole
process's CPU time to stderr. Wall time on a shared machine measures the neighbours; CPU time,
compared side by side in one period (both at once), measures the simulator.

    python bench/engine_cpu.py sim ft8.yaml --workload permutation ... --quiet
    -> ENGINE_CPU_S 93.16 PROCESS_CPU_S 104.14

A first argument --no-c-fabric runs the plain path (SimFabric.native_fabric off: every
switch's event on the engine) instead of the switch-to-switch fabric in C; --no-c-hosts keeps
the C fabric but runs the Python hosts (SimFabric.native_hosts off) instead of the C hosts.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

from cellfabric.sim import engine

_run = engine.Engine.run
spent = [0.0]


def _timed_run(self: engine.Engine, *args: Any, **kwargs: Any) -> Any:
    t = time.process_time()
    try:
        return _run(self, *args, **kwargs)
    finally:
        spent[0] += time.process_time() - t


def main(argv: list[str]) -> int:
    from cellfabric.cli import main as cellfabric_main
    from cellfabric.sim.net import SimFabric

    if argv[:1] == ["--no-c-fabric"]:
        SimFabric.native_fabric = False
        argv = argv[1:]
    elif argv[:1] == ["--no-c-hosts"]:
        SimFabric.native_hosts = False
        argv = argv[1:]
    engine.Engine.run = _timed_run  # type: ignore[method-assign]
    try:
        rc = cellfabric_main(argv)
    finally:
        engine.Engine.run = _run  # type: ignore[method-assign]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"ENGINE_CPU_S {spent[0]:.2f} PROCESS_CPU_S {ru.ru_utime + ru.ru_stime:.2f}",
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
