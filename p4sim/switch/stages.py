"""The v1model packet path: one function per stage, as BMv2's simple_switch runs it.

    receive(port, frame)          parser -> verify checksum -> ingress pipeline -> (clone /
                                  digest / resubmit / multicast / drop / unicast)
    to_egress(P, port)            the egress buffers: the one place that decides whether a
                                  packet waits in its queue or goes on at once
    egress(P, port, prio, left, now)
                                  egress pipeline -> (clone / drop / recirculate) -> compute
                                  checksum -> deparser -> transmit

This module is the source of those functions, not a library to call: ``build`` executes it
once per program in a namespace that binds the names below (the program's compiled parser,
pipelines, deparser, field slots, the traffic manager's calls) to that program's values, so the
hot path reads constants instead of attributes. The placeholder values here only make the
module importable and lint-clean.

Speed without a second copy: ``build(fuse=True)`` also generates a ``receive`` in which each
call marked ``# inline`` is replaced by the called stage's own body (its parameters are named
as the call's arguments, and such a call is the last thing its caller does on that path, so a
``return`` in the inlined body means the same). The fused and the stage-by-stage functions
are tested against each other (tests/unit/test_switch_onepath.py).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

from p4sim.switch.packet import NORMAL, Packet
from p4sim.switch.parser import run_parser
from p4sim.switch.primitives import DROP_PORT

# -- names bound per program by build() (placeholders) ------------------------------------------
flow: Any = None  # the V1Model: its _in_egress flag
counters: Any = None
template: list[int] = []
clock: Any = None
t0 = 0
parser_start: Any = None
too_short = 0
verify: Any = None
ingress: Any = None
egress_pipe: Any = None
update: Any = None
deparse: Any = None
special: Any = None  # V1Model._after_ingress_special
clone_e2e: Any = None
recirculate: Any = None
abort: Any = None
output: Any = None
priorities = 1
queues: dict = {}
new_queue: Any = None
may_pass: Any = None
enqueue: Any = None
start_link: Any = None
settle: Any = None
links: dict = {}
s_in = s_len = s_igts = s_it = s_perr = s_es = s_mcast = s_prio = 0
s_enq_ts = s_enq_qd = s_ep = s_egts = s_deq_td = s_deq_qd = s_qid = 0
m_enq_ts = m_deq_td = -1


# -- the stages -----------------------------------------------------------------------------------

def receive(port: int, frame: bytes, instance_type: int = NORMAL,
            preserved: list[tuple[int, int]] | None = None, passes: int = 0) -> None:
    """Ingress for one frame arriving on ``port`` (or resubmitted / recirculated)."""
    F = template[:]
    P = Packet(F, frame, port)
    F[s_in] = port
    F[s_len] = len(frame)
    F[s_igts] = (clock() - t0) // 1000
    if instance_type:
        P.instance_type = F[s_it] = instance_type
        P.passes = passes
        for slot, value in preserved or ():
            F[slot] = value
    try:
        err = run_parser(parser_start, P, F, too_short)
        if err:
            F[s_perr] = err
            counters.parser_errors += 1
        if verify is not None:
            verify(P, F, ())
        ingress(P, F)
        P.exit = False
        if P.clone_session is not None or P.digests or P.resubmit_fl is not None or F[s_mcast]:
            special(P, F)
            return
        port = F[s_es]
        if port == DROP_PORT:
            counters.pipeline_drops += 1
            return
        to_egress(P, port)  # inline
    except Exception as e:  # a bad packet never stops the switch
        abort(e)


def to_egress(P: Packet, port: int) -> None:
    """The egress buffers: queue the packet, or run egress now if it would leave at once (then
    its queue depth and delay are 0, as they would be measured)."""
    F = P.F
    prio = F[s_prio] if priorities > 1 else 0
    if prio >= priorities:
        counters.pipeline_drops += 1
        return
    now = clock()
    F[s_enq_ts] = ((now - t0) // 1000) & m_enq_ts
    q = queues.get((port, prio)) or new_queue(port, prio)
    # Not while another packet is in egress: its E2E clones queue behind it. (q.bypass caches
    # may_pass's answer for queues that nothing limits.)
    if not q.items and not flow._in_egress and (q.bypass or may_pass(port, prio, now)):
        F[s_enq_qd] = 0
        if links:
            start_link(port, P.length, now)
        left = 0
        try:
            egress(P, port, prio, left, now)  # inline
        except Exception as e:  # a bad packet never stops the switch
            abort(e)
        return
    depth = enqueue(port, prio, P, now)
    if depth >= 0:
        F[s_enq_qd] = depth


def egress(P: Packet, port: int, prio: int, left: int, now: int) -> None:
    """Egress for a packet leaving its queue at ``now`` (``left`` packets stay behind):
    pipeline, E2E clone, drop, checksums, deparse, recirculate or transmit."""
    # _in_egress stops E2E clones made here from entering egress directly; abort() clears it
    # if a packet fails half way.
    flow._in_egress = True
    F = P.F
    ts = (now - t0) // 1000
    F[s_ep] = port
    F[s_egts] = ts
    F[s_deq_td] = (ts - F[s_enq_ts]) & m_deq_td
    F[s_deq_qd] = left
    F[s_qid] = prio
    if egress_pipe is not None:
        egress_pipe(P, F)
        P.exit = False
    if P.clone_session is not None:
        clone_e2e(P, F)
    if F[s_es] == DROP_PORT:
        flow._in_egress = False
        counters.pipeline_drops += 1
        if links:
            settle(port, P.length, 0)
        return
    if update is not None:
        update(P, F, ())
    frame = deparse(P, F, ())
    if P.truncate and len(frame) > P.truncate:
        frame = frame[:P.truncate]
    flow._in_egress = False
    if P.recirc_fl is not None:
        recirculate(P, F, port, frame)
        return
    if links:
        settle(port, P.length, len(frame))
    output(port, frame)


STAGES = ("receive", "to_egress", "egress")


# -- building -------------------------------------------------------------------------------------

BOUND = (
    "flow", "counters", "template", "clock", "t0", "parser_start", "too_short", "verify",
    "ingress", "egress_pipe", "update", "deparse", "special", "clone_e2e", "recirculate",
    "abort", "output", "priorities", "queues", "new_queue", "may_pass", "enqueue",
    "start_link", "settle", "links", "s_in", "s_len", "s_igts", "s_it", "s_perr", "s_es",
    "s_mcast", "s_prio", "s_enq_ts", "s_enq_qd", "s_ep", "s_egts", "s_deq_td", "s_deq_qd",
    "s_qid", "m_enq_ts", "m_deq_td",
)
_INLINE = re.compile(r"(\s*)(\w+)\(([^()]*)\)\s*# inline\s*")


def _source(name: str) -> str:
    return textwrap.dedent(inspect.getsource(globals()[name]))


def _split(src: str) -> tuple[list[str], list[str]]:
    """(parameter names, body lines dedented without the docstring) of a function's source."""
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    stmts = fn.body
    if isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant):
        stmts = stmts[1:]
    lines = src.splitlines()[stmts[0].lineno - 1:]
    return [a.arg for a in fn.args.args], textwrap.dedent("\n".join(lines)).splitlines()


