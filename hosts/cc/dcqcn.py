"""DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
SIGCOMM 2015), as pure functions over a small state.

On a CNP:            Rt = Rc;  Rc = Rc * (1 - alpha/2);  alpha = (1 - g) * alpha + g
                     (the cut uses alpha before its update), counters and timers restart.
No CNP for K:        alpha = (1 - g) * alpha.
Rate increase events come from a timer (every T) and a byte counter (every B bytes sent).
With te, be the events of each kind since the last CNP (counted including this one):
  fast recovery      max(te, be) <= F:        Rc = (Rt + Rc) / 2
  additive increase  one of te, be > F:       Rt = Rt + R_AI;  Rc = (Rt + Rc) / 2
  hyper increase     both te, be > F:         Rt = Rt + R_HAI; Rc = (Rt + Rc) / 2
Rates are capped at the line rate and floored at ``min_rate_bps``.

Defaults are the paper's: g = 1/256, K = 55 us, T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s.
R_HAI is not pinned down for our link speeds; we use 10 * R_AI = 400 Mb/s (configurable).
The emulated fabric runs at a few Mb/s, so runs usually scale T, B, R_AI, R_HAI down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class DcqcnParams:
    line_rate_bps: float
    g: float = 1 / 256
    alpha_timer_s: float = 55e-6  # K
    increase_timer_s: float = 55e-6  # T
    byte_counter: int = 10 * 1000 * 1000  # B
    fast_recovery_steps: int = 5  # F
    rai_bps: float = 40e6
    rhai_bps: float = 400e6
    min_rate_bps: float = 1e5  # floor (not in the paper): a few cells/s at our link speeds
    max_catchup_events: int = 1000  # bound on timer events handled in one call after a stall


@dataclass(frozen=True)
class DcqcnState:
    rc: float  # current rate
    rt: float  # target rate
    alpha: float = 1.0
    timer_events: int = 0
    byte_events: int = 0
    bytes_since: int = 0
    alpha_stamp: float = 0.0  # last alpha update (or CNP)
    timer_stamp: float = 0.0  # last increase-timer event (or CNP)
    cnps: int = 0


def initial(params: DcqcnParams, now: float = 0.0) -> DcqcnState:
    return DcqcnState(rc=params.line_rate_bps, rt=params.line_rate_bps,
                      alpha_stamp=now, timer_stamp=now)


def on_cnp(s: DcqcnState, p: DcqcnParams, now: float) -> DcqcnState:
    rc = max(p.min_rate_bps, s.rc * (1 - s.alpha / 2))
    alpha = (1 - p.g) * s.alpha + p.g
    return replace(s, rt=s.rc, rc=rc, alpha=alpha, timer_events=0, byte_events=0,
                   bytes_since=0, alpha_stamp=now, timer_stamp=now, cnps=s.cnps + 1)


def decay_alpha(s: DcqcnState, p: DcqcnParams) -> DcqcnState:
    return replace(s, alpha=(1 - p.g) * s.alpha)


def increase(s: DcqcnState, p: DcqcnParams) -> DcqcnState:
    """One rate-increase step for the current counters (after the event was counted)."""
    f = p.fast_recovery_steps
    rt = s.rt
    if max(s.timer_events, s.byte_events) <= f:
        pass  # fast recovery: only move towards the target
    elif min(s.timer_events, s.byte_events) > f:
        rt = rt + p.rhai_bps
    else:
        rt = rt + p.rai_bps
    rt = min(rt, p.line_rate_bps)
    rc = min((rt + s.rc) / 2, p.line_rate_bps)
    return replace(s, rt=rt, rc=rc)


def stage(s: DcqcnState, p: DcqcnParams) -> str:
    f = p.fast_recovery_steps
    if max(s.timer_events, s.byte_events) <= f:
        return "fast_recovery"
    if min(s.timer_events, s.byte_events) > f:
        return "hyper_increase"
    return "additive_increase"


def on_timer_event(s: DcqcnState, p: DcqcnParams) -> DcqcnState:
    return increase(replace(s, timer_events=s.timer_events + 1), p)


def on_bytes_sent(s: DcqcnState, p: DcqcnParams, nbytes: int) -> DcqcnState:
    total = s.bytes_since + nbytes
    while total >= p.byte_counter:
        total -= p.byte_counter
        s = increase(replace(s, byte_events=s.byte_events + 1), p)
    return replace(s, bytes_since=total)


def advance(s: DcqcnState, p: DcqcnParams, now: float) -> DcqcnState:
    """Run the alpha timer and the increase timer up to ``now``."""
    s = _run_timer(s, p, now, "alpha_stamp", p.alpha_timer_s, decay_alpha)
    return _run_timer(s, p, now, "timer_stamp", p.increase_timer_s, on_timer_event)


def _run_timer(s: DcqcnState, p: DcqcnParams, now: float, stamp: str, period: float,
               event: Callable[[DcqcnState, DcqcnParams], DcqcnState]) -> DcqcnState:
    """Fire ``event`` once per ``period`` elapsed since the state's ``stamp``; after
    ``max_catchup_events`` in one go (a long idle gap) the timer restarts from ``now``."""
    n = 0
    while now - getattr(s, stamp) >= period and n < p.max_catchup_events:
        s = replace(event(s, p), **{stamp: getattr(s, stamp) + period})
        n += 1
    if n == p.max_catchup_events:
        s = replace(s, **{stamp: now})
    return s
