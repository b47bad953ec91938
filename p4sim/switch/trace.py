"""Per-packet trace, like BMv2's ``--log-console`` / ``--log-file`` event log.

For every packet: where it came in, each parser state (and a parser error), each table applied
with its lookup key, hit or miss and the entry that matched, each action with its arguments,
each condition's outcome, the egress buffers (queue, depth found, tail drop), egress (port,
queue, depth, delay), and what left on which port. Levels are simple_switch's (``trace`` >
``debug`` > ``info`` > ``warn`` > ``error`` > ``off``): packet events are ``debug``, lookup keys
and parser states ``trace``.

Zero cost when off: nothing here runs unless a Tracer is given to the data plane; the program
is then built with wrapped parser states, table lookups, actions, conditions and stages (and
without the fused receive), and is built plainly otherwise.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, TextIO

from p4sim.switch.api import (
    ActionCall,
    Exact,
    GroupRef,
    KeyField,
    Lpm,
    MemberRef,
    Optional_,
    Range,
    Ternary,
)
from p4sim.switch.packet import ParserError

LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4, "off": 5}
_LETTER = {0: "T", 1: "D", 2: "I", 3: "W", 4: "E"}


_FORMATS: dict[type, Callable[[Any], str]] = {
    Exact: lambda k: f"{k.value:#x}",
    Lpm: lambda k: f"{k.value:#x}/{k.prefix_len}",
    Ternary: lambda k: f"{k.value:#x}&&&{k.mask:#x}",
    Range: lambda k: f"{k.low:#x}->{k.high:#x}",
    Optional_: lambda k: "*" if k.value is None else f"{k.value:#x}",
    ActionCall: lambda a: f"{a.action}({', '.join(f'{v:#x}' for v in a.args)})",
    MemberRef: lambda a: f"member {a.member_id}",
    GroupRef: lambda a: f"group {a.group_id}",
}


def fmt(obj: KeyField | ActionCall | MemberRef | GroupRef) -> str:
    """A key field or a table entry's action as the trace shows it."""
    f = _FORMATS.get(type(obj))
    return f(obj) if f is not None else repr(obj)


