"""Translate BMv2 JSON actions (lists of primitive calls) into Python functions ``fn(P, F, D)``.

Each primitive becomes a few lines of source over the flat PHV; v1model's packet-level effects
(clone, resubmit, recirculate, digest, truncate, exit) set flags on the packet object that the
v1model flow in ``dataplane`` acts on at the end of ingress/egress, as simple_switch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4sim.switch.codegen import Gen, HeaderRef, hexstr
from p4sim.switch.packet import PacketAbort
from p4sim.switch.program import ProgramError

DROP_PORT = 511


def _abort(msg: str) -> None:
    raise PacketAbort(msg)


class ActionCompiler:
    """Compiles actions; the namespace must hold REGISTERS/COUNTERS/METERS/CALCS dicts."""

    def __init__(self, gen: Gen, log: Any = None) -> None:
        self.gen = gen
        self.p = gen.p
        gen.ns.setdefault("_abort", _abort)
        gen.ns.setdefault("_randint", gen.rng.randint)
        gen.ns.setdefault("_log", log or (lambda msg: None))
        gen.ns.setdefault("_fmt", format_log)
        self.egress_spec = self.p.std_slot("egress_spec")
        self.mcast_grp = self.p.std_slot("mcast_grp")

    def compile_action(self, action: dict) -> Any:
        where = f"action '{action.get('name', '?')}'"
        # the body is the same for every switch loading the program (unless it names one's
        # registers or counters): translated once, not once for each of a fabric's switches
        body = self.gen.shared_source(("action", id(action)),
                                      lambda: self._action_body(action, where))
        return self.gen.make_function("_action", body, where)

    def _action_body(self, action: dict, where: str) -> list[str]:
        prims = action.get("primitives") or []
        blocks = [self.primitive(prim, f"{where} primitive[{i}] {prim.get('op')!r}")
                  for i, prim in enumerate(prims)]
        if any(prim.get("op") in ("_jump", "_jump_if_zero") for prim in prims):
            return self._with_jumps(prims, blocks, where)
        return [line for block in blocks for line in block]

    def _with_jumps(self, prims: list, blocks: list[list[str]], where: str) -> list[str]:
        # A small program-counter loop: each primitive is one arm, jumps assign ``_pc``.
        body = ["_pc = 0", f"while _pc < {len(prims)}:"]
        for i, (prim, block) in enumerate(zip(prims, blocks)):
            body.append(f"    {'if' if i == 0 else 'elif'} _pc == {i}:")
            params = prim.get("parameters") or []
            if prim.get("op") == "_jump":
                body.append(f"        _pc = {self.gen.expr(params[0], where)}")
            elif prim.get("op") == "_jump_if_zero":
                cond = self.gen.expr(params[0], where)
                body.append(f"        _pc = {self.gen.expr(params[1], where)} if ({cond}) == 0 "
                            f"else {i + 1}")
            else:
                body.extend("        " + line for line in block)
                body.append(f"        _pc = {i + 1}")
        return body

    # -- helpers -----------------------------------------------------------------------------

    def _named(self, table: str, param: dict, where: str) -> str:
        obj = self.gen.ns[table].get(param.get("value"))
        if obj is None:
            raise ProgramError(f"{where}: unknown {param.get('type')} {param.get('value')!r}")
        return self.gen.const(obj, table.lower()[:3])

    def _header(self, param: dict, where: str) -> HeaderRef:
        return self.gen.header(param, where)

    def _copy_header(self, dst: HeaderRef, src: HeaderRef) -> list[str]:
        n = len(dst.htype.fields)
        lines = [f"F[{dst.field_slot_src(i)}] = F[{src.field_slot_src(i)}]" for i in range(n)]
        lines.append(f"{dst.valid_src()} = {src.valid_src()}")
        return lines

    def _set_valid(self, ref: HeaderRef) -> list[str]:
        lines = [f"if not {ref.valid_src()}:"]
        for i in range(len(ref.htype.fields)):
            lines.append(f"    F[{ref.field_slot_src(i)}] = 0")
        lines.append(f"    {ref.valid_src()} = 1")
        if ref.inst is not None and ref.inst.union is not None:
            # A header union holds at most one valid member.
            for other in self.p.unions[ref.inst.union].members.values():
                if other is not ref.inst:
                    lines.append(f"F[{other.valid_slot}] = 0")
        return lines

    def _stack_shift(self, op: str, param: dict, count_src: str, where: str) -> list[str]:
        stack = self.p.stacks.get(param.get("value"))
        if stack is None:
            raise ProgramError(f"{where}: unknown header stack {param.get('value')!r}")
        hs = stack.headers
        width = len(hs[0].fields) + 1  # fields then the validity slot, contiguous
        bases = self.gen.const([h.fields[0].slot if h.fields else h.valid_slot for h in hs], "sb")
        fn = self.gen.const(_push if op == "push" else _pop, op)
        return [f"{fn}(F, {bases}, {width}, {count_src}, {stack.next_slot})"]

    # -- primitives --------------------------------------------------------------------------

    def primitive(self, prim: dict, where: str) -> list[str]:
        op = prim.get("op")
        emit = PRIMITIVES.get(op) if isinstance(op, str) else None
        if emit is None:
            raise ProgramError(f"{where}: unsupported primitive {op!r}")
        return emit(self, op, prim.get("parameters") or [], where)  # type: ignore[arg-type]


# -- the primitives, by name (as BMv2 registers its primitives) ----------------------------------
# Each turns one call's parameters into lines of source over the flat PHV.

Emit = Callable[[ActionCompiler, str, list, str], list[str]]
PRIMITIVES: dict[str, Emit] = {}


def primitive(*names: str) -> Callable[[Emit], Emit]:
    """Register the decorated function as the source of the primitives ``names``."""
    def register(emit: Emit) -> Emit:
        for name in names:
            if name in PRIMITIVES:
                raise AssertionError(f"primitive {name!r} registered twice")
            PRIMITIVES[name] = emit
        return emit
    return register


@primitive("assign", "modify_field", "assign_VL")
def _assign(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    g = ac.gen
    lv = g.lvalue(ps[0], where)
    src = g.expr(ps[1], where)
    if op == "modify_field" and len(ps) > 2:
        mask = g.expr(ps[2], where)
        src = f"((F[{lv[0]}] & ~{mask}) | ({src} & {mask}))"
    return [g.store(lv, src)]


@primitive("add_to_field", "subtract_from_field")
def _add_to_field(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    lv = ac.gen.lvalue(ps[0], where)
    sign = "+" if op == "add_to_field" else "-"
    return [ac.gen.store(lv, f"F[{lv[0]}] {sign} {ac.gen.expr(ps[1], where)}")]


@primitive("assign_header")
def _assign_header(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return ac._copy_header(ac._header(ps[0], where), ac._header(ps[1], where))


@primitive("assign_union")
def _assign_union(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    du, su = ac.p.unions[ps[0]["value"]], ac.p.unions[ps[1]["value"]]
    lines = []
    for dh, sh in zip(du.members.values(), su.members.values()):
        lines += ac._copy_header(HeaderRef(dh.htype, dh), HeaderRef(sh.htype, sh))
    return lines


@primitive("assign_header_stack")
def _assign_header_stack(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    ds, ss = ac.p.stacks[ps[0]["value"]], ac.p.stacks[ps[1]["value"]]
    lines = [f"F[{ds.next_slot}] = F[{ss.next_slot}]"]
    for dh, sh in zip(ds.headers, ss.headers):
        lines += ac._copy_header(HeaderRef(dh.htype, dh), HeaderRef(sh.htype, sh))
    return lines


@primitive("add_header", "add_header_fast")
def _add_header(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return ac._set_valid(ac._header(ps[0], where))


@primitive("remove_header")
def _remove_header(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return [f"{ac._header(ps[0], where).valid_src()} = 0"]


@primitive("push", "pop")
def _push_pop(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return ac._stack_shift(op, ps[0], ac.gen.expr(ps[1], where), where)


# The packet's fate: flags on the packet that the v1model flow acts on after the pipeline.

@primitive("mark_to_drop", "drop")
def _drop(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return [f"F[{ac.egress_spec}] = {DROP_PORT}", f"F[{ac.mcast_grp}] = 0"]


@primitive("exit")
def _exit(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return ["P.exit = True", "return"]


@primitive("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress")
def _clone(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    g = ac.gen
    return [f"P.clone_session = {g.expr(ps[0], where)}",
            f"P.clone_fl = {g.expr(ps[1], where) if len(ps) > 1 else 0}"]


@primitive("resubmit", "recirculate")
def _resubmit(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    flag = "resubmit_fl" if op == "resubmit" else "recirc_fl"
    return [f"P.{flag} = {ac.gen.expr(ps[0], where) if ps else 0}"]


@primitive("generate_digest")
def _digest(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    learn_id = ac.gen.expr(ps[1], where)
    return ["if P.digests is None: P.digests = []", f"P.digests.append({learn_id})"]


@primitive("truncate")
def _truncate(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return [f"P.truncate = {ac.gen.expr(ps[0], where)}"]


# Externs: hashes, random, registers, counters, meters, asserts, logging.

@primitive("modify_field_with_hash_based_offset")
def _hash(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    g = ac.gen
    lv = g.lvalue(ps[0], where)
    calc = ac._named("CALCS", ps[2], where)
    base, size = g.expr(ps[1], where), g.expr(ps[3], where)
    return [f"_sz = {size} or 1", g.store(lv, f"{base} + {calc}(P, F, D) % _sz")]


@primitive("modify_field_rng_uniform")
def _random(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    g = ac.gen
    lv = g.lvalue(ps[0], where)
    return [g.store(lv, f"_randint({g.expr(ps[1], where)}, {g.expr(ps[2], where)})")]


@primitive("register_read")
def _register_read(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    lv = ac.gen.lvalue(ps[0], where)
    reg = ac._named("REGISTERS", ps[1], where)
    return [ac.gen.store(lv, f"{reg}.read({ac.gen.expr(ps[2], where)})")]


@primitive("register_write")
def _register_write(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    g = ac.gen
    reg = ac._named("REGISTERS", ps[0], where)
    return [f"{reg}.write({g.expr(ps[1], where)}, {g.expr(ps[2], where)})"]


@primitive("count")
def _count(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    ctr = ac._named("COUNTERS", ps[0], where)
    return [f"{ctr}.count({ac.gen.expr(ps[1], where)}, P.length)"]


@primitive("execute_meter")
def _meter(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    met = ac._named("METERS", ps[0], where)
    lv = ac.gen.lvalue(ps[2], where)
    return [ac.gen.store(lv, f"{met}.execute({ac.gen.expr(ps[1], where)}, P.length)")]


@primitive("assert", "assume")
def _assert(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return [f"if not ({ac.gen.expr(ps[0], where)}): _abort({where + ' failed'!r})"]


@primitive("log_msg")
def _log_msg(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    fmt = ps[0].get("value", "")
    args = ps[1].get("value", []) if len(ps) > 1 else []
    vals = ", ".join(ac.gen.expr(a, where) for a in args)
    return [f"_log(_fmt({fmt!r}, ({vals}{',' if args else ''})))"]


@primitive("no_op", "_jump", "_jump_if_zero")  # jumps: the program-counter loop does them
def _no_op(ac: ActionCompiler, op: str, ps: list, where: str) -> list[str]:
    return ["pass"]


def format_log(fmt: str, values: tuple) -> str:
    """log_msg: each '{}' in ``fmt`` takes the next value (other text is kept as is)."""
    parts = fmt.split("{}")
    out = [parts[0]]
    for i, part in enumerate(parts[1:]):
        out.append(str(values[i]) if i < len(values) else "{}")
        out.append(part)
    return "".join(out)


def _push(F: list[int], bases: list[int], width: int, count: int, next_slot: int) -> None:
    size = len(bases)
    for i in range(size - 1, -1, -1):
        if i >= count:
            src = bases[i - count]
            F[bases[i]:bases[i] + width] = F[src:src + width]
        else:
            F[bases[i] + width - 1] = 0
    F[next_slot] = min(F[next_slot] + count, size)


def _pop(F: list[int], bases: list[int], width: int, count: int, next_slot: int) -> None:
    size = len(bases)
    for i in range(size):
        if i + count < size:
            src = bases[i + count]
            F[bases[i]:bases[i] + width] = F[src:src + width]
        else:
            F[bases[i] + width - 1] = 0
    F[next_slot] = max(F[next_slot] - count, 0)


def const_action_data(action: dict, data: list[Any], where: str) -> tuple[int, ...]:
    """Action data from JSON hexstrings, checked against the action's runtime_data."""
    params = action.get("runtime_data") or []
    if len(data) != len(params):
        raise ProgramError(f"{where}: action '{action.get('name')}' expects {len(params)} "
                           f"arguments, got {len(data)}")
    return tuple(hexstr(v, where) & ((1 << int(p["bitwidth"])) - 1) for v, p in zip(data, params))
