"""The v1model packet path: one function per stage, as BMv2's simple_switch runs it.

    receive(port, frame)          prologue -> ingress pipeline -> (clone / digest / resubmit /
                                  multicast / drop / unicast)
    prologue(port, frame, igts, ...)
                                  fresh metadata -> parser -> verify checksum (every packet
                                  entering ingress, and the I2E clone)
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

Speed without a second copy: ``build(fuse=True)`` also makes a ``receive`` in which each call
of another stage that is a statement of its own is replaced by that stage's body, by a
transform of this module's syntax tree (``_Inliner``). The call's arguments must be named as
the callee's parameters, and such a call is the last thing its caller does on that path, so a
``return`` in the inlined body means the same; ``name = prologue(...)`` becomes the body with
its final ``return value`` as ``name = value``. The fused code keeps this file's name and line
numbers, so a traceback or pdb in the fused ``receive`` shows the lines above as written. The
fused and the stage-by-stage functions are tested against each other
(tests/unit/test_switch_onepath.py).
"""

from __future__ import annotations
import __future__

import ast
import copy
import functools
from collections.abc import Callable
from pathlib import Path
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
    igts = (clock() - t0) // 1000
    try:
        P = prologue(port, frame, igts, instance_type, preserved, passes)
        F = P.F
        ingress(P, F)
        P.exit = False
        if P.clone_session is not None or P.digests or P.resubmit_fl is not None or F[s_mcast]:
            special(P, F)
            return
        port = F[s_es]
        if port == DROP_PORT:
            counters.pipeline_drops += 1
            return
        to_egress(P, port)
    except Exception as e:  # a bad packet never stops the switch
        abort(e)


def prologue(port: int, frame: bytes, igts: int, instance_type: int,
             preserved: list[tuple[int, int]] | None, passes: int) -> Packet:
    """The packet as the ingress pipeline starts on it: fresh metadata (but the preserved
    field list), parsed (a parser error counted), checksums verified. Shared by every packet
    entering ingress and the I2E clone, which BMv2 parses again from the original bytes."""
    F = template[:]
    P = Packet(F, frame, port)
    F[s_in] = port
    F[s_len] = len(frame)
    F[s_igts] = igts
    if instance_type:
        P.instance_type = F[s_it] = instance_type
        P.passes = passes
        for slot, value in preserved or ():
            F[slot] = value
    err = run_parser(parser_start, P, F, too_short)
    if err:
        F[s_perr] = err
        counters.parser_errors += 1
    if verify is not None:
        verify(P, F, ())
    return P


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
            start_link(port, P.length, now, prio)
        left = 0
        try:
            egress(P, port, prio, left, now)
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
            settle(port, P.length, 0, prio)
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
        settle(port, P.length, len(frame), prio)
    output(port, frame)


STAGES = ("receive", "prologue", "to_egress", "egress")


# -- building -------------------------------------------------------------------------------------

BOUND = (
    "flow", "counters", "template", "clock", "t0", "parser_start", "too_short", "verify",
    "ingress", "egress_pipe", "update", "deparse", "special", "clone_e2e", "recirculate",
    "abort", "output", "priorities", "queues", "new_queue", "may_pass", "enqueue",
    "start_link", "settle", "links", "s_in", "s_len", "s_igts", "s_it", "s_perr", "s_es",
    "s_mcast", "s_prio", "s_enq_ts", "s_enq_qd", "s_ep", "s_egts", "s_deq_td", "s_deq_qd",
    "s_qid", "m_enq_ts", "m_deq_td",
)


# Compiled as this module is: annotations stay unevaluated strings.
_ANNOTATIONS = __future__.annotations.compiler_flag


@functools.cache
def _stage_defs() -> dict[str, ast.FunctionDef]:
    """The stage functions' syntax trees, parsed from this file (real line numbers)."""
    tree = ast.parse(Path(__file__).read_text(), __file__)
    return {node.name: node for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in STAGES}


