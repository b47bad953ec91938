"""Translate BMv2 JSON expression trees into Python source over the flat PHV ``F``.

BMv2 evaluates expressions with arbitrary precision (signed, two's complement for ``~``) and
truncates only when a value is stored into a field or register; Python ints have exactly those
semantics, so each JSON operator maps to the Python operator and ``store()`` does the truncation
(wraparound to the field width, or two's complement wrap for signed fields).

Generated code sees these names: ``F`` (the PHV list), ``D`` (action data / "local" values),
``P`` (the packet object), and whatever ``Gen.const`` registered in the namespace.
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import random
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

from p4sim.switch.program import HeaderInstance, HeaderType, Program, ProgramError


def hexstr(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 16)
    except ValueError:
        raise ProgramError(f"{where}: bad hexstr {value!r}") from None


def two_comp_mod(value: int, width: int) -> int:
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half


def sat_cast(value: int, width: int) -> int:
    hi = (1 << (width - 1)) - 1
    lo = -(1 << (width - 1))
    return hi if value > hi else lo if value < lo else value


def usat_cast(value: int, width: int) -> int:
    hi = (1 << width) - 1
    return hi if value > hi else 0 if value < 0 else value


def wrap_src(width: int, signed: bool, src: str) -> str:
    """Source storing ``src`` into a ``width``-bit field: BMv2's truncation on assignment."""
    if signed:
        half = 1 << (width - 1)
        return f"((({src}) + {half}) & {(1 << width) - 1}) - {half}"
    return f"({src}) & {(1 << width) - 1}"


T = TypeVar("T")
_MISSING = object()

_BINARY = {
    "+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|", "^": "^",
    "==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "/": "//", "%": "%",
    "and": "and", "or": "or",
}
# Operators written as a template over the operands' sources ({l} left, {r} right).
_TEMPLATES = {
    "not": "(not {r})", "~": "(~{r})", "d2b": "({r} != 0)", "b2d": "(1 if {r} else 0)",
    "two_comp_mod": "_tcm({l}, {r})", "sat_cast": "_sat({l}, {r})", "usat_cast": "_usat({l}, {r})",
}


class HeaderRef:
    """A header operand: either one static instance or a runtime header index (``src``)."""

    def __init__(self, htype: HeaderType, inst: HeaderInstance | None = None,
                 src: str | None = None) -> None:
        self.htype = htype
        self.inst = inst
        self.src = src

    def valid_src(self) -> str:
        if self.inst is not None:
            return f"F[{self.inst.valid_slot}]"
        return f"F[HV[{self.src}]]"

    def field_slot_src(self, offset: int) -> str:
        if self.inst is not None:
            return str(self.inst.fields[offset].slot)
        return f"HB[{self.src}] + {offset}"


