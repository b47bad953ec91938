"""Translate BMv2 JSON actions (lists of primitive calls) into Python functions ``fn(P, F, D)``.

Each primitive becomes a few lines of source over the flat PHV; v1model's packet-level effects
(clone, resubmit, recirculate, digest, truncate, exit) set flags on the packet object that the
v1model flow in ``dataplane`` acts on at the end of ingress/egress, as simple_switch does.
"""

from __future__ import annotations

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
        name = action.get("name", "?")
        where = f"action '{name}'"
        prims = action.get("primitives") or []
        blocks = [self.primitive(prim, f"{where} primitive[{i}] {prim.get('op')!r}")
                  for i, prim in enumerate(prims)]
        if any(prim.get("op") in ("_jump", "_jump_if_zero") for prim in prims):
            body = self._with_jumps(prims, blocks, where)
        else:
            body = [line for block in blocks for line in block]
        return self.gen.make_function("_action", body, where)

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
        ps = prim.get("parameters") or []
        g = self.gen
        if op in ("assign", "modify_field", "assign_VL"):
            lv = g.lvalue(ps[0], where)
            src = g.expr(ps[1], where)
            if op == "modify_field" and len(ps) > 2:
                mask = g.expr(ps[2], where)
                src = f"((F[{lv[0]}] & ~{mask}) | ({src} & {mask}))"
            return [g.store(lv, src)]
        if op == "assign_header":
            return self._copy_header(self._header(ps[0], where), self._header(ps[1], where))
        if op == "assign_union":
            du, su = self.p.unions[ps[0]["value"]], self.p.unions[ps[1]["value"]]
            lines = []
            for (_, dh), (_, sh) in zip(du.members.items(), su.members.items()):
                lines += self._copy_header(HeaderRef(dh.htype, dh), HeaderRef(sh.htype, sh))
            return lines
        if op == "assign_header_stack":
            ds, ss = self.p.stacks[ps[0]["value"]], self.p.stacks[ps[1]["value"]]
            lines = [f"F[{ds.next_slot}] = F[{ss.next_slot}]"]
            for dh, sh in zip(ds.headers, ss.headers):
                lines += self._copy_header(HeaderRef(dh.htype, dh), HeaderRef(sh.htype, sh))
            return lines
        if op in ("add_header", "add_header_fast"):
            return self._set_valid(self._header(ps[0], where))
        if op == "remove_header":
            return [f"{self._header(ps[0], where).valid_src()} = 0"]
        if op in ("push", "pop"):
            return self._stack_shift(op, ps[0], g.expr(ps[1], where), where)
        return self._packet_or_extern(op, ps, where)

    def _packet_or_extern(self, op: str, ps: list, where: str) -> list[str]:
        """Primitives on the packet's fate (drop, exit, clone, resubmit, recirculate, digest,
        truncate) and on externs (hashes, random, registers, counters, meters, asserts)."""
        g = self.gen
        if op in ("mark_to_drop", "drop"):
            return [f"F[{self.egress_spec}] = {DROP_PORT}", f"F[{self.mcast_grp}] = 0"]
        if op == "exit":
            return ["P.exit = True", "return"]
        if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            return [f"P.clone_session = {g.expr(ps[0], where)}",
                    f"P.clone_fl = {g.expr(ps[1], where) if len(ps) > 1 else 0}"]
        if op == "resubmit":
            return [f"P.resubmit_fl = {g.expr(ps[0], where) if ps else 0}"]
        if op == "recirculate":
            return [f"P.recirc_fl = {g.expr(ps[0], where) if ps else 0}"]
        if op == "generate_digest":
            learn_id = g.expr(ps[1], where)
            return ["if P.digests is None: P.digests = []", f"P.digests.append({learn_id})"]
        if op == "truncate":
            return [f"P.truncate = {g.expr(ps[0], where)}"]
        if op == "modify_field_with_hash_based_offset":
            lv = g.lvalue(ps[0], where)
            calc = self._named("CALCS", ps[2], where)
            base, size = g.expr(ps[1], where), g.expr(ps[3], where)
            return [f"_sz = {size} or 1", g.store(lv, f"{base} + {calc}(P, F, D) % _sz")]
        if op == "modify_field_rng_uniform":
            lv = g.lvalue(ps[0], where)
            return [g.store(lv, f"_randint({g.expr(ps[1], where)}, {g.expr(ps[2], where)})")]
        if op == "register_read":
            lv = g.lvalue(ps[0], where)
            reg = self._named("REGISTERS", ps[1], where)
            return [g.store(lv, f"{reg}.read({g.expr(ps[2], where)})")]
        if op == "register_write":
            reg = self._named("REGISTERS", ps[0], where)
            return [f"{reg}.write({g.expr(ps[1], where)}, {g.expr(ps[2], where)})"]
        if op == "count":
            ctr = self._named("COUNTERS", ps[0], where)
            return [f"{ctr}.count({g.expr(ps[1], where)}, P.length)"]
        if op == "execute_meter":
            met = self._named("METERS", ps[0], where)
            lv = g.lvalue(ps[2], where)
            return [g.store(lv, f"{met}.execute({g.expr(ps[1], where)}, P.length)")]
        if op in ("assert", "assume"):
            return [f"if not ({g.expr(ps[0], where)}): _abort({where + ' failed'!r})"]
        if op == "log_msg":
            fmt = ps[0].get("value", "")
            args = ps[1].get("value", []) if len(ps) > 1 else []
            vals = ", ".join(g.expr(a, where) for a in args)
            return [f"_log(_fmt({fmt!r}, ({vals}{',' if args else ''})))"]
        if op in ("no_op", "_jump", "_jump_if_zero"):
            return ["pass"]
        if op in ("add_to_field", "subtract_from_field"):
            lv = g.lvalue(ps[0], where)
            sign = "+" if op == "add_to_field" else "-"
            return [g.store(lv, f"F[{lv[0]}] {sign} {g.expr(ps[1], where)}")]
        raise ProgramError(f"{where}: unsupported primitive {op!r}")


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
