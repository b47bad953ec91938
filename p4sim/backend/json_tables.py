"""Lowering tables to BMv2: the table applied (its actions, bound directional arguments,
next tables), its keys (computed ones in temporaries, as p4c), and its entries in the
program."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend import refs as R
from p4sim.backend.json_expr import Env
from p4sim.backend.naming import expr_text
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.action_registry import ActionRegistry
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_expr import ExprConverter
    from p4sim.backend.json_externs import ExternConverter
    from p4sim.backend.json_layout import StorageLayout


class TableConverter:
    """Tables: keys, actions, default and const entries, selectors and direct resources."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter, storage: StorageLayout,
                 externs: ExternConverter, actions: ActionRegistry) -> None:
        self.ctx, self.exprs, self.storage = ctx, exprs, storage
        self.externs, self.actions = externs, actions
        self.tables_applied: dict[str, A.TableDecl] = {}
        self.table_info: list[tuple[str, A.TableDecl, Env]] = []
        self.table_pipeline: dict[str, int] = {}
        self.hidden_tables: set[str] = set()  # tables p4sim made up (P4Info leaves them out)

    # ---- tables -------------------------------------------------------------------------------
    def ref_table(self, call: A.Call, env: Env) -> R.ObjRef:
        base = call.func.expr  # type: ignore[attr-defined]
        r = self.exprs.ref(base, env)
        assert isinstance(r, R.ObjRef)
        return r

    def table_action(self, act: A.ActionDecl, acall: A.Call | None, tref: R.ObjRef,
                     env: Env) -> tuple[str, int]:
        aenv = self.actions.env_of(act, env)
        bound: list[Any] = []
        if acall is not None:
            for a, p in zip(acall.args, act.params):
                if p.direction:
                    assert a.expr is not None
                    bound.append((p, self.exprs.ref(a.expr, env)))
        return self.actions.action_for(act, aenv, bound)

    def apply_table(self, call: A.Call, env: Env, nt: dict[str, str | None], nxt: str | None,
                    hitmiss: bool = False) -> str:
        tref = self.ref_table(call, env)
        t: A.TableDecl = tref.decl
        if tref.name in self.tables_applied:
            raise unsupported(call.loc, f"table {tref.name} applied more than once")
        self.tables_applied[tref.name] = t
        actions = [self.table_action(a, c, tref, env) for a, c, _ in t.action_list]
        names = [n for n, _ in actions]
        next_tables = nt if hitmiss else {n: nt.get(n, nxt) for n in names}
        pre: list[Json] = []
        keys, selector_inputs = self.table_keys(t, env, pre)
        kinds = {k["match_type"] for k in keys}
        mt = ("range" if "range" in kinds else "ternary" if kinds & {"ternary", "optional"}
              else "lpm" if "lpm" in kinds else "exact")
        j: Json = {"name": tref.name, "id": self.ctx.next_table_id(),
                   "source_info": self.ctx.source_info(t), "key": keys, "match_type": mt,
                   "type": "simple", "max_size": t.size if t.size is not None else 1024,
                   "with_counters": False, "support_timeout": False, "direct_meters": None,
                   "action_ids": [i for _, i in actions], "actions": names,
                   "base_default_next": nxt, "next_tables": next_tables}
        props = t.prop_map
        if "support_timeout" in props:
            j["support_timeout"] = bool(props["support_timeout"].value.const)
        if "implementation" in props:
            prof = self.exprs.ref(props["implementation"].value, env)
            assert isinstance(prof, R.ObjRef)
            self.externs.add_action_profile(prof, selector_inputs, t)
            j["type"] = "indirect_ws" if prof.decl.name == "action_selector" else "indirect"
            j["action_profile"] = prof.name
        elif selector_inputs:
            raise CompileError(t.loc, f"table {t.name} has selector keys but no"
                               " implementation")
        if "counters" in props:
            cref = self.exprs.ref(props["counters"].value, env)
            assert isinstance(cref, R.ObjRef)
            self.externs.bind_direct(cref, tref.name, j)
            j["with_counters"] = True
        if "meters" in props:
            mref = self.exprs.ref(props["meters"].value, env)
            assert isinstance(mref, R.ObjRef)
            self.externs.bind_direct(mref, tref.name, j)
            j["direct_meters"] = mref.name
        dact, dcall, dconst = t.default
        did = dict(zip([a for a, _, _ in t.action_list], actions))
        __, daid = did.get(dact) or self.table_action(dact, dcall, tref, env)
        data = []
        if dcall is not None:
            data = [R.hex_padded(self.exprs.const_int_of(a.expr), T.bit_width(p.rtype))
                    for a, p in zip(dcall.args, dact.params) if not p.direction]
        if j["type"] == "simple":
            j["default_entry"] = {"action_id": daid, "action_const": bool(dconst),
                                  "action_data": data, "action_entry_const": bool(dconst)}
        if t.entries:
            j["entries"] = self.table_entries(t, did)
        self.ctx.pipeline["tables"].append(j)
        self.table_info.append((tref.name, t, env))
        self.table_pipeline[tref.name] = self.ctx.pipeline["id"]
        if pre:  # computed keys: p4c-style temporaries set by a hidden action just before
            aname = self.ctx.unique_action("act")
            aid = self.actions.add_action_json(aname, [], pre, t)
            self.actions.hidden_actions.add(aname)
            return self.dummy_table(self.ctx.unique_table("tbl_" + aname), aname, aid, [],
                                    tref.name, t)
        return tref.name

    def dummy_table(self, tname: str, aname: str, aid: int, data: list[str], nxt: str | None,
                    node: Any) -> str:
        self.hidden_tables.add(tname)
        self.ctx.pipeline["tables"].append({
            "name": tname, "id": self.ctx.next_table_id(),
            "source_info": self.ctx.source_info(node),
            "key": [], "match_type": "exact", "type": "simple", "max_size": 1024,
            "with_counters": False, "support_timeout": False, "direct_meters": None,
            "action_ids": [aid], "actions": [aname], "base_default_next": nxt,
            "next_tables": {aname: nxt},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": data,
                              "action_entry_const": True}})
        return tname

    def table_keys(self, t: A.TableDecl, env: Env, pre: list[Json]
                   ) -> tuple[list[Json], list[Json]]:
        keys: list[Json] = []
        selector: list[Json] = []
        for k in t.keys:
            a = A.anno(k.annos, "name")
            name = a.args[0] if a and a.args else expr_text(k.expr)
            e, mask = k.expr, None
            if isinstance(e, A.Binary) and e.op == "&" and isinstance(
                    e.right.const, int) and isinstance(e.left, A.Member):
                # `field & constant`: BMv2 applies the constant as the key's mask
                mask = R.hex_padded(e.right.const, T.bit_width(e.left.type))
                e = e.left
            # a slice key is computed into a temporary (as p4c does), so the key's value is
            # the slice itself, not the field under a mask
            valid_of = (self.exprs.ref(e.target[2], env) if isinstance(e, A.Call) and e.target
                        and e.target[:2] == ("builtin", "isValid") else None)
            if isinstance(valid_of, R.HeaderRef):
                target: Json = {"type": "field", "value": [valid_of.name, "$valid$"]}
            else:
                r = self.exprs.ref(e, env) if isinstance(e, (A.Name, A.Member, A.Index)) else None
                if not isinstance(r, R.FieldRef):
                    if mask is not None:  # the slice's base is itself computed
                        e, mask = k.expr, None
                    tmp = self.storage.alloc_temp(T.bit_width(e.type), env, "key")
                    pre.append(R.prim("assign", [tmp.json(), self.exprs.data(e, env)], k,
                                      self.ctx.source_info))
                    r = tmp
                target = r.json()
            if k.match_kind == "selector":
                selector.append(target)
                continue
            if k.match_kind not in ("exact", "lpm", "ternary", "range", "optional"):
                raise unsupported(k.mk_loc, f"match kind '{k.match_kind}' on BMv2")
            # BMv2 has no optional match: p4c declares such a key ternary (P4Info keeps
            # OPTIONAL; PI maps its values to ternary ones). p4sim's switch has an optional
            # match, kept for tables filled at run time; a table with entries in the program
            # gets p4c's shape, since only a ternary entry can say `_`
            mt = "ternary" if k.match_kind == "optional" and t.entries else k.match_kind
            keys.append({"match_type": mt, "name": name, "target": target["value"],
                         "mask": mask})
        return keys, selector

    def table_entries(self, t: A.TableDecl, did: dict[Any, tuple[str, int]]) -> list[Json]:
        out: list[Json] = []
        explicit = [e.prio for e in t.entries if e.prio is not None]
        top = max(explicit) if explicit else 0
        for i, ent in enumerate(t.entries):
            mk: list[Json] = []
            for kv, k in zip(ent.keys, t.keys):
                mk.append(entry_key(kv, k))
            act = ent.act
            _aname, aid = did[act]
            data = []
            if isinstance(ent.action, A.Call):
                data = [R.hex_padded(self.exprs.const_int_of(a.expr), T.bit_width(p.rtype))
                        for a, p in zip(ent.action.args, act.params) if not p.direction]
            prio = (top + 1 - ent.prio if ent.prio is not None else
                    ent.raw_prio if ent.raw_prio is not None else i + 1)
            out.append({"source_info": self.ctx.source_info(ent), "match_key": mk,
                        "action_entry": {"action_id": aid, "action_data": data},
                        "priority": prio})
        return out


