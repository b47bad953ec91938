"""Engine.run with a second heap beside its own (what cellfabric.sim.cfabric's C fabric is):
the same order, clock and event count as one heap holding every event, with ``until_ns``,
``max_events`` and ``stop()``, when each event is on either heap and events schedule more
events on either. The second heap here is Python, driven through the same interface
(io[6], io[7]: its top; run(bound_t, bound_seq, until, budget) -> events run)."""

from __future__ import annotations

import heapq
import random
from typing import Any

import pytest

from cellfabric.sim.engine import NEVER, Engine


class FakeNative:
    """A second heap that takes its sequence numbers from the engine's counter."""

    def __init__(self, engine: Engine, event: Any) -> None:
        self.engine, self.event = engine, event
        self.heap: list[tuple[int, int, int]] = []
        self.io = [0] * 16
        self._top()

    def _top(self) -> None:
        self.io[6], self.io[7] = self.heap[0][:2] if self.heap else (NEVER, 0)

    def at(self, t: int, i: int) -> None:
        eng = self.engine
        eng._seq += 1
        heapq.heappush(self.heap, (max(t, eng.now), eng._seq, i))
        self._top()

    def pending(self) -> int:
        return len(self.heap)

    def run(self, bound_t: int, bound_seq: int, until: int, budget: int) -> int:
        ran = 0
        while self.heap and ran != budget:
            t, seq, i = self.heap[0]
            if t > until or (t, seq) > (bound_t, bound_seq):
                break
            heapq.heappop(self.heap)
            self.engine.now = t
            ran += 1
            self._top()
            if self.event(i):  # an event that needs "Python": hand over, stop the run
                break
        self._top()
        return ran


def _scenario(seed: int, merged: bool) -> tuple[list[tuple[int, int]], int, int]:
    rnd = random.Random(seed)
    eng = Engine()
    ran: list[tuple[int, int]] = []
    stop_at = rnd.choice([None, rnd.randrange(300)])
    children = {i: [(rnd.randrange(0, 20), rnd.random() < 0.5) for _ in range(rnd.randrange(3))]
                for i in range(300)}
    count = [200]

    def event(i: int) -> bool:
        """Runs event i; True when it is one the second heap hands over (ends its run): as in
        the C fabric, only those reach Python, so only they schedule on the engine's heap or
        stop it."""
        ran.append((eng.now, i))
        python = i % 5 == 0 or i == stop_at
        for delay, on_native in children[i] if count[0] < 300 else ():
            schedule(eng.now + delay, count[0], on_native or not python)
            count[0] += 1
        if i == stop_at:
            eng.stop()
        return python

    native = FakeNative(eng, event)

    def schedule(t: int, i: int, on_native: bool) -> None:
        if merged and on_native:
            native.at(t, i)
        else:
            eng.at(t, lambda i: event(i), i)

    if merged:
        eng.native = native
    for i in range(200):
        schedule(rnd.randrange(0, 50), i, rnd.random() < 0.5)
    until = rnd.choice([None, 10, 25, 60])
    limit = rnd.choice([None, 1, 7, 120])
    eng.run(until_ns=until, max_events=limit)
    first = (list(ran), eng.now, eng.events)
    while eng.pending():
        eng.run(max_events=rnd.choice([None, 3]))
    return [*first[0], (-1, -1), *ran[len(first[0]):]], first[1], eng.events


@pytest.mark.parametrize("seed", range(12))
def test_two_heaps_run_as_one(seed: int) -> None:
    assert _scenario(seed, merged=True) == _scenario(seed, merged=False)
