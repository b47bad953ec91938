"""The traffic manager's early return (``not_before``: no dequeue walk before the earliest
deadline it knows) and its walk-free next deadline (``deadline_exact``: a dequeue that found
nothing ready leaves the exact deadline behind, enqueues keep it where they can) against the
plain traffic manager that walks every port on every call: the same random sequence of
enqueues, dequeues, deadlines, settles, rate and link changes and blocked ports, on both,
must give the same answer to every call."""

from __future__ import annotations

import random

import pytest

from p4sim.switch.tm import TrafficManager


class PlainTM(TrafficManager):
    """No early return: ``not_before`` always reads 0 (unknown), so every dequeue walks."""

    @property  # type: ignore[override]
    def not_before(self) -> int:
        return 0

    @not_before.setter
    def not_before(self, value: int) -> None:
        pass


class Item:
    __slots__ = ("length", "tag")

    def __init__(self, length: int, tag: int) -> None:
        self.length = length
        self.tag = tag


def _dequeued(got: tuple | None) -> tuple | None:
    return None if got is None else (got[0], got[1], got[2].tag, got[3])


def _setup(tm: TrafficManager, mode: str) -> None:
    if mode == "bits":
        tm.set_link(100_000_000_000, 64 * 1024)  # 100 Gb/s, 64 KiB per port (the sim's way)
    elif mode == "packets":
        tm.set_rate(2_000_000)
        tm.set_depth(40)
    elif mode == "both":  # per-port line rates over bit-rate ports, one port paced per queue
        tm.set_link(40_000_000_000, 0)
        tm.set_port_rate(3_000_000, 2)
        tm.set_rate(1_000_000, 3, 1)
    else:  # queues: each priority its own rate, so a port's time can move later on enqueue
        tm.set_rate(2_000_000)
        for port in (1, 2, 3):
            tm.set_rate(500_000, port, 1)
        tm.set_port_rate(4_000_000, 4)


def _step(rnd: random.Random, tms: list[TrafficManager], now: int,
          tag: int) -> tuple[str, list]:
    """One random operation on every traffic manager: its kind and what each answered (a
    dequeue's and a deadline's answers end with whether the first one answered without a
    walk)."""
    op = rnd.random()
    port, prio = rnd.randrange(1, 5), rnd.randrange(2)
    if op < 0.45:
        n = rnd.choice([64, 1024, 1100, 1500])
        return "enqueue", [tm.enqueue(port, prio, Item(n, tag), now) for tm in tms]
    if op < 0.75:
        early = bool(tms[0].backlog) and now < tms[0].not_before
        out = []
        change = rnd.choice([None, 0, -80, -1, 36, 200])  # egress changed its length by this
        for tm in tms:
            got = tm.dequeue(now)
            if got is not None and change is not None:
                tm.settle(got[0], got[2].length, max(0, got[2].length + change))
            out.append(_dequeued(got))
        return "dequeue", [*out, early]
    if op < 0.9:
        walk_free = bool(tms[0].backlog and tms[0].deadline_exact and tms[0].not_before)
        return "deadline", [*[tm.next_deadline() for tm in tms], walk_free]
    if op < 0.94:
        for tm in tms:
            tm.start_link(port, 1024, now)
        return "start_link", []
    if op < 0.97:
        blocked = rnd.random() < 0.5
        for tm in tms:
            (tm.block if blocked else tm.unblock)(port)
        return "block", []
    rate = rnd.choice([0, 1_000_000, 5_000_000])
    for tm in tms:
        tm.set_rate(rate, port, prio)
    return "rate", []


@pytest.mark.parametrize("mode", ["bits", "packets", "both", "queues"])
@pytest.mark.parametrize("seed", range(4))
def test_early_return_answers_every_call_as_the_plain_walk(mode: str, seed: int) -> None:
    rnd = random.Random(f"{mode}:{seed}")
    fast, plain = TrafficManager(priorities=2), PlainTM(priorities=2)
    for tm in (fast, plain):
        _setup(tm, mode)
    now = 0
    walk_free = {"dequeue": 0, "deadline": 0}  # calls the fast TM answered without a walk
    for tag in range(4000):
        now += rnd.choice([0, 0, 1, 7, 30, 120])  # many calls at the same nanosecond
        kind, answers = _step(rnd, [fast, plain], now, tag)
        if answers:
            assert answers[0] == answers[1], (tag, now, kind, answers)
        if kind in walk_free:
            walk_free[kind] += int(answers[2])
    assert fast.drops == plain.drops and fast.busy_tx == plain.busy_tx
    assert fast.backlog == plain.backlog and fast.busy_total == plain.busy_total
    # both shortcuts did answer calls here
    assert walk_free["dequeue"] > 20 and walk_free["deadline"] > 20, walk_free


def _port_walk_deadline(tm: TrafficManager) -> int | None:
    """next_deadline by its definition, from scratch: per port with packets waiting and not
    blocked, its highest-priority non-empty queue's time (pacing and link, rounded up)."""
    best = None
    for (port, prio), q in sorted(tm.queues.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        if not q.items or any(other.items for p2, other in tm.port_queues[port]
                              if p2 > prio):
            continue
        if q.blocked:
            continue
        t = -(-q.next_num // q.pps) if q.pps else 0
        if q.link is not None:
            t = max(t, q.link.ready_at())
        best = t if best is None else min(best, t)
    return best


@pytest.mark.parametrize("mode", ["bits", "packets", "both", "queues"])
def test_walk_free_deadline_is_the_definitions_after_every_call(mode: str) -> None:
    """After each random call, the fast TM's known deadline (when it says it is exact) is the
    one computed from scratch: a change it does not follow may not leave it stale."""
    rnd = random.Random(f"exact:{mode}")
    fast, plain = TrafficManager(priorities=2), PlainTM(priorities=2)
    for tm in (fast, plain):
        _setup(tm, mode)
    now, checked = 0, 0
    for tag in range(3000):
        now += rnd.choice([0, 1, 7, 30, 120])
        _step(rnd, [fast, plain], now, tag)
        if fast.backlog and fast.deadline_exact and fast.not_before:
            assert fast.not_before == _port_walk_deadline(fast), (tag, now)
            checked += 1
    assert checked > 100
