"""Samples of the fabric over a run, on whichever clock drives it: per switch port, its
transmit counter (fabric.p4's port_tx) and its queue depth, all ports of one sample at one
time. The emulation's monitor thread adds a sample every half second of wall-clock time, the
simulator's engine timer at its own interval of virtual time; both derive the same link and
queue series from them."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from topologies.model import Topology

Port = tuple[str, int]  # (switch, port)


def _series_for(series: dict[Port, list], sample: Mapping[Port, int]) -> dict[Port, list]:
    """``series`` with a list for every port of ``sample``, new ones in the sample's
    order (a run's ports are the same at every sample: one set difference, in C, instead
    of a new empty list per port per sample for ``setdefault``)."""
    if sample.keys() - series.keys():
        for key in sample:
            if key not in series:
                series[key] = []
    return series


class FabricSamples:
    def __init__(self) -> None:
        self.tx: dict[Port, list[tuple[float, int]]] = {}  # cumulative packets sent
        self.depth: dict[Port, list[tuple[float, int]]] = {}  # packets waiting
        self.times: list[float] = []  # the times of the samples kept (all, until thinned)
        # per port the deepest queue of the samples since ``open_window``'s time, from every
        # sample taken (thinning drops none of it), and the latest sample's depths
        self.window_peak: dict[Port, int] = {}
        self._last_depth: tuple[float, Mapping[Port, int]] | None = None

    def add_tx(self, t: float, counts: Mapping[Port, int]) -> None:
        series = _series_for(self.tx, counts)
        for key, packets in counts.items():
            series[key].append((t, packets))

    def add_depth(self, t: float, depths: Mapping[Port, int]) -> None:
        series = _series_for(self.depth, depths)
        peak = self.window_peak
        for key, depth in depths.items():
            series[key].append((t, depth))
            if depth and depth > peak.get(key, 0):  # most queues are empty: no lookup
                peak[key] = depth
        self.times.append(t)
        self._last_depth = (t, depths)

    def open_window(self, since: float) -> None:
        """Start ``window_peak`` over at ``since`` (a sample taken at that very time counts)."""
        last = self._last_depth
        self.window_peak = {k: d for k, d in last[1].items() if d} if last and last[0] >= since \
            else {}

    def thin(self) -> None:
        """Drop every other sample time (the first kept) from every series: the series keep
        their uniform spacing at twice the interval. The simulator does this when a run
        outlasts twice the time its sampling interval was planned for."""
        self.times = self.times[::2]
        kept = set(self.times)
        for series in (self.tx, self.depth):
            for key, rows in series.items():
                series[key] = [row for row in rows if row[0] in kept]

    def rates(self, switch: str, port: int) -> list[tuple[float, float]]:
        """(t, packets per second since the sample before)."""
        samples = self.tx.get((switch, port), [])
        return [(t1, (c1 - c0) / (t1 - t0)) for (t0, c0), (t1, c1)
                in itertools.pairwise(samples) if t1 > t0]

    def link_samples(self, topo: Topology) -> dict[str, dict[str, Any]]:
        """Topology link 'a-b' -> capacity and [t, pps a->b, pps b->a] rows. A direction is
        measured at its sending switch; a host's sending side has no counter and reads 0."""
        out: dict[str, dict[str, Any]] = {}
        for lk in topo.links:
            rows: dict[float, list[float]] = {}
            for side, (node, port) in enumerate(((lk.a, lk.a_port), (lk.b, lk.b_port))):
                for t, rate in self.rates(node, port):
                    rows.setdefault(t, [0.0, 0.0])[side] = rate
            out[lk.name] = {"capacity_pps": lk.queue.rate_pps,
                            "samples": [[t, a, b] for t, (a, b) in sorted(rows.items())]}
        return out

    def queue_samples(self) -> dict[str, list[list[float]]]:
        return {f"{sw}:{port}": [[t, d] for t, d in rows]
                for (sw, port), rows in sorted(self.depth.items())}
