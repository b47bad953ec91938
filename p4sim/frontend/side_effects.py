"""Side-effect ordering on the typed AST (the job of p4c's SideEffectOrdering pass).

P4_16 evaluates an expression left to right, completing each call (with its copy-out) before
the next operand is read, and `&&`, `||` and `?:` evaluate only the operands they need. BMv2
expressions have no calls, so every call that needs statements of its own (a function with a
body or with out/inout parameters, `t.apply().hit` in a value position) is moved out of its
expression into a temporary, just before the statement using it. Operands read before such a
call are copied first, so `a + f(a)` reads `a` before `f` writes it, and an lvalue's run-time
index is fixed before the right-hand side runs. Short-circuit and conditional operators whose
later operands need statements become `if` statements.

The pass runs after the type checker and gives the nodes it builds their types and
declarations, so the back end lowers them like any other statements.
"""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import Loc, unsupported

Pre = list[A.Stmt]


def is_table_outcome(e: A.Expr) -> bool:
    """`t.apply().hit` / `.miss` (possibly under `!`): an if condition the back end maps to a
    table's hit/miss branches."""
    while isinstance(e, A.Unary) and e.op == "!":
        e = e.expr
    return (isinstance(e, A.Member) and e.name in ("hit", "miss") and isinstance(e.expr, A.Call)
            and bool(e.expr.target) and e.expr.target[0] == "table_apply")


def is_lookahead(c: A.Expr) -> bool:
    return isinstance(c, A.Call) and bool(c.target) and c.target[0] == "method" and (
        c.target[2].name == "lookahead")


def is_lookahead_unit(e: A.Expr) -> bool:
    """`pkt.lookahead<T>()`, or a field or slice of it: one BMv2 lookahead operand, which only
    a parser `set` can read, so inside a larger expression it goes to a temporary."""
    if isinstance(e, (A.Member, A.Slice)):
        e = e.expr
    return is_lookahead(e)


def needs_statements(c: A.Call) -> bool:
    """A call that cannot stay inside a BMv2 expression."""
    tgt = c.target
    if not tgt:
        return False
    if tgt[0] == "function":
        fn = tgt[1]
        if fn.body is None:
            return fn.name != "verify" and fn.rret not in (None, T.VOID)
        stmts = [s for s in fn.body.stmts if not isinstance(s, A.EmptyStmt)]
        pure = (len(stmts) == 1 and isinstance(stmts[0], A.Return)
                and not any(p.direction in ("out", "inout") for p in fn.params))
        return not pure or any(needs_statements_in(s) for s in stmts)
    if tgt[0] == "method":
        return not is_lookahead(c) and c.type not in (None, T.VOID)
    return False


def needs_statements_in(s: A.Stmt) -> bool:
    if isinstance(s, A.Return) and s.value is not None:
        return _has_effects(s.value)
    return False


_LEAVES = frozenset({A.Name, A.IntLit, A.BoolLit, A.StrLit, A.DefaultExpr, A.TypeExpr})


def _has_effects(e: A.Expr | None) -> bool:
    if e is None or e.const is not None:
        return False
    kind = type(e)
    if kind in _LEAVES:  # the common cases first: this pass sees every expression
        return False
    if kind is A.Member:
        inner = e.expr  # type: ignore[attr-defined]
        if type(inner) is A.Call:
            return is_table_outcome(e) or is_lookahead(inner) or _has_effects(inner)
        return _has_effects(inner)
    if kind is A.Call:
        if needs_statements(e) or is_lookahead(e):  # type: ignore[arg-type]
            return True
        return any(_has_effects(a.expr) for a in e.args)  # type: ignore[attr-defined]
    if kind is A.Slice and is_lookahead(e.expr):  # type: ignore[attr-defined]
        return True
    return any(_has_effects(c) for c in _subexprs(e))


def _subexprs(e: A.Expr) -> list[A.Expr]:
    if isinstance(e, (A.Unary, A.Cast)):
        return [e.expr]
    if isinstance(e, A.Binary):
        return [e.left, e.right]
    if isinstance(e, A.Ternary):
        return [e.cond, e.then, e.other]
    if isinstance(e, A.Index):
        return [e.expr, e.index]
    if isinstance(e, (A.Slice, A.Member)):
        return [e.expr]
    if isinstance(e, A.ListExpr):
        return list(e.items)
    if isinstance(e, A.StructInit):
        return [x for _, x in e.fields]
    return []


