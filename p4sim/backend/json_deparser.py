"""Lowering the deparser (its emit() order) and the checksum controls (verify_checksum and
update_checksum calls) to BMv2 JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from p4sim.backend import refs as R
from p4sim.backend.json_actions import HASH_ALGOS
from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_externs import ExternConverter


class DeparserConverter:
    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, externs: ExternConverter
                 ) -> None:
        self.ctx, self.exprs, self.externs = ctx, exprs, externs

    def lower_deparser(self, decl: A.ControlDecl, env: Env) -> Json:
        order: list[str] = []
        for s, c in _calls_in(decl):
            if c is None or c.target[0] != "method" or c.target[2].name != "emit":
                raise unsupported(s.loc, "deparser statements other than emit()")
            arg = c.args[0].expr
            assert arg is not None
            self.emit_order(self.exprs.ref(arg, env), order, arg)
        return {"name": "deparser", "id": 0, "source_info": self.ctx.source_info(decl),
                "order": order, "primitives": []}

    def emit_order(self, r: R.Ref, order: list[str], e: A.Expr) -> None:
        if isinstance(r, R.HeaderRef):
            order.append(r.name)
        elif isinstance(r, R.StackRef):
            order.extend(r.elems)
        elif isinstance(r, R.UnionRef):
            order.extend(h.name for h in r.members.values())
        elif isinstance(r, R.UnionStackRef):
            for u in r.unions:
                order.extend(h.name for h in u.members.values())
        elif isinstance(r, R.StructRef):
            for sub in r.fields.values():
                self.emit_order(sub, order, e)
        else:
            raise CompileError(e.loc, "emit() needs a header, a header stack or a struct")

    def lower_checksums(self, decl: A.ControlDecl, env: Env, verify: bool,
                        out: list[Json]) -> None:
        for s, c in _calls_in(decl):
            name = c.target[1].name if c is not None and c.target[0] == "function" else ""
            want = "verify_checksum" if verify else "update_checksum"
            if c is None or name not in (want, want + "_with_payload"):
                raise unsupported(s.loc, f"statements other than {want}() in"
                                  f" {decl.name}")
            args = [a.expr for a in c.args]
            algo = args[3].const[1]  # type: ignore[union-attr]
            if algo not in ("csum16", "crc16", "crc32", "identity", "xor16"):
                raise unsupported(c.loc, f"checksum algorithm {algo}")
            fields = self.exprs.flatten(args[1], env)
            if any(f.get("type") in ("expression", "runtime_data") for f in fields):
                raise unsupported(c.loc, "computed values in a checksum's field list")
            if name.endswith("_with_payload"):
                fields = [*fields, {"type": "payload", "value": None}]
            calc = self.externs.add_calculation(HASH_ALGOS[algo], fields, c)
            tgt = self.exprs.ref(args[2], env)
            if not isinstance(tgt, R.FieldRef):
                raise CompileError(args[2].loc, "checksum target must be a field")
            cond = None if args[0].const is True else self.exprs.cond(args[0], env)
            n = len(out)
            out.append({"name": "cksum" if n == 0 else f"cksum_{n - 1}", "id": n,
                        "source_info": self.ctx.source_info(c), "target": tgt.json()["value"],
                        "type": "generic", "calculation": calc, "verify": verify,
                        "update": not verify, "if_cond": cond})


def _calls_in(decl: A.ControlDecl) -> list[tuple[A.Stmt, A.Call | None]]:
    """The statements of a deparser's or checksum control's body (empty ones left out), each
    with its call, or None for a statement that is no call."""
    assert decl.body is not None
    return [(s, s.call if isinstance(s, A.CallStmt) else None) for s in decl.body.stmts
            if not isinstance(s, A.EmptyStmt)]
