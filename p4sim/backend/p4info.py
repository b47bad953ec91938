"""P4Info for the compiled program, built with the p4runtime protobuf classes from the back
end's `ControlPlaneModel`, with p4c's order (by pipeline, then by place in the source), ids
and aliases (`p4info_ids`)."""

from __future__ import annotations

from typing import Any

from p4.config.v1 import p4info_pb2 as P

from p4sim.backend.model import ControlPlaneModel, InstanceModel, TableModel
from p4sim.backend.p4info_ids import IdAllocator, aliases
from p4sim.frontend import ast as A
from p4sim.frontend import types as T

MATCH = {"exact": P.MatchField.EXACT, "lpm": P.MatchField.LPM, "ternary": P.MatchField.TERNARY,
         "range": P.MatchField.RANGE, "optional": P.MatchField.OPTIONAL}

# Annotations the compiler consumes itself instead of passing them on in preambles.
_NOT_IN_P4INFO = frozenset({"name", "id", "hidden", "brief", "defaultonly", "tableonly",
                            "field_list", "alias", "max_group_size", "selector_size_semantics",
                            "max_member_weight"})

_COUNTABLE = ("register", "counter", "meter", "direct_counter", "direct_meter")
_UNITS = {"packets": 2, "bytes": 1, "packets_and_bytes": 3}


