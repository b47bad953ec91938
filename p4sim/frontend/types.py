"""Semantic types of P4_16 as the type checker sees them (typedefs are transparent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Type:
    def __str__(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class BitT(Type):
    width: int
    signed: bool = False

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True)
class VarbitT(Type):
    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True)
class IntT(Type):
    """Arbitrary-precision integer (literals without a width, compile-time constants)."""

    def __str__(self) -> str:
        return "int"


@dataclass(frozen=True)
class SimpleT(Type):
    name: str  # bool, string, void, error, match_kind, dontcare

    def __str__(self) -> str:
        return self.name


BOOL = SimpleT("bool")
STRING = SimpleT("string")
VOID = SimpleT("void")
ERROR = SimpleT("error")
MATCH_KIND = SimpleT("match_kind")
DONTCARE = SimpleT("_")
INT = IntT()


@dataclass(eq=False)
class StructT(Type):
    """header, struct or header_union; `fields` keep declaration order."""

    kind: str
    name: str
    fields: dict[str, Type]
    decl: Any = None
    annos: list[Any] = field(default_factory=list)
    newtypes: dict[str, Any] = field(default_factory=dict)  # field -> its `type` declaration

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def is_header(self) -> bool:
        return self.kind == "header"

    def width(self) -> int:
        return sum(bit_width(t) for t in self.fields.values())


@dataclass(frozen=True, eq=False)
class StackT(Type):
    elem: StructT
    size: int

    def __str__(self) -> str:
        return f"{self.elem.name}[{self.size}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StackT) and other.elem is self.elem and other.size == self.size

    def __hash__(self) -> int:
        return hash((id(self.elem), self.size))


@dataclass(eq=False)
class EnumT(Type):
    name: str
    members: list[str]
    underlying: BitT | None = None
    values: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"enum {self.name}"


@dataclass(frozen=True)
class NewT(Type):
    """A `type` declaration: a distinct type with the representation of `base`."""

    name: str
    base: Type

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TupleT(Type):
    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.items)) + ">"


@dataclass(frozen=True)
class TypeVar(Type):
    name: str
    owner: int = 0  # id of the declaring node, so T of one generic is not T of another

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class ObjT(Type):
    """Types of non-data things: extern/parser/control/package instances, tables, actions,
    functions, and table-apply results. `kind` says which; `decl` is the AST node."""

    kind: str  # extern, parser, control, package, table, action, apply_result, action_enum,
    #            value_set, type (a type name used as a value), function
    decl: Any
    targs: dict[str, Type] = field(default_factory=dict)
    of: Type | None = None  # for kind == "type": the named type

    def __str__(self) -> str:
        name = getattr(self.decl, "name", "")
        return f"{self.kind} {name}".strip()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ObjT) and other.kind == self.kind
                and other.decl is self.decl and other.targs == self.targs)

    def __hash__(self) -> int:
        return hash((self.kind, id(self.decl)))


def bit_width(t: Type) -> int:
    if isinstance(t, BitT):
        return t.width
    if isinstance(t, NewT):
        return bit_width(t.base)
    if t == BOOL:
        return 1
    if t == ERROR:
        return 32
    if isinstance(t, EnumT):
        return t.underlying.width if t.underlying else 32
    if isinstance(t, VarbitT):
        return t.max_width
    if isinstance(t, StructT):
        return t.width()
    if isinstance(t, StackT):
        return t.elem.width() * t.size
    return 0


def fits(value: int, t: BitT) -> bool:
    if t.signed:
        return -(1 << (t.width - 1)) <= value < (1 << (t.width - 1))
    return 0 <= value < (1 << t.width)
