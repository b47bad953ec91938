"""Lowering controls to BMv2 pipelines: the apply block becomes a graph of tables and
conditionals (p4c's way: straight-line statements go into a synthesized action run by a
hidden keyless table; `hit`/`miss`/`action_run` become next_tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.json_expr import Env
from p4sim.backend.naming import qualify
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import unsupported

if TYPE_CHECKING:
    from p4sim.backend.action_registry import ActionRegistry
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_actions import StatementConverter
    from p4sim.backend.json_calls import CallInliner
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_externs import ExternConverter
    from p4sim.backend.json_layout import StorageLayout
    from p4sim.backend.json_tables import TableConverter


class ControlConverter(A.NodeVisitor):
    """Control apply blocks to the pipeline graph of tables and conditionals."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, calls: CallInliner,
                 stmts: StatementConverter, storage: StorageLayout, externs: ExternConverter,
                 actions: ActionRegistry, tables: TableConverter) -> None:
        self.ctx, self.exprs, self.calls, self.stmts = ctx, exprs, calls, stmts
        self.storage, self.externs, self.actions, self.tables = storage, externs, actions, tables
        self.ret_targets: list[str | None] = []  # per control being lowered: where return goes
        self.applied_controls: dict[str, int] = {}
        self.control_envs: dict[str, Env] = {}

    # ---- controls -----------------------------------------------------------------------------
    def lower_control(self, decl: A.ControlDecl, env: Env) -> str | None:
        init: list[A.Stmt] = []
        for d in decl.locals:
            self.declare_local(d, env, init)
        assert decl.body is not None
        body = init + list(decl.body.stmts)
        self.ret_targets.append(None)
        first = self.build_seq(body, None, env)
        self.ret_targets.pop()
        return first

    def declare_local(self, d: A.Node, env: Env, init: list[A.Stmt]) -> None:
        if isinstance(d, A.Instance):
            r = self.externs.register_instance(d, env.prefix)
            if r.kind in ("control", "parser"):
                # constructor arguments (`C2(c1) c2;`) are bound where the instance is declared
                r.extra = [(p, self.ctor_arg(a.expr, p, env)) for a, p in zip(
                    d.args, r.decl.ctor_params) if a.expr is not None]
            env.bind(d, r)
        elif isinstance(d, A.TableDecl):
            env.bind(d, R.ObjRef("table", qualify(d, env.prefix), d))
            for inst in d.synthetic:  # instances written inside table properties
                env.bind(inst, self.externs.register_instance(inst, env.prefix))
        elif isinstance(d, A.VarDecl):
            if d.const:
                return
            env.bind(d, self.storage.alloc_local(d, env))
            if d.init is not None:
                init.append(A.Assign(d.loc, A.Name(d.loc, d.name), d.init))
                init[-1].lhs.decl = d  # type: ignore[attr-defined]
                init[-1].lhs.type = d.type  # type: ignore[attr-defined]
        elif isinstance(d, A.ActionDecl):
            pass  # lowered when a table or call uses it
        elif isinstance(d, A.ValueSetDecl):
            raise unsupported(d.loc, "value_set in a control")

    # ---- the apply graph ------------------------------------------------------------------------

    def build_seq(self, stmts: list[A.Stmt], nxt: str | None, env: Env) -> str | None:
        env = Env(env)
        for s in stmts:  # bind locals first: later statements are lowered before earlier ones
            if isinstance(s, A.VarDecl) and not s.const:
                env.bind(s, self.storage.alloc_local(s, env))
        node = nxt
        pending: list[A.Stmt] = []
        for s in reversed(stmts):
            if isinstance(s, A.Exit):
                node = None
                pending = [s]
                continue
            if isinstance(s, A.Return):
                node = self.ret_targets[-1]
                pending = []
                continue
            rhs = s.rhs if isinstance(s, A.Assign) else (
                s.init if isinstance(s, A.VarDecl) else None)
            hm = self.hit_miss(rhs) if rhs is not None else None
            if hm is not None:  # `b = t.apply().hit;`: each outcome sets b, then goes on
                node = self.flush(pending, node, env)
                pending = []
                dst = env.get(s) if isinstance(s, A.VarDecl) else self.exprs.ref(s.lhs, env)
                call, hit = hm
                outcome = {}
                for key, value in (("__HIT__", hit), ("__MISS__", not hit)):
                    outcome[key] = self.prims_table([R.prim("assign", [
                        dst.json(), R.hexstr(int(value), 1)], s, self.ctx.source_info)], node, s)
                node = self.tables.apply_table(call, env, outcome, node, hitmiss=True)
                continue
            if self.is_simple(s):
                if isinstance(s, A.VarDecl) and (s.init is None or s.const):
                    continue
                pending.insert(0, s)
                continue
            node = self.flush(pending, node, env)
            pending = []
            node = self.build_stmt(s, node, env)
        return self.flush(pending, node, env)

    def is_simple(self, s: A.Stmt) -> bool:
        if isinstance(s, (A.Assign, A.VarDecl, A.EmptyStmt)):
            return True
        if isinstance(s, A.For):  # a loop runs inside one action, so it may not apply tables
            applied = next((c for c in _calls(s) if c.target and c.target[0] in (
                "table_apply", "control_apply")), None)
            if applied is not None:
                raise unsupported(applied.loc, "applying a table or control inside a 'for'"
                                  " loop (BMv2 loops only inside an action)")
            return True
        if isinstance(s, A.CallStmt):
            return s.call.target[0] not in ("table_apply", "control_apply")
        return False

    def flush(self, stmts: list[A.Stmt], nxt: str | None, env: Env) -> str | None:
        stmts = [s for s in stmts if not isinstance(s, A.EmptyStmt)]
        if not stmts:
            return nxt
        c = stmts[0].call if len(stmts) == 1 and isinstance(stmts[0], A.CallStmt) else None
        if c is not None and c.target[0] == "action" and all(
                a.expr is not None and a.expr.const is not None
                for a in c.args) and not any(p.direction for p in c.target[1].params):
            act: A.ActionDecl = c.target[1]
            aname, aid = self.actions.action_for(act, self.actions.env_of(act, env), [])
            data = [R.hex_padded(int(self.exprs.const_int_of(a.expr)), T.bit_width(p.rtype))
                    for a, p in zip(c.args, act.params)]
            tname = self.ctx.unique_table("tbl_" + act.name)
            return self.tables.dummy_table(tname, aname, aid, data, nxt, stmts[0])
        prims: list[Json] = []
        for s in stmts:
            if isinstance(s, A.VarDecl):
                assert s.init is not None
                r = env.get(s)
                assert r is not None
                self.calls.pre_prims.append(prims)
                try:
                    self.stmts.assign(r, s.init, env, prims, s)
                finally:
                    self.calls.pre_prims.pop()
            else:
                if isinstance(s, A.CallStmt) and s.call.target[0] == "action":
                    # p4c gives an action called from the apply block its own table, so it is
                    # in the P4Info; calls nested in actions are simply inlined
                    self.actions.note_called_action(s.call.target[1], s.call, env)
                self.stmts.stmt_to_prims(s, env, prims)
        return self.prims_table(prims, nxt, stmts[0])

    def build_stmt(self, s: A.Stmt, nxt: str | None, env: Env) -> str | None:
        """The graph node that runs `s` and then `nxt`."""
        if self.is_simple(s) or isinstance(s, (A.Exit, A.Return)):
            return self.build_seq([s], nxt, env)  # an unbraced branch
        return self.visit(s, nxt, env)

    def generic_visit(self, node: A.Node, *args: Any) -> None:
        raise unsupported(node.loc, f"statement {type(node).__name__} in a control")

    def visit_Block(self, s: A.Block, nxt: str | None, env: Env) -> str | None:
        return self.build_seq(s.stmts, nxt, env)

    def visit_CallStmt(self, s: A.CallStmt, nxt: str | None, env: Env) -> str | None:
        if s.call.target[0] == "table_apply":
            return self.tables.apply_table(s.call, env, {}, nxt)
        return self.apply_control(s.call, env, nxt)

    def visit_If(self, s: A.If, nxt: str | None, env: Env) -> str | None:
        then = self.build_stmt(s.then, nxt, env)
        other = self.build_stmt(s.other, nxt, env) if s.other is not None else nxt
        hm = self.hit_miss(s.cond)
        if hm is not None:
            call, hit = hm
            nt = {"__HIT__": then, "__MISS__": other} if hit else {
                "__HIT__": other, "__MISS__": then}
            return self.tables.apply_table(call, env, nt, nxt, hitmiss=True)
        name = f"node_{self.ctx.next_cond_id()}"
        self.ctx.pipeline["conditionals"].append({
            "name": name, "id": self.ctx.cond_count - 1,
            "source_info": self.ctx.source_info(s.cond),
            "expression": self.exprs.cond(s.cond, env), "true_next": then, "false_next": other})
        return name

    def hit_miss(self, e: A.Expr) -> tuple[A.Call, bool] | None:
        neg = False
        while isinstance(e, A.Unary) and e.op == "!":
            neg = not neg
            e = e.expr
        if isinstance(e, A.Member) and e.name in ("hit", "miss") and isinstance(
                e.expr, A.Call) and e.expr.target and e.expr.target[0] == "table_apply":
            return e.expr, (e.name == "hit") != neg
        return None

    def visit_Switch(self, s: A.Switch, nxt: str | None, env: Env) -> str | None:
        if s.kind == "action_run":
            call = s.expr.expr  # type: ignore[attr-defined]
            table = call.target[1]
            nt: dict[str, str | None] = {}
            default_node = nxt
            body_node = nxt
            for case in reversed(s.cases):
                if case.body is not None:
                    body_node = self.build_seq(case.body.stmts, nxt, env)
                for lab in case.labels:
                    if isinstance(lab, A.DefaultExpr):
                        default_node = body_node
                    else:
                        nt[id(lab.decl)] = body_node  # type: ignore[index]
            tref = self.tables.ref_table(call, env)
            names = {}
            for act, acall, _ in table.action_list:
                aname, _ = self.tables.table_action(act, acall, tref, env)
                names[aname] = nt.get(id(act), default_node)  # type: ignore[arg-type]
            return self.tables.apply_table(call, env, names, nxt)
        # switch on a value: a chain of conditionals
        node = nxt
        default_node = nxt
        bodies: list[tuple[list[A.Expr], str | None]] = []
        body_node = nxt
        for case in reversed(s.cases):
            if case.body is not None:
                body_node = self.build_seq(case.body.stmts, nxt, env)
            bodies.insert(0, (case.labels, body_node))
        for labels, bnode in reversed(bodies):
            for lab in labels:
                if isinstance(lab, A.DefaultExpr):
                    default_node = bnode
        node = default_node
        for labels, bnode in reversed(bodies):
            for lab in labels:
                if isinstance(lab, A.DefaultExpr):
                    continue
                name = f"node_{self.ctx.next_cond_id()}"
                self.ctx.pipeline["conditionals"].append({
                    "name": name, "id": self.ctx.cond_count - 1,
                    "source_info": self.ctx.source_info(lab),
                    "expression": R.expr("==", self.exprs.data(s.expr, env),
                                         self.exprs.data(lab, env)),
                    "true_next": bnode, "false_next": node})
                node = name
        return node

    def apply_control(self, call: A.Call, env: Env, nxt: str | None) -> str | None:
        base = call.target[1]
        if isinstance(base, A.Name) and isinstance(base.decl, A.ControlDecl):
            # `Type.apply(...)`: an implicit instance named after the type
            inst = R.ObjRef("control", qualify(base.decl, env.prefix), base.decl)
        else:
            inst = self.exprs.ref(base, env)
        if not isinstance(inst, R.ObjRef) or inst.kind != "control":
            raise unsupported(call.loc, "applying this control")
        decl: A.ControlDecl = inst.decl
        # p4c inlines each application of an instance; its tables may still be applied once
        self.applied_controls[inst.name] = n = self.applied_controls.get(inst.name, -1) + 1
        inner = Env(self.ctx.globals_env, prefix=inst.name, application=n)
        for p, r in inst.extra or []:
            inner.bind(p, r)
        copied = params_needing_copies(call.args, decl.params)
        copy_in: list[Json] = []
        copy_back: list[tuple[Any, R.Ref]] = []
        for a, p in zip(call.args, decl.params):
            assert a.expr is not None
            if id(p) in copied:
                inner.bind(p, self.calls.copy_in(a.expr, p, env, copy_in, copy_back, call))
                continue
            by_ref = p.direction in ("out", "inout") or isinstance(p.rtype, (T.StructT, T.StackT))
            inner.bind(p, self.exprs.ref(a.expr, env) if by_ref
                       else R.DataRef(self.exprs.data(a.expr, env), p.rtype))
        init: list[A.Stmt] = []
        first = self.control_envs.setdefault(inst.name, inner)
        for d in decl.locals:
            if first is not inner and isinstance(d, (A.Instance, A.TableDecl)):
                # the instance's externs and tables exist once, whichever application
                inner.bind(d, first.map[id(d)])
                for x in d.synthetic if isinstance(d, A.TableDecl) else []:
                    inner.bind(x, first.map[id(x)])
                continue
            self.declare_local(d, inner, init)
        assert decl.body is not None
        end = nxt
        if copy_back:  # the body ends (or returns) into the copy-out, then goes on
            out: list[Json] = []
            self.calls.copy_out(copy_back, call, env, out)
            end = self.prims_table(out, end, call)
        # `exit` leaves without the copy-out (as p4c inlines a control: its exit skips it)
        self.ret_targets.append(end)
        first = self.build_seq(init + list(decl.body.stmts), end, inner)
        self.ret_targets.pop()
        return self.prims_table(copy_in, first, call) if copy_in else first

    def prims_table(self, prims: list[Json], nxt: str | None, node: Any) -> str:
        """A hidden table whose default action runs `prims`, then goes to `nxt`."""
        aname = self.ctx.unique_action("act")
        aid = self.actions.add_action_json(aname, [], prims, node)
        self.actions.hidden_actions.add(aname)
        return self.tables.dummy_table(self.ctx.unique_table("tbl_" + aname), aname, aid, [],
                                       nxt, node)

    def ctor_arg(self, e: A.Expr, p: A.Param, env: Env) -> R.Ref:
        if e.const is not None:
            return R.DataRef(self.exprs.const_json(e.const, e.type), e.type)
        return self.exprs.ref(e, env)

