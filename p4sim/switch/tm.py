"""Traffic manager: simple_switch's egress buffers, with an optional link model per port.

One FIFO per (egress port, priority), strict priority between a port's queues (higher priority
number served first) and round robin between ports. Two ways to limit a port, usable together:

- **packet mode** (simple_switch's ``set_queue_rate`` / ``set_queue_depth``, what the emulated
  target uses): each queue holds at most ``depth`` packets (tail drop) and releases at most
  ``rate`` packets per second (0 = unlimited);
- **bit-rate mode** (``set_link``, for the simulator): the port's serializer sends at ``bps``
  bits per second, shared by all its priority queues (a frame of n bytes keeps it busy
  n * 8 / bps), and the port buffers at most ``buffer_bytes`` bytes over all its queues (tail
  drop);
- a **port line rate** in packets per second (``set_port_rate``, beyond simple_switch, whose
  per-queue rates let a port with two queues send twice its rate): all the port's queues
  together never send more. ``set_port_rate`` may leave the port's top priorities out of the
  line (``below``): their queues are paced only by their own rates and take no line time (an
  emulated fabric's control frames, whose share of a real link is negligible, see
  ``Link.below``).

The TM never reads a clock: every call that needs the time takes ``now`` in integer
nanoseconds of the data plane's clock. Paced times are kept as exact integers scaled by the
rate (``t_ns * rate``), so departures keep an exact spacing however they are polled and a
deadline is exact to the nanosecond (rounded up). Queued items are packets: bit-rate mode reads
their ``length``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

DEFAULT_DEPTH = 64
NS = 1_000_000_000


class Link:
    """What a port shares between its priority queues: a serializer at ``bps`` bits per second
    and a byte buffer (bit-rate mode), and/or a line rate of ``pps`` packets per second."""

    __slots__ = ("below", "bps", "buffer_bytes", "free_num", "line_num", "pps", "queued_bytes")

    def __init__(self, bps: int = 0, buffer_bytes: int = 0, pps: int = 0, below: int = 0) -> None:
        self.bps = bps  # 0 = no serializer limit
        self.buffer_bytes = buffer_bytes  # 0 = unlimited
        self.pps = pps  # 0 = no line rate
        # The priorities the link serves: those below this (0 = every one). A queue above is
        # not on the link at all (its Queue.link is None): an emulated link runs ~10^8 times
        # slower than a real one while a NOS's BFD and BGP keep real-time timers, so their
        # frames would take a few percent of an emulated line where they take ~10^-6 of a
        # real one.
        self.below = below
        self.free_num = 0  # the serializer is free from free_num / bps ns on
        self.line_num = 0  # the line takes its next packet from line_num / pps ns on
        self.queued_bytes = 0

    def busy(self, now: int) -> bool:
        return bool((self.bps and self.free_num > now * self.bps)
                    or (self.pps and self.line_num > now * self.pps))

    def start(self, now: int) -> None:
        """An idle link starts at ``now`` (idle time earns no credit)."""
        if self.bps and self.free_num < now * self.bps:
            self.free_num = now * self.bps
        if self.pps and self.line_num < now * self.pps:
            self.line_num = now * self.pps

    def send(self, nbytes: int) -> None:
        """A packet of ``nbytes`` leaves: the serializer and the line are busy with it."""
        if self.bps:
            self.free_num += nbytes * 8 * NS
        if self.pps:
            self.line_num += NS

    def ready_at(self) -> int:
        t = -(-self.free_num // self.bps) if self.bps else 0
        return max(t, -(-self.line_num // self.pps)) if self.pps else t

    def rescale(self, bps: int, pps: int) -> None:
        """New rates: the same instants in the new scales."""
        self.free_num = self.free_num * bps // self.bps if self.bps and bps else 0
        self.line_num = self.line_num * pps // self.pps if self.pps and pps else 0
        self.bps, self.pps = bps, pps

    def unused(self) -> bool:
        return not (self.bps or self.pps or self.buffer_bytes)

    def serves(self, prio: int) -> bool:
        return not self.below or prio < self.below


class Queue:
    __slots__ = ("blocked", "bypass", "depth", "items", "link", "next_num", "pps")
    # Counts every (re)computation of any queue's ``bypass``: the native path caches which
    # ports may bypass their queue and rebuilds that cache when this moves.
    generation = 0

    def __init__(self, depth: int, pps: int, link: Link | None, blocked: bool = False) -> None:
        self.items: deque[Any] = deque()
        self.depth = depth
        self.pps = pps  # 0 = unlimited
        self.next_num = 0  # next departure allowed from next_num / pps ns on
        self.link = link
        self.blocked = blocked  # the port's transmit cannot take more (see block())
        self.bypass = False
        self.update()

    def update(self) -> None:
        """After a setting changed: ``bypass`` caches what ``may_pass`` answers for this queue
        whenever it is empty (True: nothing limits it), so the hot path skips the call."""
        Queue.generation += 1
        self.bypass = (not self.pps and self.depth > 0 and self.link is None
                       and not self.blocked)


def _ready_at(q: Queue, link: Link | None) -> int:
    """When the head of ``q`` (its port's highest non-empty queue) may leave: its pacing and
    its port's link, each rounded up to the nanosecond (next_deadline's per-port time)."""
    t = -(-q.next_num // q.pps) if q.pps else 0
    if link is not None:
        if link.bps:
            r = -(-link.free_num // link.bps)
            if r > t:
                t = r
        if link.pps:
            r = -(-link.line_num // link.pps)
            if r > t:
                t = r
    return t


class TrafficManager:
    def __init__(self, priorities: int = 1, depth: int = DEFAULT_DEPTH) -> None:
        self.priorities = max(1, priorities)
        self.default_depth = depth
        self.default_rate = 0
        self.port_depth: dict[int, int] = {}
        self.port_rate: dict[tuple[int, int | None], int] = {}
        self.links: dict[int, Link] = {}
        self.blocked: set[int] = set()  # ports whose transmit waits for the kernel
        self.default_link: tuple[int, int] | None = None  # (bps, buffer bytes) for new ports
        self.queues: dict[tuple[int, int], Queue] = {}
        self.ports: list[int] = []  # ports with queues, in round-robin order
        # port -> its (priority, queue) pairs, highest priority first: what dequeue and
        # next_deadline walk, so they look up no (port, prio) key per call
        self.port_queues: dict[int, list[tuple[int, Queue]]] = {}
        self.rr = 0
        self.drops: dict[int, int] = {}
        self.backlog = 0
        # No waiting packet may leave before this time (ns): the earliest time next_deadline
        # found, lowered by every change that can make a port ready sooner (0: unknown). A
        # dequeue before it serves nothing, so it returns at once instead of walking every
        # port (after an arrival queued behind a busy port, the usual case).
        self.not_before = 0
        # not_before is the exact next deadline (not only a bound): next_deadline returns it
        # without a walk. Set by a walk that saw every port (next_deadline, a dequeue that
        # found nothing ready); kept by changes whose effect on it is known; cleared by the
        # others (every not_before = 0 makes it meaningless).
        self.deadline_exact = False
        # Enqueues so far and the port of the last one: a driver that records peak backlogs
        # after each arrival checks only the port that grew when there was one enqueue since.
        self.enqueues = 0
        self.last_enqueue_port = -1
        # Busy accounting (time a port had packets waiting, packets sent from a backlog).
        self.port_backlog: dict[int, int] = {}
        self.busy_since: dict[int, int] = {}
        self.busy_total: dict[int, int] = {}
        self.busy_tx: dict[int, int] = {}

    def _rate_for(self, port: int, prio: int) -> int:
        for key in ((port, prio), (port, None)):
            if key in self.port_rate:
                return self.port_rate[key]
        return self.default_rate

    def _link_for(self, port: int) -> Link | None:
        link = self.links.get(port)
        if link is None and self.default_link is not None:
            link = self.links[port] = Link(*self.default_link)
        return link

    def queue(self, port: int, prio: int = 0) -> Queue:
        q = self.queues.get((port, prio))
        if q is None:
            link = self._link_for(port)
            q = Queue(self.port_depth.get(port, self.default_depth), self._rate_for(port, prio),
                      link if link is None or link.serves(prio) else None, port in self.blocked)
            self.queues[(port, prio)] = q
            if port not in self.ports:
                self.ports.append(port)
            pairs = self.port_queues.setdefault(port, [])
            pairs.append((prio, q))
            pairs.sort(key=lambda pair: -pair[0])
        return q

    # -- settings ----------------------------------------------------------------------------

    def set_rate(self, pps: int, port: int | None = None, prio: int | None = None) -> None:
        """simple_switch_CLI set_queue_rate: packets per second (0 = unlimited)."""
        if port is None:
            self.default_rate = pps
            self.port_rate.clear()
            targets = list(self.queues.values())
        else:
            self.port_rate[(port, prio)] = pps
            targets = [q for (p, pr), q in self.queues.items()
                       if p == port and (prio is None or pr == prio)]
        self.not_before = 0
        for q in targets:
            if q.pps and pps:
                q.next_num = q.next_num * pps // q.pps  # same instant in the new scale
            else:
                q.next_num = 0
            q.pps = pps
            q.update()

    def set_depth(self, packets: int, port: int | None = None) -> None:
        """simple_switch_CLI set_queue_depth: packets per queue."""
        if port is None:
            self.default_depth = packets
            self.port_depth.clear()
            targets = list(self.queues.values())
        else:
            self.port_depth[port] = packets
            targets = [q for (p, _), q in self.queues.items() if p == port]
        for q in targets:
            q.depth = packets
            q.update()

    def set_link(self, bps: int, buffer_bytes: int = 0, port: int | None = None) -> None:
        """Bit-rate mode for ``port`` (or every port, present and future): a serializer of
        ``bps`` bits per second shared by the port's queues and a buffer of ``buffer_bytes``
        (0 = unlimited). ``bps`` 0 returns the port(s) to packet mode."""
        if port is None:
            self.default_link = (bps, buffer_bytes) if bps > 0 else None
            ports = sorted({p for p, _ in self.queues} | set(self.links))
        else:
            ports = [port]
        for p in ports:
            link = self.links.get(p) or Link()
            link.rescale(max(bps, 0), link.pps)
            link.buffer_bytes = buffer_bytes if bps > 0 else 0
            self._attach(p, link)

    def set_port_rate(self, pps: int, port: int, below: int = 0) -> None:
        """The port's line rate in packets per second (0 = none), shared by its priority
        queues below ``below`` (0 = all of them); the queues above take no line time (see
        ``Link.below``)."""
        link = self.links.get(port) or Link()
        link.rescale(link.bps, max(pps, 0))
        link.below = max(below, 0)
        self._attach(port, link)

    def _attach(self, port: int, link: Link) -> None:
        self.not_before = 0
        if link.unused():
            self.links.pop(port, None)
            attached = None
        else:
            attached = self.links[port] = link
        for (qp, prio), q in self.queues.items():
            if qp == port:
                q.link = attached if attached is None or attached.serves(prio) else None
                q.update()

    def block(self, port: int) -> None:
        """The port's transmit cannot take more (the kernel's socket buffer is full: a ``tc``
        rate limit or a full veth). As BMv2's blocking transmit stalls its egress, nothing of
        the port leaves until ``unblock``: its queue builds here, where P4 sees its depth."""
        self._set_blocked(port, True)

    def unblock(self, port: int) -> None:
        self._set_blocked(port, False)

    def _set_blocked(self, port: int, blocked: bool) -> None:
        self.not_before = 0
        if blocked:
            self.blocked.add(port)
        else:
            self.blocked.discard(port)
        for (qp, _), q in self.queues.items():
            if qp == port:
                q.blocked = blocked
                q.update()

    # -- data path ---------------------------------------------------------------------------

    def may_pass(self, port: int, prio: int, now: int) -> bool:
        """True when a packet for (port, prio) would leave at once: an empty queue without a
        packet-rate limit on an idle port. The caller then sends it straight through egress
        (``start_link`` claims the serializer) instead of a queue round trip. (An empty queue
        with ``bypass`` set always may.)"""
        q = self.queues.get((port, prio)) or self.queue(port, prio)
        if q.items or q.pps or q.depth <= 0 or q.blocked:
            return False
        link = q.link
        return link is None or (not self.port_backlog.get(port) and not link.busy(now))

    def enqueue(self, port: int, prio: int, item: Any, now: int) -> int:
        """Queue ``item``; returns the depth it found (enq_qdepth) or -1 when tail-dropped."""
        q = self.queues.get((port, prio)) or self.queue(port, prio)
        n = len(q.items)
        link = q.link
        if n >= q.depth or (link is not None and link.buffer_bytes
                            and link.queued_bytes + item.length > link.buffer_bytes):
            self.drops[port] = self.drops.get(port, 0) + 1
            return -1
        if not n and q.pps:
            # A busy period starts: the first packet may leave now. (Idle time earns no
            # credit; within a busy period departures keep an exact 1/rate spacing.)
            t = now * q.pps
            if q.next_num < t:
                q.next_num = t
        waiting = self.port_backlog.get(port, 0)
        if link is not None:
            # Nothing of the link waits (the port's backlog may be queues off the link): an
            # idle serializer / line starts with this packet
            if not link.queued_bytes:
                link.start(now)
            link.queued_bytes += item.length
        nb = self.not_before
        if nb and waiting and not n:
            # A queue of a port that already waits becomes non-empty: if it outranks the
            # port's head, the port's ready time moves, maybe later (per-queue rates).
            before = self._port_ready(port)
            q.items.append(item)
            t = self._port_ready(port)
            if t is not None and t < nb:
                self.not_before = t  # earlier than every port: the new deadline, exact
            elif t != before and before == nb:
                self.deadline_exact = False  # this port set the deadline: now only a bound
        else:
            q.items.append(item)
            if nb and not waiting:  # a port joins: the deadline is the earlier of the two
                t = self._port_ready(port)
                if t is not None and t < nb:
                    self.not_before = t
            # (a queue that already had packets: the port's head, its time, stay as they were)
        self.backlog += 1
        if not waiting:
            self.busy_since[port] = now
        self.port_backlog[port] = waiting + 1
        self.enqueues += 1
        self.last_enqueue_port = port
        return n

    def _port_ready(self, port: int) -> int | None:
        """When the port's highest-priority waiting packet may leave (None: blocked or
        nothing waits): its part of next_deadline."""
        for _, q in self.port_queues[port]:
            if not q.items:
                continue
            if q.blocked:
                return None
            t = -(-q.next_num // q.pps) if q.pps else 0
            link = q.link
            if link is not None:
                r = link.ready_at()
                if r > t:
                    t = r
            return t
        return None

    def dequeue(self, now: int) -> tuple[int, int, Any, int] | None:
        """Next packet allowed to leave at ``now``: (port, prio, item, depth after), or None.
        In bit-rate mode the port's serializer is claimed for the item's length (``settle``
        corrects it once egress has decided the frame that actually leaves)."""
        if not self.backlog or now < self.not_before:
            return None
        ports, backlog, port_queues = self.ports, self.port_backlog, self.port_queues
        n, rr = len(ports), self.rr
        # The earliest time a port not ready now will be (next_deadline's answer, gathered on
        # the way: a pass that serves nothing leaves it as the exact next deadline)
        best = None
        for i in range(n):
            j = rr + i
            port = ports[j - n if j >= n else j]
            if not backlog.get(port):
                continue  # nothing of this port waits (every enqueue counts in port_backlog)
            for prio, q in port_queues[port]:
                if not q.items:
                    continue
                if q.blocked:
                    break  # the kernel takes nothing more of this port for now
                link = q.link
                # Link.busy(now), inline: this test runs for every port a pass looks at
                if link is not None and ((link.bps and link.free_num > now * link.bps)
                                         or (link.pps and link.line_num > now * link.pps)):
                    # the sim's case inline (a serializer alone): Link.ready_at()
                    t = (_ready_at(q, link) if q.pps or link.pps
                         else -(-link.free_num // link.bps))
                    if best is None or t < best:
                        best = t
                    break  # the port is still sending: nothing of it leaves yet
                if q.pps:
                    if q.next_num > now * q.pps:
                        t = _ready_at(q, link)
                        if best is None or t < best:
                            best = t
                        break  # this port's head is paced; strict priority holds lower ones
                    q.next_num += NS
                item = q.items.popleft()
                self.not_before = 0  # what waited behind it may be ready at once
                if link is not None:
                    link.queued_bytes -= item.length
                    link.send(item.length)
                self.backlog -= 1
                self.busy_tx[port] = self.busy_tx.get(port, 0) + 1
                waiting = backlog[port] - 1
                backlog[port] = waiting
                if not waiting:
                    self.busy_total[port] = (self.busy_total.get(port, 0)
                                             + now - self.busy_since[port])
                self.rr = (rr + i + 1) % n
                return port, prio, item, len(q.items)
        # Every port was seen and none is ready: ``best`` is what next_deadline would find.
        self.not_before = best or 0
        self.deadline_exact = True
        return None

    def start_link(self, port: int, nbytes: int, now: int, prio: int = 0) -> None:
        """A packet passed straight through (``may_pass``) on an idle bit-rate port: the
        serializer is busy with it from ``now``."""
        link = self.links.get(port)
        if link is not None and link.serves(prio):
            link.start(now)
            link.send(nbytes)
            if self.port_backlog.get(port):
                self.deadline_exact = False  # its waiting packets leave later: a bound now

    def settle(self, port: int, charged: int, sent: int, prio: int = 0) -> None:
        """Egress turned a packet charged at ``charged`` bytes into ``sent`` bytes on the wire
        (0: dropped, recirculated): the serializer is busy for what really left."""
        link = self.links.get(port)
        if link is not None and link.bps and charged != sent and link.serves(prio):
            link.free_num += (sent - charged) * 8 * NS
            if sent < charged:
                self.not_before = 0  # the port is free sooner than its deadline said
            elif self.port_backlog.get(port):
                self.deadline_exact = False  # its waiting packets leave later: a bound now

    def next_deadline(self) -> int | None:
        """Earliest time (ns) a waiting packet may leave; None if nothing waits. Per port that
        is its highest-priority non-empty queue's time: ``dequeue`` serves nothing below it
        first (strict priority), so a lower queue's earlier time is no deadline (a virtual
        clock driver would poll forever at that instant)."""
        if not self.backlog:
            return None
        if self.deadline_exact and self.not_before:
            return self.not_before  # a walk saw every port since the last change it can't follow
        best = None
        backlog, port_queues = self.port_backlog, self.port_queues
        for port in self.ports:
            if not backlog.get(port):
                continue
            for _, q in port_queues[port]:
                if not q.items:
                    continue
                if q.blocked:
                    break  # due when the kernel takes more: the ports wake the loop then
                # (a call, not inline: with deadline_exact this walk is the rare case)
                t = _ready_at(q, q.link)
                if best is None or t < best:
                    best = t
                break
        self.not_before = best or 0
        self.deadline_exact = True
        return best

    def depth(self, port: int, prio: int = 0) -> int:
        q = self.queues.get((port, prio))
        return len(q.items) if q else 0

    def queued_bytes(self, port: int) -> int:
        link = self.links.get(port)
        return link.queued_bytes if link is not None else 0

    def busy_seconds(self, port: int, now: int) -> float:
        total = self.busy_total.get(port, 0)
        if self.port_backlog.get(port):
            total += now - self.busy_since[port]
        return total / NS

    def rate(self, port: int) -> int:
        return self._rate_for(port, 0)

    def clear(self, now: int) -> None:
        for port, waiting in self.port_backlog.items():
            if waiting:
                self.busy_total[port] = (self.busy_total.get(port, 0)
                                         + now - self.busy_since[port])
        for q in self.queues.values():
            q.items.clear()
        for link in self.links.values():
            link.queued_bytes = 0
        self.port_backlog.clear()
        self.backlog = 0
        self.not_before = 0