class Gen:
    """Code generator state: the program, the namespace generated code runs in and the
    random generator its draws use."""

    def __init__(self, program: Program, namespace: dict[str, Any],
                 rng: random.Random | None = None) -> None:
        self.p = program
        self.ns = namespace
        self.rng = rng or random.Random()  # every random draw of the program's code
        self.hdr_index = {name: i for i, name in enumerate(program.headers)}
        hdrs = list(program.headers.values())
        namespace.setdefault("HB", [h.fields[0].slot if h.fields else h.valid_slot for h in hdrs])
        namespace.setdefault("HV", [h.valid_slot for h in hdrs])
        namespace.setdefault("_tcm", two_comp_mod)
        namespace.setdefault("_sat", sat_cast)
        namespace.setdefault("_usat", usat_cast)
        self._consts = 0

    def shared_source(self, key: Any, generate: Callable[[], T]) -> T:
        """``generate()``'s source, generated once per program when it is shareable.

        Every switch loading a program builds it in the same order, so a generated text is a
        function of the program and of what it was generated from (``key``, of objects of the
        program's document), except where it names a per-switch object registered with
        ``const`` (a register's values, a parser value set, a branch holder). A text that
        registered none names only the program's layout and the namespace's fixed names (F,
        P, D, HB, HV, _tcm, ...): it is kept on the program for the next switch to reuse (the
        code runs in each switch's own namespace)."""
        memo = self.p.generated
        found = memo.get(key, _MISSING)
        if found is not _MISSING:
            return cast(T, found)
        before = self._consts
        text = generate()
        if self._consts == before:
            memo[key] = text
        return text

    def const(self, obj: Any, hint: str = "k") -> str:
        """Register ``obj`` in the namespace and return the name code uses for it."""
        self._consts += 1
        name = f"_{hint}{self._consts}"
        self.ns[name] = obj
        return name

    # -- header-valued operands --------------------------------------------------------------

    def stack_list(self, name: str, where: str) -> str:
        stack = self.p.stacks.get(name)
        if stack is None:
            raise ProgramError(f"{where}: unknown header stack '{name}'")
        return self.const([self.hdr_index[h.name] for h in stack.headers], "stk")

    def header(self, node: Any, where: str) -> HeaderRef:
        kind, value = node.get("type"), node.get("value")
        if kind == "header":
            inst = self.p.header(value, where)
            return HeaderRef(inst.htype, inst)
        if kind == "expression":
            e = value
            op = e.get("op")
            if op == "dereference_header_stack":
                stack = self.p.stacks.get(e["left"]["value"])
                if stack is None:
                    raise ProgramError(f"{where}: unknown header stack {e['left']['value']!r}")
                idx = self.expr(e["right"], where)
                return HeaderRef(stack.headers[0].htype,
                                 src=f"{self.stack_list(stack.name, where)}[{idx}]")
            if op == "access_union_header":
                left = e["left"]
                if left.get("type") == "header_union":
                    union = self.p.unions[left["value"]]
                    inst = list(union.members.values())[e["right"]]
                    return HeaderRef(inst.htype, inst)
                ustack, idx = self._union_stack_deref(left["value"], where)
                member = list(ustack.unions[0].members.values())[e["right"]]
                rows = self.const([[self.hdr_index[h.name] for h in u.members.values()]
                                   for u in ustack.unions], "ustk")
                return HeaderRef(member.htype, src=f"{rows}[{idx}][{e['right']}]")
            if op == "?":
                cond = self.expr(e["cond"], where)
                a, b = self.header(e["left"], where), self.header(e["right"], where)
                sa = a.src if a.src else str(self.hdr_index[a.inst.name])  # type: ignore[union-attr]
                sb = b.src if b.src else str(self.hdr_index[b.inst.name])  # type: ignore[union-attr]
                return HeaderRef(a.htype, src=f"({sa} if {cond} else {sb})")
        raise ProgramError(f"{where}: expected a header operand, got {kind!r}")

    def _union_stack_deref(self, node: Any, where: str) -> tuple[Any, str]:
        if not (isinstance(node, dict) and node.get("op") == "dereference_union_stack"):
            raise ProgramError(f"{where}: unsupported union operand")
        ustack = self.p.union_stacks[node["left"]["value"]]
        return ustack, self.expr(node["right"], where)

    # -- fields ------------------------------------------------------------------------------

    def lvalue(self, node: Any, where: str) -> tuple[str, int, bool]:
        """(slot source, width, signed) of an assignable field operand."""
        kind, value = node.get("type"), node.get("value")
        if kind == "field":
            info = self.p.field(value, where)
            return str(info.slot), info.width, info.signed
        if kind == "stack_field":
            stack = self.p.stacks.get(value[0])
            if stack is None:
                raise ProgramError(f"{where}: unknown header stack '{value[0]}'")
            off, fdesc = self._field_offset(stack.headers[0].htype, value[1], where)
            base = self.stack_list(stack.name, where)
            return (f"HB[{base}[F[{stack.next_slot}] - 1]] + {off}", fdesc[1] or 0, fdesc[2])
        if kind == "expression":
            e = value
            if e.get("op") == "access_field":
                ref = self.header(e["left"], where)
                off = e["right"]
                _fname, width, signed = ref.htype.fields[off]
                return ref.field_slot_src(off), width or 0, signed
            # p4c wraps an lvalue in one more "expression" layer.
            return self.lvalue(e, where)
        raise ProgramError(f"{where}: expected a field, got {kind!r}")

    @staticmethod
    def _field_offset(htype: HeaderType, fname: str, where: str) -> tuple[int, Any]:
        for i, f in enumerate(htype.fields):
            if f[0] == fname:
                return i, f
        raise ProgramError(f"{where}: header type '{htype.name}' has no field '{fname}'")

    def store(self, lv: tuple[str, int, bool], src: str) -> str:
        slot, width, signed = lv
        if width == 0:  # variable-length field: stored as-is
            return f"F[{slot}] = {src}"
        return f"F[{slot}] = {wrap_src(width, signed, src)}"

    # -- rvalues -----------------------------------------------------------------------------

    def expr(self, node: Any, where: str) -> str:
        if not isinstance(node, dict):
            if isinstance(node, bool):
                return "True" if node else "False"
            if isinstance(node, int):
                return str(node)
            raise ProgramError(f"{where}: bad operand {node!r}")
        kind, value = node.get("type"), node.get("value")
        if kind == "field":
            return f"F[{self.p.field(value, where).slot}]"
        if kind == "hexstr":
            return str(hexstr(value, where))
        if kind == "bool":
            return "True" if value else "False"
        if kind in ("runtime_data", "local"):
            return f"D[{int(value)}]"
        if kind == "stack_field":
            return f"F[{self.lvalue(node, where)[0]}]"
        if kind == "register":
            reg = self.ns.get("REGISTERS", {}).get(value[0])
            if reg is None:
                raise ProgramError(f"{where}: unknown register array '{value[0]}'")
            name = self.const(reg.values, "reg")
            return f"{name}[{self.expr(value[1], where)}]"
        if kind == "lookahead":
            return f"P.lookahead({int(value[0])}, {int(value[1])})"
        if kind == "string":
            return repr(value)
        if kind == "header":
            return f"F[{self.p.header(value, where).valid_slot}]"
        if kind == "expression":
            return self._op(value, where)
        raise ProgramError(f"{where}: unsupported operand type {kind!r}")

    def _op(self, e: Any, where: str) -> str:
        # p4c wraps a plain operand in an expression node too (e.g. extract_VL's length as
        # {"type": "expression", "value": {"type": "hexstr", ...}}): evaluate the operand.
        if isinstance(e, dict) and "op" not in e and "type" in e:
            return self.expr(e, where)
        op = e.get("op")
        left, right = e.get("left"), e.get("right")
        if op in _BINARY:
            return f"({self.expr(left, where)} {_BINARY[op]} {self.expr(right, where)})"
        if op in _TEMPLATES:
            return _TEMPLATES[op].format(l=self.expr(left, where) if left is not None else "",
                                         r=self.expr(right, where))
        if op == "?":
            return (f"({self.expr(left, where)} if {self.expr(e['cond'], where)} "
                    f"else {self.expr(right, where)})")
        if op == "valid":
            return f"({self.header(right, where).valid_src()} != 0)"
        if op == "valid_union":
            union = self.p.unions.get(right.get("value"))
            if union is None:
                raise ProgramError(f"{where}: unknown header union {right.get('value')!r}")
            terms = " or ".join(f"F[{h.valid_slot}] != 0" for h in union.members.values())
            return f"({terms or 'False'})"
        if op == "access_field":
            ref = self.header(left, where)
            return f"F[{ref.field_slot_src(right)}]"
        if op == "last_stack_index":
            return f"(F[{self._next_slot(right, where)}] - 1)"
        if op == "size_stack":
            return f"F[{self._next_slot(right, where)}]"
        if op in ("dereference_header_stack", "access_union_header"):
            return self.header({"type": "expression", "value": e}, where).valid_src()
        raise ProgramError(f"{where}: unsupported expression op {op!r}")

    def _next_slot(self, node: Any, where: str) -> int:
        name = node.get("value")
        if name in self.p.stacks:
            return self.p.stacks[name].next_slot
        if name in self.p.union_stacks:
            return self.p.union_stacks[name].next_slot
        raise ProgramError(f"{where}: unknown header stack {name!r}")

    def compile_expr(self, node: Any, where: str) -> Any:
        """A ``fn(P, F, D)`` evaluating one expression (for cold paths and tests)."""
        src = self.expr(node, where)
        return self.make_function("_expr", ["return " + src], where)

    def make_function(self, name: str, body: list[str], where: str,
                      params: str = "P, F, D") -> Any:
        lines = [f"def {name}({params}):"] + ["    " + line for line in (body or ["pass"])]
        text = "\n".join(lines) + "\n"
        try:
            code, filename, cached_lines = _compiled(text, where)
        except SyntaxError as e:
            raise ProgramError(f"{where}: could not translate ({e.msg})") from None
        # Registered so that tracebacks and pdb show the generated lines. The name holds a
        # digest of the text: the same program loaded by many switches shares one entry.
        if filename not in linecache.cache:
            linecache.cache[filename] = cached_lines
        exec(code, self.ns)
        return self.ns.pop(name)


@functools.lru_cache(maxsize=65536)
def _compiled(text: str, where: str) -> tuple[Any, str, tuple[int, None, list[str], str]]:
    """One code object per generated text (and the place it was made for), with its file
    name and linecache entry: every switch of a simulated fabric loads the same program and
    executes the same functions, each in its own namespace (code objects are immutable, so
    sharing them shares nothing of a switch's state; naming and registering them again for
    each switch cost 0.2 CPU s of a k=8 fabric's set-up)."""
    filename = generated_filename(where, text)
    code = compile(text, filename, "exec")
    return code, filename, (len(text), None, text.splitlines(True), filename)


def generated_filename(where: str, text: str) -> str:
    """A file-like name for generated code: what it was made from, and a digest of it."""
    slug = re.sub(r"[^\w.\[\]-]+", "_", where).strip("_")[:80]
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return f"p4sim-generated/{slug}-{digest}.py"

