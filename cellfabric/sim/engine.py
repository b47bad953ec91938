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
        return len(self._heap)

    def run(self, until_ns: int | None = None, max_events: int | None = None) -> None:
        """Run events in time order until none is left, ``until_ns`` is passed, ``stop()``
        is called or ``max_events`` more have run."""
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
