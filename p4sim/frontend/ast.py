"""AST node classes for P4_16 (small dataclasses; the type checker fills in `type` on
expressions and `decl` on names)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from p4sim.frontend.errors import Loc


@dataclass(eq=False)
class Node:
    loc: Loc

    def children(self) -> Iterator[Node]:
        """The nodes directly under this one, in source order (fields holding nodes, lists of
        nodes and pairs containing nodes; types, declarations resolved by the checker and
        other annotations are not children)."""
        for f in fields(self):
            yield from _nodes_in(getattr(self, f.name))


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
        method = self._dispatch.get(kind)
        if method is None:
            method = getattr(type(self), "visit_" + kind.__name__, type(self).generic_visit)
            self._dispatch[kind] = method
        return method(self, node, *args)

    def generic_visit(self, node: Node, *args: Any) -> Any:
        for child in node.children():
            self.visit(child, *args)


@dataclass(eq=False)
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
@dataclass(eq=False)
class TypeRef(Node):
    name: str
    args: list[TypeSyntax] = field(default_factory=list)


@dataclass(eq=False)
class BitTypeSyntax(Node):
    width: Expr | None  # None for plain `int`
    signed: bool = False
    varbit: bool = False


@dataclass(eq=False)
class BaseTypeSyntax(Node):
    name: str  # bool, error, string, void, match_kind, _


@dataclass(eq=False)
class StackTypeSyntax(Node):
    elem: TypeSyntax
    size: Expr


@dataclass(eq=False)
class TupleTypeSyntax(Node):
    args: list[TypeSyntax]


TypeSyntax = TypeRef | BitTypeSyntax | BaseTypeSyntax | StackTypeSyntax | TupleTypeSyntax


# ---- expressions ------------------------------------------------------------------------------
@dataclass(eq=False)
class Expr(Node):
    """Every expression carries the checker's results: `type` (its P4 type, a `types.Type`)
    and `const` (its compile-time value when it has one: int, bool, an (enum, member) or
    ("error", member) pair; None when it is only known at run time)."""

    def __post_init__(self) -> None:
        self.type: Any = None
        self.const: Any = None


@dataclass(eq=False)
class IntLit(Expr):
    value: int
    width: int | None = None
    signed: bool = False
    base: int = 10  # as written, for names built from expressions (p4c prints hex as hex)


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class StrLit(Expr):
    value: str


@dataclass(eq=False)
class Name(Expr):
    name: str
    top: bool = False  # `.name`: look up at top level only

    def __post_init__(self) -> None:
        super().__post_init__()
        self.decl: Any = None


@dataclass(eq=False)
class Member(Expr):
    expr: Expr
    name: str


@dataclass(eq=False)
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(eq=False)
class Call(Expr):
    func: Expr
    type_args: list[TypeSyntax]
    args: list[Arg]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.target: Any = None  # resolved callee description


@dataclass(eq=False)
class Arg(Node):
    expr: Expr | None  # None for `_` (don't care) arguments
    name: str | None = None


@dataclass(eq=False)
class Unary(Expr):
    op: str
    expr: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Cast(Expr):
    to: TypeSyntax
    expr: Expr


@dataclass(eq=False)
class ListExpr(Expr):
    items: list[Expr]


@dataclass(eq=False)
class StructInit(Expr):
    fields: list[tuple[str, Expr]]


@dataclass(eq=False)
class DefaultExpr(Expr):
    """`default` or `_` in select/keyset/switch positions."""


@dataclass(eq=False)
class TypeExpr(Expr):
    """A type used where an expression is expected (`bit<8>.minSizeInBits`, generic calls)."""

    syntax: TypeSyntax


# ---- statements -------------------------------------------------------------------------------
@dataclass(eq=False)
class Stmt(Node):
    pass


@dataclass(eq=False)
class Assign(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class CallStmt(Stmt):
    call: Call


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class Exit(Stmt):
    pass


@dataclass(eq=False)
class For(Stmt):
    init: list[Stmt]
    cond: Expr | None
    updates: list[Stmt]
    body: Stmt


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False)
class SwitchCase(Node):
    labels: list[Expr]  # Name (action) or value expressions or DefaultExpr
    body: Block | None  # None: fall through to next case


@dataclass(eq=False)
class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]

    def __post_init__(self) -> None:
        self.kind = ""  # set by the checker: "action_run" (on a table's action) or "value"


@dataclass(eq=False)
class VarDecl(Stmt):
    annos: list[Annotation]
    type_syntax: TypeSyntax
    name: str
    init: Expr | None
    const: bool = False

    def __post_init__(self) -> None:
        self.type: Any = None
        self.value: Any = None  # constant value for const declarations


@dataclass(eq=False)
class EmptyStmt(Stmt):
    pass


# ---- declarations -----------------------------------------------------------------------------
@dataclass(eq=False)
class Decl(Node):
    annos: list[Annotation]
    name: str

    def __post_init__(self) -> None:
        # set by the checker: the declared type, resolved (a parameter's, a header's, an
        # instance's ObjT...); None until checked
        self.rtype: Any = None


@dataclass(eq=False)
class FieldDecl(Decl):
    type_syntax: TypeSyntax


@dataclass(eq=False)
class HeaderDecl(Decl):
    kind: str  # header, struct, header_union
    fields: list[FieldDecl]


@dataclass(eq=False)
class EnumDecl(Decl):
    underlying: TypeSyntax | None
    members: list[tuple[str, Expr | None, Loc]]


@dataclass(eq=False)
class ErrorDecl(Decl):
    members: list[tuple[str, Loc]]


@dataclass(eq=False)
class MatchKindDecl(Decl):
    members: list[tuple[str, Loc]]


@dataclass(eq=False)
class TypedefDecl(Decl):
    type_syntax: TypeSyntax
    newtype: bool = False


@dataclass(eq=False)
class Param(Decl):
    direction: str  # "", in, out, inout
    type_syntax: TypeSyntax
    default: Expr | None = None


@dataclass(eq=False)
class MethodDecl(Decl):
    ret: TypeSyntax | None  # None for constructors
    type_params: list[str]
    params: list[Param]
    abstract: bool = False


@dataclass(eq=False)
class ExternDecl(Decl):
    type_params: list[str]
    methods: list[MethodDecl]


@dataclass(eq=False)
class FunctionDecl(Decl):
    ret: TypeSyntax
    type_params: list[str]
    params: list[Param]
    body: Block | None  # None for extern functions

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rret: Any = None  # the return type, resolved by the checker


@dataclass(eq=False)
class ActionDecl(Decl):
    params: list[Param]
    body: Block


@dataclass(eq=False)
class Instance(Decl):
    type_syntax: TypeSyntax
    args: list[Arg]


@dataclass(eq=False)
class ValueSetDecl(Decl):
    elem: TypeSyntax
    size: Expr

    def __post_init__(self) -> None:
        super().__post_init__()
        self.relem: Any = None  # the element type and size, resolved by the checker
        self.rsize: int = 0


@dataclass(eq=False)
class SelectCase(Node):
    keyset: Expr  # ListExpr for tuples, DefaultExpr, Mask/Range as Binary(&&&, ..)
    state: str
    state_loc: Loc


@dataclass(eq=False)
class Transition(Node):
    state: str | None  # direct transition
    select: list[Expr] | None = None
    cases: list[SelectCase] = field(default_factory=list)


@dataclass(eq=False)
class ParserState(Decl):
    stmts: list[Stmt]
    transition: Transition | None


@dataclass(eq=False)
class ParserDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]
    states: list[ParserState]
    is_type: bool = False


@dataclass(eq=False)
class KeyElement(Node):
    expr: Expr
    match_kind: str
    mk_loc: Loc
    annos: list[Annotation]


@dataclass(eq=False)
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


@dataclass(eq=False)
class TableProperty(Node):
    name: str
    value: Any  # list[KeyElement] | list[(annos, Expr)] | list[TableEntry] | Expr
    const: bool = False
    annos: list[Annotation] = field(default_factory=list)


@dataclass(eq=False)
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


@dataclass(eq=False)
class ControlDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Node]
    body: Block | None
    is_type: bool = False


@dataclass(eq=False)
class PackageDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class Program(Node):
    decls: list[Node]
