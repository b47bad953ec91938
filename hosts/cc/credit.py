"""Receiver-driven credits ("look before you leave"): the receiver hands out cells at the rate
of its own downlink, so the senders together never send faster than it can take.

Each active flow first has ``initial_cells`` unscheduled cells it may send without a grant
(by default about one BDP: a lone flow loses no round trip, but N flows starting together put
N BDPs into the fabric at once, which an incast's last switch cannot hold). After that the
receiver's token bucket earns ``downlink_cells_per_s`` tokens per second (at most
``burst_cells`` banked); tokens go round-robin to active flows, each one moving that flow's
grant frontier one cell on. A flow is active while it has sent something in the last
``idle_s`` seconds (at least three grant intervals) and its last message is not complete.
Senders send only sequence numbers below their grant; one that has been starved of grants for
a while sends a single probe cell so a receiver that took it for idle notices it again
(hosts.sender).

``window_cells`` > 0 caps the cells granted and not yet arrived, over all flows: no token is
spent while that many are on their way. With ``initial_cells`` = 1 (the first cell is the
request to send, as in receiver-driven schemes such as NDP and ExpressPass) the cells in
flight toward this receiver never exceed ``window_cells`` + 2 per flow (its request and one
probe), wherever they queue: an incast cannot overflow a buffer larger than that.
(Retransmissions need no grant and are not counted. When a message completes, the grants its
sender has not used are withdrawn, so its next message starts with a request again: one round
trip per message.)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CreditParams:
    downlink_cells_per_s: float
    initial_cells: int = 16
    burst_cells: float = 8.0
    idle_s: float = 0.05
    window_cells: int = 0  # > 0: at most this many granted cells not yet arrived
    batch_cells: int = 1  # with a window: tokens go round-robin this many at a time


@dataclass
class CreditFlow:
    granted: int  # sender may send sequence numbers < granted
    highest_seen: int = -1
    last_arrival: float = 0.0
    lowest_seen: int = 0
    received: int = 0  # distinct cells seen
    done: bool = False  # its last message is complete and nothing newer has arrived

    def outstanding(self) -> int:
        """Cells the sender may have sent that have not arrived (0 once its message is
        complete: grants past a message's end are never used by it)."""
        if self.done:
            return 0
        return max(0, self.granted - self.lowest_seen - self.received)


@dataclass
class CreditGranter:
    params: CreditParams
    tokens: float = 0.0
    stamp: float | None = None
    flows: dict[object, CreditFlow] = field(default_factory=dict)
    _rr: int = 0
    _streak: int = 0
    granted_total: int = 0

    def on_cell(self, key: object, seq: int, now: float, new: bool = True) -> CreditFlow:
        """A data cell arrived; ``new``: not a duplicate of one already received."""
        flow = self.flows.get(key)
        if flow is None:
            flow = CreditFlow(granted=seq + self.params.initial_cells, lowest_seen=seq)
            self.flows[key] = flow
        if self.params.window_cells > 0:
            if flow.done and seq > flow.highest_seen:
                flow.done = False  # its next message
            # a probe (hosts.sender) went past the grant: it is on its way, so it counts
            flow.granted = max(flow.granted, seq + 1)
        flow.highest_seen = max(flow.highest_seen, seq)
        flow.lowest_seen = min(flow.lowest_seen, seq)
        flow.last_arrival = now
        if new:
            flow.received += 1
        return flow

    def on_message_done(self, key: object, last_seq: int) -> None:
        """With a window: the flow's message ending at ``last_seq`` is complete. Unless a later
        cell already came, its grant goes back to ``initial_cells`` past the message (the next
        message's request; grants the sender has not used yet are withdrawn, as a grant is a
        frontier) and it gets no more until one of those arrives."""
        flow = self.flows.get(key)
        if self.params.window_cells <= 0 or flow is None or flow.highest_seen > last_seq:
            return
        flow.done = True
        flow.granted = last_seq + 1 + self.params.initial_cells

    def window_open(self) -> bool:
        w = self.params.window_cells
        return w <= 0 or sum(f.outstanding() for f in self.flows.values()) < w

    def _idle_s(self) -> float:
        # A flow must not look idle between two of its own grants: with N flows sharing the
        # downlink, each gets one every N cell times.
        p = self.params
        return max(p.idle_s, 3.0 * max(1, len(self.flows)) / p.downlink_cells_per_s)

    def active(self, now: float) -> list[object]:
        idle = self._idle_s()
        return [k for k, f in self.flows.items() if not f.done and now - f.last_arrival <= idle]

    def tick(self, now: float) -> list[object]:
        """Spend the tokens earned since the last tick; return the flows whose grant moved."""
        p = self.params
        if self.stamp is None:
            self.stamp = now
            return []
        self.tokens = min(p.burst_cells, self.tokens + (now - self.stamp) * p.downlink_cells_per_s)
        self.stamp = now
        active = self.active(now)
        moved: list[object] = []
        free = (p.window_cells - sum(f.outstanding() for f in self.flows.values())
                if p.window_cells > 0 else None)
        while self.tokens >= 1.0 and active and (free is None or free > 0):
            key = active[self._rr % len(active)]
            self._streak += 1
            if free is None or self._streak >= p.batch_cells:
                # With a window, a flow's batch fills before the next flow's starts: grants
                # go out a batch at a time, and N part batches would hold the window
                # without releasing any.
                self._rr += 1
                self._streak = 0
            self.flows[key].granted += 1
            self.granted_total += 1
            self.tokens -= 1.0
            if free is not None:
                free -= 1
            if key not in moved:
                moved.append(key)
        return moved