class _Inliner(ast.NodeTransformer):
    """Replaces each statement ``stage(args)`` (or ``name = stage(args)``) calling one of
    ``defs`` by that stage's body (itself inlined, without its docstring)."""

    def __init__(self, defs: dict[str, ast.FunctionDef]) -> None:
        self.defs = defs

    def visit_Expr(self, node: ast.Expr) -> Any:
        body = self._callee_body(node.value)
        return node if body is None else body

    def visit_Assign(self, node: ast.Assign) -> Any:
        """``name = stage(args)`` where the stage ends in its only ``return value``: its body,
        then ``name = value``."""
        body = self._callee_body(node.value)
        if body is None:
            return node
        last = body[-1]
        if not isinstance(last, ast.Return) or last.value is None or len(node.targets) != 1 \
                or any(isinstance(n, ast.Return) for s in body[:-1] for n in ast.walk(s)):
            raise AssertionError(f"line {node.lineno}: an inlined stage whose result is used "
                                 "must end in its only return")
        target = node.targets[0]
        if isinstance(target, ast.Name) and isinstance(last.value, ast.Name) \
                and target.id == last.value.id:  # ``P = P``: nothing to do
            return body[:-1]
        result = ast.Assign(targets=node.targets, value=last.value)
        return [*body[:-1], ast.copy_location(result, node)]

    def _callee_body(self, call: ast.expr) -> list[ast.stmt] | None:
        """The inlined body of ``call`` if it calls a stage, else None."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id in self.defs):
            return None
        callee = self.defs[call.func.id]
        params = [a.arg for a in callee.args.args]
        args = [a.id if isinstance(a, ast.Name) else None for a in call.args]
        if args != params or call.keywords:
            raise AssertionError(f"line {call.lineno}: a call of stage {callee.name} to inline "
                                 f"must pass its parameters by name, {params}")
        return self.statements(_without_docstring(copy.deepcopy(callee).body))

    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            new = self.visit(stmt)
            out += new if isinstance(new, list) else [new]
        return out


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return body[1:]
    return body


def fused_tree(name: str) -> ast.FunctionDef:
    """Stage ``name`` with every call of another stage replaced by the callee's body."""
    defs = _stage_defs()
    fn = copy.deepcopy(defs[name])
    fn.body = _Inliner({n: d for n, d in defs.items() if n != name}).statements(fn.body)
    return fn


@functools.cache
def _stage_code(name: str, fuse: bool) -> Any:
    """Stage ``name``'s code object, fused or not: the same for every program (what differs is
    the namespace it is executed in), so made once per process."""
    module = ast.Module(body=[fused_tree(name) if fuse else _stage_defs()[name]],
                        type_ignores=[])
    return compile(module, __file__, "exec", _ANNOTATIONS, dont_inherit=True)


def build(bindings: dict[str, Any], fuse: bool = True,
          wrap: Callable[[str, Any], Any] | None = None) -> dict[str, Any]:
    """The stage functions executed with ``bindings`` (every name of BOUND) as their
    constants, with the later stages inlined into each when ``fuse``. ``wrap(name, fn)``, if
    given, wraps each stage and the ``enqueue`` and ``output`` bindings (the packet trace).
    Returns {stage name: function}."""
    missing = [n for n in BOUND if n not in bindings]
    if missing:
        raise AssertionError(f"stages.build: unbound names {missing}")
    ns: dict[str, Any] = {"Packet": Packet, "run_parser": run_parser, "DROP_PORT": DROP_PORT,
                          "NORMAL": NORMAL, "__builtins__": __builtins__, **bindings}
    if wrap is not None:
        ns["enqueue"], ns["output"] = wrap("enqueue", ns["enqueue"]), wrap("output", ns["output"])
    for name in ("egress", "to_egress", "prologue", "receive"):  # each binds those before it
        exec(_stage_code(name, fuse), ns)
        if wrap is not None:
            ns[name] = wrap(name, ns[name])  # later stages call it by this name
    return {name: ns[name] for name in STAGES}
