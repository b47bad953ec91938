"""Message arrivals of an offered-load workload: a seeded Poisson process.

A sender offered a fraction F of its link rate R gets messages of S bytes at exponentially
distributed gaps with mean 8 S / (F R). Message i (0-based) arrives after the sum of the first
i + 1 gaps, counted from the flow's start; the window the load is offered over ends one gap
after the last message, at the arrival the process would make next. With n messages that
window is a sum of n + 1 gaps, so n x S / window estimates F x R without bias (the time of the
n-th arrival alone would overstate it by n / (n - 1)).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Arrivals:
    times_s: tuple[float, ...]  # arrival of each message, seconds after the flow's start
    window_s: float  # the offered interval: [start, start + window_s]
    mean_gap_s: float


def mean_gap_s(message_bytes: int, load: float, link_bps: float) -> float:
    """The mean gap between arrivals that offers ``load`` of ``link_bps`` in messages of
    ``message_bytes``."""
    if not 0 < load <= 1:
        raise ValueError(f"load {load!r}: expected a fraction of the link rate, 0 < load <= 1")
    if link_bps <= 0 or message_bytes <= 0:
        raise ValueError("offered load needs a positive message size and link rate")
    return 8 * message_bytes / (load * link_bps)


def poisson_arrivals(count: int, mean_gap: float, seed: int) -> Arrivals:
    """``count`` arrivals of a Poisson process of mean gap ``mean_gap``, the same for the
    same seed on every machine (random.Random is specified to be reproducible)."""
    if mean_gap <= 0:
        raise ValueError(f"mean gap {mean_gap!r}: expected a positive number of seconds")
    rng = random.Random(seed)
    t, times = 0.0, []
    for _ in range(count):
        t += rng.expovariate(1.0 / mean_gap)
        times.append(t)
    window = t + rng.expovariate(1.0 / mean_gap)
    return Arrivals(tuple(times), window, mean_gap)
