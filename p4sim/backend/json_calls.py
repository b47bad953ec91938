"""Inlining calls of actions and functions with P4_16's copy-in/copy-out semantics.

A call evaluates its arguments left to right, copies `in` and `inout` arguments into fresh
storage, runs the body on that storage and, when the body ends (or returns), copies `out` and
`inout` parameters back to the argument locations. Passing by reference differs as soon as the
body also reads or writes an argument's location some other way (`f(x, x)`, an action writing a
field that was passed to it, an `out` parameter the body never writes), so the copies are made
unless nothing can tell them apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import unsupported

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_actions import StatementConverter
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_layout import StorageLayout


def _root(e: A.Expr) -> Any:
    while isinstance(e, (A.Member, A.Index, A.Slice)):
        e = e.expr
    return e.decl if isinstance(e, A.Name) else None


def _is_scalar(t: Any) -> bool:
    return isinstance(t, (T.BitT, T.EnumT, T.NewT)) or t in (T.BOOL, T.ERROR)


def writes_only_own_storage(decl: A.ActionDecl | A.FunctionDecl) -> bool:
    """True when the body writes nothing but its own parameters and locals, so an `in`
    argument read lazily inside it sees the value it had at the call."""
    if isinstance(decl, A.FunctionDecl):
        return True  # a function sees only its parameters
    own = {id(p) for p in decl.params}

    def ok(s: A.Stmt) -> bool:
        if isinstance(s, A.VarDecl):
            own.add(id(s))
            return True
        if isinstance(s, A.Assign):
            return id(_root(s.lhs)) in own
        if isinstance(s, A.Block):
            return all(ok(x) for x in s.stmts)
        if isinstance(s, A.If):
            return ok(s.then) and (s.other is None or ok(s.other))
        return isinstance(s, (A.EmptyStmt, A.Exit, A.Return))

    return all(ok(s) for s in decl.body.stmts)  # type: ignore[union-attr]


_WRITING_BUILTINS = ("setValid", "setInvalid", "push_front", "pop_front")


class ParamUse(A.NodeVisitor):
    """The storage a body may write (`written`, by declaration id): assigned, passed as
    out/inout, or changed by a header or stack method."""

    def __init__(self) -> None:
        self.written: set[int] = set()

    def visit_Assign(self, s: A.Assign) -> None:
        self.written.add(id(_root(s.lhs)))
        self.generic_visit(s)

    def visit_Call(self, c: A.Call) -> None:
        tgt = c.target or ()
        if tgt and tgt[0] == "builtin" and tgt[1] in _WRITING_BUILTINS:
            self.written.add(id(_root(tgt[2])))
        params: list[A.Param] = []
        if tgt and tgt[0] in ("function", "action"):
            params = tgt[1].params
        elif tgt and tgt[0] == "method":
            params = tgt[2].params
            self.written.add(id(_root(tgt[1])))  # an extern's own state, conservatively
        for a, p in zip(c.args, params):
            if a.expr is not None and p.direction in ("out", "inout"):
                self.written.add(id(_root(a.expr)))
        self.generic_visit(c)


class CallInliner:
    """Calls of actions and functions inlined with copy-in/copy-out."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, storage: StorageLayout
                 ) -> None:
        self.ctx, self.exprs, self.storage = ctx, exprs, storage
        self.stmts: StatementConverter  # wired by the program builder (bodies hold calls)
        self.param_uses: dict[int, ParamUse] = {}
        # per call being inlined: its copy-backs, the call and its environment (for `exit`)
        self.copy_out_frames: list[tuple[list[tuple[Any, R.Ref]], A.Call, Env]] = []
        self.fn_returns: list[R.Ref] = []  # where each function being inlined returns to
        # per statement being lowered: primitives that must run before it (the bodies of
        # functions called in its expressions)
        self.pre_prims: list[list[Json]] = []

    def inline_call(self, c: A.Call, decl: A.ActionDecl | A.FunctionDecl, env: Env,
                    out: list[Json], result_type: Any = None) -> R.Ref | None:
        """Emit `decl`'s body for the call `c` into `out`; returns where the result is."""
        inner = Env(env)
        lazy_in = writes_only_own_storage(decl)
        use = self.param_use(decl)
        copy_back: list[tuple[Any, R.Ref]] = []  # (argument Ref, or a Slice expression; temp)
        for a, p in zip(c.args, decl.params):
            t = p.rtype
            if p.direction == "inout" and a.expr is not None and lazy_in and (
                    id(p) not in use.written):
                # never written, and nothing else changes what it refers to: copying it in
                # and back out changes nothing (and reads no stack element out of range)
                inner.bind(p, self.exprs.ref(a.expr, env))
                continue
            if p.direction in ("out", "inout"):
                inner.bind(p, self.copy_in(a.expr, p, env, out, copy_back, c))
                continue
            if a.expr is None:
                raise unsupported(a.loc, "'_' for an argument that is read")
            if a.expr.const is not None or (lazy_in and _is_scalar(t)):
                inner.bind(p, self.in_value(a.expr, t, env))
                continue
            tmp = self.storage.layout(t, p.name, "")
            self.stmts.assign(tmp, a.expr, env, out, c)
            inner.bind(p, tmp)
        result: R.Ref | None = None
        if result_type is not None and result_type != T.VOID:
            result = self.storage.layout(result_type, f"{decl.name}_ret", "")
            self.fn_returns.append(result)
        self.copy_out_frames.append((copy_back, c, env))
        try:
            self.stmts.body_to_prims(decl.body.stmts, inner, out)  # type: ignore[union-attr]
        finally:
            self.copy_out_frames.pop()
            if result is not None:
                self.fn_returns.pop()
        self.copy_out(copy_back, c, env, out)
        return result

    def copy_in(self, arg: A.Expr | None, p: A.Param, env: Env, out: list[Json],
                copy_back: list[tuple[Any, R.Ref]], node: Any) -> R.Ref:
        """Fresh storage for parameter `p`, filled from `arg` (in, inout; a slice through its
        bits) or invalidated (out), and noted in `copy_back` to be copied back (out, inout).
        `arg` None is `_`: storage, nothing copied either way."""
        tmp = self.storage.layout(p.rtype, p.name, "")
        if arg is None:
            return tmp
        if p.direction not in ("out", "inout"):
            self.stmts.assign(tmp, arg, env, out, node)
            return tmp
        dst: Any = arg if isinstance(arg, A.Slice) else self.exprs.ref(arg, env)
        if p.direction == "out":
            self.invalidate(tmp, out, node)
        elif isinstance(dst, A.Slice):
            self.stmts.assign(tmp, dst, env, out, node)
        else:
            self.stmts.assign_ref(tmp, dst, out, node)
        copy_back.append((dst, tmp))
        return tmp

    def copy_out(self, copy_back: list[tuple[Any, R.Ref]], c: A.Call, env: Env,
                 out: list[Json]) -> None:
        for dst, tmp in copy_back:
            if isinstance(dst, A.Slice):  # `f(x[3:0])`: the slice's bits of x
                target, value = self.stmts.slice_store(dst, tmp.json(), env)
                out.append(R.prim("assign", [target, value], c, self.ctx.source_info))
            else:
                self.stmts.assign_ref(dst, tmp, out, c)

    def param_use(self, decl: A.ActionDecl | A.FunctionDecl) -> ParamUse:
        use = self.param_uses.get(id(decl))
        if use is None:
            use = self.param_uses[id(decl)] = ParamUse()
            assert decl.body is not None
            use.visit(decl.body)
        return use

    def copy_out_before_exit(self, out: list[Json]) -> None:
        """`exit` inside inlined calls still copies their out/inout parameters back, the
        innermost call first (p4c's behaviour)."""
        for copy_back, c, env in reversed(self.copy_out_frames):
            self.copy_out(copy_back, c, env, out)

    def in_value(self, e: A.Expr, t: Any, env: Env) -> R.Ref:
        if isinstance(t, (T.StructT, T.StackT)):
            return self.exprs.ref(e, env)
        return R.DataRef(self.exprs.data(e, env) if t != T.BOOL else self.exprs.rvalue(e, env), t)

    def invalidate(self, r: R.Ref, out: list[Json], node: Any) -> None:
        """An `out` header parameter starts invalid (P4_16 6.8: out parameters are
        uninitialized, and an uninitialized header is invalid)."""
        if isinstance(r, (R.HeaderRef, R.DynElemRef)):
            out.append(R.prim("remove_header", [r.json()], node, self.ctx.source_info))
        elif isinstance(r, R.StructRef):
            for sub in r.fields.values():
                self.invalidate(sub, out, node)
        elif isinstance(r, R.StackRef):
            for name in r.elems:
                out.append(R.prim("remove_header", [{"type": "header", "value": name}], node,
                                  self.ctx.source_info))
        elif isinstance(r, R.UnionRef):
            for m in r.members.values():
                self.invalidate(m, out, node)
        elif isinstance(r, R.DynFieldRef):
            pass
