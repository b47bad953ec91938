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
        heapq.heappush(self._heap, (max(t_ns, self.now), self._seq, fn, arg))

    def after(self, delay_ns: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self.at(self.now + delay_ns, fn, arg)

    def pending(self) -> int:
        return len(self._heap)

    def run(self, until_ns: int | None = None, max_events: int | None = None) -> None:
        """Run events in time order until none is left, ``until_ns`` is passed, ``stop()``
        is called or ``max_events`` more have run."""
        heap, pop = self._heap, heapq.heappop
        limit = math.inf if max_events is None else self.events + max_events
        self.stopped = False
        while heap and not self.stopped and self.events < limit:
            if until_ns is not None and heap[0][0] > until_ns:
                self.now = until_ns
                return
            t, _, fn, arg = pop(heap)
            self.now = t
            self.events += 1
            fn(arg)

    def stop(self) -> None:
        self.stopped = True
