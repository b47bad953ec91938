"""Translate BMv2 JSON parsers into Python: one generated function per parse state.

A state function runs its parser ops over ``P.data`` from ``P.pos`` and returns the next state's
function (or None to accept). Parser errors raise ``ParserError`` with the error's value; the
v1model flow stores it in ``standard_metadata.parser_error`` and lets the packet continue to
ingress with whatever was extracted so far, as simple_switch does.
"""

from __future__ import annotations

import struct
from typing import Any

from p4sim.switch.codegen import Gen, hexstr
from p4sim.switch.layout import chunks, struct_format, unpack_lines
from p4sim.switch.packet import TOO_SHORT, ParserError
from p4sim.switch.primitives import ActionCompiler
from p4sim.switch.program import HeaderInstance, ProgramError


def extract_lines(gen: Gen, fields: list, base: str | None, nbits: int,
                  too_short: int) -> list[str]:
    """Extract a fixed-size header. ``fields`` are FieldInfo of a static instance (base None),
    or (width, signed) of a header type with slots ``base + i`` (runtime instance)."""
    nbytes = (nbits + 7) // 8
    lines = ["_o = P.pos", f"_e = _o + {nbytes}",
             f"if _e > P.end: raise _PE({too_short})"]
    if base is None:
        refs = [(f.slot, f.width, f.signed) for f in fields]
        slot_src = str
    else:
        refs = [(i, w, sg) for i, (w, sg) in enumerate(fields)]
        slot_src = lambda i: f"{base} + {i}"  # noqa: E731
    chs = chunks(refs)
    if chs is not None:
        unpack = gen.const(struct.Struct(struct_format(chs)).unpack_from, "unp")
        nwords = sum(len(ch.words) for ch in chs)
        names = ", ".join(f"_w{i}" for i in range(nwords))
        lines.append(f"{names}{',' if nwords == 1 else ''} = {unpack}(P.data, _o)")
        lines.append("P.pos = _e")
        return lines + unpack_lines(chs, slot_src)
    # Not byte-aligned field by field: one big integer for the whole header.
    lines += ["_x = int.from_bytes(P.data[_o:_e], 'big')", "P.pos = _e"]
    shift = nbytes * 8
    for ref, width, signed in refs:
        shift -= width
        val = f"(_x >> {shift}) & {(1 << width) - 1}" if shift else f"_x & {(1 << width) - 1}"
        if signed:
            half = 1 << (width - 1)
            val = f"(({val}) ^ {half}) - {half}"
        lines.append(f"F[{slot_src(ref)}] = {val}")
    return lines


def extract_varbit(P: Any, F: list[int], inst: HeaderInstance, vl_bits: int, too_short: int,
                   header_too_short: int, invalid_argument: int) -> None:
    """Extract a header with one variable-length field of ``vl_bits`` bits (cold path).

    Checks in BMv2's order: a length that is not a whole number of bytes is
    ParserInvalidArgument, then too few bytes left is PacketTooShort, then a header longer than
    its type's max_length is HeaderTooShort."""
    fixed = inst.htype.fixed_bits
    max_bits = inst.htype.max_length * 8
    if vl_bits % 8:
        raise ParserError(invalid_argument)
    if vl_bits < 0:
        raise ParserError(header_too_short)
    total = fixed + vl_bits
    nbytes = (total + 7) // 8
    if P.pos + nbytes > P.end:
        raise ParserError(too_short)
    if max_bits and total > max_bits:
        raise ParserError(header_too_short)
    x = int.from_bytes(P.data[P.pos:P.pos + nbytes], "big")
    P.pos += nbytes
    shift = nbytes * 8
    for f in inst.fields:
        width = f.width or vl_bits
        shift -= width
        F[f.slot] = (x >> shift) & ((1 << width) - 1)
    F[inst.vl_slot] = vl_bits  # type: ignore[index]
    F[inst.valid_slot] = 1


