"""Lowering parsers (states, extract/set/verify/advance/primitive ops, select transitions
with masks, ranges and value sets); the deparser and checksums are in json_deparser.py."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.context import unique
from p4sim.backend.json_actions import StraightLineStatements
from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_actions import StatementConverter
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_externs import ExternConverter
    from p4sim.backend.json_layout import StorageLayout


def _has_if(b: A.Block) -> bool:
    return any(isinstance(s, A.If) or (isinstance(s, A.Block) and _has_if(s)) for s in b.stmts)


def range_to_masks(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """Cover [lo, hi] with value/mask pairs (aligned power-of-two blocks)."""
    out: list[tuple[int, int]] = []
    full = (1 << width) - 1
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


class ParserConverter(StraightLineStatements):
    """The parser: its states (sub-parsers inlined), their statements and transitions."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, stmts: StatementConverter,
                 storage: StorageLayout, externs: ExternConverter) -> None:
        self.ctx, self.exprs, self.stmts = ctx, exprs, stmts
        self.storage, self.externs = storage, externs
        self.parse_vsets: list[Json] = []
        self.value_sets: list[tuple[str, A.ValueSetDecl]] = []
        self.state_names: set[str] = set()
        self.state_rename: list[dict[str, str]] = []  # per sub-parser inlined: its states
        self.applied_parsers: set[Any] = set()

    def bind_locals(self, decl: A.ParserDecl, env: Env, sub_parser: bool) -> None:
        """A parser's variables, extern instances and value sets (not in a sub-parser)."""
        for d in decl.locals:
            if isinstance(d, A.VarDecl) and not d.const:
                self.storage.declare_local(d, env)
            elif isinstance(d, A.Instance):
                env.bind(d, self.externs.register_instance(d, env.prefix))
            elif isinstance(d, A.ValueSetDecl):
                if sub_parser:
                    raise unsupported(d.loc, "value_set in a sub-parser")
                self.add_value_set(d, env)

    def add_value_set(self, d: A.ValueSetDecl, env: Env) -> None:
        name = f"{env.prefix}.{d.name}" if env.prefix else d.name
        a = A.anno(d.annos, "name")
        if a and a.args:
            name = str(a.args[0]).lstrip(".")
        width = T.bit_width(d.relem)
        self.value_sets.append((name, d))
        self.parse_vsets.append({"name": name, "id": len(self.parse_vsets),
                                 "compressed_bitwidth": width, "max_size": d.rsize})
        env.bind(d, R.ObjRef("value_set", name, d))

    def lower_parser(self, decl: A.ParserDecl, env: Env) -> Json:
        self.bind_locals(decl, env, sub_parser=False)
        states: list[Json] = []
        need_reject = False
        self.state_names = {st.name for st in decl.states} | {"accept", "reject"}
        self.state_rename = []
        self.applied_parsers = set()
        for st in decl.states:
            senv = Env(env)
            ops: list[Json] = []
            init = [d for d in decl.locals if isinstance(d, A.VarDecl) and d.init is not None
                    and not d.const] if st.name == "start" else []
            for d in init:
                self.parser_assign(senv.get(d), d.init, senv, ops, d)
            self.lower_state(st.name, list(st.stmts), st, None, senv, ops, states)
        need_reject = any(t["next_state"] == "reject" for s in states
                          for t in s["transitions"])
        if need_reject:
            states.append({"name": "reject", "id": next(self.ctx.state_ids), "parser_ops": [
                {"op": "verify", "parameters": [{"type": "bool", "value": False},
                                                R.hexstr(self.ctx.errors["NoMatch"], 32)]}],
                "transitions": [{"type": "default", "value": None, "mask": None,
                                 "next_state": None}], "transition_key": []})
        return {"name": "parser", "id": 0, "init_state": "start", "parse_states": states}

    def lower_state(self, name: str, stmts: list[A.Stmt], st: A.ParserState, goto: str | None,
                    env: Env, ops: list[Json], states: list[Json]) -> None:
        """One parse state; an `if` splits it (p4c does the same): the condition goes into a
        1-bit temporary selected on, each branch gets a state, and both join the rest."""
        for i, s in enumerate(stmts):
            if isinstance(s, A.Block) and _has_if(s):
                self.lower_state(name, list(s.stmts) + stmts[i + 1:], st, goto, env, ops, states)
                return
            if isinstance(s, A.CallStmt) and s.call.target[0] == "control_apply":
                self.inline_subparser(name, s.call, stmts[i + 1:], st, goto, env, ops, states)
                return
            if not isinstance(s, A.If):
                self.visit(s, env, ops)
                continue
            join = self.new_state(f"{name}_join")
            then_s, else_s = self.new_state(f"{name}_true"), self.new_state(f"{name}_false")
            tmp = self.storage.alloc_temp(1, env)
            ops.append({"op": "set", "parameters": [tmp.json(), R.as_param(
                R.b2d(self.exprs.cond(s.cond, env)))]})
            states.append({"name": name, "id": next(self.ctx.state_ids), "parser_ops": ops,
                           "transition_key": [tmp.json()], "transitions": [
                               {"type": "hexstr", "value": "0x01", "mask": None,
                                "next_state": then_s},
                               {"type": "default", "value": None, "mask": None,
                                "next_state": else_s}]})
            for bname, branch in ((then_s, s.then), (else_s, s.other)):
                body = [] if branch is None else (
                    list(branch.stmts) if isinstance(branch, A.Block) else [branch])
                self.lower_state(bname, body, st, join, Env(env), [], states)
            self.lower_state(join, stmts[i + 1:], st, goto, env, [], states)
            return
        if goto is not None:
            key: list[Json] = []
            trans = [{"type": "default", "value": None, "mask": None, "next_state": goto}]
        else:
            key, trans = self.transition(st, env, ops)
        states.append({"name": name, "id": next(self.ctx.state_ids), "parser_ops": ops,
                       "transitions": trans, "transition_key": key})

    def inline_subparser(self, name: str, call: A.Call, rest: list[A.Stmt], st: A.ParserState,
                         goto: str | None, env: Env, ops: list[Json],
                         states: list[Json]) -> None:
        """`sub.apply(...)`: the sub-parser's states are copied in (p4c inlines them too); its
        accept continues with the rest of the calling state."""
        base = call.target[1]
        if isinstance(base, A.Name) and isinstance(base.decl, A.ParserDecl):
            inst = R.ObjRef("parser", f"{env.prefix}.{base.decl.name}" if env.prefix
                            else base.decl.name, base.decl)
        else:
            inst = self.exprs.ref(base, env)
        if not isinstance(inst, R.ObjRef) or inst.kind != "parser":
            raise unsupported(call.loc, "applying this parser")
        decl: A.ParserDecl = inst.decl
        inner = Env(self.ctx.globals_env, prefix=inst.name)
        for a, p in zip(call.args, decl.params):
            assert a.expr is not None
            r = self.exprs.ref(a.expr, env)
            inner.bind(p, r)
        self.bind_locals(decl, inner, sub_parser=True)
        local = inst.name.split(".")[-1]
        join = self.new_state(f"{name}_after_{local}")
        rename = {s.name: self.new_state(f"{local}_{s.name}") for s in decl.states}
        rename["accept"] = join
        states.append({"name": name, "id": next(self.ctx.state_ids), "parser_ops": ops,
                       "transition_key": [], "transitions": [
                           {"type": "default", "value": None, "mask": None,
                            "next_state": rename["start"]}]})
        self.state_rename.append(rename)
        for sst in decl.states:
            sub_ops: list[Json] = []
            if sst.name == "start":
                for d in decl.locals:
                    if isinstance(d, A.VarDecl) and d.init is not None and not d.const:
                        self.parser_assign(inner.get(d), d.init, inner, sub_ops, d)
            self.lower_state(rename[sst.name], list(sst.stmts), sst, None, Env(inner), sub_ops,
                             states)
        self.state_rename.pop()
        self.lower_state(join, rest, st, goto, env, [], states)

    def new_state(self, base: str) -> str:
        return unique(base, self.state_names)

    def generic_visit(self, node: A.Node, *args: Any) -> None:
        raise unsupported(node.loc, f"statement {type(node).__name__} in a parser state")

    def visit_Block(self, s: A.Block, env: Env, ops: list[Json]) -> None:
        for x in s.stmts:
            self.visit(x, Env(env), ops)

    def assign_slice(self, s: A.Assign, env: Env, out: list[Json]) -> None:
        dst, value = self.stmts.slice_assign(s.lhs, s.rhs, env)  # type: ignore[arg-type]
        out.append({"op": "set", "parameters": [dst, R.as_param(value)]})

    def assign_value(self, dst: R.Ref, rhs: A.Expr, env: Env, out: list[Json], node: Any
                     ) -> None:
        self.parser_assign(dst, rhs, env, out, node)

    def lower_call(self, c: A.Call, env: Env, out: list[Json]) -> None:
        self.parser_call(c, env, out)

    def lookahead_of(self, e: A.Expr) -> Json | None:
        """`pkt.lookahead<T>()` (or a field/slice of it) as a BMv2 lookahead operand."""
        offset = 0
        if isinstance(e, A.Slice) and isinstance(e.expr, A.Call):
            w = T.bit_width(e.expr.type)
            inner = self.lookahead_of(e.expr)
            if inner is None:
                return None
            return {"type": "lookahead", "value": [w - 1 - e.hi.const, e.hi.const - e.lo.const
                                                   + 1]}
        if isinstance(e, A.Member) and isinstance(e.expr, A.Call) and isinstance(
                e.expr.type, T.StructT):
            st = e.expr.type
            for fname, ft in st.fields.items():
                if fname == e.name:
                    break
                offset += T.bit_width(ft)
            call = e.expr
            if not (call.target and call.target[0] == "method"
                    and call.target[2].name == "lookahead"):
                return None
            return {"type": "lookahead", "value": [offset, T.bit_width(st.fields[e.name])]}
        if isinstance(e, A.Call) and e.target and e.target[0] == "method" and (
                e.target[2].name == "lookahead"):
            return {"type": "lookahead", "value": [0, T.bit_width(e.type)]}
        return None

    def parser_assign(self, dst: R.Ref | None, rhs: A.Expr, env: Env, ops: list[Json],
                      node: Any) -> None:
        assert dst is not None
        la = self.lookahead_of(rhs)
        if la is not None and isinstance(dst, R.FieldRef):
            ops.append({"op": "set", "parameters": [dst.json(), la]})
            return
        if isinstance(dst, R.FieldRef) and not isinstance(dst.type, T.VarbitT):
            value = R.as_param(self.exprs.data(rhs, env))
            ops.append({"op": "set", "parameters": [dst.json(), value]})
            return
        prims: list[Json] = []
        self.stmts.assign(dst, rhs, env, prims, node)
        for p in prims:
            if p["op"] == "assign":
                ops.append({"op": "set", "parameters": p["parameters"]})
            else:
                ops.append({"op": "primitive", "parameters": [p]})

    def parser_call(self, c: A.Call, env: Env, ops: list[Json]) -> None:
        tgt = c.target
        if tgt[0] == "method":
            inst = self.exprs.ref(tgt[1], env)
            if isinstance(inst, R.ObjRef) and inst.kind == "packet_in":
                name = tgt[2].name
                if name == "extract":
                    arg = c.args[0].expr
                    if arg is None:  # extract<T>(_): skip a T's worth of bits
                        skipped = tgt[3].get("T")
                        if skipped is None:
                            raise CompileError(c.loc, "extract(_) needs a type argument")
                        ops.append({"op": "advance", "parameters": [
                            R.hexstr(T.bit_width(skipped), 32)]})
                        return
                    p = self.extract_target(arg, env)
                    if len(c.args) == 2:
                        n = c.args[1].expr
                        assert n is not None
                        # BMv2 wants an expression parameter: a typed node wrapped once more,
                        # here always an operation (which p4sim's switch reads too)
                        length = R.as_param(R.expr("&", self.exprs.data(n, env),
                                                   R.hexstr(0xFFFFFFFF, 32)))
                        ops.append({"op": "extract_VL", "parameters": [p, length]})
                    else:
                        ops.append({"op": "extract", "parameters": [p]})
                elif name == "advance":
                    n = c.args[0].expr
                    assert n is not None
                    length = R.as_param(self.exprs.data(n, env))
                    ops.append({"op": "advance", "parameters": [length]})
                elif name == "lookahead":
                    # value unused, but BMv2 still checks the packet is long enough
                    # (PacketTooShort): read it into a temporary
                    width = T.bit_width(c.type)
                    if width:
                        tmp = self.storage.alloc_temp(width, env, "tmp")
                        ops.append({"op": "set", "parameters": [
                            tmp.json(), {"type": "lookahead", "value": [0, width]}]})
                else:
                    raise unsupported(c.loc, f"packet_in.{name}() in a parser")
                return
        if tgt[0] == "control_apply":
            raise unsupported(c.loc, "applying a sub-parser")
        if tgt[0] == "function" and tgt[1].name == "verify":
            cond, err = c.args[0].expr, c.args[1].expr
            assert cond is not None and err is not None
            ops.append({"op": "verify", "parameters": [self.exprs.cond(cond, env),
                                                       self.exprs.data(err, env)]})
            return
        prims: list[Json] = []
        self.stmts.call_to_prims(c, env, prims)
        for p in prims:
            ops.append({"op": "primitive", "parameters": [p]})

    def extract_target(self, arg: A.Expr, env: Env) -> Json:
        nxt = arg.expr if isinstance(arg, A.Member) else None
        if isinstance(nxt, A.Member) and nxt.name == "next" and isinstance(nxt.expr.type,
                                                                            T.StackT):
            ust = self.exprs.ref(nxt.expr, env)  # `u.next.member` of a header union stack
            if isinstance(ust, R.UnionStackRef):
                return {"type": "union_stack", "value": [ust.name, arg.name]}
        if isinstance(arg, A.Member) and arg.name == "next" and isinstance(arg.expr.type,
                                                                             T.StackT):
            st = self.exprs.ref(arg.expr, env)
            assert isinstance(st, R.StackRef)
            return {"type": "stack", "value": st.name}
        r = self.exprs.ref(arg, env)
        if isinstance(r, R.HeaderRef):
            return {"type": "regular", "value": r.name}
        if isinstance(r, R.DynElemRef):
            raise unsupported(arg.loc, "extract into a stack element with a run-time index")
        raise CompileError(arg.loc, "extract needs a header")

    # ---- select ---------------------------------------------------------------------------------
    def transition(self, st: A.ParserState, env: Env, ops: list[Json]
                   ) -> tuple[list[Json], list[Json]]:
        tr = st.transition
        assert tr is not None

        rename = self.state_rename[-1] if self.state_rename else None

        def target(name: str) -> str | None:
            if rename is not None and name != "reject":
                return rename[name]
            return None if name == "accept" else name

        if tr.select is None:
            return [], [{"type": "default", "value": None, "mask": None,
                         "next_state": target(tr.state or "")}]
        keys: list[Json] = []
        layout: list[tuple[int, int, int]] = []  # (byte width, shift, slice mask or -1)
        for e in tr.select:
            j, width, shift, smask = self.select_key(e, env, ops)
            keys.append(j)
            layout.append((width, shift, smask))
        trans: list[Json] = []
        for case in tr.cases:
            nxt = target(case.state)
            ks = case.keyset
            if isinstance(ks, A.DefaultExpr) or (isinstance(ks, A.ListExpr) and all(
                    isinstance(i, A.DefaultExpr) for i in ks.items)):
                trans.append({"type": "default", "value": None, "mask": None, "next_state": nxt})
                continue
            items = ks.items if isinstance(ks, A.ListExpr) else [ks]
            if len(items) == 1 and isinstance(items[0], A.Name) and isinstance(
                    items[0].type, T.ObjT):
                vs = self.exprs.ref(items[0], env)
                trans.append({"type": "parse_vset", "value": vs.name, "mask": None,
                              "next_state": nxt})
                continue
            choices = [self.key_choices(it, lay) for it, lay in zip(items, layout)]
            for combo in itertools.product(*choices):
                value = mask = 0
                masked = False
                for (v, m, is_masked), (width, _, _) in zip(combo, layout):
                    value = (value << (8 * width)) | v
                    mask = (mask << (8 * width)) | m
                    masked = masked or is_masked
                total = sum(w for w, _, _ in layout)
                trans.append({"type": "hexstr", "value": "0x" + format(value, f"0{2 * total}x"),
                              "mask": ("0x" + format(mask, f"0{2 * total}x")) if masked
                              else None, "next_state": nxt})
        return keys, trans

    def select_key(self, e: A.Expr, env: Env, ops: list[Json]) -> tuple[Json, int, int, int]:
        bits = T.bit_width(e.type)
        la = self.lookahead_of(e)
        if la is not None:
            return la, (bits + 7) // 8, 0, -1
        shift, smask = 0, -1
        inner = e
        if isinstance(e, A.Slice):
            inner = e.expr
            shift = e.lo.const
            smask = ((1 << bits) - 1) << shift
        if isinstance(inner, A.Member) and inner.type != T.BOOL and not isinstance(
                inner.expr.type, T.ObjT):
            r = self.exprs.ref(inner, env)
            if isinstance(r, R.FieldRef):
                w = T.bit_width(inner.type)
                return r.json(), (w + 7) // 8, shift, smask
            if isinstance(inner.expr, A.Member) and inner.expr.name == "last":
                st = self.exprs.ref(inner.expr.expr, env)
                w = T.bit_width(inner.type)
                return {"type": "stack_field", "value": [st.name, inner.name]}, (w + 7) // 8, \
                    shift, smask
        tmp = self.storage.alloc_temp(bits, env)
        ops.append({"op": "set", "parameters": [tmp.json(), R.as_param(self.exprs.data(e, env))]})
        return tmp.json(), (bits + 7) // 8, 0, -1

    def key_choices(self, it: A.Expr, lay: tuple[int, int, int]) -> list[tuple[int, int, bool]]:
        width, shift, smask = lay
        full = (1 << (8 * width)) - 1
        base_mask = smask if smask >= 0 else full

        def val(x: A.Expr) -> int:
            v = x.const
            if isinstance(v, bool):
                return int(v)
            if isinstance(v, tuple):
                j = self.exprs.const_json(v, x.type)
                return int(j["value"], 16)
            return v

        if isinstance(it, A.DefaultExpr):
            return [(0, 0, True)]
        if isinstance(it, A.Binary) and it.op == "&&&":
            v, m = val(it.left) << shift, (val(it.right) << shift) & base_mask
            return [(v & m, m, True)]
        if isinstance(it, A.Binary) and it.op == "..":
            bits = T.bit_width(it.type)
            out = []
            for v, m in range_to_masks(val(it.left), val(it.right), bits):
                out.append(((v << shift) & base_mask, (m << shift) & base_mask, True))
            return out
        return [((val(it) << shift) & base_mask, base_mask, smask >= 0)]

    # ---- deparser and checksums -------------------------------------------------------------
