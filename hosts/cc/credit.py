"""Receiver-driven credits ("look before you leave"): the receiver hands out cells at the rate
of its own downlink, so the senders together never send faster than it can take.

Each active flow first has ``initial_cells`` unscheduled cells (about one BDP) it may send
without a grant. After that the receiver's token bucket earns ``downlink_cells_per_s`` tokens
per second (at most ``burst_cells`` banked); tokens go round-robin to active flows, each one
moving that flow's grant frontier one cell on. A flow is active while it has sent something in
the last ``idle_s`` seconds (at least three grant intervals). Senders send only sequence
numbers below their grant; one that has been starved of grants for a while sends a single
probe cell so a receiver that took it for idle notices it again (hosts.sender).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CreditParams:
    downlink_cells_per_s: float
    initial_cells: int = 16
    burst_cells: float = 8.0
    idle_s: float = 0.05


@dataclass
class CreditFlow:
    granted: int  # sender may send sequence numbers < granted
    highest_seen: int = -1
    last_arrival: float = 0.0


@dataclass
class CreditGranter:
    params: CreditParams
    tokens: float = 0.0
    stamp: float | None = None
    flows: dict[object, CreditFlow] = field(default_factory=dict)
    _rr: int = 0
    granted_total: int = 0

    def on_cell(self, key: object, seq: int, now: float) -> CreditFlow:
        flow = self.flows.get(key)
        if flow is None:
            flow = CreditFlow(granted=seq + self.params.initial_cells)
            self.flows[key] = flow
        flow.highest_seen = max(flow.highest_seen, seq)
        flow.last_arrival = now
        return flow

    def tick(self, now: float) -> list[object]:
        """Spend the tokens earned since the last tick; return the flows whose grant moved."""
        p = self.params
        if self.stamp is None:
            self.stamp = now
            return []
        self.tokens = min(p.burst_cells, self.tokens + (now - self.stamp) * p.downlink_cells_per_s)
        self.stamp = now
        # A flow must not look idle between two of its own grants: with N flows sharing the
        # downlink, each gets one every N cell times.
        idle = max(p.idle_s, 3.0 * max(1, len(self.flows)) / p.downlink_cells_per_s)
        active = [k for k, f in self.flows.items() if now - f.last_arrival <= idle]
        moved: list[object] = []
        while self.tokens >= 1.0 and active:
            key = active[self._rr % len(active)]
            self._rr += 1
            self.flows[key].granted += 1
            self.granted_total += 1
            self.tokens -= 1.0
            if key not in moved:
                moved.append(key)
        return moved
