"""Traffic manager: simple_switch's egress buffers.

One FIFO per (egress port, priority); a depth limit in packets with tail drop counted per port;
a service rate in packets per second (0 = unlimited) paced with real time; strict priority
between a port's queues (higher priority number served first) and round robin between ports.
Beyond simple_switch (which paces each priority queue on its own, so a port with two queues can
send twice its rate), a port may have a line rate (``set_port_rate``, the admin channel's
``set_port_rate PPS PORT``) that all its queues share: together they never send more.
Depths are in packets and times in seconds here; the v1model flow converts to microseconds.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

DEFAULT_DEPTH = 64


class Queue:
    __slots__ = ("depth", "interval", "items", "next_time")

    def __init__(self, depth: int, rate: int) -> None:
        self.items: deque[Any] = deque()
        self.depth = depth
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next_time = 0.0


class TrafficManager:
    def __init__(self, priorities: int = 1, depth: int = DEFAULT_DEPTH) -> None:
        self.priorities = max(1, priorities)
        self.default_depth = depth
        self.default_rate = 0
        self.port_depth: dict[int, int] = {}
        self.port_rate: dict[tuple[int, int | None], int] = {}
        self.queues: dict[tuple[int, int], Queue] = {}
        self.ports: list[int] = []  # ports with queues, in round-robin order
        self.rr = 0
        self.drops: dict[int, int] = {}
        self.backlog = 0
        # Busy accounting (time a port had packets waiting, packets sent from a backlog).
        self.port_backlog: dict[int, int] = {}
        self.busy_since: dict[int, float] = {}
        self.busy_total: dict[int, float] = {}
        self.busy_tx: dict[int, int] = {}
        # port -> [interval, next departure]: the line rate its priority queues share
        self.line: dict[int, list[float]] = {}

    def _rate_for(self, port: int, prio: int) -> int:
        for key in ((port, prio), (port, None)):
            if key in self.port_rate:
                return self.port_rate[key]
        return self.default_rate

    def queue(self, port: int, prio: int = 0) -> Queue:
        q = self.queues.get((port, prio))
        if q is None:
            q = Queue(self.port_depth.get(port, self.default_depth), self._rate_for(port, prio))
            self.queues[(port, prio)] = q
            if port not in self.ports:
                self.ports.append(port)
        return q

    # -- settings (simple_switch_CLI set_queue_rate / set_queue_depth) -------------------------

    def set_rate(self, pps: int, port: int | None = None, prio: int | None = None) -> None:
        if port is None:
            self.default_rate = pps
            self.port_rate.clear()
            targets = list(self.queues.values())
        else:
            self.port_rate[(port, prio)] = pps
            targets = [q for (p, pr), q in self.queues.items()
                       if p == port and (prio is None or pr == prio)]
        for q in targets:
            q.interval = 1.0 / pps if pps > 0 else 0.0

    def set_port_rate(self, pps: int, port: int) -> None:
        """The port's line rate, shared by all its priority queues (0 = none)."""
        if pps <= 0:
            self.line.pop(port, None)
        else:
            self.line.setdefault(port, [0.0, 0.0])[0] = 1.0 / pps

    def set_depth(self, packets: int, port: int | None = None) -> None:
        if port is None:
            self.default_depth = packets
            self.port_depth.clear()
            targets = list(self.queues.values())
        else:
            self.port_depth[port] = packets
            targets = [q for (p, _), q in self.queues.items() if p == port]
        for q in targets:
            q.depth = packets

    # -- data path ---------------------------------------------------------------------------

    def enqueue(self, port: int, prio: int, item: Any) -> int:
        """Queue ``item``; returns the depth it found (enq_qdepth) or -1 when tail-dropped."""
        q = self.queues.get((port, prio)) or self.queue(port, prio)
        n = len(q.items)
        if n >= q.depth:
            self.drops[port] = self.drops.get(port, 0) + 1
            return -1
        if not n and q.interval:
            # A busy period starts: the first packet may leave now. (Idle time earns no
            # credit; within a busy period departures keep an exact 1/rate spacing.)
            t = time.monotonic()
            if q.next_time < t:
                q.next_time = t
        q.items.append(item)
        self.backlog += 1
        waiting = self.port_backlog.get(port, 0)
        if not waiting:
            self.busy_since[port] = time.monotonic()
            line = self.line.get(port)
            if line is not None and line[1] < self.busy_since[port]:
                line[1] = self.busy_since[port]  # an idle line earns no credit either
        self.port_backlog[port] = waiting + 1
        return n

    def dequeue(self, now: float) -> tuple[int, int, Any, int] | None:
        """Next packet allowed to leave at ``now``: (port, prio, item, depth after), or None."""
        if not self.backlog:
            return None
        ports = self.ports
        n = len(ports)
        for i in range(n):
            port = ports[(self.rr + i) % n]
            line = self.line.get(port)
            if line is not None and line[1] > now:
                continue  # the port's line is busy, whichever queue would send
            for prio in range(self.priorities - 1, -1, -1):
                q = self.queues.get((port, prio))
                if q is None or not q.items:
                    continue
                if q.interval:
                    if q.next_time > now:
                        break  # this port's head is paced; strict priority holds lower ones
                    q.next_time += q.interval
                if line is not None:
                    line[1] += line[0]
                item = q.items.popleft()
                self.backlog -= 1
                self.busy_tx[port] = self.busy_tx.get(port, 0) + 1
                waiting = self.port_backlog[port] - 1
                self.port_backlog[port] = waiting
                if not waiting:
                    self.busy_total[port] = (self.busy_total.get(port, 0.0)
                                             + now - self.busy_since[port])
                self.rr = (self.rr + i + 1) % n
                return port, prio, item, len(q.items)
        return None

    def next_deadline(self) -> float | None:
        """Earliest time a paced queue with packets may send (None if nothing waits)."""
        best = None
        for (port, _), q in self.queues.items():
            if q.items:
                t = q.next_time if q.interval else 0.0
                line = self.line.get(port)
                if line is not None and line[1] > t:
                    t = line[1]
                best = t if best is None or t < best else best
        return best

    def depth(self, port: int, prio: int = 0) -> int:
        q = self.queues.get((port, prio))
        return len(q.items) if q else 0

    def busy_seconds(self, port: int) -> float:
        total = self.busy_total.get(port, 0.0)
        if self.port_backlog.get(port):
            total += time.monotonic() - self.busy_since[port]
        return total

    def rate(self, port: int) -> int:
        return self._rate_for(port, 0)

    def clear(self) -> None:
        now = time.monotonic()
        for port, waiting in self.port_backlog.items():
            if waiting:
                self.busy_total[port] = (self.busy_total.get(port, 0.0)
                                         + now - self.busy_since[port])
        for q in self.queues.values():
            q.items.clear()
        self.port_backlog.clear()
        self.backlog = 0


def now() -> float:
    return time.monotonic()