def _runtime_index_written(c: A.Call, params: list[A.Param]) -> bool:
    """An out/inout argument like `s[i].f`: its index is fixed at the call, before the body
    (which may change i) runs."""
    for a, p in zip(c.args, params):
        e = a.expr
        if e is None or p.direction not in ("out", "inout"):
            continue
        while isinstance(e, (A.Member, A.Slice, A.Index)):
            if isinstance(e, A.Index) and e.index.const is None:
                return True
            e = e.expr
    return False


def _storable(t: Any) -> bool:
    return isinstance(t, (T.BitT, T.EnumT, T.NewT, T.StructT, T.StackT, T.VarbitT)) or t in (
        T.BOOL, T.ERROR)


# the declarations whose bodies hold statements to order (visited without a `pre` list)
_WITH_BODIES = (A.ActionDecl, A.FunctionDecl, A.ControlDecl, A.ParserDecl)


class SideEffectOrdering(A.NodeVisitor):
    def __init__(self) -> None:
        self.in_parser = False

    # ---- typed node builders ------------------------------------------------------------------
    def temp(self, loc: Loc, t: Any, init: A.Expr | None, pre: Pre) -> A.Name:
        if not _storable(t):
            raise unsupported(loc, f"a temporary of type {t} for this expression")
        d = A.VarDecl(loc, [], A.BaseTypeSyntax(loc, "_"), "tmp", init)
        d.type = t
        pre.append(d)
        return self.name(d)

    @staticmethod
    def name(d: A.VarDecl) -> A.Name:
        n = A.Name(d.loc, d.name)
        n.decl, n.type = d, d.type
        return n

    @staticmethod
    def assign(lhs: A.Name, rhs: A.Expr) -> A.Assign:
        n = A.Name(lhs.loc, lhs.name)
        n.decl, n.type = lhs.decl, lhs.type
        return A.Assign(rhs.loc, n, rhs)

    @staticmethod
    def bool_lit(loc: Loc, v: bool) -> A.BoolLit:
        b = A.BoolLit(loc, v)
        b.type, b.const = T.BOOL, v
        return b

    # ---- program --------------------------------------------------------------------------------
    def run(self, prog: A.Program) -> None:
        for d in prog.decls:
            if isinstance(d, _WITH_BODIES):
                self.visit(d)

    def generic_visit(self, node: A.Node, *args: Any) -> None:
        pass  # declarations and statements without expressions to order

    def visit_ActionDecl(self, d: A.ActionDecl) -> None:
        d.body.stmts = self.stmts(d.body.stmts)

    def visit_FunctionDecl(self, d: A.FunctionDecl) -> None:
        if d.body is not None:
            d.body.stmts = self.stmts(d.body.stmts)

    def visit_ControlDecl(self, d: A.ControlDecl) -> None:
        if d.body is not None:
            for x in d.locals:
                if isinstance(x, _WITH_BODIES):
                    self.visit(x)
            d.body.stmts = self.stmts(d.body.stmts)

    def visit_ParserDecl(self, d: A.ParserDecl) -> None:
        self.in_parser = True
        try:
            for st in d.states:
                st.stmts = self.stmts(st.stmts)
                self.transition(st)
        finally:
            self.in_parser = False

    def transition(self, st: A.ParserState) -> None:
        tr = st.transition
        if tr is None or tr.select is None:
            return
        pre: Pre = []  # runs after the state's statements, before the select
        tr.select = [self.value(e, pre, keep_call=is_lookahead_unit(e)) for e in tr.select]
        st.stmts.extend(pre)

    # ---- statements -----------------------------------------------------------------------------
    def stmts(self, stmts: list[A.Stmt]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s))
        return out

    def block(self, s: A.Stmt | None) -> Any:
        if s is None:
            return None
        new = self.stmts([s] if not isinstance(s, A.Block) else s.stmts)
        if isinstance(s, A.Block):
            s.stmts = new
            return s
        return new[0] if len(new) == 1 else A.Block(s.loc, new)

    def stmt(self, s: A.Stmt) -> list[A.Stmt]:
        """`s` with its expressions in order, after the statements they need (`pre`)."""
        pre: Pre = []
        self.visit(s, pre)
        return [*pre, s]

    def visit_Assign(self, s: A.Assign, pre: Pre) -> None:
        if not _has_effects(s.rhs) or is_table_outcome(s.rhs):
            if _has_effects(s.lhs):
                self.fix_lvalue(s.lhs, pre)
            return
        self.fix_lvalue(s.lhs, pre)
        s.rhs = self.value(s.rhs, pre, keep_call=True)

    def visit_VarDecl(self, s: A.VarDecl, pre: Pre) -> None:
        if s.init is not None and _has_effects(s.init) and not is_table_outcome(s.init):
            s.init = self.value(s.init, pre, keep_call=True)

    def visit_CallStmt(self, s: A.CallStmt, pre: Pre) -> None:
        if s.call.args and (any(_has_effects(a.expr) for a in s.call.args)
                            or _runtime_index_written(s.call, self.params_of(s.call))):
            self.call_args(s.call, pre)

    def visit_If(self, s: A.If, pre: Pre) -> None:
        if not is_table_outcome(s.cond):
            s.cond = self.value(s.cond, pre)
        s.then = self.block(s.then)
        s.other = self.block(s.other)

    def visit_Block(self, s: A.Block, pre: Pre) -> None:
        s.stmts = self.stmts(s.stmts)

    def visit_Switch(self, s: A.Switch, pre: Pre) -> None:
        if not (isinstance(s.expr, A.Member) and s.expr.name == "action_run"):
            s.expr = self.value(s.expr, pre)
        for c in s.cases:
            if c.body is not None:
                c.body.stmts = self.stmts(c.body.stmts)

    def visit_For(self, s: A.For, pre: Pre) -> None:
        s.init = self.stmts(s.init)
        if s.cond is not None and _has_effects(s.cond):
            raise unsupported(s.cond.loc, "a loop condition with calls needing statements")
        s.updates = self.stmts(s.updates)
        s.body = self.block(s.body)

    def visit_Return(self, s: A.Return, pre: Pre) -> None:
        if s.value is not None:
            s.value = self.value(s.value, pre, keep_call=True)

    def fix_lvalue(self, e: A.Expr, pre: Pre) -> None:
        """Fix the run-time indices of an lvalue before its right-hand side runs (the Index
        node is changed in place, so `x[i] |= v`, whose right side shares it, reads the same
        element)."""
        while isinstance(e, (A.Member, A.Slice, A.Index)):
            if isinstance(e, A.Index) and e.index.const is None:
                idx = self.value(e.index, pre)
                fresh = isinstance(idx, A.Name) and any(idx.decl is d for d in pre)
                e.index = idx if fresh else self.temp(e.index.loc, e.index.type, idx, pre)
            e = e.expr

    def call_args(self, c: A.Call, pre: Pre) -> None:
        """Arguments left to right; an `in` argument read before a later one that needs
        statements is copied first."""
        parts: list[tuple[A.Arg, Pre]] = []
        params = self.params_of(c)
        for i, a in enumerate(c.args):
            sub: Pre = []
            if a.expr is not None:
                direction = params[i].direction if i < len(params) else ""
                if direction in ("out", "inout"):
                    self.fix_lvalue(a.expr, sub)
                else:
                    a.expr = self.value(a.expr, sub)
            parts.append((a, sub))
        for i, (a, sub) in enumerate(parts):
            later = any(p for _, p in parts[i + 1:])
            pre.extend(sub)
            direction = params[i].direction if i < len(params) else ""
            if later and a.expr is not None and a.expr.const is None and not direction and (
                    _storable(a.expr.type)) and not isinstance(a.expr.type, T.ObjT):
                a.expr = self.temp(a.expr.loc, a.expr.type, a.expr, pre)

    @staticmethod
    def params_of(c: A.Call) -> list[A.Param]:
        tgt = c.target
        if not tgt:
            return []
        if tgt[0] in ("function", "action"):
            return list(tgt[1].params)
        if tgt[0] == "method":
            return list(tgt[2].params)
        if tgt[0] == "control_apply":
            return list(tgt[2].params)
        return []

    # ---- expressions ----------------------------------------------------------------------------
    def value(self, e: A.Expr, pre: Pre, keep_call: bool = False) -> A.Expr:
        """`e` with every call needing statements moved into `pre`; `keep_call` leaves a call
        at the top (the right-hand side of an assignment) in place."""
        if e.const is not None or not _has_effects(e):
            return e
        if is_lookahead_unit(e):
            return e if keep_call else self.temp(e.loc, e.type, e, pre)
        if isinstance(e, A.Call):
            self.call_args(e, pre)
            if keep_call or not needs_statements(e):
                return e
            return self.temp(e.loc, e.type, e, pre)
        if isinstance(e, A.Member) and is_table_outcome(e):
            t = self.temp(e.loc, T.BOOL, None, pre)
            pre.append(A.If(e.loc, e, self.assign(t, self.bool_lit(e.loc, True)),
                            self.assign(t, self.bool_lit(e.loc, False))))
            return t
        if isinstance(e, A.Binary) and e.op in ("&&", "||"):
            return self.short_circuit(e, pre)
        if isinstance(e, A.Ternary):
            return self.conditional(e, pre)
        return self.operands(e, pre)

    def short_circuit(self, e: A.Binary, pre: Pre) -> A.Expr:
        left = self.value(e.left, pre)
        rpre: Pre = []
        right = self.value(e.right, rpre)
        if not rpre:
            e.left, e.right = left, right
            return e
        if self.in_parser:
            raise unsupported(e.loc, f"'{e.op}' with a call needing statements in a parser")
        t = self.temp(e.loc, T.BOOL, left, pre)
        cond: A.Expr = self.name(t.decl)
        if e.op == "||":
            cond = A.Unary(e.loc, "!", cond)
            cond.type = T.BOOL
        pre.append(A.If(e.loc, cond, A.Block(e.loc, [*rpre, self.assign(t, right)]), None))
        return self.name(t.decl)

    def conditional(self, e: A.Ternary, pre: Pre) -> A.Expr:
        cond = self.value(e.cond, pre)
        tpre: Pre = []
        opre: Pre = []
        then, other = self.value(e.then, tpre), self.value(e.other, opre)
        if not tpre and not opre:
            e.cond, e.then, e.other = cond, then, other
            return e
        if self.in_parser:
            raise unsupported(e.loc, "'?:' with a call needing statements in a parser")
        t = self.temp(e.loc, e.type, None, pre)
        pre.append(A.If(e.loc, cond, A.Block(e.loc, [*tpre, self.assign(t, then)]),
                        A.Block(e.loc, [*opre, self.assign(t, other)])))
        return self.name(t.decl)

    def operands(self, e: A.Expr, pre: Pre) -> A.Expr:
        """Any other expression: operands left to right, copying those read before a later
        operand's statements."""
        subs = _subexprs(e)
        done: list[tuple[A.Expr, Pre]] = []
        for x in subs:
            sub: Pre = []
            done.append((self.value(x, sub), sub))
        new: list[A.Expr] = []
        for i, (x, sub) in enumerate(done):
            pre.extend(sub)
            if any(p for _, p in done[i + 1:]) and x.const is None and _storable(x.type) and not (
                    isinstance(e, A.Index) and i == 0):
                x = self.temp(x.loc, x.type, x, pre)
            new.append(x)
        _replace_subexprs(e, new)
        return e


def _replace_subexprs(e: A.Expr, new: list[A.Expr]) -> None:
    if isinstance(e, (A.Unary, A.Cast, A.Slice, A.Member)):
        e.expr = new[0]
    elif isinstance(e, A.Binary):
        e.left, e.right = new
    elif isinstance(e, A.Ternary):
        e.cond, e.then, e.other = new
    elif isinstance(e, A.Index):
        e.expr, e.index = new
    elif isinstance(e, A.ListExpr):
        e.items = new
    elif isinstance(e, A.StructInit):
        e.fields = [(n, x) for (n, _), x in zip(e.fields, new)]


def order_side_effects(prog: A.Program) -> None:
    SideEffectOrdering().run(prog)
