"""Rate controllers a sender can run, in a registry: one ``CcAlgorithm`` per algorithm says
everything the hosts and the harness need of it (``none``, ``dcqcn``, ``hpcc``, ``credit`` are
registered below; ``register`` adds one from anywhere, and every mode list, CLI choice and
plan follows).

Each wraps a pure core (state in small frozen dataclasses, functions checked by unit tests
against the papers' formulas) behind one small interface the sender calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from hosts.cc import dcqcn, hpcc


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


@dataclass(frozen=True)
class LineContext:
    """What a rate control's default parameters may depend on: the sender's line rate (bits
    per second), its cell frame, how much slower the fabric's clock runs than the one the
    algorithm's paper assumes, and the path's idle round trip (0: unknown)."""

    rate_bps: float
    frame_bytes: int
    time_scale: float = 1.0
    base_rtt_s: float = 0.0


def _no_defaults(_: LineContext) -> dict[str, object]:
    return {}


@dataclass(frozen=True)
class CcAlgorithm:
    """One congestion-control algorithm: its controller factory (line rate in bits/s and the
    complete parameters), its default parameters at a sender's line and time base, and what
    the rest of the fabric must do for it."""

    name: str
    controller: Callable[[float, dict[str, object]], RateController]
    defaults: Callable[[LineContext], dict[str, object]] = _no_defaults
    # the switches' INT: cells leave the sender with an INT-MD header and the receiver echoes
    # the hop stacks in its ACKs; the per-hop bandwidth the algorithm reads them against is
    # the links' whole line
    int_source: bool = False
    # the receiver grants credits at its downlink's rate (receiver-driven scheduling); the
    # sender starts with unscheduled cells and probes when starved of grants
    grants: bool = False
    help: str = ""


_REGISTRY: dict[str, CcAlgorithm] = {}


def register(algo: CcAlgorithm) -> CcAlgorithm:
    if algo.name in _REGISTRY:
        raise ValueError(f"rate control '{algo.name}' is registered already")
    _REGISTRY[algo.name] = algo
    return algo


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def algorithm(name: str) -> CcAlgorithm:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown rate control '{name}' (expected one of "
                         f"{', '.join(_REGISTRY)})") from None


class _Names(Sequence[str]):
    """The registered names as they are when read (argparse choices, topology checks), so an
    algorithm registered after import is a valid choice everywhere."""

    def __getitem__(self, index):  # type: ignore[override]
        return names()[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __repr__(self) -> str:
        return repr(names())


NAMES: Sequence[str] = _Names()


def make_controller(name: str, line_rate_bps: float, **params: object) -> RateController:
    """The controller of ``name`` with exactly these parameters (no defaults filled in)."""
    return algorithm(name).controller(line_rate_bps, params)


def controller_for(name: str, line: LineContext, params: dict[str, object]) -> RateController:
    """The controller a sender runs: ``params`` over the algorithm's defaults at its line."""
    algo = algorithm(name)
    return algo.controller(line.rate_bps, {**algo.defaults(line), **params})


def _dcqcn(line_rate_bps: float, params: dict[str, object]) -> RateController:
    p = dcqcn.DcqcnParams(line_rate_bps=line_rate_bps, **params)  # type: ignore[arg-type]
    return DcqcnController(line_rate_bps, params=p)


def _dcqcn_defaults(line: LineContext) -> dict[str, object]:
    """The paper's timers stretched by the time scale and its rate steps shrunk by it, so the
    controller reacts in the same number of cell times on a slower fabric."""
    if line.time_scale == 1.0:
        return {}
    paper = dcqcn.DcqcnParams(line_rate_bps=line.rate_bps)
    out: dict[str, object] = {}
    for name in ("alpha_timer_s", "increase_timer_s"):
        out[name] = getattr(paper, name) * line.time_scale
    for name in ("rai_bps", "rhai_bps"):
        out[name] = getattr(paper, name) / line.time_scale
    return out


def _hpcc(line_rate_bps: float, params: dict[str, object]) -> RateController:
    return HpccController(line_rate_bps, params=hpcc.HpccParams(**params))  # type: ignore[arg-type]


def _hpcc_defaults(line: LineContext) -> dict[str, object]:
    """Base RTT T: the path's, else 2 ms of software latency plus ten cell times at the line
    rate (a few hops of serialization each way); the NIC's rate is the line's."""
    cell_time = line.frame_bytes * 8 / line.rate_bps if line.rate_bps > 0 else 0.0
    return {"base_rtt_s": line.base_rtt_s or 0.002 + 10 * cell_time,
            "nic_bytes_per_s": line.rate_bps / 8}


register(CcAlgorithm("none", lambda rate, _: RateController(rate), help="fixed line rate"))
register(CcAlgorithm("dcqcn", _dcqcn, _dcqcn_defaults, help="ECN marks, CNPs (Zhu et al.)"))
register(CcAlgorithm("hpcc", _hpcc, _hpcc_defaults, int_source=True,
                     help="INT-driven window and rate (Li et al.)"))
register(CcAlgorithm("credit", lambda rate, _: CreditController(rate), grants=True,
                     help="receiver-driven credits"))