class Tracer:
    """Writes trace lines to ``out`` (any text stream) at ``level`` and above. ``clock`` is the
    data plane's (ns): each line carries the switch time in microseconds."""

    def __init__(self, out: TextIO, level: str = "trace", flush: bool = False) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown log level '{level}' (one of {', '.join(LEVELS)})")
        self.out = out
        self.level = LEVELS[level]
        self.flush = flush
        self.clock: Callable[[], int] = lambda: 0
        self.t0 = 0
        self._ids = itertools.count(1)
        self._local = threading.local()  # the packet being processed (id), per thread

    def enabled(self, level: str) -> bool:
        return LEVELS[level] >= self.level

    def write(self, level: int, msg: str) -> None:
        if level < self.level:
            return
        pkt = getattr(self._local, "pkt", None)
        t_us = (self.clock() - self.t0) / 1000
        tag = f"[{pkt}]" if pkt is not None else "[-]"
        self.out.write(f"[{t_us:.3f}] [p4sim] [{_LETTER[level]}] {tag} {msg}\n")
        if self.flush:
            self.out.flush()

    def event(self, msg: str) -> None:
        self.write(1, msg)

    def detail(self, msg: str) -> None:
        self.write(0, msg)

    def info(self, msg: str) -> None:
        self.write(2, msg)

    def warning(self, msg: str) -> None:
        self.write(3, msg)

    # -- program building (called by CompiledProgram) -----------------------------------------

    def wrap_action(self, name: str, fn: Any) -> Any:
        def action(P: Any, F: list[int], D: tuple) -> Any:
            self.event(f"action {name}({', '.join(f'{a:#x}' for a in D)})")
            return fn(P, F, D)
        return action

    def wrap_parser_states(self, ns: dict[str, Any], start: Any,
                           state_names: dict[str, str]) -> Any:
        """Every parser state function in the generated namespace (transitions find the next
        state there by the name ``state_names`` maps to the state's) logs its state's name;
        returns the wrapped start state."""
        wrapped: dict[Any, Any] = {}
        for name, state in state_names.items():
            fn = ns[name]
            wrapped[fn] = ns[name] = self._state(state, fn)
        return wrapped.get(start, start)

    def _state(self, state: str, fn: Any) -> Any:
        def traced_state(P: Any, F: list[int], D: tuple) -> Any:
            self.detail(f"parser state '{state}' at byte {P.pos}")
            try:
                return fn(P, F, D)
            except ParserError as e:
                self.event(f"parser error in state '{state}' (error {e.code})")
                raise
        return traced_state

    def wrap_lookup(self, table: Any, lookup: Any) -> Any:
        names = [kname for _, _, kname in table.keys]

        def traced_lookup(key: tuple) -> Any:
            if self.level == 0:
                shown = ", ".join(f"{n}={v:#x}" for n, v in zip(names, key))
                self.detail(f"table '{table.name}': looking up key {{{shown}}}")
            entry = lookup(key)
            if entry is None:
                self.event(f"table '{table.name}': miss, default action")
            else:
                api = table.to_api(entry)
                keys = ", ".join(fmt(k) for k in api.key)
                self.event(f"table '{table.name}': hit entry ({keys}) priority {api.priority}"
                           f" -> {fmt(api.action)}")
            return entry
        return traced_lookup

    def wrap_node(self, kind: str, name: str, node: Any, holder: Any = None) -> Any:
        """A control-flow node: tables announce themselves, conditions say their outcome."""
        if kind == "table":
            def table_node(P: Any, F: list[int]) -> Any:
                self.detail(f"applying table '{name}'")
                return node(P, F)
            return table_node

        def cond_node(P: Any, F: list[int], D: tuple = ()) -> Any:
            nxt = node(P, F)
            self.event(f"condition '{name}' is {'true' if nxt is holder.true_next else 'false'}")
            return nxt
        return cond_node

    # -- the packet path (called by V1Model) --------------------------------------------------

    def stage_wrapper(self, flow: Any) -> Callable[[str, Any], Any]:
        """For stages.build: wraps each stage function and the traffic manager's enqueue."""
        counters = flow.counters

        def wrap(name: str, fn: Any) -> Any:
            if name == "receive":
                def receive(port: int, frame: bytes, *rest: Any) -> None:
                    outer = getattr(self._local, "pkt", None)
                    self._local.pkt = pid = next(self._ids)
                    kind = {4: "recirculated", 6: "resubmitted"}.get(rest[0] if rest else 0,
                                                                       "received")
                    self.event(f"packet {kind} on port {port}, {len(frame)} bytes")
                    drops = counters.pipeline_drops
                    try:
                        fn(port, frame, *rest)
                    finally:
                        if counters.pipeline_drops > drops:
                            self.event(f"packet {pid}: {counters.pipeline_drops - drops} "
                                       "copy(ies) dropped in the pipeline")
                        self._local.pkt = outer
                return receive
            if name == "to_egress":
                def to_egress(P: Any, port: int) -> None:
                    P.trace_id = getattr(self._local, "pkt", None)
                    self.event(f"egress buffers: port {port}, instance type {P.instance_type}")
                    fn(P, port)
                return to_egress
            if name == "egress":
                def egress(P: Any, port: int, prio: int, left: int, now: int) -> None:
                    outer = getattr(self._local, "pkt", None)
                    self._local.pkt = getattr(P, "trace_id", None)
                    waited = ((now - flow.t0) // 1000 - P.F[flow.s_enq_ts]) & flow.m_deq_td
                    self.event(f"egress: port {port} queue {prio}, waited {waited} us, "
                               f"{left} packet(s) left in the queue")
                    try:
                        fn(P, port, prio, left, now)
                    finally:
                        self._local.pkt = outer
                return egress
            if name == "enqueue":
                def enqueue(port: int, prio: int, P: Any, now: int) -> int:
                    depth = fn(port, prio, P, now)
                    self.event(f"queue ({port}, {prio}): "
                               + ("full, tail drop" if depth < 0 else f"queued at depth {depth}"))
                    return depth
                return enqueue
            if name == "output":
                def output(port: int, frame: bytes) -> None:
                    self.event(f"transmitting {len(frame)} bytes on port {port}")
                    fn(port, frame)
                return output
            return fn
        return wrap
