"""HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019), as pure functions.

Per ACK, from the INT records it echoes (``ack.L``) and the previous ones for the same hop
(``L``), for every hop i:
    txRate_i = (ack.L[i].txBytes - L[i].txBytes) / (ack.L[i].ts - L[i].ts)
    u_i      = min(ack.L[i].qlen, L[i].qlen) / (B_i * T) + txRate_i / B_i
u = max_i u_i, tau = the ts difference of that hop, tau = min(tau, T),
U = (1 - tau/T) * U + (tau/T) * u                                   (MeasureInflight)
If U >= eta or incStage >= maxStage:  W = Wc / (U/eta) + W_AI       (ComputeWind)
else:                                 W = Wc + W_AI
and only once per RTT (ack_seq > lastUpdateSeq, then lastUpdateSeq = snd_nxt) the reference
window moves: Wc = W, incStage reset to 0 (multiplicative) or incremented (additive).
Rate R = W / T. Defaults: eta = 0.95, maxStage = 5, W_init = B_nic * T, W_AI = W_init*(1-eta)/N
with N the expected number of concurrent flows (a deployment parameter; default 1).
Units here: bytes, seconds, bytes per second. W is clamped to [W_min, W_init].

Hops are matched by (node id, egress port), so sprayed cells that return records of other
paths are compared with the last record of the same hop, never of another.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class HopSample:
    key: tuple[int, int]  # (node id, egress port)
    qlen_bytes: float
    tx_bytes: int  # 32-bit counter
    ts_s: float
    link_bytes_per_s: float


@dataclass(frozen=True)
class HpccParams:
    base_rtt_s: float  # T
    nic_bytes_per_s: float  # B of the host link, for W_init
    eta: float = 0.95
    max_stage: int = 5
    flows: int = 1  # N in W_AI = W_init * (1 - eta) / N
    w_min_bytes: float = 1024.0

    @property
    def w_init(self) -> float:
        return self.nic_bytes_per_s * self.base_rtt_s

    @property
    def w_ai(self) -> float:
        return self.w_init * (1 - self.eta) / self.flows


@dataclass(frozen=True)
class HpccState:
    window: float
    wc: float
    u: float = 0.0
    inc_stage: int = 0
    last_update_seq: int = -1
    prev: dict[tuple[int, int], HopSample] = field(default_factory=dict)


def initial(p: HpccParams) -> HpccState:
    return HpccState(window=p.w_init, wc=p.w_init)


def measure_inflight(s: HpccState, p: HpccParams, hops: list[HopSample]) -> float | None:
    """The new U, or None when no hop has a previous sample to compare with."""
    u_max = None
    tau = p.base_rtt_s
    T = p.base_rtt_s
    for hop in hops:
        old = s.prev.get(hop.key)
        if old is None or hop.ts_s <= old.ts_s:
            continue
        dt = hop.ts_s - old.ts_s
        tx_rate = ((hop.tx_bytes - old.tx_bytes) % (1 << 32)) / dt
        u_hop = (min(hop.qlen_bytes, old.qlen_bytes) / (hop.link_bytes_per_s * T)
                 + tx_rate / hop.link_bytes_per_s)
        if u_max is None or u_hop > u_max:
            u_max, tau = u_hop, dt
    if u_max is None:
        return None
    tau = min(tau, T)
    return (1 - tau / T) * s.u + (tau / T) * u_max


def compute_window(s: HpccState, p: HpccParams, u: float, update_wc: bool) -> HpccState:
    if u >= p.eta or s.inc_stage >= p.max_stage:
        w = s.wc / (max(u, 1e-9) / p.eta) + p.w_ai
        stage = 0
    else:
        w = s.wc + p.w_ai
        stage = s.inc_stage + 1
    w = min(max(w, p.w_min_bytes), p.w_init)
    if update_wc:
        return replace(s, window=w, wc=w, u=u, inc_stage=stage)
    return replace(s, window=w, u=u)


def on_ack(s: HpccState, p: HpccParams, hops: list[HopSample], ack_seq: int,
           snd_nxt: int) -> HpccState:
    """NewAck: update U and W from an ACK's INT echo; remember the records for next time."""
    u = measure_inflight(s, p, hops)
    prev = dict(s.prev)
    for hop in hops:
        old = prev.get(hop.key)
        # Keep the older record while the hop's clock has not moved on: INT timestamps are
        # v1model's microseconds, and at 100 Gb/s several ACKs echo one microsecond. Replacing
        # it would compare the next record's bytes (a fraction of a microsecond's worth) with
        # a whole microsecond of time and read the link's rate a few times too low.
        if old is None or hop.ts_s > old.ts_s:
            prev[hop.key] = hop
    if u is None:
        return replace(s, prev=prev)
    if ack_seq > s.last_update_seq:
        s = replace(compute_window(s, p, u, True), last_update_seq=snd_nxt)
    else:
        s = compute_window(s, p, u, False)
    return replace(s, prev=prev)


def rate_bytes_per_s(s: HpccState, p: HpccParams) -> float:
    return s.window / p.base_rtt_s
