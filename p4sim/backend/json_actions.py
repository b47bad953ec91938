"""Lowering statements to BMv2 action primitives: assignments, header validity, stack
push/pop, v1model externs (registers, counters, meters, hash, random, clone, digest,
resubmit/recirculate, truncate, log_msg, assert/assume), `if` via _jump_if_zero, exit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.action_registry import ActionRegistry
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_calls import CallInliner
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_externs import ExternConverter
    from p4sim.backend.json_layout import StorageLayout

HASH_ALGOS = {"crc32": "crc32", "crc32_custom": "crc32_custom", "crc16": "crc16",
              "crc16_custom": "crc16_custom", "random": "random", "identity": "identity",
              "csum16": "csum16", "xor16": "xor16"}


class StraightLineStatements(A.NodeVisitor):
    """The statements an action and a parser state lower alike (assignments, locals, calls,
    empty statements), visited as `visit(stmt, env, out)`; a subclass says how an assignment
    and a call become its own operations (action primitives, parser ops)."""

    exprs: ExprConverter
    storage: StorageLayout

    def assign_slice(self, s: A.Assign, env: Env, out: list[Json]) -> None:
        raise NotImplementedError

    def assign_value(self, dst: R.Ref, rhs: A.Expr, env: Env, out: list[Json], node: Any
                     ) -> None:
        raise NotImplementedError

    def lower_call(self, c: A.Call, env: Env, out: list[Json]) -> None:
        raise NotImplementedError

    def visit_Assign(self, s: A.Assign, env: Env, out: list[Json]) -> None:
        if isinstance(s.lhs, A.Slice):
            self.assign_slice(s, env, out)
        else:
            self.assign_value(self.exprs.ref(s.lhs, env), s.rhs, env, out, s)

    def visit_VarDecl(self, s: A.VarDecl, env: Env, out: list[Json]) -> None:
        r = self.storage.declare_local(s, env)
        if s.init is not None:
            self.assign_value(r, s.init, env, out, s)

    def visit_CallStmt(self, s: A.CallStmt, env: Env, out: list[Json]) -> None:
        self.lower_call(s.call, env, out)

    def visit_EmptyStmt(self, s: A.EmptyStmt, env: Env, out: list[Json]) -> None:
        pass


class StatementConverter(StraightLineStatements):
    """Statements (and the externs they call) to action primitives."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, calls: CallInliner,
                 storage: StorageLayout, externs: ExternConverter) -> None:
        self.ctx, self.exprs, self.calls = ctx, exprs, calls
        self.storage, self.externs = storage, externs
        self.actions: ActionRegistry  # wired by the program builder (actions call actions)
        self.return_patches: list[list[Json]] = []  # per body: its `return` jumps
        self.loop_jumps: list[tuple[list[Json], list[Json]]] = []  # per loop: breaks, continues

    def stmts_to_prims(self, stmts: list[A.Stmt], env: Env, out: list[Json]) -> None:
        for s in stmts:
            self.stmt_to_prims(s, env, out)

    def body_to_prims(self, stmts: list[A.Stmt], env: Env, out: list[Json]) -> None:
        """An action or function body: `return` jumps past its last primitive."""
        self.return_patches.append([])
        self.stmts_to_prims(stmts, env, out)
        for jmp in self.return_patches.pop():
            jmp["parameters"][0] = R.hexstr(len(out))

    def stmt_to_prims(self, s: A.Stmt, env: Env, out: list[Json]) -> None:
        # Functions called inside the statement put their bodies just before it.
        self.calls.pre_prims.append(out)
        try:
            self.visit(s, env, out)
        finally:
            self.calls.pre_prims.pop()

    def generic_visit(self, node: A.Node, *args: Any) -> None:
        raise unsupported(node.loc, f"statement {type(node).__name__} in an action")

    def visit_Block(self, s: A.Block, env: Env, out: list[Json]) -> None:
        self.stmts_to_prims(s.stmts, Env(env), out)

    def assign_slice(self, s: A.Assign, env: Env, out: list[Json]) -> None:
        dst, value = self.slice_assign(s.lhs, s.rhs, env)  # type: ignore[arg-type]
        out.append(R.prim("assign", [dst, value], s, self.ctx.source_info))

    def assign_value(self, dst: R.Ref, rhs: A.Expr, env: Env, out: list[Json], node: Any
                     ) -> None:
        self.assign(dst, rhs, env, out, node)

    def lower_call(self, c: A.Call, env: Env, out: list[Json]) -> None:
        self.call_to_prims(c, env, out)

    def visit_If(self, s: A.If, env: Env, out: list[Json]) -> None:
        # Primitive index of the jump target is patched once the branch length is known.
        cond = R.b2d(self.exprs.cond(s.cond, env))
        jz = R.prim("_jump_if_zero", [cond, R.hexstr(0)], s.cond, self.ctx.source_info)
        out.append(jz)
        self.stmt_to_prims(s.then, Env(env), out)
        if s.other is not None:
            jmp = R.prim("_jump", [R.hexstr(0)])
            out.append(jmp)
            jz["parameters"][1] = R.hexstr(len(out))
            self.stmt_to_prims(s.other, Env(env), out)
            jmp["parameters"][0] = R.hexstr(len(out))
        else:
            jz["parameters"][1] = R.hexstr(len(out))

    def visit_Exit(self, s: A.Exit, env: Env, out: list[Json]) -> None:
        self.calls.copy_out_before_exit(out)
        out.append(R.prim("exit", [], s, self.ctx.source_info))
        out.append(dict(R.prim("_jump", [R.hexstr(0)]), to_end=True))  # see end_exits

    def visit_Return(self, s: A.Return, env: Env, out: list[Json]) -> None:
        if not self.return_patches:
            raise unsupported(s.loc, "'return' here")
        if s.value is not None:
            if not self.calls.fn_returns:
                raise unsupported(s.loc, "'return' with a value here")
            self.assign(self.calls.fn_returns[-1], s.value, env, out, s)
        jmp = R.prim("_jump", [R.hexstr(0)], s, self.ctx.source_info)
        self.return_patches[-1].append(jmp)
        out.append(jmp)

    def visit_Break(self, s: A.Break, env: Env, out: list[Json]) -> None:
        self.loop_jump(s, 0, out)

    def visit_Continue(self, s: A.Continue, env: Env, out: list[Json]) -> None:
        self.loop_jump(s, 1, out)

    def loop_jump(self, s: A.Stmt, kind: int, out: list[Json]) -> None:
        """A jump patched when the loop is done: kind 0 to its end, 1 to its updates."""
        jmp = R.prim("_jump", [R.hexstr(0)], s, self.ctx.source_info)
        self.loop_jumps[-1][kind].append(jmp)
        out.append(jmp)

    def visit_Switch(self, s: A.Switch, env: Env, out: list[Json]) -> None:
        raise unsupported(s.loc, "'switch' inside an action")

    def visit_For(self, s: A.For, env: Env, out: list[Json]) -> None:
        """A loop in an action is primitives with jumps back (BMv2 actions are straight-line
        programs with `_jump` and `_jump_if_zero`)."""
        inner = Env(env)
        self.stmts_to_prims(s.init, inner, out)
        top = len(out)
        exit_jump = None
        if s.cond is not None:
            cond = R.b2d(self.exprs.cond(s.cond, inner))
            exit_jump = R.prim("_jump_if_zero", [cond, R.hexstr(0)], s.cond,
                               self.ctx.source_info)
            out.append(exit_jump)
        self.loop_jumps.append(([], []))
        try:
            self.stmt_to_prims(s.body, Env(inner), out)
        finally:
            breaks, continues = self.loop_jumps.pop()
        for jmp in continues:
            jmp["parameters"][0] = R.hexstr(len(out))
        self.stmts_to_prims(s.updates, inner, out)
        out.append(R.prim("_jump", [R.hexstr(top)], s, self.ctx.source_info))
        for jmp in breaks:
            jmp["parameters"][0] = R.hexstr(len(out))
        if exit_jump is not None:
            exit_jump["parameters"][1] = R.hexstr(len(out))

    # ---- assignment ---------------------------------------------------------------------------
    def slice_assign(self, lhs: A.Slice, rhs: A.Expr, env: Env) -> tuple[Json, Json]:
        return self.slice_store(lhs, self.exprs.data(rhs, env), env)

    def slice_store(self, lhs: A.Slice, value: Json, env: Env) -> tuple[Json, Json]:
        """`f[hi:lo] = v` writes the whole field: (f & ~m) | ((v << lo) & m)."""
        lo = 0
        target: A.Expr = lhs
        while isinstance(target, A.Slice):  # nested slices add up their offsets
            lo += target.lo.const
            target = target.expr
        width = lhs.hi.const - lhs.lo.const + 1
        r = self.exprs.ref(target, env)
        if not isinstance(r, R.LEAF) or isinstance(r, R.DataRef):
            raise CompileError(lhs.loc, "cannot assign to this expression")
        fw = T.bit_width(target.type)
        mask = ((1 << width) - 1) << lo
        keep = R.expr("&", r.json(), R.hexstr(((1 << fw) - 1) & ~mask, fw))
        if lo:
            value = R.expr("<<", value, R.hexstr(lo, 8))
        new = R.expr("|", keep, R.expr("&", value, R.hexstr(mask, fw)))
        return r.json(), new

    def assign(self, dst: R.Ref, rhs: A.Expr, env: Env, out: list[Json], node: Any) -> None:
        if isinstance(dst, R.LEAF) and not isinstance(dst, R.DataRef):
            op = "assign_VL" if isinstance(dst.type, T.VarbitT) else "assign"
            out.append(R.prim(op, [dst.json(), self.exprs.data(rhs, env)], node,
                              self.ctx.source_info))
            return
        if isinstance(dst, (R.HeaderRef, R.DynElemRef)):
            if isinstance(rhs, (A.ListExpr, A.StructInit)) and isinstance(dst, R.HeaderRef):
                # a header from a list or struct initializer: valid, then field by field
                out.append(R.prim("add_header", [dst.json()], node, self.ctx.source_info))
                items = (rhs.items if isinstance(rhs, A.ListExpr)
                         else [fe for _, fe in sorted(rhs.fields, key=lambda f: list(
                             dst.type.fields).index(f[0]))])
                for fname, item in zip(dst.type.fields, items):
                    self.assign(R.FieldRef(dst.name, fname, dst.type.fields[fname]), item, env,
                                out, node)
                return
            if isinstance(rhs, (A.ListExpr, A.StructInit)):
                raise unsupported(rhs.loc, "assigning a list to a header stack element")
            src = self.exprs.ref(rhs, env)
            out.append(R.prim("assign_header", [dst.json(), src.json()], node,
                              self.ctx.source_info))
            return
        if isinstance(dst, R.UnionRef):
            src = self.exprs.ref(rhs, env)
            out.append(R.prim("assign_union", [dst.json(), src.json()], node, self.ctx.source_info))
            return
        if isinstance(dst, R.StackRef):
            src = self.exprs.ref(rhs, env)
            out.append(R.prim("assign_header_stack", [dst.json(), src.json()], node,
                              self.ctx.source_info))
            return
        if isinstance(dst, R.StructRef):
            if isinstance(rhs, A.StructInit):
                for name, fe in rhs.fields:
                    self.assign(dst.fields[name], fe, env, out, node)
                return
            if isinstance(rhs, A.ListExpr):
                for sub, fe in zip(dst.fields.values(), rhs.items):
                    self.assign(sub, fe, env, out, node)
                return
            src = self.exprs.ref(rhs, env)
            if not isinstance(src, R.StructRef):
                raise unsupported(rhs.loc, "this struct-valued expression")
            for name, sub in dst.fields.items():
                self.assign_ref(sub, src.fields[name], out, node)
            return
        raise CompileError(node.loc, "cannot assign to this expression")

    def assign_ref(self, dst: R.Ref, src: R.Ref, out: list[Json], node: Any) -> None:
        if isinstance(dst, R.StructRef):
            assert isinstance(src, R.StructRef)
            for name, sub in dst.fields.items():
                self.assign_ref(sub, src.fields[name], out, node)
        elif isinstance(dst, (R.HeaderRef, R.DynElemRef)):
            out.append(R.prim("assign_header", [dst.json(), src.json()], node,
                              self.ctx.source_info))
        elif isinstance(dst, R.StackRef):
            out.append(R.prim("assign_header_stack", [dst.json(), src.json()], node,
                              self.ctx.source_info))
        else:
            out.append(R.prim("assign", [dst.json(), src.json()], node, self.ctx.source_info))

    # ---- calls --------------------------------------------------------------------------------
    def call_to_prims(self, c: A.Call, env: Env, out: list[Json]) -> None:
        tgt = c.target
        kind = tgt[0]
        si = self.ctx.source_info
        if kind == "builtin":
            name, base = tgt[1], tgt[2]
            r = self.exprs.ref(base, env)
            if name in ("setValid", "setInvalid"):
                out.append(R.prim("add_header" if name == "setValid" else "remove_header",
                                  [r.json()], c, si))
            elif name in ("push_front", "pop_front"):
                out.append(R.prim("push" if name == "push_front" else "pop",
                                  [r.json(), R.hexstr(tgt[3])], c, si))
            else:
                raise unsupported(c.loc, f"{name}() as a statement")
            return
        if kind == "action":
            self.inline_action(c, tgt[1], env, out)
            return
        if kind == "function":
            fn = tgt[1]
            if fn.body is None:
                self.extern_function(c, fn, tgt[2], env, out)
            else:
                self.inline_void_function(c, fn, env, out)
            return
        if kind == "method":
            self.extern_method(c, tgt[1], tgt[2], env, out)
            return
        raise unsupported(c.loc, f"{kind} call here")

    def inline_action(self, c: A.Call, act: A.ActionDecl, env: Env, out: list[Json]) -> None:
        self.calls.inline_call(c, act, env, out)

    def inline_void_function(self, c: A.Call, fn: A.FunctionDecl, env: Env,
                             out: list[Json]) -> None:
        self.calls.inline_call(c, fn, env, out, fn.rret)

    def arg(self, c: A.Call, i: int) -> A.Expr:
        e = c.args[i].expr
        if e is None:
            raise unsupported(c.loc, "'_' arguments to externs")
        return e

    def field_arg(self, c: A.Call, i: int, env: Env) -> Json:
        r = self.exprs.ref(self.arg(c, i), env)
        if not isinstance(r, R.LEAF) or isinstance(r, R.DataRef):
            raise CompileError(c.args[i].loc, "expected a field to write the result to")
        return r.json()

    def extern_function(self, c: A.Call, fn: A.FunctionDecl, bind: dict[str, T.Type],
                        env: Env, out: list[Json]) -> None:
        n = fn.name
        si = self.ctx.source_info
        if n == "mark_to_drop":
            if c.args:
                out.append(R.prim("mark_to_drop", [{"type": "header",
                                                    "value": "standard_metadata"}], c, si))
            else:  # the deprecated argument-less form is BMv2's legacy `drop`
                out.append(R.prim("drop", [], c, si))
        elif n == "hash":
            algo = self.enum_member(self.arg(c, 1))
            inputs = []
            for j in self.exprs.flatten(self.arg(c, 3), env):
                if j.get("type") in ("expression", "runtime_data"):
                    # BMv2 hashes fields and constants only: compute into a temporary first
                    tmp = self.storage.alloc_temp(j.pop("bitwidth"), env, "hash_in")
                    out.append(R.prim("assign", [tmp.json(), j], c, si))
                    j = tmp.json()
                inputs.append(j)
            calc = self.externs.add_calculation(HASH_ALGOS[algo], inputs, c)
            out.append(R.prim("modify_field_with_hash_based_offset",
                              [self.field_arg(c, 0, env), self.exprs.data(self.arg(c, 2), env),
                               {"type": "calculation", "value": calc},
                               self.exprs.data(self.arg(c, 4), env)], c, si))
        elif n == "random":
            out.append(R.prim("modify_field_rng_uniform",
                              [self.field_arg(c, 0, env), self.exprs.data(self.arg(c, 1), env),
                               self.exprs.data(self.arg(c, 2), env)], c, si))
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            ctype = self.enum_member(self.arg(c, 0))
            op = ("clone_ingress_pkt_to_egress" if ctype == "I2E"
                  else "clone_egress_pkt_to_egress")
            if n == "clone_preserving_field_list":
                fl = self.externs.add_field_list(self.arg(c, 2), c)
            elif n == "clone3":
                fl = self.add_field_list_from(self.exprs.flatten(self.arg(c, 2), env), c)
            else:  # p4c gives a plain clone an empty list of its own
                fl = self.add_field_list_from([], c)
            out.append(R.prim(op, [self.exprs.data(self.arg(c, 1), env), R.hexstr(fl)], c, si))
        elif n in ("resubmit_preserving_field_list", "recirculate_preserving_field_list",
                   "resubmit", "recirculate"):
            op = "resubmit" if n.startswith("resubmit") else "recirculate"
            if n.endswith("field_list"):
                fl = self.externs.add_field_list(self.arg(c, 0), c)
            else:
                fl = self.add_field_list_from(self.exprs.flatten(self.arg(c, 0), env), c)
            out.append(R.prim(op, [R.hexstr(fl)], c, si))
        elif n == "digest":
            data = self.arg(c, 1)
            if not isinstance(data.type, T.StructT):
                raise unsupported(data.loc, "digest of a value that is not a struct")
            lid = self.externs.add_learn_list(data.type, self.exprs.flatten(data, env), c)
            receiver = self.exprs.data(self.arg(c, 0), env)
            out.append(R.prim("generate_digest", [receiver, R.hexstr(lid)], c, si))
        elif n == "truncate":
            out.append(R.prim("truncate", [self.exprs.data(self.arg(c, 0), env)], c, si))
        elif n in ("assert", "assume"):
            out.append(R.prim(n, [self.exprs.cond(self.arg(c, 0), env)], c, si))
        elif n == "log_msg":
            s = self.arg(c, 0)
            assert isinstance(s, A.StrLit)
            vals = self.exprs.flatten(self.arg(c, 1), env) if len(c.args) > 1 else []
            out.append(R.prim("log_msg", [{"type": "string", "value": s.value},
                                          {"type": "parameters_vector", "value": vals}], c, si))
        elif n in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                   "update_checksum_with_payload"):
            raise unsupported(c.loc, f"{n} outside the checksum controls")
        elif n == "verify":
            raise CompileError(c.loc, "verify() may only be called in a parser")
        elif n == "static_assert":
            pass  # already checked while type checking
        else:
            raise unsupported(c.loc, f"extern function {n}")

    def add_field_list_from(self, fields: list[Json], c: A.Call) -> int:
        return self.externs.add_field_list(None, c, fields)

    def enum_member(self, e: A.Expr) -> str:
        v = e.const
        if not isinstance(v, tuple):
            raise CompileError(e.loc, "expected an enum constant")
        return v[1]

    def extern_method(self, c: A.Call, inst: A.Expr, m: A.MethodDecl, env: Env,
                      out: list[Json]) -> None:
        r = self.exprs.ref(inst, env)
        if not isinstance(r, R.ObjRef):
            raise unsupported(c.loc, "method call on this expression")
        ext = r.decl.name if isinstance(r.decl, A.ExternDecl) else r.kind
        si = self.ctx.source_info
        name = m.name
        if ext == "register":
            ra = {"type": "register_array", "value": r.name}
            if name == "read":
                out.append(R.prim("register_read", [self.field_arg(c, 0, env), ra,
                                                    self.exprs.data(self.arg(c, 1), env)], c, si))
            else:
                out.append(R.prim("register_write", [ra, self.exprs.data(self.arg(c, 0), env),
                                                     self.exprs.data(self.arg(c, 1), env)], c, si))
        elif ext == "counter":
            out.append(R.prim("count", [{"type": "counter_array", "value": r.name},
                                        self.exprs.data(self.arg(c, 0), env)], c, si))
        elif ext == "direct_counter":
            pass  # direct counters count on every hit of their table
        elif ext == "meter":
            out.append(R.prim("execute_meter", [{"type": "meter_array", "value": r.name},
                                                self.exprs.data(self.arg(c, 0), env),
                                                self.field_arg(c, 1, env)], c, si))
        elif ext == "direct_meter":
            self.externs.direct_meter_read(r, self.field_arg(c, 0, env), c)
        elif ext in ("packet_in", "packet_out"):
            raise CompileError(c.loc, f"{ext}.{name}() may only be used in a parser/deparser")
        else:
            raise unsupported(c.loc, f"extern {ext}.{name}")

