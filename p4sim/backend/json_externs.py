"""Extern instances in the BMv2 JSON (register/counter/meter arrays, direct resources bound to
tables, action profiles and selectors) and the named objects that calls create (hash and
checksum calculations, learn lists for digests, field lists for clone/resubmit/recirculate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.backend.naming import qualify
from p4sim.backend.refs import Json, ObjRef
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported

if TYPE_CHECKING:
    from p4sim.backend.context import LoweringContext
    from p4sim.backend.json_expr import ExprConverter


class ExternConverter:
    """Extern instances (registers, counters, meters, action profiles), hash calculations,
    field lists and digests."""

    def __init__(self, ctx: LoweringContext, exprs: ExprConverter) -> None:
        self.ctx, self.exprs = ctx, exprs
        self.register_arrays: list[Json] = []
        self.counter_arrays: list[Json] = []
        self.meter_arrays: list[Json] = []
        self.instances: list[tuple[str, A.Instance, dict[str, Any]]] = []
        self.direct_meter_targets: dict[str, Json] = {}
        self.action_profiles: dict[str, Json] = {}
        self.calculations: list[Json] = []
        self.learn_lists: list[Json] = []
        self.digests: dict[str, T.StructT] = {}
        self.field_lists: list[Json] = []
        # user metadata fields with @field_list(N...): set by the builder once laid out
        self.field_list_members: list[tuple[Json, set[int]]] = []

    # ---- extern instances -----------------------------------------------------------------
    def register_instance(self, inst: A.Instance, prefix: str) -> ObjRef:
        t = inst.rtype
        name = qualify(inst, prefix)
        if t.kind in ("control", "parser"):
            return ObjRef(t.kind, name, t.decl)
        ext = t.decl.name
        args = [a.expr for a in inst.args]
        consts = [a.const if a is not None else None for a in args]
        info: dict[str, Any] = {"type": ext}
        if ext == "register":
            width = T.bit_width(t.targs.get("T", T.BitT(32)))
            info.update(size=consts[0], bitwidth=width)
            self.register_arrays.append({"name": name, "id": len(self.register_arrays),
                                         "source_info": self.ctx.source_info(inst),
                                         "size": consts[0], "bitwidth": width})
        elif ext == "counter":
            info.update(size=consts[0], unit=consts[1][1])
            self.counter_arrays.append({"name": name, "id": len(self.counter_arrays),
                                        "source_info": self.ctx.source_info(inst),
                                        "size": consts[0], "is_direct": False})
        elif ext == "meter":
            info.update(size=consts[0], unit=consts[1][1])
            self.meter_arrays.append({"name": name, "id": len(self.meter_arrays),
                                      "source_info": self.ctx.source_info(inst),
                                      "is_direct": False, "size": consts[0], "rate_count": 2,
                                      "type": consts[1][1]})
        elif ext in ("direct_counter", "direct_meter"):
            info.update(unit=consts[0][1])
        elif ext == "action_profile":
            info.update(size=consts[0])
        elif ext == "action_selector":
            info.update(algo=consts[0][1], size=consts[1], output_width=consts[2])
        elif ext in ("Checksum16",):
            raise unsupported(inst.loc, "the deprecated Checksum16 extern")
        else:
            raise unsupported(inst.loc, f"extern {ext} on BMv2")
        self.instances.append((name, inst, info))
        return ObjRef("extern", name, t.decl, extra=info)

    def bind_direct(self, r: ObjRef, table: str, tj: Json) -> None:
        info = r.extra
        if info.get("binding"):
            raise CompileError(None, f"{r.name} is attached to two tables")
        info["binding"] = table
        if info["type"] == "direct_counter":
            self.counter_arrays.append({"name": r.name, "id": len(self.counter_arrays),
                                        "is_direct": True, "binding": table,
                                        "size": tj["max_size"]})
        else:
            self.meter_arrays.append({"name": r.name, "id": len(self.meter_arrays),
                                      "is_direct": True, "binding": table, "size": tj["max_size"],
                                      "rate_count": 2, "type": info["unit"],
                                      "result_target": self.direct_meter_targets.get(r.name,
                                                                                     {}).get(
                                          "value")})

    def direct_meter_read(self, r: ObjRef, target: Json, c: A.Call) -> None:
        prev = self.direct_meter_targets.get(r.name)
        if prev is not None and prev != target:
            raise unsupported(c.loc, f"reading direct meter {r.name} into two different fields")
        self.direct_meter_targets[r.name] = target

    def add_action_profile(self, prof: ObjRef, selector: list[Json], t: A.TableDecl) -> None:
        info = prof.extra
        info.setdefault("tables", []).append(t)
        if prof.name in self.action_profiles:
            return
        j: Json = {"name": prof.name, "id": len(self.action_profiles),
                   "max_size": info["size"]}
        if info["type"] == "action_selector":
            if not selector:
                raise CompileError(t.loc, f"table {t.name} uses action_selector {prof.name} but"
                                   " has no selector keys")
            j["selector"] = {"algo": info["algo"], "input": selector}
        self.action_profiles[prof.name] = j
        self.ctx.pipeline["action_profiles"].append(j)

    def add_calculation(self, algo: str, fields: list[Json], node: Any) -> str:
        n = len(self.calculations)
        name = "calc" if n == 0 else f"calc_{n - 1}"
        inputs = []
        for f in fields:
            if f.get("type") == "hexstr" and "bitwidth" not in f:
                f = dict(f, bitwidth=max(int(f["value"], 16).bit_length(), 1))
            inputs.append(f)
        self.calculations.append({"name": name, "id": n, "source_info": self.ctx.source_info(node),
                                  "algo": algo, "input": inputs})
        return name

    def add_learn_list(self, st: T.StructT, fields: list[Json], node: Any) -> int:
        for ll in self.learn_lists:
            if ll["name"] == st.name:
                return ll["id"]
        lid = len(self.learn_lists) + 1
        self.learn_lists.append({"id": lid, "name": st.name,
                                 "source_info": self.ctx.source_info(node), "elements": fields})
        self.digests[st.name] = st
        return lid

    def add_field_list(self, index_expr: Any, node: Any, fields: list[Json] | None = None
                       ) -> int:
        """A field list for clone/resubmit/recirculate. Ids start at 1 as p4c's: BMv2 reads
        id 0 as "not requested", so a resubmit with list 0 would not happen."""
        if fields is None and index_expr is not None:
            idx = self.exprs.const_int_of(index_expr)
            fields = [f for f, i in self.field_list_members if idx in i]
            name = f"field_list{idx}"
            for fl in self.field_lists:
                if fl["name"] == name:
                    return fl["id"]
        else:
            name = f"fl_{len(self.field_lists) + 1}"
        fid = len(self.field_lists) + 1
        self.field_lists.append({"id": fid, "name": name, "source_info": self.ctx.source_info(node),
                                 "elements": fields or []})
        return fid
