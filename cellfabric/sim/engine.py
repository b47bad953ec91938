"""A discrete-event engine: a heap of (time in ns, sequence, callback, argument).

Virtual time is an integer number of nanoseconds, so event order never depends on float
rounding; events at the same nanosecond run in the order they were scheduled (the sequence
number), which makes a run a pure function of its inputs and seed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

NS = 1_000_000_000
NEVER = 1 << 62  # ns: past any run's end (146 years)


def to_ns(seconds: float) -> int:
    """Seconds to whole nanoseconds, rounded up so a wait never ends early."""
    return math.ceil(seconds * NS - 1e-6)


class Engine:
    def __init__(self) -> None:
        self.now = 0  # ns
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self.events = 0
        self.stopped = False
        # cellfabric.sim.cfabric.NativeFabric once started: a second heap (the switches'
        # events, in C) that run() merges with this one by (time, sequence)
        self.native: Any = None

    def clock(self) -> float:
        """The virtual time in seconds (the hosts' clock)."""
        return self.now / NS

    def at(self, t_ns: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` at virtual time ``t_ns`` (never before now)."""
        self._seq += 1
        now = self.now
        heapq.heappush(self._heap, (t_ns if t_ns > now else now, self._seq, fn, arg))

    def after(self, delay_ns: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self.at(self.now + delay_ns, fn, arg)

    def pending(self) -> int:
        native = self.native
        return len(self._heap) + (native.pending() if native is not None else 0)

    def run(self, until_ns: int | None = None, max_events: int | None = None) -> None:
        """Run events in time order until none is left, ``until_ns`` is passed, ``stop()``
        is called or ``max_events`` more have run."""
        if self.native is not None:
            self._run_merged(until_ns, max_events)
            return
        heap, pop = self._heap, heapq.heappop
        budget = -1 if max_events is None else max_events  # -1: never reached
        end = NEVER if until_ns is None else until_ns  # an int: int-to-int compares
        done = 0
        self.stopped = False
        # The loop reads only locals and the heap: it runs once per event (``events`` and
        # the budget are settled after it; a callback never reads ``events``).
        try:
            while heap and done != budget:
                if heap[0][0] > end:
                    self.now = until_ns  # type: ignore[assignment]
                    return
                t, _, fn, arg = pop(heap)
                self.now = t
                done += 1
                fn(arg)
                if self.stopped:
                    return
        finally:
            self.events += done

    def stop(self) -> None:
        self.stopped = True

    def _run_merged(self, until_ns: int | None, max_events: int | None) -> None:
        """run() with the C fabric's heap beside this one: whichever top is first by (time,
        sequence) runs next; C runs its events in one call until Python's top, the end or
        something C hands over (see cellfabric.sim.cfabric). Every event counts once."""
        heap, pop = self._heap, heapq.heappop
        native = self.native
        io, run_native = native.io, native.run
        budget = -1 if max_events is None else max_events
        end = NEVER if until_ns is None else until_ns
        done = 0
        self.stopped = False
        try:
            while done != budget:
                ct = io[6]  # C's top (NEVER: none)
                if heap:
                    top = heap[0]
                    t = top[0]
                    if ct < t or (ct == t and io[7] < top[1]):
                        bound_t, bound_seq = t, top[1]
                    else:
                        if t > end:
                            self.now = until_ns  # type: ignore[assignment]
                            return
                        t, _, fn, arg = pop(heap)
                        self.now = t
                        done += 1
                        fn(arg)
                        if self.stopped:
                            return
                        continue
                elif ct == NEVER:
                    return
                else:
                    bound_t, bound_seq = NEVER, 0
                if ct > end:
                    self.now = until_ns  # type: ignore[assignment]
                    return
                done += run_native(bound_t, bound_seq, end, budget - done if budget >= 0 else -1)
                if self.stopped:
                    return
        finally:
            self.events += done