def fused_source(name: str) -> str:
    """Source of stage ``name`` with every ``# inline`` call replaced by the callee's body."""
    out = []
    for line in _source(name).splitlines():
        m = _INLINE.fullmatch(line)
        if m is None:
            out.append(line)
            continue
        indent, callee, args = m.groups()
        params, body = _split(fused_source(callee))
        if [a.strip() for a in args.split(",")] != params:
            raise AssertionError(f"inline call of {callee}: arguments must be named as its "
                                 f"parameters {params}")
        out += [indent + b if b.strip() else b for b in body]
    return "\n".join(out)


def build(bindings: dict[str, Any], fuse: bool = True,
          wrap: Callable[[str, Any], Any] | None = None) -> dict[str, Any]:
    """The stage functions executed with ``bindings`` (every name of BOUND) as their
    constants: ``to_egress`` and ``egress`` as written, ``receive`` with the later stages
    inlined when ``fuse``. ``wrap(name, fn)``, if given, wraps each stage and the ``enqueue``
    and ``output`` bindings (the packet trace). Returns {stage name: function}."""
    missing = [n for n in BOUND if n not in bindings]
    if missing:
        raise AssertionError(f"stages.build: unbound names {missing}")
    ns: dict[str, Any] = {"Packet": Packet, "run_parser": run_parser, "DROP_PORT": DROP_PORT,
                          "NORMAL": NORMAL, "__builtins__": __builtins__, **bindings}
    if wrap is not None:
        ns["enqueue"], ns["output"] = wrap("enqueue", ns["enqueue"]), wrap("output", ns["output"])
    for name in ("egress", "to_egress", "receive"):  # each binds the ones built before it
        src = fused_source(name) if fuse else _source(name)
        exec(compile(src, f"<p4sim stage {name}{' (fused)' if fuse else ''}>", "exec"), ns)
        if wrap is not None:
            ns[name] = wrap(name, ns[name])  # later stages call it by this name
    return {name: ns[name] for name in STAGES}
