"""Expression typing: P4_16 rules (no implicit width conversion, `int` literals converted to
the other operand's type only when they fit, bool distinct from bit<1>), plus constant folding."""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, Loc
from p4sim.frontend.typecheck_call import CallChecker

_COMPARE = ("<", ">", "<=", ">=")


def _fold(op: str, a: int, b: int, loc: Loc) -> int:
    if op in ("/", "%") and b == 0:
        raise CompileError(loc, "division by zero")
    if op in ("/", "%") and (a < 0 or b < 0):
        raise CompileError(loc, f"'{op}' on negative values is not defined")
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a // b,
            "%": lambda: a % b, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
            "<<": lambda: a << b, ">>": lambda: a >> b}[op]()


def wrap(v: int, t: T.Type) -> int:
    if isinstance(t, T.BitT):
        v &= (1 << t.width) - 1
        if t.signed and v >> (t.width - 1):
            v -= 1 << t.width
    return v


class ExprChecker(CallChecker, A.NodeVisitor):
    def const_int(self, e: A.Expr, what: str) -> int:
        self.check_expr(e)
        v = e.const
        if not isinstance(v, int) or isinstance(v, bool):
            raise CompileError(e.loc, f"{what} must be a compile-time integer constant")
        return v

    def coerce(self, e: A.Expr, want: T.Type, what: str = "expression",
               operand: bool = False) -> None:
        """Check that `e` may be used where `want` is expected; converts int literals."""
        have = e.type
        if have == want or isinstance(want, T.TypeVar) or want == T.DONTCARE:
            return
        if isinstance(have, T.IntT) and isinstance(want, T.BitT):
            v = e.const
            if v is None:
                raise CompileError(e.loc, f"type mismatch: expected {want}, got int")
            if not T.fits(v, want):
                # p4c only warns ("value does not fit", "negative value with unsigned type")
                # and wraps the constant to the width: -1 is all ones, 512 in bit<9> is 0
                e.const = wrap(v, want)
                if v < 0 and not want.signed and v >= -(1 << want.width):
                    self.warn(e.loc, f"negative value {v} with unsigned type {want}: "
                                     f"taken as {e.const}")
                elif not operand:
                    self.warn(e.loc, f"value {v} does not fit in {want}: truncated to {e.const}")
            e.type = want
            return
        if isinstance(have, T.IntT) and isinstance(want, T.EnumT) and want.underlying:
            raise CompileError(e.loc, f"type mismatch: expected {want}, got int")
        if isinstance(have, T.IntT) and isinstance(want, T.IntT):
            return
        if isinstance(have, T.EnumT) and have.underlying is not None and have.underlying == want:
            return  # a serializable enum converts implicitly to its underlying type
        if isinstance(have, T.TupleT) and isinstance(want, T.StructT):
            if len(have.items) != len(want.fields):
                raise CompileError(e.loc, f"type mismatch: {want} has {len(want.fields)}"
                                   f" fields, the list has {len(have.items)}")
            if isinstance(e, A.ListExpr):
                for item, ft in zip(e.items, want.fields.values()):
                    self.coerce(item, ft, what)
            e.type = want
            return
        if isinstance(e, A.StructInit) and isinstance(want, T.StructT):
            names = [n for n, _ in e.fields]
            if sorted(names) != sorted(want.fields):
                raise CompileError(e.loc, f"type mismatch: fields {names} do not match {want}")
            for n, fe in e.fields:
                self.coerce(fe, want.fields[n], what)
            e.type = want
            return
        raise CompileError(e.loc, f"type mismatch: expected {want}, got {have}")

    def unify_int(self, a: A.Expr, b: A.Expr, op: str, loc: Loc) -> T.Type:
        """Operands of a binary operator must have the same type; an int literal adapts."""
        ta, tb = a.type, b.type
        # serializable enums take part as their underlying type when the other side is bits
        if isinstance(ta, T.EnumT) and ta.underlying is not None and isinstance(tb, T.BitT):
            ta = ta.underlying
        if isinstance(tb, T.EnumT) and tb.underlying is not None and isinstance(ta, T.BitT):
            tb = tb.underlying
        if isinstance(ta, T.IntT) and isinstance(tb, T.BitT):
            self.coerce(a, tb, operand=True)
            return tb
        if isinstance(tb, T.IntT) and isinstance(ta, T.BitT):
            self.coerce(b, ta, operand=True)
            return ta
        if ta != tb:
            raise CompileError(loc, f"operands of '{op}' have different types: {ta} and {tb}")
        return ta

    # ---- the dispatcher -----------------------------------------------------------------------
    def check_expr(self, e: A.Expr, expected: T.Type | None = None) -> T.Type:
        kind = type(e)  # self.visit(e, expected), without its frame: this runs for every node
        t = (self._dispatch.get(kind) or self.method_for(kind))(self, e, expected)
        e.type = t
        return t

    def generic_visit(self, node: A.Node, *args: Any) -> Any:
        what = "statement" if isinstance(node, A.Stmt) else "expression"
        raise CompileError(node.loc, f"unexpected {what} {type(node).__name__}")

    def visit_IntLit(self, e: A.IntLit, expected: Any) -> T.Type:
        e.const = e.value
        if e.width is None:
            return T.INT
        t = T.BitT(e.width, e.signed)
        if e.width <= 0:
            raise CompileError(e.loc, "integer width must be positive")
        e.const = wrap(e.value, t)
        if not T.fits(e.value, t) and not (e.signed and 0 <= e.value < (1 << e.width)):
            self.warn(e.loc, f"value {e.value} does not fit in {t}: truncated to {e.const}")
        return t

    def visit_BoolLit(self, e: A.BoolLit, expected: Any) -> T.Type:
        e.const = e.value
        return T.BOOL

    def visit_StrLit(self, e: A.StrLit, expected: Any) -> T.Type:
        return T.STRING

    def visit_DefaultExpr(self, e: A.DefaultExpr, expected: Any) -> T.Type:
        return T.DONTCARE

    def visit_TypeExpr(self, e: A.TypeExpr, expected: Any) -> T.Type:
        return T.ObjT("type", None, of=self.resolve_type(e.syntax))

    def visit_Name(self, e: A.Name, expected: Any) -> T.Type:
        d = self.lookup(e.name, e.loc, e.top)
        e.decl = d
        if isinstance(d, list):
            return T.ObjT("function", d)
        if isinstance(d, (A.Param, A.VarDecl)):
            t = d.rtype if isinstance(d, A.Param) else d.type
            if isinstance(d, A.VarDecl) and d.const and d.value is not None:
                e.const = d.value
            return t
        if isinstance(d, A.Instance):
            return d.rtype
        if isinstance(d, A.ActionDecl):
            return T.ObjT("action", d)
        if isinstance(d, A.TableDecl):
            return T.ObjT("table", d)
        if isinstance(d, A.ValueSetDecl):
            return T.ObjT("value_set", d)
        if isinstance(d, (A.HeaderDecl, A.EnumDecl, A.TypedefDecl)):
            return T.ObjT("type", d, of=d.rtype)
        if d == "error":
            return T.ObjT("type", None, of=T.ERROR)
        if isinstance(d, tuple) and d[0] == "match_kind":
            e.const = d[1]
            return T.MATCH_KIND
        if isinstance(d, (A.ExternDecl, A.ParserDecl, A.ControlDecl, A.PackageDecl)):
            return T.ObjT("type", d)
        if isinstance(d, T.TypeVar):
            return T.ObjT("type", None, of=d)
        raise CompileError(e.loc, f"'{e.name}' cannot be used as a value")

    def visit_Member(self, e: A.Member, expected: Any) -> T.Type:
        base = e.expr
        bt = self.check_expr(base)
        name = e.name
        if isinstance(bt, T.ObjT) and bt.kind == "type":
            of = bt.of
            if isinstance(of, T.EnumT):
                if name not in of.members:
                    raise CompileError(e.name_loc, f"enum {of.name} has no member '{name}'")
                e.const = (of.name, name)
                return of
            if of == T.ERROR:
                if name not in self.error_members:
                    raise CompileError(e.name_loc, f"error.{name} is not declared")
                e.const = ("error", name)
                return T.ERROR
            if of is None and name == "apply" and isinstance(bt.decl, (A.ControlDecl,
                                                                       A.ParserDecl)):
                if bt.decl.is_type:
                    raise CompileError(e.name_loc, f"{bt.decl.name} has no body to apply")
                return T.ObjT("apply", bt.decl, of=bt)  # direct type invocation
            if of is not None and name in ("minSizeInBits", "minSizeInBytes"):
                w = T.bit_width(of)
                return T.ObjT("builtin", name, of=T.BitT(w if name.endswith("Bits")
                                                         else (w + 7) // 8))
            raise CompileError(e.loc, f"{of} has no member '{name}'")
        if isinstance(bt, T.StructT):
            if name in bt.fields:
                return bt.fields[name]
            if bt.kind != "struct" and name in ("isValid", "setValid", "setInvalid"):
                return T.ObjT("builtin", name)
            if name in ("minSizeInBits", "minSizeInBytes"):
                w = bt.width()
                return T.ObjT("builtin", name, of=T.BitT(w if name.endswith("Bits")
                                                         else (w + 7) // 8))
            raise CompileError(e.name_loc, f"{bt} has no field '{name}'")
        if isinstance(bt, T.StackT):
            if name in ("next", "last"):
                if self.ctx and not isinstance(self.ctx[0], A.ParserDecl):
                    raise CompileError(e.name_loc, f"'{name}' may only be used in a parser")
                return bt.elem
            if name == "size":
                e.const = bt.size
                return T.BitT(32)
            if name == "lastIndex":
                return T.BitT(32)
            if name in ("push_front", "pop_front"):
                return T.ObjT("builtin", name)
            raise CompileError(e.name_loc, f"header stack has no member '{name}'")
        if isinstance(bt, T.ObjT):
            if bt.kind == "extern":
                methods = [m for m in bt.decl.methods if m.name == name and m.ret is not None]
                if not methods:
                    raise CompileError(e.name_loc, f"extern {bt.decl.name} has no method '{name}'")
                return T.ObjT("method", methods, dict(bt.targs), of=bt)
            if bt.kind in ("table", "control", "parser") and name == "apply":
                return T.ObjT("apply", bt.decl, of=bt)
            if bt.kind == "apply_result":
                if name in ("hit", "miss"):
                    return T.BOOL
                if name == "action_run":
                    return T.ObjT("action_enum", bt.decl)
        raise CompileError(e.name_loc, f"{bt} has no member '{name}'")

    def visit_Index(self, e: A.Index, expected: Any) -> T.Type:
        bt = self.check_expr(e.expr)
        if not isinstance(bt, T.StackT):
            raise CompileError(e.loc, f"cannot index a value of type {bt}")
        it = self.check_expr(e.index)
        if not isinstance(it, (T.BitT, T.IntT)):
            raise CompileError(e.index.loc, f"stack index must be an integer, not {it}")
        v = e.index.const
        if v is not None and not (0 <= v < bt.size):
            raise CompileError(e.index.loc, f"index {v} is out of range for {bt}")
        return bt.elem

    def visit_Slice(self, e: A.Slice, expected: Any) -> T.Type:
        bt = self.check_expr(e.expr)
        hi = self.const_int(e.hi, "a slice bound")
        lo = self.const_int(e.lo, "a slice bound")
        if hi < 0 or lo < 0:
            raise CompileError(e.loc, "slice indexes must not be negative")
        if isinstance(bt, T.IntT):
            v = e.expr.const
            if v is not None:
                e.const = (v >> lo) & ((1 << (hi - lo + 1)) - 1)
            return T.BitT(hi - lo + 1)
        if not isinstance(bt, T.BitT):
            raise CompileError(e.loc, f"cannot slice a value of type {bt}")
        if hi < lo or lo < 0 or hi >= bt.width:
            raise CompileError(e.loc, f"slice [{hi}:{lo}] is out of range for {bt}")
        v = e.expr.const
        if v is not None:
            e.const = (v >> lo) & ((1 << (hi - lo + 1)) - 1)
        return T.BitT(hi - lo + 1)

    def visit_Unary(self, e: A.Unary, expected: Any) -> T.Type:
        t = self.check_expr(e.expr, expected)
        v = e.expr.const
        if e.op == "!":
            if t != T.BOOL:
                raise CompileError(e.loc, f"'!' needs a bool operand, got {t}")
            if v is not None:
                e.const = not v
            return T.BOOL
        if e.op == "~":
            if not isinstance(t, T.BitT):
                raise CompileError(e.loc, f"'~' needs a bit<W> or int<W> operand, got {t}")
            if v is not None:
                e.const = wrap(~v, t)
            return t
        if not isinstance(t, (T.BitT, T.IntT)):
            raise CompileError(e.loc, f"'{e.op}' needs a numeric operand, got {t}")
        if v is not None:
            e.const = wrap(-v if e.op == "-" else v, t)
        return t

    def visit_Binary(self, e: A.Binary, expected: Any) -> T.Type:
        op = e.op
        if op in ("&&&", ".."):
            raise CompileError(e.loc, f"'{op}' may only be used in a keyset")
        ta = self.check_expr(e.left)
        tb = self.check_expr(e.right)
        va, vb = e.left.const, e.right.const
        if op in ("&&", "||"):
            for side, st in ((e.left, ta), (e.right, tb)):
                if st != T.BOOL:
                    raise CompileError(side.loc, f"'{op}' needs bool operands, got {st}")
            if va is not None and vb is not None:
                e.const = (va and vb) if op == "&&" else (va or vb)
            return T.BOOL
        if op in ("==", "!="):
            if isinstance(ta, (T.BitT, T.IntT)) or isinstance(tb, (T.BitT, T.IntT)):
                self.unify_int(e.left, e.right, op, e.loc)
                va, vb = e.left.const, e.right.const  # an int side is now of the bit width
            elif ta != tb:
                raise CompileError(e.loc, f"operands of '{op}' have different types:"
                                   f" {ta} and {tb}")
            if isinstance(va, (int, tuple)) and isinstance(vb, (int, tuple)):
                e.const = (va == vb) == (op == "==")
            return T.BOOL
        if op == "++":
            for side, st in ((e.left, ta), (e.right, tb)):
                if not isinstance(st, T.BitT):
                    raise CompileError(side.loc, f"'++' needs bit<W> or int<W> operands,"
                                       f" got {st}")
            t = T.BitT(ta.width + tb.width, ta.signed)
            if va is not None and vb is not None:
                e.const = wrap(((va & ((1 << ta.width) - 1)) << tb.width)
                               | (vb & ((1 << tb.width) - 1)), t)
            return t
        if op in ("<<", ">>"):
            if not isinstance(ta, (T.BitT, T.IntT)):
                raise CompileError(e.left.loc, f"cannot shift a value of type {ta}")
            if not (isinstance(tb, T.IntT) or (isinstance(tb, T.BitT) and not tb.signed)):
                raise CompileError(e.right.loc, f"shift amount must be unsigned, got {tb}")
            if isinstance(ta, T.IntT) and vb is None:
                raise CompileError(e.loc, "shifting an int needs a constant shift amount")
            if vb is not None and vb < 0:
                raise CompileError(e.right.loc, "shift amount must not be negative")
            if vb is not None and va is not None and isinstance(ta, T.IntT) and vb > 4096:
                raise CompileError(e.right.loc, f"shift amount {vb} is too large")
            if isinstance(tb, T.IntT):
                e.right.type = T.BitT(max(vb.bit_length(), 1)) if vb is not None else tb
            if va is not None and vb is not None:
                e.const = wrap(_fold(op, va, vb, e.loc), ta)
            return ta
        for side, st in ((e.left, ta), (e.right, tb)):
            if not isinstance(st, (T.BitT, T.IntT)):
                raise CompileError(side.loc, f"'{op}' needs numeric operands, got {st}")
        t = self.unify_int(e.left, e.right, op, e.loc)
        va, vb = e.left.const, e.right.const  # `8w1 < -1` compares with 8w255, as p4c
        if op in _COMPARE:
            if va is not None and vb is not None:
                e.const = {"<": va < vb, ">": va > vb, "<=": va <= vb, ">=": va >= vb}[op]
            return T.BOOL
        if op in ("|+|", "|-|") and isinstance(t, T.IntT):
            raise CompileError(e.loc, f"'{op}' needs bit<W> or int<W> operands")
        if op in ("/", "%") and isinstance(t, T.BitT) and t.signed and (
                vb is None or va is None):
            raise CompileError(e.loc, f"'{op}' is not defined on signed run-time values")
        if va is not None and vb is not None:
            if op in ("|+|", "|-|"):
                r = va + vb if op == "|+|" else va - vb
                lo = -(1 << (t.width - 1)) if t.signed else 0
                hi = (1 << (t.width - 1)) - 1 if t.signed else (1 << t.width) - 1
                e.const = min(max(r, lo), hi)
            else:
                e.const = wrap(_fold(op, va, vb, e.loc), t)
        return t

    def visit_Ternary(self, e: A.Ternary, expected: Any) -> T.Type:
        ct = self.check_expr(e.cond)
        if ct != T.BOOL:
            raise CompileError(e.cond.loc, f"condition must be bool, got {ct}")
        self.check_expr(e.then, expected)
        self.check_expr(e.other, expected)
        if isinstance(e.then.type, T.IntT) and isinstance(e.other.type, T.IntT):
            if isinstance(expected, T.BitT):
                self.coerce(e.then, expected)
                self.coerce(e.other, expected)
            elif e.cond.const is None:
                raise CompileError(e.loc, "the branches of '?:' cannot both be int unless the"
                                   " condition is constant")
        t = self.unify_int(e.then, e.other, "?:", e.then.loc) if (
            isinstance(e.then.type, (T.BitT, T.IntT))) else e.then.type
        if t != e.other.type:
            raise CompileError(e.loc, f"branches of '?:' have different types:"
                               f" {e.then.type} and {e.other.type}")
        cv = e.cond.const
        if cv is not None:
            v = (e.then if cv else e.other).const
            if v is not None:
                e.const = v
        return t

    def visit_Cast(self, e: A.Cast, expected: Any) -> T.Type:
        to = self.resolve_type(e.to)
        have = self.check_expr(e.expr, to)
        v = e.expr.const
        ok = False
        if have == to:
            ok = True
        elif isinstance(to, T.NewT) or isinstance(have, T.NewT):
            # a `type` converts only to and from the type it was declared with (or an int)
            ok = (isinstance(to, T.NewT) and (to.base == have or isinstance(have, T.IntT))) or (
                isinstance(have, T.NewT) and have.base == to)
            if ok and isinstance(v, int) and not isinstance(v, bool):
                e.const = v
        elif isinstance(to, T.BitT) and isinstance(have, (T.BitT, T.IntT)):
            ok = isinstance(have, T.IntT) or have.signed == to.signed or have.width == to.width
            if isinstance(v, int) and not isinstance(v, bool):
                e.const = wrap(v, to)
        elif to == T.BOOL and (have == T.BitT(1) or isinstance(have, T.IntT)):
            ok = have == T.BitT(1) or v in (0, 1)
            if v is not None:
                e.const = bool(v)
        elif isinstance(to, T.BitT) and to.width == 1 and have == T.BOOL:
            ok = True
            if v is not None:
                e.const = int(v)
        elif isinstance(to, T.EnumT) and to.underlying and (have == to.underlying
                                                             or isinstance(have, T.IntT)):
            ok = True
        elif isinstance(have, T.EnumT) and have.underlying and isinstance(to, T.BitT):
            ok = have.underlying == to
            if ok and v is not None:
                e.const = have.values[v[1]]
        elif isinstance(to, T.StructT) and isinstance(have, T.TupleT):
            self.coerce(e.expr, to)
            ok = True
        if not ok:
            raise CompileError(e.loc, f"cannot cast {have} to {to}")
        return to

    def visit_ListExpr(self, e: A.ListExpr, expected: Any) -> T.Type:
        if isinstance(expected, T.StructT) and len(expected.fields) == len(e.items):
            for item, ft in zip(e.items, expected.fields.values()):
                self.check_expr(item, ft)
        else:
            for item in e.items:
                self.check_expr(item)
        return T.TupleT(tuple(i.type for i in e.items))

    def visit_StructInit(self, e: A.StructInit, expected: Any) -> T.Type:
        if not isinstance(expected, T.StructT):
            raise CompileError(e.loc, "a struct initializer needs a known struct type here")
        for n, fe in e.fields:
            if n not in expected.fields:
                raise CompileError(fe.loc, f"{expected} has no field '{n}'")
            self.check_expr(fe, expected.fields[n])
        self.coerce(e, expected)
        return expected
