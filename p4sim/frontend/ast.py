"""AST node classes for P4_16 (small dataclasses; the type checker fills in `type` on
expressions and `decl` on names)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, dataclass_transform

from p4sim.frontend.errors import Loc


@dataclass_transform(eq_default=False, field_specifiers=(field,))
@dataclass(eq=False)
class Node:
    """Every node class is a dataclass (compared by identity): declaring its fields is all a
    subclass writes."""

    loc: Loc

    # per class: the fields that can hold nodes (walked once per node, so found once here)
    _child_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(eq=False)(cls)
        cls._child_fields = tuple(f.name for f in fields(cls)
                                  if f.name != "loc" and f.type not in _LEAF_FIELD_TYPES)

    def children(self) -> Iterator[Node]:
        """The nodes directly under this one, in source order (fields holding nodes, lists of
        nodes and pairs containing nodes; types, declarations resolved by the checker and
        other annotations are not children)."""
        for name in self._child_fields:
            yield from _nodes_in(getattr(self, name))


# field annotations (strings, as annotations are not evaluated) that never hold a node
_LEAF_FIELD_TYPES = {"str", "int", "bool", "str | None", "int | None", "Loc"}


def _nodes_in(value: Any) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _nodes_in(v)


class NodeVisitor:
    """The one tree-walking convention of the compiler, pycparser's `c_ast.NodeVisitor`:
    `visit(node)` calls `visit_<ClassName>(node)` when the subclass defines it, else
    `generic_visit(node)`, which visits the children. A `visit_X` method visits below X only
    if it calls `generic_visit`. Extra arguments of `visit` (a checker's expected type, a
    lowering's environment) are passed on to the method unchanged.

    To write a pass: subclass, define `visit_<ClassName>` for the nodes it cares about, and
    override `generic_visit` when unknown nodes are an error rather than something to walk."""

    # per subclass: node class -> the function that visits it (looked up once, not per node)
    _dispatch: dict[type, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}

    def visit(self, node: Node, *args: Any) -> Any:
        kind = type(node)
        method = self._dispatch.get(kind) or self.method_for(kind)
        return method(self, node, *args)

    @classmethod
    def method_for(cls, kind: type) -> Any:
        """The function `visit` calls for nodes of class `kind` (a hot caller may look it up
        in `_dispatch` itself, saving a call per node)."""
        method = getattr(cls, "visit_" + kind.__name__, cls.generic_visit)
        cls._dispatch[kind] = method
        return method

    def generic_visit(self, node: Node, *args: Any) -> Any:
        for child in node.children():
            self.visit(child, *args)


class Annotation(Node):
    name: str
    args: list[Any] = field(default_factory=list)  # literal values: str / int / identifiers
    body: str = ""  # the source tokens between the parentheses, for P4Info annotations


def anno(annos: list[Annotation], name: str) -> Annotation | None:
    for a in annos:
        if a.name == name:
            return a
    return None


# ---- types (syntax) ---------------------------------------------------------------------------
class TypeRef(Node):
    name: str
    args: list[TypeSyntax] = field(default_factory=list)


class BitTypeSyntax(Node):
    width: Expr | None  # None for plain `int`
    signed: bool = False
    varbit: bool = False


class BaseTypeSyntax(Node):
    name: str  # bool, error, string, void, match_kind, _


class StackTypeSyntax(Node):
    elem: TypeSyntax
    size: Expr


class TupleTypeSyntax(Node):
    args: list[TypeSyntax]


TypeSyntax = TypeRef | BitTypeSyntax | BaseTypeSyntax | StackTypeSyntax | TupleTypeSyntax


# ---- expressions ------------------------------------------------------------------------------
class Expr(Node):
    """Every expression carries the checker's results: `type` (its P4 type, a `types.Type`)
    and `const` (its compile-time value when it has one: int, bool, an (enum, member) or
    ("error", member) pair; None when it is only known at run time)."""

    def __post_init__(self) -> None:
        self.type: Any = None
        self.const: Any = None


class IntLit(Expr):
    value: int
    width: int | None = None
    signed: bool = False
    base: int = 10  # as written, for names built from expressions (p4c prints hex as hex)


class BoolLit(Expr):
    value: bool


class StrLit(Expr):
    value: str


class Name(Expr):
    name: str
    top: bool = False  # `.name`: look up at top level only

    def __post_init__(self) -> None:
        super().__post_init__()
        self.decl: Any = None


class Member(Expr):
    expr: Expr
    name: str


class Index(Expr):
    expr: Expr
    index: Expr


class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


class Call(Expr):
    func: Expr
    type_args: list[TypeSyntax]
    args: list[Arg]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.target: Any = None  # resolved callee description


class Arg(Node):
    expr: Expr | None  # None for `_` (don't care) arguments
    name: str | None = None


class Unary(Expr):
    op: str
    expr: Expr


class Binary(Expr):
    op: str
    left: Expr
    right: Expr


class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


class Cast(Expr):
    to: TypeSyntax
    expr: Expr


class ListExpr(Expr):
    items: list[Expr]


class StructInit(Expr):
    fields: list[tuple[str, Expr]]


class DefaultExpr(Expr):
    """`default` or `_` in select/keyset/switch positions."""


class TypeExpr(Expr):
    """A type used where an expression is expected (`bit<8>.minSizeInBits`, generic calls)."""

    syntax: TypeSyntax


# ---- statements -------------------------------------------------------------------------------
class Stmt(Node):
    pass


class Assign(Stmt):
    lhs: Expr
    rhs: Expr


class CallStmt(Stmt):
    call: Call


class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


class Block(Stmt):
    stmts: list[Stmt]


class Exit(Stmt):
    pass


class For(Stmt):
    init: list[Stmt]
    cond: Expr | None
    updates: list[Stmt]
    body: Stmt


class Break(Stmt):
    pass


class Continue(Stmt):
    pass


class Return(Stmt):
    value: Expr | None


class SwitchCase(Node):
    labels: list[Expr]  # Name (action) or value expressions or DefaultExpr
    body: Block | None  # None: fall through to next case


class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]

    def __post_init__(self) -> None:
        self.kind = ""  # set by the checker: "action_run" (on a table's action) or "value"


class VarDecl(Stmt):
    annos: list[Annotation]
    type_syntax: TypeSyntax
    name: str
    init: Expr | None
    const: bool = False

    def __post_init__(self) -> None:
        self.type: Any = None
        self.value: Any = None  # constant value for const declarations


class EmptyStmt(Stmt):
    pass


# ---- declarations -----------------------------------------------------------------------------
class Decl(Node):
    annos: list[Annotation]
    name: str

    def __post_init__(self) -> None:
        # set by the checker: the declared type, resolved (a parameter's, a header's, an
        # instance's ObjT...); None until checked
        self.rtype: Any = None


class FieldDecl(Decl):
    type_syntax: TypeSyntax


class HeaderDecl(Decl):
    kind: str  # header, struct, header_union
    fields: list[FieldDecl]


class EnumDecl(Decl):
    underlying: TypeSyntax | None
    members: list[tuple[str, Expr | None, Loc]]


class ErrorDecl(Decl):
    members: list[tuple[str, Loc]]


class MatchKindDecl(Decl):
    members: list[tuple[str, Loc]]


class TypedefDecl(Decl):
    type_syntax: TypeSyntax
    newtype: bool = False


class Param(Decl):
    direction: str  # "", in, out, inout
    type_syntax: TypeSyntax
    default: Expr | None = None


class MethodDecl(Decl):
    ret: TypeSyntax | None  # None for constructors
    type_params: list[str]
    params: list[Param]
    abstract: bool = False


class ExternDecl(Decl):
    type_params: list[str]
    methods: list[MethodDecl]


class FunctionDecl(Decl):
    ret: TypeSyntax
    type_params: list[str]
    params: list[Param]
    body: Block | None  # None for extern functions

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rret: Any = None  # the return type, resolved by the checker


class ActionDecl(Decl):
    params: list[Param]
    body: Block


class Instance(Decl):
    type_syntax: TypeSyntax
    args: list[Arg]


class ValueSetDecl(Decl):
    elem: TypeSyntax
    size: Expr

    def __post_init__(self) -> None:
        super().__post_init__()
        self.relem: Any = None  # the element type and size, resolved by the checker
        self.rsize: int = 0


class SelectCase(Node):
    keyset: Expr  # ListExpr for tuples, DefaultExpr, Mask/Range as Binary(&&&, ..)
    state: str
    state_loc: Loc


class Transition(Node):
    state: str | None  # direct transition
    select: list[Expr] | None = None
    cases: list[SelectCase] = field(default_factory=list)


class ParserState(Decl):
    stmts: list[Stmt]
    transition: Transition | None


class ParserDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]
    states: list[ParserState]
    is_type: bool = False


class KeyElement(Node):
    expr: Expr
    match_kind: str
    mk_loc: Loc
    annos: list[Annotation]


class TableEntry(Node):
    keys: list[Expr]
    action: Expr  # Name or Call
    priority: Expr | None
    annos: list[Annotation]

    def __post_init__(self) -> None:
        # set by the checker
        self.act: Any = None  # the ActionDecl the entry runs
        self.prio: int | None = None  # `priority = N` (P4: the larger wins)
        self.raw_prio: int | None = None  # `@priority(N)`, given to BMv2 as it is


class TableProperty(Node):
    name: str
    value: Any  # list[KeyElement] | list[(annos, Expr)] | list[TableEntry] | Expr
    const: bool = False
    annos: list[Annotation] = field(default_factory=list)


class TableDecl(Decl):
    props: list[TableProperty]

    def __post_init__(self) -> None:
        super().__post_init__()
        # set by the checker from the properties
        self.prop_map: dict[str, TableProperty] = {}
        self.keys: list[KeyElement] = []
        self.action_list: list[tuple[ActionDecl, Call | None, list[Annotation]]] | None = None
        self.default: tuple[Any, Call | None, bool] = (None, None, False)  # action, call, const
        self.entries: list[TableEntry] = []
        self.synthetic: list[Instance] = []  # instances written inside properties


class ControlDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]
    body: Block | None
    is_type: bool = False


class PackageDecl(Decl):
    type_params: list[str]
    params: list[Param]


class Program(Node):
    decls: list[Node]
