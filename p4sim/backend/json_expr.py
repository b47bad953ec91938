"""Lowering P4 expressions to BMv2 JSON expression trees (p4c's shapes: arithmetic masked to
the field width, `d2b`/`b2d` between bool and data, `$valid$` fields, stack operators)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_calls import CallInliner


def field_ref(header: str, name: str, t: T.Type) -> R.Ref:
    """A header field; a struct-typed one is a struct of its flattened members."""
    if isinstance(t, T.StructT) and t.kind == "struct":
        return R.StructRef({f: field_ref(header, f"{name}.{f}", ft) for f, ft in t.fields.items()},
                           t)
    return R.FieldRef(header, name, t)


class Env:
    """Maps declarations (parameters, locals, instances) to what they denote."""

    def __init__(self, parent: Env | None = None, prefix: str = "", application: int = 0
                 ) -> None:
        self.parent = parent
        self.map: dict[int, R.Ref] = {}
        self.prefix = prefix if prefix or parent is None else parent.prefix
        # which application of a control instance applied more than once this is: its
        # actions are lowered again, since its parameters are bound to other arguments
        self.application = application or (parent.application if parent else 0)

    def bind(self, decl: Any, ref: R.Ref) -> None:
        self.map[id(decl)] = ref

    def get(self, decl: Any) -> R.Ref | None:
        e: Env | None = self
        while e is not None:
            r = e.map.get(id(decl))
            if r is not None:
                return r
            e = e.parent
        return None


class ExprConverter(A.NodeVisitor):
    """Expressions to BMv2 JSON values and references to storage."""

    def __init__(self, ctx: LoweringContext) -> None:
        self.ctx = ctx
        self.calls: CallInliner  # wired by the program builder (calls and expressions recurse)

    # ---- constants -------------------------------------------------------------------------------
    def const_json(self, value: Any, t: T.Type) -> Json:
        if isinstance(value, bool):
            return {"type": "bool", "value": value}
        if isinstance(value, tuple):
            kind, name = value
            if kind == "error":
                return R.hexstr(self.ctx.errors[name], 32)
            assert isinstance(t, T.EnumT)
            return R.hexstr(t.values[name], T.bit_width(t))
        if isinstance(value, str):  # match kind
            return {"type": "string", "value": value}
        return R.hexstr(value, T.bit_width(t) or None)

    def const_int_of(self, e: A.Expr) -> int:
        v = e.const
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, tuple):
            j = self.const_json(v, e.type)
            return int(j["value"], 16)
        return v

    # ---- paths ---------------------------------------------------------------------------------
    def ref(self, e: A.Expr, env: Env) -> R.Ref:
        if isinstance(e, A.Name):
            d = e.decl
            r = env.get(d)
            if r is not None:
                return r
            if isinstance(d, A.VarDecl) and d.const and d.value is not None:
                return R.DataRef(self.const_json(d.value, d.type), d.type)
            raise unsupported(e.loc, f"reference to '{e.name}' here")
        if isinstance(e, A.Member):
            if isinstance(e.expr.type, T.ObjT):
                return R.DataRef(self.rvalue(e, env), e.type)
            base = self.ref(e.expr, env)
            return self.member(base, e, env)
        if isinstance(e, A.Index):
            base = self.ref(e.expr, env)
            idx = e.index.const
            if isinstance(base, R.UnionStackRef):
                if idx is None:
                    raise unsupported(e.loc, "a header union stack with a run-time index")
                return base.unions[idx]
            assert isinstance(base, R.StackRef)
            if idx is not None:
                return R.HeaderRef(base.elems[idx], base.type.elem)
            return R.DynElemRef(base, self.data(e.index, env), base.type.elem)
        if isinstance(e, A.Call) and e.target and e.target[0] == "function" and isinstance(
                e.type, (T.StructT, T.StackT)) and e.target[1].body is not None:
            return self.function_result(e, e.target[1], env)
        return R.DataRef(self.rvalue(e, env), e.type)

    def member(self, base: R.Ref, e: A.Member, env: Env) -> R.Ref:
        name = e.name
        if isinstance(base, R.StructRef):
            return base.fields[name]
        if isinstance(base, R.UnionRef):
            return base.members[name]
        if isinstance(base, R.HeaderRef):
            return field_ref(base.name, name, e.type)
        if isinstance(base, R.DynElemRef):
            offset = list(base.type.fields).index(name)
            return R.DynFieldRef(base, offset, e.type)
        if isinstance(base, R.StackRef):
            if name == "last":
                return R.DynElemRef(base, R.expr("last_stack_index", None, base.json()),
                                    base.type.elem)
            if name == "next":  # the element after the last valid one: index = valid count
                return R.DynElemRef(base, R.expr("size_stack", None, base.json()), base.type.elem)
            if name == "lastIndex":
                return R.DataRef(R.expr("last_stack_index", None, base.json()), e.type)
            if name == "size":
                return R.DataRef(R.hexstr(base.type.size, 32), e.type)
            raise unsupported(e.loc, f"header stack '.{name}' in this position")
        raise unsupported(e.loc, f"member '{name}' of this expression")

    def leaf_json(self, r: R.Ref, e: A.Expr) -> Json:
        if isinstance(r, (R.FieldRef, R.DynFieldRef)):
            j = r.json()
            return R.d2b(j) if r.type == T.BOOL else j
        if isinstance(r, R.DataRef):
            return r.value
        if isinstance(r, (R.HeaderRef, R.StackRef, R.DynElemRef, R.UnionRef)):
            return r.json()
        raise unsupported(e.loc, "a struct or object used as a value")

    # ---- values --------------------------------------------------------------------------------
    def data(self, e: A.Expr, env: Env) -> Json:
        """A value in data form (bools converted with b2d)."""
        j = self.rvalue(e, env)
        return R.b2d(j) if e.type == T.BOOL and j.get("type") != "bool" else (
            R.hexstr(int(j["value"]), 1) if e.type == T.BOOL else j)

    def cond(self, e: A.Expr, env: Env) -> Json:
        return self.rvalue(e, env)

    def rvalue(self, e: A.Expr, env: Env) -> Json:
        c = e.const
        if c is not None and not isinstance(e.type, T.ObjT) and e.type != T.MATCH_KIND:
            return self.const_json(c, e.type)
        if isinstance(e, (A.Name, A.Index)):
            return self.leaf_json(self.ref(e, env), e)
        if isinstance(e, A.Member):
            if isinstance(e.expr.type, T.ObjT) and e.expr.type.kind == "apply_result":
                raise unsupported(e.loc, f"'.{e.name}' of a table apply outside an if"
                                  " condition")
            return self.leaf_json(self.ref(e, env), e)
        kind = type(e)  # self.visit(e, env), without its frame: this runs for every node
        return (self._dispatch.get(kind) or self.method_for(kind))(self, e, env)

    def generic_visit(self, node: A.Node, *args: Any) -> Any:
        raise unsupported(node.loc, f"expression {type(node).__name__} here")

    def visit_Slice(self, e: A.Slice, env: Env) -> Json:
        hi, lo = e.hi.const, e.lo.const
        j = self.data(e.expr, env)
        if lo:
            j = R.expr(">>", j, R.hexstr(lo, 8))
        return R.mask_to(j, hi - lo + 1)

    def visit_Unary(self, e: A.Unary, env: Env) -> Json:
        t = e.type
        if e.op == "!":
            return R.expr("not", None, self.cond(e.expr, env))
        v = self.data(e.expr, env)
        if e.op == "+":
            return v
        if e.op == "~":
            return self.fix_width(R.expr("~", None, v), t)
        return self.fix_width(R.expr("-", R.hexstr(0, 8), v), t)

    def fix_width(self, j: Json, t: T.Type) -> Json:
        if isinstance(t, T.BitT):
            if t.signed:
                return R.expr("two_comp_mod", j, R.hexstr(t.width, 32))
            return R.mask_to(j, t.width)
        return j

    def visit_Binary(self, e: A.Binary, env: Env) -> Json:
        op = e.op
        if op in ("&&", "||"):
            return R.expr("and" if op == "&&" else "or", self.cond(e.left, env),
                          self.cond(e.right, env))
        if op in ("==", "!=") and e.left.type == T.BOOL:
            return R.expr(op, self.cond(e.left, env), self.cond(e.right, env))
        if op in ("==", "!=") and isinstance(e.left.type, (T.StructT, T.StackT)):
            same = self.equal_refs(self.ref(e.left, env), self.ref(e.right, env), e)
            return same if op == "==" else R.expr("not", None, same)
        a, b = self.data(e.left, env), self.data(e.right, env)
        t = e.type
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return R.expr(op, a, b)
        if op in ("&", "|", "^"):
            return R.expr(op, a, b)
        if op == ">>":
            return R.expr(op, a, b)
        if op == "++":
            wb = T.bit_width(e.right.type)
            lhs = R.mask_to(R.expr("<<", a, R.hexstr(wb, 8)), t.width)
            return self.fix_width(R.expr("|", lhs, R.mask_to(b, wb) if e.right.type.signed
                                         else b), t)
        if op in ("|+|", "|-|"):
            sat = "sat_cast" if t.signed else "usat_cast"
            return R.expr(sat, R.expr("+" if op == "|+|" else "-", a, b), R.hexstr(t.width, 32))
        if op in ("/", "%"):
            return self.fix_width(R.expr(op, a, b), t)
        return self.fix_width(R.expr(op, a, b), t)

    def visit_Ternary(self, e: A.Ternary, env: Env) -> Json:
        if e.type == T.BOOL:
            a, b = self.cond(e.then, env), self.cond(e.other, env)
        else:
            a, b = self.data(e.then, env), self.data(e.other, env)
        return R.expr("?", a, b, cond=self.cond(e.cond, env))

    def visit_Cast(self, e: A.Cast, env: Env) -> Json:
        to, have = e.type, e.expr.type
        if to == T.BOOL:
            if have == T.BOOL:
                return self.cond(e.expr, env)
            return R.d2b(self.data(e.expr, env))
        v = self.data(e.expr, env)
        if isinstance(to, T.BitT):
            hw = T.bit_width(have)
            if to.signed:
                return R.expr("two_comp_mod", v, R.hexstr(to.width, 32))
            if isinstance(have, T.BitT) and have.signed:
                return R.mask_to(v, to.width)
            if hw > to.width or isinstance(have, T.IntT):
                return R.mask_to(v, to.width)
            return v
        return v

    def visit_Call(self, e: A.Call, env: Env) -> Json:
        tgt = e.target
        if tgt and tgt[0] == "builtin" and tgt[1] == "isValid":
            r = self.ref(tgt[2], env)
            if isinstance(r, R.HeaderRef):
                return R.d2b({"type": "field", "value": [r.name, "$valid$"]})
            if isinstance(r, R.DynElemRef):
                return R.expr("valid", None, r.json())
            if isinstance(r, R.UnionRef):
                return R.expr("valid_union", None, r.json())
            raise unsupported(e.loc, "isValid() on this expression")
        if tgt and tgt[0] == "function":
            return self.inline_function(e, tgt[1], env)
        return self.call_value(e, env)

    def equal_refs(self, a: R.Ref, b: R.Ref, e: A.Expr) -> Json:
        """Structs are equal field by field; headers when both are invalid, or both valid with
        equal fields."""
        if isinstance(a, R.StructRef) and isinstance(b, R.StructRef):
            parts = [self.equal_refs(a.fields[n], b.fields[n], e) for n in a.fields]
        elif isinstance(a, R.StackRef) and isinstance(b, R.StackRef):
            parts = [self.equal_refs(R.HeaderRef(x, a.type.elem), R.HeaderRef(y, b.type.elem), e)
                     for x, y in zip(a.elems, b.elems)]
        elif isinstance(a, R.HeaderRef) and isinstance(b, R.HeaderRef):
            va = R.d2b({"type": "field", "value": [a.name, "$valid$"]})
            vb = R.d2b({"type": "field", "value": [b.name, "$valid$"]})
            fields = [R.expr("==", {"type": "field", "value": [a.name, f]},
                             {"type": "field", "value": [b.name, f]}) for f in a.type.fields]
            both_valid = va
            for j in [vb, *fields]:
                both_valid = R.expr("and", both_valid, j)
            return R.expr("or", R.expr("and", R.expr("not", None, va), R.expr("not", None, vb)),
                          both_valid)
        elif isinstance(a, (R.FieldRef, R.DataRef)) and isinstance(b, (R.FieldRef, R.DataRef)):
            return R.expr("==", a.json(), b.json())
        else:
            raise unsupported(e.loc, "comparing these values")
        result: Json = {"type": "bool", "value": True}
        for j in parts:
            result = j if result.get("type") == "bool" else R.expr("and", result, j)
        return result

    def call_value(self, e: A.Call, env: Env) -> Json:
        raise unsupported(e.loc, "a call whose value is used in an expression here")

    def inline_function(self, e: A.Call, fn: A.FunctionDecl, env: Env) -> Json:
        body = fn.body
        if body is None:
            raise unsupported(e.loc, f"extern function {fn.name} used as a value")
        stmts = [s for s in body.stmts if not isinstance(s, A.EmptyStmt)]
        if (len(stmts) != 1 or not isinstance(stmts[0], A.Return) or stmts[0].value is None
                or any(p.direction in ("out", "inout") for p in fn.params)
                or any(isinstance(a.expr, (A.ListExpr, A.StructInit)) for a in e.args)):
            return self.leaf_json(self.function_result(e, fn, env), e)
        # `return expr;` with only `in` parameters: the expression itself, nothing to order
        inner = Env(env)
        for a, p in zip(e.args, fn.params):
            assert a.expr is not None
            inner.bind(p, self.ref(a.expr, env))
        return self.rvalue(stmts[0].value, inner)

    def function_result(self, e: A.Call, fn: A.FunctionDecl, env: Env) -> R.Ref:
        """A function with statements, called in an expression: its body runs as primitives
        just before the statement using it (side-effect ordering has made the call the
        statement's last step), leaving the result in a temporary."""
        if not self.calls.pre_prims:
            raise unsupported(e.loc, f"calling function {fn.name} (which has statements) here")
        result = self.calls.inline_call(e, fn, env, self.calls.pre_prims[-1], fn.rret)
        assert result is not None
        return result

    def visit_ListExpr(self, e: A.ListExpr, env: Env) -> Json:
        raise unsupported(e.loc, "a list expression used as a value here")

    # ---- flattening (field lists, digests, hash inputs) ---------------------------------------
    def flatten(self, e: A.Expr, env: Env) -> list[Json]:
        """The fields making up a list or struct expression, in order."""
        if isinstance(e, A.ListExpr):
            out: list[Json] = []
            for item in e.items:
                out.extend(self.flatten(item, env))
            return out
        if isinstance(e, A.StructInit):
            out = []
            for _, item in e.fields:
                out.extend(self.flatten(item, env))
            return out
        if isinstance(e, (A.Name, A.Member, A.Index)) and not (
                isinstance(e, A.Member) and isinstance(e.expr.type, T.ObjT)):
            r = self.ref(e, env)
            return self.flatten_ref(r, e)
        j = self.data(e, env)
        if j.get("type") in ("hexstr", "expression", "runtime_data") and T.bit_width(e.type):
            j = dict(j, bitwidth=T.bit_width(e.type))  # the width a hash input contributes
        return [j]

    def flatten_ref(self, r: R.Ref, e: A.Expr) -> list[Json]:
        if isinstance(r, R.StructRef):
            out: list[Json] = []
            for sub in r.fields.values():
                out.extend(self.flatten_ref(sub, e))
            return out
        if isinstance(r, R.HeaderRef):
            return self.flatten_ref(R.StructRef({f: field_ref(r.name, f, ft) for f, ft in
                                                 r.type.fields.items()}, r.type), e)
        if isinstance(r, (R.FieldRef, R.DataRef)):
            return [r.json()]
        raise CompileError(e.loc, "cannot use this value in a field list")

    def obj(self, e: A.Expr, env: Env) -> R.ObjRef:
        r = self.ref(e, env)
        if not isinstance(r, R.ObjRef):
            raise unsupported(e.loc, "an extern or table reference here")
        return r