class P4InfoWriter:
    """Fills one P4Info message from the model, entity kind by entity kind."""

    def __init__(self, model: ControlPlaneModel) -> None:
        self.m = model
        self.info = P.P4Info()
        self.tables = sorted(model.tables, key=lambda t: model.place(t.decl, t.pipeline))
        self.actions = sorted(model.actions, key=lambda a: model.place(a.decl, a.pipeline))
        self.profiles = sorted((i for i in model.instances
                                if i.info["type"] in ("action_profile", "action_selector")),
                               key=lambda i: model.place(i.decl, 0)[1:])
        self.ids = IdAllocator()
        self.alias: dict[str, str] = {}

    def build(self) -> P.P4Info:
        info = self.info
        info.pkg_info.arch = "v1model"
        info.type_info.SetInParent()
        _pkg_info(info, self.m.main_annos)
        self.allocate_ids()
        for t in self.tables:
            self.add_table(t)
        for a in self.actions:
            self.add_action(a)
        for p in self.profiles:
            self.add_profile(p)
        for inst in self.m.instances:
            self.add_resource(inst)
        for d in self.m.controller_headers:
            self.add_controller_header(d)
        for name, vs in self.m.value_sets:
            self.add_value_set(name, vs)
        for name, st in self.m.digests.items():
            self.add_digest(name, st)
        return info

    def allocate_ids(self) -> None:
        ids = self.ids
        for t in self.tables:
            ids.add("table", t.name, t.decl.annos)
        for a in self.actions:
            ids.add("action", a.name, a.decl.annos)
        for p in self.profiles:
            ids.add("action_profile", p.name, p.decl.annos)
        for inst in self.m.instances:
            if self.in_p4info(inst):
                ids.add(inst.info["type"], inst.name, inst.decl.annos)
        for d in self.m.controller_headers:
            ids.add("controller_header", _controller_name(d), d.annos, hash_name=d.name)
        for name in self.m.digests:
            ids.add("digest", name)
        for name, vs in self.m.value_sets:
            ids.add("value_set", name, vs.annos)
        ids.assign()
        self.alias = aliases([name for _, name, _ in ids.wanted])

    @staticmethod
    def in_p4info(inst: InstanceModel) -> bool:
        kind = inst.info["type"]
        return kind in _COUNTABLE and (kind not in ("direct_counter", "direct_meter")
                                       or bool(inst.info.get("binding")))

    def preamble(self, msg: Any, kind: str, name: str,
                 annos: list[A.Annotation] | None = None) -> None:
        msg.preamble.id = self.ids(kind, name)
        msg.preamble.name = name
        msg.preamble.alias = self.alias.get(name, name)
        for a in annos or []:
            if a.name == "brief" and a.args:
                msg.preamble.brief = str(a.args[0])
            elif a.name not in _NOT_IN_P4INFO:
                msg.preamble.annotations.append(f"@{a.name}({a.body})" if a.body
                                                else f"@{a.name}")

    # ---- tables ---------------------------------------------------------------------------------
    def add_table(self, tm: TableModel) -> None:
        t, tj = tm.decl, tm.json
        m = self.info.tables.add()
        self.preamble(m, "table", tm.name, t.annos)
        self.add_match_fields(m, t)
        for aname in tj["actions"]:
            if aname in self.m.action_named:
                self.add_action_ref(m, t, aname)
        self.add_default_action(m, tm)
        if "action_profile" in tj:
            m.implementation_id = self.ids("action_profile", tj["action_profile"])
        for res, kind in (("counters", "direct_counter"), ("meters", "direct_meter")):
            if res in t.prop_map:
                rname = self.m.direct_resource(tm.name, kind)
                if rname:
                    m.direct_resource_ids.append(self.ids(kind, rname))
        m.size = tj["max_size"]
        if tj.get("support_timeout"):
            m.idle_timeout_behavior = P.Table.NOTIFY_CONTROL
        if t.entries:
            m.is_const_table = t.prop_map["entries"].const
            m.has_initial_entries = True

    def add_match_fields(self, m: Any, t: A.TableDecl) -> None:
        fid = 1
        for k in t.keys:
            if k.match_kind == "selector":
                continue
            mf = m.match_fields.add()
            mf.id = fid
            fid += 1
            a = A.anno(k.annos, "name")
            mf.name = a.args[0] if a and a.args else _key_name(k)
            mf.bitwidth = T.bit_width(k.expr.type)
            mf.match_type = MATCH[k.match_kind]
            nt = _key_newtype(k.expr)
            if nt is not None:
                mf.bitwidth = _new_type(self.info, nt, mf.bitwidth)
                mf.type_name.name = nt.name

    def add_action_ref(self, m: Any, t: A.TableDecl, aname: str) -> None:
        ref = m.action_refs.add()
        ref.id = self.ids("action", aname)
        decl = self.m.action_named[aname].decl
        entry = next((x for x in t.action_list or [] if x[0] is decl), None)
        annos = entry[2] if entry else []
        if A.anno(annos, "defaultonly"):
            ref.scope = P.ActionRef.DEFAULT_ONLY
            ref.annotations.append("@defaultonly")
        elif A.anno(annos, "tableonly"):
            ref.scope = P.ActionRef.TABLE_ONLY
            ref.annotations.append("@tableonly")

    def add_default_action(self, m: Any, tm: TableModel) -> None:
        dact, dcall, dconst = tm.decl.default
        dname = next((nm for nm in tm.json["actions"] if nm in self.m.action_named
                      and self.m.action_named[nm].decl is dact), None)
        if dname is None:
            return
        aid = self.ids("action", dname)
        if dconst:
            m.const_default_action_id = aid
        m.initial_default_action.action_id = aid
        if dcall is not None:
            data = [(p, a) for p, a in zip(dact.params, dcall.args) if not p.direction]
            for i, (p, a) in enumerate(data, 1):
                arg = m.initial_default_action.arguments.add()
                arg.param_id = i
                width = T.bit_width(p.rtype)
                arg.value = (_const_int(a.expr) & ((1 << width) - 1)).to_bytes(
                    (width + 7) // 8, "big")

    # ---- actions and profiles -------------------------------------------------------------------
    def add_action(self, am: Any) -> None:
        m = self.info.actions.add()
        self.preamble(m, "action", am.name, am.decl.annos)
        for i, (pname, width, p) in enumerate(am.params, 1):
            prm = m.params.add()
            pa = A.anno(p.annos, "id")
            prm.id = pa.args[0] if pa and pa.args else i
            prm.name = pname
            prm.bitwidth = width
            nt = _param_newtype(p)
            if nt is not None:
                prm.bitwidth = _new_type(self.info, nt, width)
                prm.type_name.name = nt.name

    def add_profile(self, p: InstanceModel) -> None:
        m = self.info.action_profiles.add()
        annos = p.decl.annos
        self.preamble(m, "action_profile", p.name, annos)
        users = {id(t) for t in p.info.get("tables", [])}
        for t in self.tables:  # already in p4c's order
            if id(t.decl) in users:
                m.table_ids.append(self.ids("table", t.name))
        m.with_selector = p.info["type"] == "action_selector"
        m.size = p.info["size"]
        mg = A.anno(annos, "max_group_size")
        if not m.with_selector:
            return
        if mg and mg.args:
            m.max_group_size = int(mg.args[0])
        sem = A.anno(annos, "selector_size_semantics")
        if sem and sem.args and sem.args[0] == "sum_of_members":
            m.sum_of_members.SetInParent()
            mw = A.anno(annos, "max_member_weight")
            if mw and mw.args:
                m.sum_of_members.max_member_weight = int(mw.args[0])
        elif mg or sem:  # p4c states the default semantics only next to a size annotation
            m.sum_of_weights.SetInParent()

    # ---- stateful resources, packet metadata, value sets, digests -------------------------------
    def add_resource(self, inst: InstanceModel) -> None:
        if not self.in_p4info(inst):
            return
        kind, inf, name, annos = inst.info["type"], inst.info, inst.name, inst.decl.annos
        m = getattr(self.info, kind + "s").add()
        self.preamble(m, kind, name, annos)
        if kind == "register":
            m.type_spec.bitstring.bit.bitwidth = inf["bitwidth"]
            m.size = inf["size"]
        elif kind in ("counter", "direct_counter"):
            m.spec.unit = _UNITS[inf["unit"]]
        else:
            m.spec.unit = 1 if inf["unit"] == "bytes" else 2
        if kind in ("counter", "meter"):
            m.size = inf["size"]
        elif kind in ("direct_counter", "direct_meter"):
            m.direct_table_id = self.ids("table", inf["binding"])

    def add_controller_header(self, d: A.HeaderDecl) -> None:
        cname = _controller_name(d)
        m = self.info.controller_packet_metadata.add()
        self.preamble(m, "controller_header", cname, d.annos)
        for i, fd in enumerate(d.fields, 1):
            md = m.metadata.add()
            md.id = i
            md.name = fd.name
            md.bitwidth = T.bit_width(d.rtype.fields[fd.name])
            nt = d.rtype.newtypes.get(fd.name)
            if nt is not None:
                md.bitwidth = _new_type(self.info, nt, md.bitwidth)
                md.type_name.name = nt.name

    def add_value_set(self, name: str, vs: A.ValueSetDecl) -> None:
        m = self.info.value_sets.add()
        self.preamble(m, "value_set", name, vs.annos)
        elem = vs.relem
        members = list(elem.fields.items()) if isinstance(elem, T.StructT) else [("", elem)]
        for i, (fname, ft) in enumerate(members, 1):
            mf = m.match.add()
            mf.id = i
            mf.name = fname
            mf.bitwidth = T.bit_width(ft)
            mf.match_type = P.MatchField.EXACT
        m.size = vs.rsize

    def add_digest(self, name: str, st: T.StructT) -> None:
        m = self.info.digests.add()
        self.preamble(m, "digest", name)
        m.type_spec.struct.name = name
        s = self.info.type_info.structs[name]
        for fname, ft in st.fields.items():
            mem = s.members.add()
            mem.name = fname
            mem.type_spec.bitstring.bit.bitwidth = T.bit_width(ft)


def build_p4info(model: ControlPlaneModel) -> P.P4Info:
    return P4InfoWriter(model).build()


def _controller_name(d: A.HeaderDecl) -> str:
    a = A.anno(d.annos, "controller_header")
    assert a is not None
    return str(a.args[0])


def _key_newtype(e: A.Expr) -> Any:
    if isinstance(e, A.Member) and isinstance(e.expr.type, T.StructT):
        return e.expr.type.newtypes.get(e.name)
    return None


def _param_newtype(p: A.Param) -> Any:
    ts = p.type_syntax
    d = getattr(ts, "decl", None)
    return d if isinstance(d, A.TypedefDecl) and d.newtype else None


def _new_type(info: P.P4Info, decl: A.TypedefDecl, width: int) -> int:
    """Record a `type` in type_info; returns the bitwidth the controller sees (translated
    types use their @p4runtime_translation width)."""
    entry = info.type_info.new_types[decl.name]
    a = A.anno(decl.annos, "p4runtime_translation")
    if a and a.args:
        entry.translated_type.uri = str(a.args[0])
        if len(a.args) >= 2 and a.args[1] == "string":
            entry.translated_type.sdn_string.SetInParent()
            return 0
        sdn = int(a.args[1]) if len(a.args) >= 2 and isinstance(a.args[1], int) else 32
        entry.translated_type.sdn_bitwidth = sdn
        return sdn
    entry.original_type.bitstring.bit.bitwidth = width
    return width


def _pairs(a: A.Annotation) -> list[tuple[str, Any]]:
    args = a.args
    return [(str(args[i]), args[i + 2]) for i in range(0, len(args) - 2, 3) if args[i + 1] == "="]


def _pkg_info(info: P.P4Info, annos: list[A.Annotation]) -> None:
    """@pkginfo(key = "value", ...) and @platform_property(key = N, ...) on `main`."""
    for a in annos:
        if a.name == "pkginfo":
            for k, v in _pairs(a):
                if k in ("name", "version", "arch", "organization", "contact", "url"):
                    setattr(info.pkg_info, k, str(v))
        elif a.name == "platform_property":
            props = info.pkg_info.platform_properties
            for k, v in _pairs(a):
                if k in props.DESCRIPTOR.fields_by_name and isinstance(v, int):
                    setattr(props, k, v)


def _const_int(e: Any) -> int:
    v = e.const
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, tuple):
        t = e.type
        return t.values[v[1]] if isinstance(t, T.EnumT) else 0
    return int(v)


def _key_name(k: A.KeyElement) -> str:
    from p4sim.backend.naming import expr_text
    return expr_text(k.expr)
