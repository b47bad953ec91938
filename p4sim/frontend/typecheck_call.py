"""Typing of calls: actions, functions, extern functions and methods (with type-argument
inference), table/control apply, and header/stack built-in methods."""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, Loc


class CallChecker:
    tables_applied: list[A.TableDecl]  # the current control's table applications
    # Provided by the other mixins / Checker.
    check_expr: Any
    coerce: Any
    resolve_type: Any
    push: Any
    pop: Any
    scope: Any
    ctx: list[Any]

    def visit_Call(self, e: A.Call, expected: Any) -> T.Type:
        f = e.func
        ft = self.check_expr(f)
        type_args = [self.resolve_type(t) for t in e.type_args]
        if isinstance(ft, T.ObjT):
            if ft.kind == "action":
                return self.call_action(e, ft.decl)
            if ft.kind == "function":
                decls = ft.decl
                ret, m, bind = self.check_call_args(e.loc, decls[0].name, decls, e.args, {},
                                                    type_args=type_args)
                e.target = ("function", m, bind)
                if m.name == "static_assert" and m.body is None:
                    self.static_assert(e)
                return ret
            if ft.kind == "method":
                assert isinstance(f, A.Member)
                ext = ft.of
                assert isinstance(ext, T.ObjT)
                ret, m, bind = self.check_call_args(e.loc, f.name, ft.decl, e.args,
                                                    dict(ext.targs), owner=ext.decl,
                                                    type_args=type_args)
                e.target = ("method", f.expr, m, bind)
                return ret
            if ft.kind == "apply":
                assert isinstance(f, A.Member)
                decl = ft.decl
                home = A.ParserDecl if isinstance(decl, A.ParserDecl) else A.ControlDecl
                if not self.ctx or not isinstance(self.ctx[-1], home):
                    where = type(self.ctx[-1]).__name__.replace("Decl", "").lower() if (
                        self.ctx) else "here"
                    raise CompileError(e.loc, f"{decl.name}.apply() cannot be called in"
                                       f" a{'n' if where[0] in 'aeiou' else ''} {where}")
                if isinstance(decl, A.TableDecl):
                    if e.args:
                        raise CompileError(e.loc, f"table {decl.name}.apply() takes no"
                                           " arguments")
                    e.target = ("table_apply", decl)
                    self.tables_applied.append(decl)
                    return T.ObjT("apply_result", decl)
                self.check_plain_args(e.loc, f"{decl.name}.apply", decl.params, e.args)
                e.target = ("control_apply", f.expr, decl)
                return T.VOID
            if ft.kind == "builtin":
                assert isinstance(f, A.Member)
                if ft.decl in ("minSizeInBits", "minSizeInBytes"):
                    if e.args:
                        raise CompileError(e.loc, f"{ft.decl}() takes no arguments")
                    e.const = ft.of.width  # the size is carried in a BitT of that width
                    return T.INT
                return self.call_builtin(e, ft.decl, f.expr)
            if ft.kind == "type":
                raise CompileError(e.loc, "a parser or control can only be instantiated as a"
                                   " declaration or a package argument")
        raise CompileError(e.loc, f"{ft} is not callable")

    def static_assert(self, e: A.Call) -> None:
        cond = e.args[0].expr
        assert cond is not None
        value = cond.const
        if not isinstance(value, bool):
            raise CompileError(cond.loc, "static_assert needs a compile-time constant condition")
        if not value:
            msg = e.args[1].expr.value if len(e.args) > 1 and isinstance(
                e.args[1].expr, A.StrLit) else "static assertion failed"
            raise CompileError(e.loc, msg)
        e.const = True

    def call_builtin(self, e: A.Call, name: str, base: A.Expr) -> T.Type:
        if name == "isValid":
            if e.args:
                raise CompileError(e.loc, "isValid() takes no arguments")
            e.target = ("builtin", name, base)
            return T.BOOL
        if name in ("setValid", "setInvalid"):
            if e.args:
                raise CompileError(e.loc, f"{name}() takes no arguments")
            self.check_lvalue(base, f"{name}()")
            e.target = ("builtin", name, base)
            return T.VOID
        # push_front / pop_front
        if len(e.args) != 1 or e.args[0].expr is None:
            raise CompileError(e.loc, f"{name} expects 1 argument, got {len(e.args)}")
        arg = e.args[0].expr
        self.check_expr(arg)
        n = arg.const if arg is not None else None
        if not isinstance(n, int) or n < 0:
            raise CompileError(arg.loc, f"{name} needs a non-negative constant count")
        self.check_lvalue(base, f"{name}()")
        e.target = ("builtin", name, base, n)
        return T.VOID

    def call_action(self, e: A.Call, act: A.ActionDecl) -> T.Type:
        cur = self.ctx[-1] if self.ctx else None
        if isinstance(cur, A.ParserDecl) or (isinstance(cur, A.ControlDecl)
                                             and self.scope.kind == "control"):
            raise CompileError(e.loc, f"action {act.name} cannot be called here")
        self.check_plain_args(e.loc, act.name, act.params, e.args)
        e.target = ("action", act)
        return T.VOID

    def check_plain_args(self, loc: Loc, name: str, params: list[A.Param],
                         args: list[A.Arg]) -> None:
        order_args(loc, name, args, params)
        if len(args) != len(params):
            raise CompileError(loc, f"{name} expects {len(params)} arguments, got {len(args)}")
        for a, p in zip(args, params):
            self.check_arg(a, p, p.rtype)

    def check_arg(self, a: A.Arg, p: A.Param, want: T.Type) -> None:
        if a.expr is None:
            if p.direction != "out":
                raise CompileError(a.loc, f"'_' may only be passed to an out parameter,"
                                   f" not to '{p.name}'")
            return
        self.check_expr(a.expr, None if isinstance(want, T.TypeVar) else want)
        self.coerce(a.expr, want, f"argument '{p.name}'")
        if p.direction in ("out", "inout"):
            self.check_lvalue(a.expr, f"argument for {p.direction} parameter '{p.name}'")

    def check_call_args(self, loc: Loc, name: str, cands: list[Any], args: list[A.Arg],
                        targs: dict[str, T.Type], owner: Any = None,
                        type_args: list[T.Type] | None = None
                        ) -> tuple[T.Type, Any, dict[str, T.Type]]:
        named = {a.name for a in args if a.name}

        def arity_ok(c: Any) -> bool:
            required = [p for p in c.params if p.default is None]
            if named and not named <= {p.name for p in c.params}:
                return False
            return len(required) <= len(args) <= len(c.params)

        matching = [c for c in cands if arity_ok(c)]
        if not matching:
            counts = sorted({len(c.params) for c in cands})
            want = " or ".join(str(n) for n in counts)
            raise CompileError(loc, f"{name} expects {want} arguments, got {len(args)}")
        m = matching[0]
        if len(matching) > 1 and type_args:
            m = next((c for c in matching if len(c.type_params) == len(type_args)), m)
        order_args(loc, name, args, m.params)
        self.push("call")
        tvars: dict[str, T.Type] = {}
        if owner is not None:
            for tp in owner.type_params:
                tvars[tp] = targs.get(tp) or T.TypeVar(tp, id(owner))
        for i, tp in enumerate(getattr(m, "type_params", [])):
            tvars[tp] = type_args[i] if type_args and i < len(type_args) else T.TypeVar(
                tp, id(m))
        if type_args and len(type_args) != len(getattr(m, "type_params", [])):
            raise CompileError(loc, f"{name} expects {len(m.type_params)} type arguments,"
                               f" got {len(type_args)}")
        for k, v in tvars.items():
            self.scope.names[k] = v
        ptypes = [self.resolve_type(p.type_syntax) for p in m.params]
        ret = self.resolve_type(m.ret) if m.ret is not None else T.VOID
        self.pop()
        bind: dict[T.TypeVar, T.Type] = {}
        for a, pt in zip(args, ptypes):
            if a.expr is not None:
                self.check_expr(a.expr, None if _has_var(pt) else pt)
        for a, pt in zip(args, ptypes):
            if isinstance(pt, T.TypeVar) and a.expr is not None and pt not in bind and not (
                    isinstance(a.expr.type, T.IntT)):
                at = a.expr.type
                if isinstance(at, T.ObjT):
                    raise CompileError(a.loc, f"cannot pass {at} as an argument")
                bind[pt] = at
        for a, p, pt in zip(args, m.params, ptypes):
            want = bind.get(pt, pt) if isinstance(pt, T.TypeVar) else pt
            self.check_arg(a, p, want)
        ret = bind.get(ret, ret) if isinstance(ret, T.TypeVar) else ret
        if isinstance(ret, T.TypeVar):
            raise CompileError(loc, f"cannot infer the return type of {name}: give type"
                               " arguments")
        names = {tv.name: t for tv, t in bind.items()}
        names.update({k: v for k, v in tvars.items() if not isinstance(v, T.TypeVar)})
        return ret, m, names

    # ---- lvalues ------------------------------------------------------------------------------
    def check_lvalue(self, e: A.Expr, what: str) -> None:
        root = e
        while isinstance(root, (A.Member, A.Index, A.Slice)):
            if isinstance(root, A.Member) and isinstance(root.expr.type, T.StackT) and (
                    root.name in ("size", "lastIndex")):
                raise CompileError(e.loc, f"{what}: '{root.name}' is read-only")
            root = root.expr
        if not isinstance(root, A.Name):
            raise CompileError(e.loc, f"{what}: expression cannot be written to")
        d = root.decl
        if isinstance(d, A.Param):
            if d.direction == "in":
                raise CompileError(e.loc, f"{what}: cannot write to '{d.name}', an 'in'"
                                   " parameter")
            if d.direction == "":
                raise CompileError(e.loc, f"{what}: cannot write to '{d.name}', a"
                                   " directionless parameter")
        elif isinstance(d, A.VarDecl):
            if d.const:
                raise CompileError(e.loc, f"{what}: cannot write to constant '{d.name}'")
        else:
            raise CompileError(e.loc, f"{what}: '{root.name}' cannot be written to")
        if isinstance(e.type, T.ObjT):
            raise CompileError(e.loc, f"{what}: expression cannot be written to")


def order_args(loc: Loc, name: str, args: list[A.Arg], params: list[Any]) -> None:
    """Put named arguments in parameter order and fill in defaults (in place)."""
    if any(a.name for a in args):
        if not all(a.name for a in args):
            raise CompileError(loc, f"{name}: all arguments must be named, or none")
        by_name: dict[str, A.Arg] = {}
        for a in args:
            if a.name not in {p.name for p in params}:
                raise CompileError(a.loc, f"{name} has no parameter named '{a.name}'")
            if a.name in by_name:
                raise CompileError(a.loc, f"argument '{a.name}' given twice")
            by_name[str(a.name)] = a
        ordered: list[A.Arg] = []
        for p in params:
            if p.name in by_name:
                ordered.append(by_name[p.name])
            elif p.default is not None:
                ordered.append(A.Arg(loc, p.default, p.name))
            else:
                raise CompileError(loc, f"{name}: missing argument for parameter '{p.name}'")
        args[:] = ordered
        return
    for p in params[len(args):]:
        if p.default is None:
            return  # the caller reports the count mismatch
        args.append(A.Arg(loc, p.default, p.name))


def _has_var(t: T.Type) -> bool:
    return isinstance(t, T.TypeVar)
