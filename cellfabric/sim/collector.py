"""How a simulated run uses Python's cyclic garbage collector.

Set-up allocates hundreds of thousands of long-lived objects (the P4Runtime messages and every
switch's tables: ~10 k entries at k=8), and the collector's full passes rescan all of them
each time the heap has grown by a quarter: at k=8 that was 6.5 of set-up's 19.3 CPU seconds.
Nothing set-up builds is garbage the collector would free (reference counting frees what it
drops), so the collector is off while it runs; its survivors are then frozen (``gc.freeze``:
out of every later pass) and the collector runs again for the engine, whose own cycles stay
collected, but its youngest generation is collected every ENGINE_GEN0 allocations instead of
every 700: each event allocates a few tuples and packets that live a few microseconds of
virtual time, and the default's passes took a third of a k=4 engine's CPU time (3.35 s against
2.0 s; the peak memory did not move). The report (plots) runs with the collector off again.
Whether it is on never changes a figure (tests/sim/test_sim_fast_paths.py runs a seeded job
both ways).
"""

from __future__ import annotations

import gc
from types import TracebackType

ENGINE_GEN0 = 20_000


class CollectorPolicy:
    """``with CollectorPolicy(): ...`` around a run; ``settled()`` once set-up is done and
    ``quiet()`` before the report. Inert when ``enabled`` is False, the collector was
    already off or objects were already frozen; leaving restores what it found."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.active = False
        self.thresholds = gc.get_threshold()

    def __enter__(self) -> CollectorPolicy:
        # someone else's frozen objects: leave their freeze alone (unfreeze thaws them all)
        self.active = self.enabled and gc.isenabled() and not gc.get_freeze_count()
        if self.active:
            self.thresholds = gc.get_threshold()
            gc.disable()
        return self

    def settled(self) -> None:
        """Set-up is done: what it built leaves the collector's passes; the collector runs,
        its youngest generation collected less often."""
        if self.active:
            gc.freeze()
            gc.set_threshold(ENGINE_GEN0, *self.thresholds[1:])
            gc.enable()

    def quiet(self) -> None:
        """The run is over: no collection passes while the report is written."""
        if self.active:
            gc.disable()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.active:
            gc.unfreeze()
            gc.set_threshold(*self.thresholds)
            gc.enable()
            self.active = False
