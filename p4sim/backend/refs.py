"""What a P4 path expression denotes in the BMv2 JSON (a field, a header, a stack, a struct of
those, action data, an extern instance), plus JSON value helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from p4sim.frontend import types as T

Json = dict[str, Any]


def hexstr(value: int, width: int | None = None) -> Json:
    digits = max(((width or max(value.bit_length(), 1)) + 3) // 4, 1)
    if value < 0:
        return {"type": "hexstr", "value": "-0x" + format(-value, "0" + str(digits) + "x")}
    return {"type": "hexstr", "value": "0x" + format(value, "0" + str(digits) + "x")}


def hex_padded(value: int, width: int) -> str:
    """Byte-padded hex string (keys, masks, action data)."""
    nbytes = max((width + 7) // 8, 1)
    value &= (1 << (nbytes * 8)) - 1
    return "0x" + format(value, "0" + str(nbytes * 2) + "x")


def _operand(j: Json | None) -> Json | None:
    # BMv2 reads an action parameter inside an expression as "local" ("runtime_data" only as
    # a primitive's own parameter): p4c's form, which real BMv2 requires
    if j is not None and j.get("type") == "runtime_data":
        return {"type": "local", "value": j["value"]}
    return j


def expr(op: str, left: Json | None, right: Json, **extra: Json) -> Json:
    v: Json = {"op": op, "left": _operand(left), "right": _operand(right)}
    v.update({k: _operand(x) for k, x in extra.items()})
    return {"type": "expression", "value": v}


def b2d(j: Json) -> Json:
    return expr("b2d", None, j)


def d2b(j: Json) -> Json:
    return expr("d2b", None, j)


def mask_to(j: Json, width: int) -> Json:
    return expr("&", j, hexstr((1 << width) - 1, width))


def prim(op: str, params: list[Json], node: Any = None, si: Any = None) -> Json:
    """A BMv2 primitive call; `si(node)` gives its source_info."""
    p: Json = {"op": op, "parameters": [as_param(x) for x in params]}
    if si is not None and node is not None:
        p["source_info"] = si(node)
    return p


def as_param(j: Json) -> Json:
    """Primitive arguments wrap expressions once more (a type/value object inside)."""
    if j.get("type") == "expression":
        return {"type": "expression", "value": j}
    return j


StorageType = TypeVar("StorageType", bound=T.Type)


class Ref:
    type: T.Type


@dataclass
class FieldRef(Ref):
    header: str
    field: str
    type: T.Type

    def json(self) -> Json:
        return {"type": "field", "value": [self.header, self.field]}


@dataclass
class NamedRef(Ref, Generic[StorageType]):
    """Storage BMv2 names as a whole: its JSON is the kind and the name."""

    name: str
    type: StorageType
    json_kind: ClassVar[str] = ""

    def json(self) -> Json:
        return {"type": self.json_kind, "value": self.name}


@dataclass
class HeaderRef(NamedRef[T.StructT]):
    json_kind: ClassVar[str] = "header"


@dataclass
class StackRef(NamedRef[T.StackT]):
    elems: list[str]
    json_kind: ClassVar[str] = "header_stack"


@dataclass
class DynElemRef(Ref):
    """stack[i] with a run-time index."""

    stack: StackRef
    index: Json
    type: T.StructT

    def json(self) -> Json:
        return expr("dereference_header_stack", self.stack.json(), self.index)


@dataclass
class DynFieldRef(Ref):
    elem: DynElemRef
    offset: int
    type: T.Type

    def json(self) -> Json:
        return {"type": "expression", "value": {"op": "access_field", "left": self.elem.json(),
                                                "right": self.offset}}


@dataclass
class UnionRef(NamedRef[T.StructT]):
    members: dict[str, HeaderRef]
    json_kind: ClassVar[str] = "header_union"


@dataclass
class UnionStackRef(NamedRef[T.StackT]):
    """A stack of header unions (constant indices and `.next` in extract only)."""

    unions: list[UnionRef]
    json_kind: ClassVar[str] = "header_union_stack"


@dataclass
class StructRef(Ref):
    fields: dict[str, Ref]
    type: T.Type


@dataclass
class DataRef(Ref):
    """A read-only value: action data, a constant, a computed expression."""

    value: Json
    type: T.Type

    def json(self) -> Json:
        return self.value


@dataclass
class ObjRef(Ref):
    kind: str  # extern, table, control, parser
    name: str
    decl: Any
    type: T.Type = field(default_factory=lambda: T.VOID)
    extra: Any = None  # externs: their info; control and parser instances: ctor bindings


LEAF = (FieldRef, DynFieldRef, DataRef)