def _arg_path(e: A.Expr) -> tuple[Any, ...]:
    """The storage an argument names, as (root declaration, member or constant index, ...);
    a run-time index is None, which may be any element."""
    steps: list[Any] = []
    while isinstance(e, (A.Member, A.Index, A.Slice)):
        if isinstance(e, A.Member):
            steps.append(e.name)
        elif isinstance(e, A.Index):
            steps.append(e.index.const if isinstance(e.index.const, int) else None)
        e = e.expr
    root = id(e.decl) if isinstance(e, A.Name) and e.decl is not None else id(e)
    return (root, *reversed(steps))


def _overlap(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def params_needing_copies(args: list[A.Arg], params: list[A.Param]) -> set[int]:
    """The parameters (by id) of a control application that need copy-in/copy-out storage:
    those whose argument overlaps another argument written by the control (`c.apply(x, x)`),
    where binding by reference would let one parameter see writes to the other, and `out`
    headers, which start invalid. The rest are bound to the argument itself, as before."""
    paths = [(_arg_path(a.expr), p) for a, p in zip(args, params) if a.expr is not None]
    copied: set[int] = set()
    for i, (path, p) in enumerate(paths):
        for j, (other, q) in enumerate(paths):
            if i != j and _overlap(path, other) and "out" in (
                    (p.direction or "") + (q.direction or "")):
                copied.add(id(p))
        if p.direction == "out" and (isinstance(p.rtype, T.StackT) or (
                isinstance(p.rtype, T.StructT) and p.rtype.is_header)):
            copied.add(id(p))
    return copied


def _calls(node: A.Node) -> list[A.Call]:
    found: list[A.Call] = []

    class Calls(A.NodeVisitor):
        def visit_Call(self, c: A.Call) -> None:
            found.append(c)
            self.generic_visit(c)

    Calls().visit(node)
    return found