class ParserCompiler:
    def __init__(self, gen: Gen, actions: ActionCompiler, vsets: dict[str, set[int]]) -> None:
        self.gen = gen
        self.p = gen.p
        self.actions = actions
        self.vsets = vsets
        gen.ns.setdefault("_PE", ParserError)
        gen.ns.setdefault("_xvl", extract_varbit)
        self.err = self.p.errors
        self.state_names: dict[str, str] = {}  # namespace name of a state's function -> state

    @property
    def _vl_codes(self) -> str:
        """The error arguments of ``_xvl``: too short, header too short, invalid argument."""
        e = self.err
        return f"{e['PacketTooShort']}, {e['HeaderTooShort']}, {e['ParserInvalidArgument']}"

    def _extract_next_vl(self, headers: list, next_slot: int, ps: list, kind: str,
                         where: str) -> list[str]:
        """``extract(stack.next, len)`` of a header with a varbit field (BMv2's stack extract
        with a length expression): the next element, then the stack's next index moves on."""
        if kind != "extract_VL" or len(ps) < 2:
            raise ProgramError(f"{where}: header stack element has a varbit field, "
                               "use extract_VL")
        g = self.gen
        hdrs = g.const(list(headers), "vh")
        return [f"_i = F[{next_slot}]",
                f"if _i >= {len(headers)}: raise _PE({self.err['StackOutOfBounds']})",
                f"_xvl(P, F, {hdrs}[_i], {g.expr(ps[1], where)}, {self._vl_codes})",
                f"F[{next_slot}] = _i + 1"]

    def _extract_next(self, headers: list, next_slot: int, ps: list, kind: str, where: str,
                      hint: str) -> list[str]:
        """``extract(stack.next)`` of a header stack or a union stack's member: the next
        element, then the stack's next index moves on."""
        htype = headers[0].htype
        if htype.has_varbit or kind == "extract_VL":
            return self._extract_next_vl(headers, next_slot, ps, kind, where)
        g = self.gen
        bases = g.const([h.fields[0].slot for h in headers], hint)
        lines = [f"_i = F[{next_slot}]",
                 f"if _i >= {len(headers)}: raise _PE({self.err['StackOutOfBounds']})",
                 f"_hb = {bases}[_i]"]
        lines += extract_lines(g, [(w, s) for _, w, s in htype.fields], "_hb",
                               htype.fixed_bits, self.err["PacketTooShort"])
        lines += [f"F[_hb + {len(htype.fields)}] = 1", f"F[{next_slot}] = _i + 1"]
        return lines

    def compile(self, parser: dict) -> Any:
        """A ``run(P, F)`` function that parses the packet from its start state."""
        pname = parser.get("name", "parser")
        states = {s.get("name"): s for s in parser.get("parse_states") or []}
        names: dict[str, str] = {}
        for i, sname in enumerate(states):
            names[sname] = self.gen.const(None, f"st{i}_")
        fns = {}
        for sname, state in states.items():
            fns[sname] = self._state(state, names, f"parser '{pname}' state '{sname}'")
        for sname, fn in fns.items():
            self.gen.ns[names[sname]] = fn
            self.state_names[names[sname]] = sname
        init = parser.get("init_state")
        if init not in states:
            raise ProgramError(f"parser '{pname}': unknown init_state {init!r}")
        return fns[init]

    def _state(self, state: dict, names: dict[str, str], where: str) -> Any:
        body: list[str] = []
        for i, op in enumerate(state.get("parser_ops") or []):
            body += self._op(op, f"{where} op[{i}]")
        body += self._transition(state, names, where)
        return self.gen.make_function("_state", body, where)

    def _op(self, op: dict, where: str) -> list[str]:
        kind = op.get("op")
        ps = op.get("parameters") or []
        g = self.gen
        short = self.err["PacketTooShort"]
        if kind in ("extract", "extract_VL"):
            target = ps[0]
            ttype, tval = target.get("type"), target.get("value")
            if ttype == "regular":
                inst = self.p.header(tval, where)
                if inst.htype.has_varbit:
                    if kind != "extract_VL":
                        raise ProgramError(f"{where}: header '{tval}' has a varbit field, "
                                           "use extract_VL")
                    ref = g.const(inst, "h")
                    bits = g.expr(ps[1], where)
                    return [f"_xvl(P, F, {ref}, {bits}, {self._vl_codes})"]
                lines = extract_lines(g, inst.fields, None, inst.htype.fixed_bits, short)
                lines.append(f"F[{inst.valid_slot}] = 1")
                if inst.union is not None:
                    for other in self.p.unions[inst.union].members.values():
                        if other is not inst:
                            lines.append(f"F[{other.valid_slot}] = 0")
                return lines
            if ttype == "stack":
                stack = self.p.stacks.get(tval)
                if stack is None:
                    raise ProgramError(f"{where}: unknown header stack {tval!r}")
                return self._extract_next(stack.headers, stack.next_slot, ps, kind, where, "sb")
            if ttype == "union_stack":
                ustack = self.p.union_stacks[tval[0]]
                rows = [u.members[tval[1]] for u in ustack.unions]
                return self._extract_next(rows, ustack.next_slot, ps, kind, where, "usb")
            raise ProgramError(f"{where}: unsupported extract target {ttype!r}")
        if kind == "set":
            return [g.store(g.lvalue(ps[0], where), g.expr(ps[1], where))]
        if kind == "verify":
            return [f"if not ({g.expr(ps[0], where)}): raise _PE({g.expr(ps[1], where)})"]
        if kind == "advance":
            # BMv2: an amount that is not whole bytes is ParserInvalidArgument.
            invalid = self.err["ParserInvalidArgument"]
            return [f"_b = {g.expr(ps[0], where)}", f"if _b % 8: raise _PE({invalid})",
                    "_e = P.pos + _b // 8", f"if _e > P.end: raise _PE({short})", "P.pos = _e"]
        if kind == "shift":
            amount = g.expr(ps[0], where)
            return [f"_e = P.pos + ({amount})", f"if _e > P.end: raise _PE({short})", "P.pos = _e"]
        if kind == "primitive":
            inner = ps[0]
            return self.actions.primitive(inner, f"{where} {inner.get('op')!r}")
        raise ProgramError(f"{where}: unsupported parser op {kind!r}")

    def _key_component(self, comp: dict, where: str) -> tuple[str, int]:
        kind, value = comp.get("type"), comp.get("value")
        if kind == "lookahead":
            return f"P.lookahead({int(value[0])}, {int(value[1])})", int(value[1])
        if kind in ("field", "stack_field"):
            slot, width, _ = self.gen.lvalue(comp, where)
            return f"F[{slot}]", width
        if kind == "union_stack_field":
            ustack = self.p.union_stacks[value[0]]
            rows = [u.members[value[1]] for u in ustack.unions]
            off = [f.name for f in rows[0].fields].index(value[2])
            bases = self.gen.const([h.fields[0].slot for h in rows], "usb")
            return f"F[{bases}[F[{ustack.next_slot}] - 1] + {off}]", rows[0].fields[off].width
        raise ProgramError(f"{where}: unsupported transition key type {kind!r}")

    def _transition(self, state: dict, names: dict[str, str], where: str) -> list[str]:
        transitions = state.get("transitions") or []
        key = state.get("transition_key") or []

        def target(t: dict) -> str:
            nxt = t.get("next_state")
            if nxt is None:
                return "None"
            if nxt not in names:
                raise ProgramError(f"{where}: unknown next_state {nxt!r}")
            return names[nxt]

        if not key:
            for t in transitions:
                if t.get("type") == "default" or t.get("value") is None:
                    return [f"return {target(t)}"]
            if transitions:
                return [f"return {target(transitions[0])}"]
            return ["return None"]
        parts = []
        for comp in key:
            src, width = self._key_component(comp, where)
            parts.append((src, width))
        if len(parts) == 1:
            src, width = parts[0]
            lines = [f"_k = {src} & {(1 << width) - 1}"]
        else:
            lines = ["_k = 0"]
            for src, width in parts:
                nbits = (width + 7) // 8 * 8
                lines.append(f"_k = (_k << {nbits}) | ({src} & {(1 << width) - 1})")
        for t in transitions:
            ttype = t.get("type")
            mask = t.get("mask")
            if ttype == "default" or (ttype is None and t.get("value") is None):
                lines.append(f"return {target(t)}")
                return lines
            if ttype == "hexstr":
                value = hexstr(t.get("value"), where)
                if mask is None:
                    lines.append(f"if _k == {value}: return {target(t)}")
                else:
                    m = hexstr(mask, where)
                    lines.append(f"if _k & {m} == {value & m}: return {target(t)}")
            elif ttype == "parse_vset":
                vname = t.get("value")
                if vname not in self.vsets:
                    raise ProgramError(f"{where}: unknown parse_vset {vname!r}")
                vs = self.gen.const(self.vsets[vname], "vset")
                if mask is None:
                    lines.append(f"if _k in {vs}: return {target(t)}")
                else:
                    m = hexstr(mask, where)
                    lines.append(f"if any(_k & {m} == _v & {m} for _v in {vs}): "
                                 f"return {target(t)}")
            else:
                raise ProgramError(f"{where}: unsupported transition type {ttype!r}")
        lines.append(f"raise _PE({self.err['NoMatch']})")
        return lines


def run_parser(start: Any, P: Any, F: list[int], too_short: int) -> int:
    """Run the parser from ``start``; returns 0 or the parser error value."""
    state = start
    try:
        while state is not None:
            state = state(P, F, ())
        err = 0
    except ParserError as e:
        err = too_short if e.code == TOO_SHORT else int(e.code)
    P.payload = P.data[P.pos:]
    return err
