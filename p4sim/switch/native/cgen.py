"""Generate C for one loaded BMv2 JSON program: parser, checksums, actions, pipelines, deparser.

The C mirrors what the Python path generates (``p4sim.switch.codegen``, ``parser``,
``primitives``, ``calculations``, ``deparser``, ``pipeline``) over the same flat PHV slots, so a
PHV can go from one path to the other as it is. Anything this generator does not translate
raises ``Unsupported`` naming it: the program then runs on the Python path, never half native.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from p4sim.switch.codegen import hexstr
from p4sim.switch.program import HeaderInstance, HeaderType, Program

GENERATOR_VERSION = "8"
PRELUDE = (Path(__file__).with_name("prelude.h")).read_text()
MAX_WIDTH = 63  # fields, keys and action data held in an int64 slot as the Python int is


class Unsupported(Exception):
    """A feature of the program the native path does not cover (the message names it)."""


def _lit(v: int) -> str:
    """A C literal of the 128-bit value ``v``."""
    if -(1 << 62) <= v < (1 << 62):
        return f"((i128){v}LL)"
    if not -(1 << 126) <= v < (1 << 126):
        raise Unsupported(f"constant {v:#x} wider than 126 bits")
    hi, lo = v >> 64, v & ((1 << 64) - 1)
    return f"((((i128){hi}LL) << 64) | (i128){lo}ULL)"


_BIN = {"+": "+", "-": "-", "*": "*", "&": "&", "|": "|", "^": "^", "==": "==", "!=": "!=",
        ">": ">", ">=": ">=", "<": "<", "<=": "<=", "and": "&&", "or": "||"}


class CGen:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.hdr_index = {name: i for i, name in enumerate(program.headers)}
        self.tables: list[Any] = []  # table JSON objects, by native table id
        self.table_ids: dict[str, int] = {}
        self.registers = list(program.register_arrays)
        self.counters = [n for n, c in program.counter_arrays.items() if not c.get("is_direct")]
        self.calc_ids = {name: i for i, name in enumerate(program.calculations)}
        self.max_data = 1
        self.out: list[str] = []

    # -- checks -------------------------------------------------------------------------------

    def check_layout(self) -> None:
        p = self.p
        if p.union_stacks:
            raise Unsupported("header union stacks")
        if p.meter_arrays:
            raise Unsupported("meters")
        if p.parse_vsets:
            raise Unsupported("parser value sets")
        if p.learn_lists:
            raise Unsupported("digests")
        for inst in p.headers.values():
            for f in inst.fields:
                if f.width == 0:
                    raise Unsupported(f"variable-length field {inst.name}.{f.name}")
                if f.width > 64:
                    raise Unsupported(f"field {inst.name}.{f.name} wider than 64 bits")
        for name, r in p.register_arrays.items():
            if int(r.get("bitwidth", 32)) > MAX_WIDTH:
                raise Unsupported(f"register {name} wider than {MAX_WIDTH} bits")
        for act in p.actions.values():
            for rd in act.get("runtime_data") or []:
                if int(rd.get("bitwidth", 0)) > MAX_WIDTH:
                    raise Unsupported(f"action {act.get('name')} parameter wider than "
                                      f"{MAX_WIDTH} bits")
            self.max_data = max(self.max_data, len(act.get("runtime_data") or []))
        if len(p.parsers) != 1 or len(p.deparsers) != 1:
            raise Unsupported("more than one parser or deparser")

    # -- header operands ------------------------------------------------------------------------

    def stack_list(self, name: str) -> tuple[str, int]:
        stack = self.p.stacks[name]
        return f"STK_{self._ident(name)}", len(stack.headers)

    @staticmethod
    def _ident(name: str) -> str:
        return "".join(c if c.isalnum() else "_" for c in name)

    def header(self, node: Any) -> tuple[HeaderType, HeaderInstance | None, str | None]:
        """(type, static instance or None, C source of the runtime header index)."""
        kind, value = node.get("type"), node.get("value")
        if kind == "header":
            inst = self.p.header(value)
            return inst.htype, inst, None
        if kind == "expression":
            op = value.get("op")
            if op == "dereference_header_stack":
                stack = self.p.stacks[value["left"]["value"]]
                lst, n = self.stack_list(stack.name)
                idx = self.expr(value["right"])
                return stack.headers[0].htype, None, f"{lst}[pyidx(R, {idx}, {n})]"
            if op == "access_union_header" and value["left"].get("type") == "header_union":
                union = self.p.unions[value["left"]["value"]]
                inst = list(union.members.values())[value["right"]]
                return inst.htype, inst, None
            if op == "?":
                cond = self.expr(value["cond"])
                ta, ia, sa = self.header(value["left"])
                _tb, ib, sb = self.header(value["right"])
                sa = sa or str(self.hdr_index[ia.name])  # type: ignore[union-attr]
                sb = sb or str(self.hdr_index[ib.name])  # type: ignore[union-attr]
                return ta, None, f"(({cond}) ? ({sa}) : ({sb}))"
        raise Unsupported(f"header operand {kind!r}")

    def others_invalid(self, ref: tuple) -> list[str]:
        """A header union holds at most one valid member: the others' validity cleared."""
        inst = ref[1]
        if inst is None or inst.union is None:
            return []
        return [f"F[{o.valid_slot}] = 0;" for o in self.p.unions[inst.union].members.values()
                if o is not inst]

    def valid_src(self, ref: tuple) -> str:
        _t, inst, src = ref
        return f"F[{inst.valid_slot}]" if inst is not None else f"F[HV[{src}]]"

    def field_slot(self, ref: tuple, off: int) -> str:
        _t, inst, src = ref
        return str(inst.fields[off].slot) if inst is not None else f"HB[{src}] + {off}"

    # -- fields and expressions -----------------------------------------------------------------

    def lvalue(self, node: Any) -> tuple[str, int, bool]:
        kind, value = node.get("type"), node.get("value")
        if kind == "field":
            info = self.p.field(value)
            return str(info.slot), info.width, info.signed
        if kind == "stack_field":
            stack = self.p.stacks[value[0]]
            htype = stack.headers[0].htype
            off = [f[0] for f in htype.fields].index(value[1])
            lst, n = self.stack_list(stack.name)
            _name, width, signed = htype.fields[off]
            return (f"HB[{lst}[pyidx(R, (i128)F[{stack.next_slot}] - 1, {n})]] + {off}",
                    width or 0, signed)
        if kind == "expression":
            if value.get("op") == "access_field":
                ref = self.header(value["left"])
                off = value["right"]
                _fname, width, signed = ref[0].fields[off]
                return self.field_slot(ref, off), width or 0, signed
            return self.lvalue(value)
        raise Unsupported(f"assignment to {kind!r}")

    @staticmethod
    def read(slot: str, width: int, signed: bool) -> str:
        """A field's value: 64-bit unsigned fields are held as their bit pattern."""
        if width == 64 and not signed:
            return f"((i128)(uint64_t)F[{slot}])"
        return f"((i128)F[{slot}])"

    def store(self, lv: tuple[str, int, bool], src: str) -> str:
        slot, width, signed = lv
        fn = "wraps" if signed else "wrapu"
        return f"F[{slot}] = {fn}({src}, {width});"

    def expr(self, node: Any) -> str:
        if not isinstance(node, dict):
            if isinstance(node, bool | int):
                return _lit(int(node))
            raise Unsupported(f"operand {node!r}")
        kind, value = node.get("type"), node.get("value")
        if kind == "field":
            info = self.p.field(value)
            return self.read(str(info.slot), info.width, info.signed)
        if kind == "hexstr":
            return _lit(hexstr(value, "native"))
        if kind == "bool":
            return "((i128)1)" if value else "((i128)0)"
        if kind in ("runtime_data", "local"):
            return f"((i128)D[{int(value)}])"
        if kind == "stack_field":
            return self.read(*self.lvalue(node))
        if kind == "register":
            rid = self.registers.index(value[0])
            size = int(self.p.register_arrays[value[0]].get("size", 0))
            return f"reg_read(C, {rid}, {size}, {self.expr(value[1])})"
        if kind == "header":
            return f"((i128)F[{self.p.header(value).valid_slot}])"
        if kind == "expression":
            return self._op(value)
        raise Unsupported(f"operand type {kind!r}")

    def _op(self, e: Any) -> str:
        if isinstance(e, dict) and "op" not in e and "type" in e:
            return self.expr(e)
        op = e.get("op")
        left, right = e.get("left"), e.get("right")
        if op in _BIN:
            return f"((i128)({self.expr(left)} {_BIN[op]} {self.expr(right)}))"
        simple = {"<<": "shl", ">>": "shr", "/": "fdiv", "%": "fmod_"}
        if op in simple:
            return f"{simple[op]}(R, {self.expr(left)}, {self.expr(right)})"
        if op == "not":
            return f"((i128)!({self.expr(right)}))"
        if op == "~":
            return f"(~{self.expr(right)})"
        if op == "d2b":
            return f"((i128)({self.expr(right)} != 0))"
        if op == "b2d":
            return f"((i128)({self.expr(right)} != 0))"
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            fn = {"two_comp_mod": "tcm", "sat_cast": "satc", "usat_cast": "usatc"}[op]
            return f"{fn}({self.expr(left)}, {self.expr(right)})"
        if op == "?":
            return f"(({self.expr(e['cond'])}) ? {self.expr(left)} : {self.expr(right)})"
        if op == "valid":
            return f"((i128)({self.valid_src(self.header(right))} != 0))"
        if op == "valid_union":
            union = self.p.unions.get(right.get("value"))
            if union is None:
                raise Unsupported(f"valid_union of {right.get('value')!r}")
            terms = " || ".join(f"F[{h.valid_slot}] != 0" for h in union.members.values())
            return f"((i128)({terms or '0'}))"
        if op == "access_field":
            ref = self.header(left)
            _n, width, signed = ref[0].fields[right]
            return self.read(self.field_slot(ref, right), width or 0, signed)
        if op in ("last_stack_index", "size_stack"):
            stack = self.p.stacks.get(right.get("value"))
            if stack is None:
                raise Unsupported(f"expression {op} of {right.get('value')!r}")
            minus = " - 1" if op == "last_stack_index" else ""
            return f"((i128)F[{stack.next_slot}]{minus})"
        if op == "access_union_header":
            return f"((i128){self.valid_src(self.header({'type': 'expression', 'value': e}))})"
        if op == "dereference_header_stack":
            return f"((i128){self.valid_src(self.header({'type': 'expression', 'value': e}))})"
        raise Unsupported(f"expression op {op!r}")

    # -- emission helpers -----------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.out.append(line)

    def generate(self) -> str:
        self.check_layout()
        p = self.p
        self.emit(PRELUDE)
        self.emit(f"#define NSLOTS {len(p.slot_fields)}")
        self.emit(f"#define MAXD {self.max_data}")
        hdrs = list(p.headers.values())
        hb = [h.fields[0].slot if h.fields else h.valid_slot for h in hdrs]
        self.emit(f"static const int HB[] = {{{', '.join(map(str, hb)) or '0'}}};")
        self.emit(f"static const int HV[] = {{{', '.join(str(h.valid_slot) for h in hdrs) or '0'}}};")
        for name, stack in p.stacks.items():
            idx = ", ".join(str(self.hdr_index[h.name]) for h in stack.headers)
            self.emit(f"static const int {self.stack_list(name)[0]}[] = {{{idx}}};")
        from p4sim.switch.native import cgen_blocks  # the larger blocks (parser, tables, ...)

        body = cgen_blocks.Blocks(self)
        body.context()
        body.calculations()
        body.actions()
        body.parser()
        body.checksums()
        body.deparser()
        body.pipelines()
        body.entry_points()
        return "\n".join(self.out) + "\n"
