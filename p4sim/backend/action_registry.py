"""The program's JSON actions: one per action and binding of its directional arguments, named
and numbered as p4c does, with what P4Info needs to know about each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend.json_expr import Env
from p4sim.backend.naming import qualify
from p4sim.backend.refs import DataRef, Json, Ref, d2b, hexstr
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_actions import StatementConverter
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_layout import StorageLayout


class ActionRegistry:
    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, storage: StorageLayout
                 ) -> None:
        self.ctx, self.exprs, self.storage = ctx, exprs, storage
        self.stmts: StatementConverter  # wired by the program builder (bodies call actions)
        prog = ctx.prog
        self.actions_json: list[Json] = []
        self.action_cache: dict[Any, tuple[str, int]] = {}
        self.action_params: dict[str, list[tuple[str, int, A.Param]]] = {}
        self.action_decls: dict[str, A.ActionDecl] = {}
        self.action_pipeline: dict[str, int] = {}
        self.hidden_actions: set[str] = set()
        self.global_actions = {d for d in prog.decls if isinstance(d, A.ActionDecl)}
        self.table_actions = {id(a) for d in prog.decls
                              if isinstance(d, A.ControlDecl) and not d.is_type
                              for t in d.locals if isinstance(t, A.TableDecl)
                              for a, _, _ in t.action_list}

    def env_of(self, act: A.ActionDecl, env: Env) -> Env:
        """Global actions see only global names; control-local ones see the control."""
        if act in self.global_actions:
            return self.ctx.globals_env
        return env

    def add_action_json(self, name: str, runtime: list[Json], prims: list[Json], node: Any
                        ) -> int:
        end_exits(prims)
        aid = len(self.actions_json)
        self.actions_json.append({"name": name, "id": aid, "runtime_data": runtime,
                                  "primitives": prims})
        return aid

    def note_called_action(self, act: A.ActionDecl, c: A.Call, env: Env) -> None:
        """An action called directly is inlined where it is called, but p4c still emits it as
        an action of its own (in the JSON and the P4Info): do the same, with the first call's
        directional arguments bound."""
        prefix = "" if act in self.global_actions else env.prefix
        if qualify(act, prefix) in self.action_decls or id(act) in self.table_actions:
            return  # a table's use of the action gives it its name
        aenv = self.ctx.globals_env if act in self.global_actions else env
        # like p4c, the data parameters of a directly called action are bound too: the action
        # it emits takes no action data
        bound = [(p, self.called_action_arg(a.expr, p, env))
                 for a, p in zip(c.args, act.params) if a.expr is not None]
        saved = self.stmts.return_patches
        self.stmts.return_patches = []
        self.action_for(act, aenv, bound)
        self.stmts.return_patches = saved

    def called_action_arg(self, e: A.Expr, p: A.Param, env: Env) -> Ref:
        composite = isinstance(p.rtype, (T.StructT, T.StackT))
        if (p.direction in ("out", "inout") and not isinstance(e, A.Slice)) or (
                composite and not isinstance(e, (A.ListExpr, A.StructInit))):
            return self.exprs.ref(e, env)
        if composite or p.direction in ("out", "inout"):  # storage of the parameter's type
            return self.storage.layout(p.rtype, p.name, "")
        return DataRef(self.exprs.data(e, env), p.rtype)

    def action_for(self, act: A.ActionDecl, env: Env, bound: list[Any]) -> tuple[str, int]:
        prefix = "" if act in self.global_actions else env.prefix
        key = (id(act), prefix, env.application, tuple((id(p), repr(r)) for p, r in bound))
        if key in self.action_cache:
            return self.action_cache[key]
        name = qualify(act, prefix)
        other = self.action_decls.get(name)
        if other is not None and other is not act:
            raise CompileError(act.loc, f"{name}: conflicting control plane name (also used by"
                               f" the action at {other.loc})")
        if name in self.ctx.action_names and other is not act:
            name = self.ctx.unique_action(name)
        # the same action bound to other directional arguments by another table (`setbyte(x)`
        # and `setbyte(y)`) is another JSON action of the same name: one P4Info action, as p4c
        self.ctx.action_names.add(name)
        inner = Env(env)
        runtime: list[Json] = []
        params: list[tuple[str, int, A.Param]] = []
        # A directly called action has its data parameters bound by the call: no action data
        # (p4c's JSON and P4Info list it with no parameters).
        bound_params = {id(p) for p, _ in bound}
        for p in act.params:
            if p.direction or id(p) in bound_params:
                continue
            w = T.bit_width(p.rtype)
            rd = {"type": "runtime_data", "value": len(runtime)}
            inner.bind(p, DataRef(d2b(rd) if p.rtype == T.BOOL else rd, p.rtype))
            runtime.append({"name": p.name, "bitwidth": w})
            params.append((p.name, w, p))
        for p, r in bound:
            inner.bind(p, r)
        prims: list[Json] = []
        self.stmts.body_to_prims(act.body.stmts, inner, prims)
        end_exits(prims)
        aid = len(self.actions_json)
        self.actions_json.append({"name": name, "id": aid, "runtime_data": runtime,
                                  "primitives": prims})
        self.action_params[name] = params
        self.action_decls[name] = act
        self.action_cache[key] = (name, aid)
        self.action_pipeline[name] = -1 if act in self.global_actions else self.ctx.pipeline["id"]
        return name, aid


def end_exits(prims: list[Json]) -> None:
    """BMv2's `exit` primitive only marks the packet: the action's later primitives still run.
    Each `exit` is followed by a jump to the action's end (dropped when nothing follows)."""
    n = len(prims)

    def jumps_to_end(p: Json) -> bool:
        at = {"_jump": 0, "_jump_if_zero": 1}.get(p["op"])
        return at is not None and not p.get("to_end") and int(
            p["parameters"][at]["value"], 16) == n

    if n >= 2 and prims[-1].get("to_end") and prims[-2]["op"] == "exit" and not any(
            jumps_to_end(p) for p in prims):
        prims.pop()
    for p in prims:
        if p.pop("to_end", False):
            p["parameters"][0] = hexstr(len(prims))