def entry_key(kv: A.Expr, k: A.KeyElement) -> Json:
    kt = k.expr.type
    w = T.bit_width(kt)
    full = (1 << w) - 1
    mkind = k.match_kind

    def val(e: A.Expr) -> int:
        v = e.const
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, tuple):
            et = e.type if isinstance(e.type, T.EnumT) else kt
            if isinstance(et, T.EnumT):
                return et.values[v[1]] & full
            raise CompileError(e.loc, "unsupported: error constants as table key values")
        return v & full

    if mkind == "exact":
        return {"match_type": "exact", "key": R.hex_padded(val(kv), w)}
    if mkind == "range":
        if isinstance(kv, A.DefaultExpr):
            return {"match_type": "range", "start": R.hex_padded(0, w),
                    "end": R.hex_padded(full, w)}
        if isinstance(kv, A.Binary) and kv.op == "..":
            return {"match_type": "range", "start": R.hex_padded(val(kv.left), w),
                    "end": R.hex_padded(val(kv.right), w)}
        return {"match_type": "range", "start": R.hex_padded(val(kv), w),
                "end": R.hex_padded(val(kv), w)}
    if isinstance(kv, A.DefaultExpr):
        value, mask = 0, 0
    elif isinstance(kv, A.Binary) and kv.op == "&&&":
        value, mask = val(kv.left), val(kv.right)
    else:
        value, mask = val(kv), full
    if mkind == "lpm":
        plen = bin(mask).count("1")
        if mask != ((full >> (w - plen)) << (w - plen) if plen else 0):
            raise CompileError(kv.loc, "lpm entry mask must be a prefix")
        return {"match_type": "lpm", "key": R.hex_padded(value & mask, w), "prefix_length": plen}
    # an optional key's entry is a ternary one (p4c's JSON): `_` is mask 0, a value mask ~0
    return {"match_type": "ternary" if mkind in ("ternary", "optional") else mkind,
            "key": R.hex_padded(value & mask, w), "mask": R.hex_padded(mask, w)}

