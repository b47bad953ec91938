"""Name resolution and type checking (one pass over the program, declarations in order).

Fills in, for the back end: `Expr.type`, `Expr.const` (compile-time value or absent),
`Name.decl`, `Call.target`, and `.rtype` on declarations that have a type.
"""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, Loc, unsupported
from p4sim.frontend.table_paths import check_table_paths
from p4sim.frontend.typecheck_expr import ExprChecker
from p4sim.frontend.typecheck_package import PackageChecker
from p4sim.frontend.typecheck_stmt import StmtChecker

MAX_WIDTH = 2048  # widest bit<W> accepted, as a sanity limit for BMv2 and for memory

# the declarations checked by their visit_ methods, at top level and in a parser or control
_TOP_LEVEL = (A.HeaderDecl, A.EnumDecl, A.ErrorDecl, A.MatchKindDecl, A.TypedefDecl, A.VarDecl,
              A.ExternDecl, A.FunctionDecl, A.ActionDecl, A.ParserDecl, A.ControlDecl,
              A.PackageDecl)
_LOCAL = (A.VarDecl, A.Instance, A.ActionDecl, A.TableDecl, A.ValueSetDecl)


class Scope:
    def __init__(self, parent: Scope | None = None, kind: str = "block") -> None:
        self.parent = parent
        self.names: dict[str, Any] = {}
        self.kind = kind

    def lookup(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


class Checker(ExprChecker, StmtChecker, PackageChecker):
    def __init__(self) -> None:
        self.globals = Scope(None, "global")
        self.scope = self.globals
        self.error_members: list[str] = []  # error constants in declaration order
        self.error_type = T.ERROR
        self.match_kinds: set[str] = set()
        self.ctx: list[Any] = []  # enclosing parser/control/action/function decls
        self.tables_applied: list[A.TableDecl] = []  # in the control being checked
        self.program: A.Program | None = None
        self.main: A.Instance | None = None
        # What p4c only warns about (a constant that does not fit its type, wrapped to it),
        # in source order; `p4sim compile` prints them and fails on them with --Werror.
        self.warnings: list[CompileError] = []

    def warn(self, loc: Any, message: str) -> None:
        self.warnings.append(CompileError(loc, message))

    # ---- scopes -------------------------------------------------------------------------------
    def push(self, kind: str = "block") -> Scope:
        self.scope = Scope(self.scope, kind)
        return self.scope

    def pop(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def declare(self, name: str, decl: Any, loc: Loc, overload: bool = False) -> None:
        names = self.scope.names
        if name in names:
            prev = names[name]
            if overload and isinstance(prev, list):
                prev.append(decl)
                return
            raise CompileError(loc, f"duplicate declaration of '{name}'")
        names[name] = [decl] if overload else decl

    def lookup(self, name: str, loc: Loc, top: bool = False) -> Any:
        d = self.globals.names.get(name) if top else self.scope.lookup(name)
        if d is None:
            raise CompileError(loc, f"undeclared name '{name}'")
        return d

    # ---- types --------------------------------------------------------------------------------
    def resolve_type(self, ts: A.TypeSyntax) -> T.Type:
        if isinstance(ts, A.BitTypeSyntax):
            if ts.width is None:
                return T.INT
            w = self.const_int(ts.width, "a type width")
            if ts.varbit:
                return T.VarbitT(w)
            if w <= 0:
                raise CompileError(ts.loc, f"invalid width {w}: must be positive")
            if w > MAX_WIDTH:
                raise CompileError(ts.loc, f"width {w} is too large (at most {MAX_WIDTH} bits)")
            return T.BitT(w, ts.signed)
        if isinstance(ts, A.BaseTypeSyntax):
            return {"bool": T.BOOL, "error": T.ERROR, "string": T.STRING, "void": T.VOID,
                    "match_kind": T.MATCH_KIND, "_": T.DONTCARE}[ts.name]
        if isinstance(ts, A.StackTypeSyntax):
            elem = self.resolve_type(ts.elem)
            size = self.const_int(ts.size, "a header stack size")
            if not isinstance(elem, T.StructT) or elem.kind == "struct":
                raise CompileError(ts.loc, f"header stack element must be a header, not {elem}")
            if size <= 0:
                raise CompileError(ts.size.loc, "header stack size must be positive")
            return T.StackT(elem, size)
        if isinstance(ts, A.TupleTypeSyntax):
            return T.TupleT(tuple(self.resolve_type(a) for a in ts.args))
        assert isinstance(ts, A.TypeRef)
        d = self.scope.lookup(ts.name)
        if d is None:
            raise CompileError(ts.loc, f"undeclared type '{ts.name}'")
        ts.decl = d  # kept for P4Info, which names `type` declarations
        if isinstance(d, T.Type):  # type variable
            return d
        if isinstance(d, list):
            d = d[0]
        if isinstance(d, (A.HeaderDecl, A.EnumDecl, A.TypedefDecl)):
            if ts.args:
                raise CompileError(ts.loc, f"{ts.name} is not a generic type")
            return d.rtype
        if isinstance(d, (A.ExternDecl, A.ParserDecl, A.ControlDecl, A.PackageDecl)):
            kind = {A.ExternDecl: "extern", A.ParserDecl: "parser", A.ControlDecl: "control",
                    A.PackageDecl: "package"}[type(d)]
            args = [self.resolve_type(a) for a in ts.args]
            if args and len(args) != len(d.type_params):
                raise CompileError(ts.loc, f"{ts.name} expects {len(d.type_params)} type"
                                   f" arguments, got {len(args)}")
            return T.ObjT(kind, d, dict(zip(d.type_params, args)))
        if d == "error":
            return T.ERROR
        raise CompileError(ts.loc, f"'{ts.name}' is not a type")

    # ---- program ------------------------------------------------------------------------------
    def check_program(self, prog: A.Program) -> None:
        self.program = prog
        for d in prog.decls:
            self.check_decl(d)
        if self.main is None:
            raise CompileError(None, "program has no 'main' package instance")

    def check_decl(self, d: A.Node) -> None:
        """A top-level declaration."""
        if isinstance(d, A.Instance):
            self.check_instance(d)
            if d.rtype.kind in ("parser", "control"):
                raise CompileError(d.loc, f"{d.name}: a {d.rtype.kind} cannot be instantiated"
                                   " at top level")
            if d.name == "main":
                self.main = d
        elif isinstance(d, A.ValueSetDecl):
            raise unsupported(d.loc, "value_set at top level")
        elif isinstance(d, _TOP_LEVEL):
            self.visit(d)
        else:
            raise unsupported(d.loc, type(d).__name__)

    def visit_HeaderDecl(self, d: A.HeaderDecl) -> None:
        self.check_header(d)

    def visit_EnumDecl(self, d: A.EnumDecl) -> None:
        self.check_enum(d)

    def visit_ErrorDecl(self, d: A.ErrorDecl) -> None:
        for name, loc in d.members:
            if name in self.error_members:
                raise CompileError(loc, f"duplicate declaration of error.{name}")
            self.error_members.append(name)
        self.globals.names.setdefault("error", "error")

    def visit_MatchKindDecl(self, d: A.MatchKindDecl) -> None:
        for name, loc in d.members:
            if name in self.match_kinds:
                raise CompileError(loc, f"duplicate declaration of '{name}'")
            self.match_kinds.add(name)
            self.declare(name, ("match_kind", name), loc)

    def visit_TypedefDecl(self, d: A.TypedefDecl) -> None:
        d.rtype = self.resolve_type(d.type_syntax)
        if d.newtype:
            if not isinstance(d.rtype, (T.BitT, T.NewT)) and d.rtype != T.BOOL:
                raise CompileError(d.type_syntax.loc, f"type {d.name} must be based on"
                                   f" bit<W>, int<W>, bool or another type, not {d.rtype}")
            d.rtype = T.NewT(d.name, d.rtype)
        self.declare(d.name, d, d.loc)

    def declare_decl(self, d: A.ExternDecl | A.PackageDecl) -> None:
        self.declare(d.name, d, d.loc)

    visit_ExternDecl = visit_PackageDecl = declare_decl

    def visit_FunctionDecl(self, d: A.FunctionDecl) -> None:
        self.check_function(d)

    def visit_ParserDecl(self, d: A.ParserDecl) -> None:
        self.check_block_decl(d, self.check_parser)

    def visit_ControlDecl(self, d: A.ControlDecl) -> None:
        self.check_block_decl(d, self.check_control)

    def check_block_decl(self, d: Any, check: Any) -> None:
        """A parser or control, checked by `check`; a parser or control type (a prototype)
        only has its parameter types resolved, which calls still need."""
        self.declare(d.name, d, d.loc)
        if not d.is_type:
            check(d)
            return
        self.push("call")
        for tp in d.type_params:
            self.scope.names[tp] = T.TypeVar(tp, id(d))
        for p in d.params:
            p.rtype = self.resolve_type(p.type_syntax)
        self.pop()

    def check_header(self, d: A.HeaderDecl) -> None:
        st = T.StructT(d.kind, d.name, {}, d, d.annos)
        d.rtype = st
        self.declare(d.name, d, d.loc)
        for f in d.fields:
            if f.name in st.fields:
                raise CompileError(f.loc, f"duplicate field '{f.name}' in {d.kind} {d.name}")
            ft = self.resolve_type(f.type_syntax)
            if d.kind == "header" and not _header_field_ok(ft) and not (
                    isinstance(ft, T.EnumT) and ft.underlying) and ft != T.BOOL:
                raise CompileError(f.type_syntax.loc,
                                   f"header field '{f.name}' cannot have type {ft}")
            if d.kind == "header_union" and not (isinstance(ft, T.StructT) and ft.is_header):
                raise CompileError(f.type_syntax.loc,
                                   f"header_union member '{f.name}' must be a header")
            st.fields[f.name] = ft
            if isinstance(f.type_syntax, A.TypeRef):  # P4Info names `type` fields' types
                d_ = self.scope.lookup(f.type_syntax.name)
                if isinstance(d_, A.TypedefDecl) and d_.newtype:
                    st.newtypes[f.name] = d_

    def check_enum(self, d: A.EnumDecl) -> None:
        under = self.resolve_type(d.underlying) if d.underlying else None
        if under is not None and not isinstance(under, T.BitT):
            raise CompileError(d.loc, f"enum underlying type must be bit<W> or int<W>,"
                               f" not {under}")
        et = T.EnumT(d.name, [], under)
        d.rtype = et
        self.declare(d.name, d, d.loc)
        for i, (name, expr, loc) in enumerate(d.members):
            if name in et.members:
                raise CompileError(loc, f"duplicate enum member '{name}' in {d.name}")
            et.members.append(name)
            if under is not None:
                if expr is None:
                    raise CompileError(loc, f"serializable enum member '{name}' needs a value")
                v = self.const_int(expr, "an enum value")
                if not T.fits(v, under):
                    raise CompileError(expr.loc, f"value {v} does not fit in {under}")
                et.values[name] = v
            else:
                et.values[name] = i

    def check_var_decl(self, d: A.VarDecl) -> None:
        d.type = self.resolve_type(d.type_syntax)
        if d.init is not None:
            self.check_expr(d.init, d.type)
            self.coerce(d.init, d.type, "initializer")
            d.value = d.init.const if d.init is not None else None
            if d.const and d.value is None and not isinstance(d.type, (T.StructT, T.TupleT)):
                raise CompileError(d.init.loc, f"initializer of constant '{d.name}' is not a"
                                   " compile-time constant")
        self.declare(d.name, d, d.loc)

    def check_function(self, d: A.FunctionDecl) -> None:
        prev = self.scope.names.get(d.name)
        if prev is not None and not (isinstance(prev, list) and prev[0].body is None
                                     and d.body is None):
            raise CompileError(d.loc, f"duplicate declaration of '{d.name}'")
        self.declare(d.name, d, d.loc, overload=True)
        self.push("function")
        for tp in d.type_params:
            self.scope.names[tp] = T.TypeVar(tp, id(d))
        d.rret = self.resolve_type(d.ret)
        self.declare_params(d.params)
        if d.body is not None:
            self.ctx.append(d)
            self.check_block(d.body, new_scope=False)
            self.ctx.pop()
        self.pop()

    def declare_params(self, params: list[A.Param]) -> None:
        for p in params:
            p.rtype = self.resolve_type(p.type_syntax)
            if p.default is not None:
                self.check_expr(p.default, p.rtype)
            self.declare(p.name, p, p.loc)

    def visit_ActionDecl(self, d: A.ActionDecl) -> None:
        self.declare(d.name, d, d.loc)
        self.push("action")
        seen_data = False
        for p in d.params:
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise CompileError(p.loc, f"action parameter '{p.name}' has a direction but"
                                   " follows a directionless parameter")
        self.declare_params(d.params)
        for p in d.params:
            if p.direction == "" and not isinstance(p.rtype, (T.BitT, T.BOOL.__class__, T.NewT,
                                                              T.EnumT)):
                raise CompileError(p.loc, f"action data parameter '{p.name}' cannot have"
                                   f" type {p.rtype}")
        self.ctx.append(d)
        self.check_block(d.body, new_scope=False)
        self.ctx.pop()
        self.pop()

    def enter_block(self, d: A.ParserDecl | A.ControlDecl, kind: str) -> None:
        """A parser's or control's scope: type parameters, parameters, then its locals."""
        self.push(kind)
        for tp in d.type_params:
            self.scope.names[tp] = T.TypeVar(tp, id(d))
        self.declare_params(d.params + d.ctor_params)
        self.ctx.append(d)
        for loc_decl in d.locals:
            self.check_local(loc_decl)

    def check_parser(self, d: A.ParserDecl) -> None:
        self.enter_block(d, "parser")
        states: dict[str, A.ParserState] = {}
        for st in d.states:
            if st.name in states or st.name in ("accept", "reject"):
                raise CompileError(st.loc, f"duplicate declaration of state '{st.name}'")
            states[st.name] = st
        if "start" not in states:
            raise CompileError(d.loc, f"parser {d.name} has no 'start' state")
        d.state_map = states
        for st in d.states:
            self.push("state")
            for s in st.stmts:
                self.check_stmt(s)
            self.check_transition(st, states)
            self.pop()
        self.ctx.pop()
        self.pop()

    def check_transition(self, st: A.ParserState, states: dict[str, A.ParserState]) -> None:
        if st.transition is None:  # no transition statement: the state goes to reject
            st.transition = A.Transition(st.loc, "reject")
        tr = st.transition

        def known(name: str, loc: Loc) -> None:
            if name not in states and name not in ("accept", "reject"):
                raise CompileError(loc, f"no parser state named '{name}'")

        if tr.select is None:
            known(tr.state or "", tr.loc)
            return
        key_types = []
        for e in tr.select:
            self.check_expr(e)
            if not isinstance(e.type, (T.BitT, T.EnumT, T.NewT)) and e.type not in (T.BOOL,
                                                                                   T.ERROR):
                raise CompileError(e.loc, f"cannot select on a value of type {e.type}")
            key_types.append(e.type)
        for case in tr.cases:
            known(case.state, case.state_loc)
            self.check_keyset(case.keyset, key_types)

    def check_keyset(self, ks: A.Expr, key_types: list[T.Type]) -> None:
        if isinstance(ks, A.DefaultExpr):
            return
        items = ks.items if isinstance(ks, A.ListExpr) else [ks]
        if len(key_types) == 1 and isinstance(ks, A.ListExpr) and len(items) == 1:
            items = ks.items
        if len(items) != len(key_types):
            raise CompileError(ks.loc, f"select keyset has {len(items)} values, but the select"
                               f" expression has {len(key_types)}")
        for it, kt in zip(items, key_types):
            self.check_key_value(it, kt)

    def check_key_value(self, it: A.Expr, kt: T.Type) -> None:
        if isinstance(it, A.DefaultExpr):
            return
        if isinstance(it, A.Binary) and it.op in ("&&&", ".."):
            for side in (it.left, it.right):
                want = kt
                if isinstance(kt, T.EnumT) and kt.underlying is not None and it.op == "&&&" and (
                        side is it.right):
                    want = kt.underlying  # a serializable enum's mask is a plain bit<W>
                self.check_expr(side, want)
                self.coerce(side, want, "keyset")
                if side.const is None:
                    raise CompileError(side.loc, "keyset value must be a compile-time constant")
            it.type = kt
            return
        self.check_expr(it, kt)
        if isinstance(it.type, T.ObjT) and it.type.kind == "value_set":
            return
        self.coerce(it, kt, "keyset")
        if it.const is None:
            raise CompileError(it.loc, "keyset value must be a compile-time constant")

    def check_local(self, d: A.Node) -> None:
        """A declaration inside a parser or control."""
        if not isinstance(d, _LOCAL):
            raise unsupported(d.loc, f"{type(d).__name__} inside a parser or control")
        self.visit(d)

    def visit_Instance(self, d: A.Instance) -> None:
        self.check_instance(d)

    def visit_ValueSetDecl(self, d: A.ValueSetDecl) -> None:
        d.relem = self.resolve_type(d.elem)
        d.rsize = self.const_int(d.size, "a value_set size")
        self.declare(d.name, d, d.loc)

    def check_control(self, d: A.ControlDecl) -> None:
        self.enter_block(d, "control")
        assert d.body is not None
        self.tables_applied = []
        self.check_block(d.body)
        check_table_paths(d, self.tables_applied)
        self.ctx.pop()
        self.pop()

    def check_instance(self, d: A.Instance) -> None:
        t = self.resolve_type(d.type_syntax)
        if not isinstance(t, T.ObjT) or t.kind not in ("extern", "parser", "control",
                                                         "package"):
            raise CompileError(d.type_syntax.loc, f"cannot instantiate {t}")
        decl = t.decl
        if t.kind == "extern":
            ctors = [m for m in decl.methods if m.ret is None]
            if not ctors:
                raise CompileError(d.loc, f"extern {decl.name} has no constructor")
            targs = dict(t.targs)
            self.check_call_args(d.loc, decl.name, ctors, d.args, targs, owner=decl)
            t = T.ObjT("extern", decl, targs)
        elif t.kind in ("parser", "control"):
            params = decl.ctor_params
            if len(d.args) != len(params):
                raise CompileError(d.loc, f"{decl.name} expects {len(params)} constructor"
                                   f" arguments, got {len(d.args)}")
            for a, p in zip(d.args, params):
                if a.expr is not None:
                    want = p.rtype
                    self.check_expr(a.expr, want if isinstance(want, T.BitT) else None)
                    if isinstance(want, T.BitT):
                        self.coerce(a.expr, want, "constructor argument")
        else:
            self.check_package(d, decl)
        d.rtype = t
        self.declare(d.name, d, d.loc)


def _header_field_ok(t: T.Type) -> bool:
    """Header fields: bit<W>, int<W>, varbit, bool, serializable enums, `type`s, and (P4_16
    v1.2.2) structs made of those."""
    if isinstance(t, (T.BitT, T.VarbitT, T.NewT)) or t == T.BOOL:
        return True
    if isinstance(t, T.EnumT):
        return t.underlying is not None
    if isinstance(t, T.StructT) and t.kind == "struct":
        return all(_header_field_ok(f) and not isinstance(f, T.VarbitT)
                   for f in t.fields.values())
    return False


def typecheck(prog: A.Program) -> Checker:
    c = Checker()
    c.check_program(prog)
    return c
