"""Rate controllers a sender can run: ``none``, ``dcqcn``, ``hpcc``, ``credit``.

Each wraps a pure core (state in small frozen dataclasses, functions checked by unit tests
against the papers' formulas) behind one small interface the sender calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hosts.cc import dcqcn, hpcc

NAMES = ("none", "dcqcn", "hpcc", "credit")


@dataclass
class RateController:
    """Fixed rate; the base of the others. Rates are bits per second."""

    line_rate_bps: float
    name: str = "none"
    history: list[tuple[float, float]] = field(default_factory=list)  # (time, rate) on change

    def rate_bps(self) -> float:
        return self.line_rate_bps

    def window_bytes(self) -> float | None:
        return None

    def uses_grants(self) -> bool:
        return False

    def on_cnp(self, now: float) -> None:
        pass

    def on_ack(self, now: float, ack_seq: int, snd_nxt: int,
               hops: list[hpcc.HopSample] | None) -> None:
        pass

    def on_sent(self, now: float, nbytes: int) -> None:
        pass

    def tick(self, now: float) -> None:
        pass

    def _note(self, now: float) -> None:
        rate = self.rate_bps()
        if not self.history or self.history[-1][1] != rate:
            self.history.append((now, rate))
            if len(self.history) > 10000:
                del self.history[: len(self.history) // 2]

    def summary(self) -> dict[str, object]:
        rates = [r for _, r in self.history] or [self.rate_bps()]
        return {"cc": self.name, "rate_bps_final": self.rate_bps(), "rate_bps_min": min(rates),
                "rate_changes": len(self.history)}


@dataclass
class DcqcnController(RateController):
    params: dcqcn.DcqcnParams | None = None
    state: dcqcn.DcqcnState | None = None

    def __post_init__(self) -> None:
        self.name = "dcqcn"
        if self.params is None:
            self.params = dcqcn.DcqcnParams(line_rate_bps=self.line_rate_bps)
        self.state = dcqcn.initial(self.params)
        self._started = False

    def rate_bps(self) -> float:
        return self.state.rc

    def on_cnp(self, now: float) -> None:
        self.state = dcqcn.on_cnp(self.state, self.params, now)
        self._note(now)

    def on_sent(self, now: float, nbytes: int) -> None:
        self.state = dcqcn.on_bytes_sent(self.state, self.params, nbytes)

    def tick(self, now: float) -> None:
        if not self._started:  # timers start with the first send, not at construction
            self.state = dcqcn.DcqcnState(rc=self.state.rc, rt=self.state.rt,
                                          alpha_stamp=now, timer_stamp=now)
            self._started = True
        self.state = dcqcn.advance(self.state, self.params, now)
        self._note(now)

    def summary(self) -> dict[str, object]:
        out = super().summary()
        out.update(cnps=self.state.cnps, alpha=self.state.alpha)
        return out


@dataclass
class HpccController(RateController):
    params: hpcc.HpccParams | None = None
    state: hpcc.HpccState | None = None
    acks_with_int: int = 0

    def __post_init__(self) -> None:
        self.name = "hpcc"
        if self.params is None:
            self.params = hpcc.HpccParams(base_rtt_s=1e-3, nic_bytes_per_s=self.line_rate_bps / 8)
        self.state = hpcc.initial(self.params)

    def rate_bps(self) -> float:
        return min(self.line_rate_bps, hpcc.rate_bytes_per_s(self.state, self.params) * 8)

    def window_bytes(self) -> float | None:
        return self.state.window

    def on_ack(self, now: float, ack_seq: int, snd_nxt: int,
               hops: list[hpcc.HopSample] | None) -> None:
        if not hops:
            return
        self.acks_with_int += 1
        self.state = hpcc.on_ack(self.state, self.params, hops, ack_seq, snd_nxt)
        self._note(now)

    def summary(self) -> dict[str, object]:
        out = super().summary()
        out.update(window_bytes=self.state.window, u=self.state.u, acks_with_int=self.acks_with_int)
        return out


@dataclass
class CreditController(RateController):
    def __post_init__(self) -> None:
        self.name = "credit"

    def uses_grants(self) -> bool:
        return True


def make_controller(name: str, line_rate_bps: float, **params: object) -> RateController:
    if name == "none":
        return RateController(line_rate_bps)
    if name == "dcqcn":
        p = dcqcn.DcqcnParams(line_rate_bps=line_rate_bps, **params)  # type: ignore[arg-type]
        return DcqcnController(line_rate_bps, params=p)
    if name == "hpcc":
        p2 = hpcc.HpccParams(**params)  # type: ignore[arg-type]
        return HpccController(line_rate_bps, params=p2)
    if name == "credit":
        return CreditController(line_rate_bps)
    raise ValueError(f"unknown rate control '{name}' (expected one of {', '.join(NAMES)})")
