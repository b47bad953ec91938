"""P4Info for the compiled program, built with the p4runtime protobuf classes and p4c's
naming and ID scheme: id = resource-type prefix << 24 | (jenkins one-at-a-time hash of the
fully-qualified name & 0xffffff), collisions resolved by probing upwards in sorted-name order,
`@id` honored; alias = shortest unique dotted suffix."""

from __future__ import annotations

from typing import Any

from p4.config.v1 import p4info_pb2 as P

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError

PREFIX = {"action": P.P4Ids.ACTION, "table": P.P4Ids.TABLE, "value_set": P.P4Ids.VALUE_SET,
          "controller_header": P.P4Ids.CONTROLLER_HEADER,
          "action_profile": P.P4Ids.ACTION_PROFILE, "counter": P.P4Ids.COUNTER,
          "direct_counter": P.P4Ids.DIRECT_COUNTER, "meter": P.P4Ids.METER,
          "direct_meter": P.P4Ids.DIRECT_METER, "register": P.P4Ids.REGISTER,
          "digest": P.P4Ids.DIGEST}

MATCH = {"exact": P.MatchField.EXACT, "lpm": P.MatchField.LPM, "ternary": P.MatchField.TERNARY,
         "range": P.MatchField.RANGE, "optional": P.MatchField.OPTIONAL}


# Annotations the compiler consumes itself instead of passing them on in preambles.
_NOT_IN_P4INFO = frozenset({"name", "id", "hidden", "brief", "defaultonly", "tableonly",
                            "field_list", "alias", "max_group_size", "selector_size_semantics",
                            "max_member_weight"})


def jenkins_hash(name: str) -> int:
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class IdAllocator:
    def __init__(self) -> None:
        self.wanted: list[tuple[str, str, int | None]] = []
        self.ids: dict[tuple[str, str], int] = {}
        self.hash_names: dict[tuple[str, str], str] = {}

    def add(self, kind: str, name: str, annos: list[A.Annotation] | None = None,
            hash_name: str | None = None) -> None:
        if hash_name is not None:  # p4c hashes a controller header's type name, not its name
            self.hash_names[(kind, name)] = hash_name
        fixed = None
        a = A.anno(annos or [], "id")
        if a and a.args and isinstance(a.args[0], int):
            fixed = a.args[0]
            if fixed < (1 << 24):
                fixed |= PREFIX[kind] << 24
        self.wanted.append((kind, name, fixed))

    def assign(self) -> None:
        taken: set[int] = set()
        for kind, name, fixed in self.wanted:
            if fixed is not None:
                if fixed in taken:
                    raise CompileError(None, f"@id {fixed:#x} of {name} is already in use")
                taken.add(fixed)
                self.ids[(kind, name)] = fixed
        for kind, name, _ in sorted(w for w in self.wanted if w[2] is None):
            if (kind, name) in self.ids:
                continue
            v = jenkins_hash(self.hash_names.get((kind, name), name))
            while True:
                cand = (PREFIX[kind] << 24) | (v & 0xFFFFFF)
                if cand not in taken:
                    break
                v = (v + 1) & 0xFFFFFFFF
            taken.add(cand)
            self.ids[(kind, name)] = cand

    def __call__(self, kind: str, name: str) -> int:
        return self.ids[(kind, name)]


def aliases(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    parts = {n: n.split(".") for n in names}
    for n, p in parts.items():
        for k in range(1, len(p) + 1):
            suffix = ".".join(p[-k:])
            clash = any(m != n and (m == suffix or m.endswith("." + suffix)) for m in names)
            if not clash:
                out[n] = suffix
                break
        else:
            out[n] = n
    return out


def _annos_of(decl: Any) -> list[A.Annotation]:
    return list(getattr(decl, "annos", []) or [])


def build_p4info(b: Any) -> P.P4Info:
    info = P.P4Info()
    info.pkg_info.arch = "v1model"
    info.type_info.SetInParent()
    _pkg_info(info, b.checker.main.annos)
    ids = IdAllocator()
    # p4c's order: by pipeline (ingress, then egress), then by place in the source.

    files = {f: i for i, f in enumerate(b.sources)}

    def place(decl: Any, pipe: int) -> tuple[int, int, int, int]:
        loc = decl.loc
        return (pipe, files.get(loc.file, len(files)), loc.line, loc.col)

    tables = sorted(((n, t, env) for n, t, env in b.table_info
                     if n not in b.hidden_tables and not A.anno(t.annos, "hidden")),
                    key=lambda x: place(x[1], b.table_pipeline[x[0]]))
    unique = {a["name"]: a for a in reversed(b.actions_json)}  # one per name, the first
    actions = sorted((a for a in unique.values() if a["name"] not in b.hidden_actions
                      and not A.anno(_annos_of(b.action_decls.get(a["name"])), "hidden")),
                     key=lambda a: place(b.action_decls[a["name"]],
                                         b.action_pipeline[a["name"]]))
    inst = {name: (i, info_) for name, i, info_ in b.instances}
    profiles = sorted(((n, inst[n]) for n, _, inf in b.instances
                       if inf["type"] in ("action_profile", "action_selector")),
                      key=lambda x: (files.get(x[1][0].loc.file, 0), x[1][0].loc.line,
                                     x[1][0].loc.col))
    ctrl_headers = [d for d in b.prog.decls if isinstance(d, A.HeaderDecl)
                    and A.anno(d.annos, "controller_header")]
    for n, t, _ in tables:
        ids.add("table", n, _annos_of(t))
    for a in actions:
        ids.add("action", a["name"], _annos_of(b.action_decls.get(a["name"])))
    for n, (i, _) in profiles:
        ids.add("action_profile", n, i.annos)
    kinds = {"register": "register", "counter": "counter", "meter": "meter",
             "direct_counter": "direct_counter", "direct_meter": "direct_meter"}
    for name, i, inf in b.instances:
        if inf["type"] in kinds and (inf["type"] not in ("direct_counter", "direct_meter")
                                     or inf.get("binding")):
            ids.add(kinds[inf["type"]], name, i.annos)
    for d in ctrl_headers:
        ids.add("controller_header", str(A.anno(d.annos, "controller_header").args[0]),
                d.annos, hash_name=d.name)
    for name in b.digests:
        ids.add("digest", name)
    for name, vs in b.value_sets:
        ids.add("value_set", name, vs.annos)
    ids.assign()
    alias = aliases([name for _, name, _ in ids.wanted])

    def preamble(msg: Any, kind: str, name: str, annos: list[A.Annotation] | None = None
                 ) -> None:
        msg.preamble.id = ids(kind, name)
        msg.preamble.name = name
        msg.preamble.alias = alias.get(name, name)
        for a in annos or []:
            if a.name == "brief" and a.args:
                msg.preamble.brief = str(a.args[0])
            elif a.name not in _NOT_IN_P4INFO:
                msg.preamble.annotations.append(f"@{a.name}({a.body})" if a.body
                                                else f"@{a.name}")

    action_ids = {a["name"]: ids("action", a["name"]) for a in actions}
    for n, t, _env in tables:
        tj = next(x for x in _all_tables(b) if x["name"] == n)
        m = info.tables.add()
        preamble(m, "table", n, t.annos)
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
                mf.bitwidth = _new_type(info, nt, mf.bitwidth)
                mf.type_name.name = nt.name
        for aname in tj["actions"]:
            if aname not in action_ids:
                continue
            ref = m.action_refs.add()
            ref.id = action_ids[aname]
            decl = b.action_decls.get(aname)
            entry = next((x for x in t.action_list if x[0] is decl), None)
            annos = entry[2] if entry else []
            if A.anno(annos, "defaultonly"):
                ref.scope = P.ActionRef.DEFAULT_ONLY
                ref.annotations.append("@defaultonly")
            elif A.anno(annos, "tableonly"):
                ref.scope = P.ActionRef.TABLE_ONLY
                ref.annotations.append("@tableonly")
        dact, dcall, dconst = t.default
        dname = next((nm for nm in tj["actions"] if b.action_decls.get(nm) is dact), None)
        if dname in action_ids:
            if dconst:
                m.const_default_action_id = action_ids[dname]
            m.initial_default_action.action_id = action_ids[dname]
            if dcall is not None:
                data = [(p, a) for p, a in zip(dact.params, dcall.args) if not p.direction]
                for i, (p, a) in enumerate(data, 1):
                    arg = m.initial_default_action.arguments.add()
                    arg.param_id = i
                    width = T.bit_width(p.rtype)
                    arg.value = (_const_int(a.expr) & ((1 << width) - 1)).to_bytes(
                        (width + 7) // 8, "big")
        if "action_profile" in tj:
            m.implementation_id = ids("action_profile", tj["action_profile"])
        for res, kind in (("counters", "direct_counter"), ("meters", "direct_meter")):
            if res in t.prop_map:
                rname = _bound(b, n, kind)
                if rname:
                    m.direct_resource_ids.append(ids(kind, rname))
        m.size = tj["max_size"]
        if tj.get("support_timeout"):
            m.idle_timeout_behavior = P.Table.NOTIFY_CONTROL
        if t.entries:
            m.is_const_table = t.prop_map["entries"].const
            m.has_initial_entries = True
    for a in actions:
        m = info.actions.add()
        preamble(m, "action", a["name"], _annos_of(b.action_decls.get(a["name"])))
        for i, (pname, width, p) in enumerate(b.action_params.get(a["name"], []), 1):
            prm = m.params.add()
            pa = A.anno(p.annos, "id")
            prm.id = pa.args[0] if pa and pa.args else i
            prm.name = pname
            prm.bitwidth = width
            nt = _param_newtype(p)
            if nt is not None:
                prm.bitwidth = _new_type(info, nt, width)
                prm.type_name.name = nt.name
    for n, (i, inf) in profiles:
        m = info.action_profiles.add()
        preamble(m, "action_profile", n, i.annos)
        users = {id(t) for t in inf.get("tables", [])}
        for tn, t, _ in tables:  # already in p4c's order
            if id(t) in users:
                m.table_ids.append(ids("table", tn))
        m.with_selector = inf["type"] == "action_selector"
        m.size = inf["size"]
        mg = A.anno(i.annos, "max_group_size")
        if m.with_selector:
            if mg and mg.args:
                m.max_group_size = int(mg.args[0])
            sem = A.anno(i.annos, "selector_size_semantics")
            if sem and sem.args and sem.args[0] == "sum_of_members":
                m.sum_of_members.SetInParent()
                mw = A.anno(i.annos, "max_member_weight")
                if mw and mw.args:
                    m.sum_of_members.max_member_weight = int(mw.args[0])
            elif mg or sem:  # p4c states the default semantics only next to a size annotation
                m.sum_of_weights.SetInParent()
    units = {"packets": 2, "bytes": 1, "packets_and_bytes": 3}
    for name, i, inf in b.instances:
        kind = inf["type"]
        if kind == "register":
            m = info.registers.add()
            preamble(m, "register", name, i.annos)
            m.type_spec.bitstring.bit.bitwidth = inf["bitwidth"]
            m.size = inf["size"]
        elif kind == "counter":
            m = info.counters.add()
            preamble(m, "counter", name, i.annos)
            m.spec.unit = units[inf["unit"]]
            m.size = inf["size"]
        elif kind == "meter":
            m = info.meters.add()
            preamble(m, "meter", name, i.annos)
            m.spec.unit = 1 if inf["unit"] == "bytes" else 2
            m.size = inf["size"]
        elif kind == "direct_counter" and inf.get("binding"):
            m = info.direct_counters.add()
            preamble(m, "direct_counter", name, i.annos)
            m.spec.unit = units[inf["unit"]]
            m.direct_table_id = ids("table", inf["binding"])
        elif kind == "direct_meter" and inf.get("binding"):
            m = info.direct_meters.add()
            preamble(m, "direct_meter", name, i.annos)
            m.spec.unit = 1 if inf["unit"] == "bytes" else 2
            m.direct_table_id = ids("table", inf["binding"])
    for d in ctrl_headers:
        cname = str(A.anno(d.annos, "controller_header").args[0])
        m = info.controller_packet_metadata.add()
        preamble(m, "controller_header", cname, d.annos)
        for i, fd in enumerate(d.fields, 1):
            md = m.metadata.add()
            md.id = i
            md.name = fd.name
            md.bitwidth = T.bit_width(d.rtype.fields[fd.name])
            nt = d.rtype.newtypes.get(fd.name)
            if nt is not None:
                md.bitwidth = _new_type(info, nt, md.bitwidth)
                md.type_name.name = nt.name
    for name, vs in b.value_sets:
        m = info.value_sets.add()
        preamble(m, "value_set", name, vs.annos)
        elem = vs.relem
        members = list(elem.fields.items()) if isinstance(elem, T.StructT) else [("", elem)]
        for i, (fname, ft) in enumerate(members, 1):
            mf = m.match.add()
            mf.id = i
            mf.name = fname
            mf.bitwidth = T.bit_width(ft)
            mf.match_type = P.MatchField.EXACT
        m.size = vs.rsize
    for name, st in b.digests.items():
        m = info.digests.add()
        preamble(m, "digest", name)
        m.type_spec.struct.name = name
        s = info.type_info.structs[name]
        for fname, ft in st.fields.items():
            mem = s.members.add()
            mem.name = fname
            mem.type_spec.bitstring.bit.bitwidth = T.bit_width(ft)
    return info


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


def _all_tables(b: Any) -> list[dict[str, Any]]:
    return [t for p in b.pipelines_done for t in p["tables"]]


def _bound(b: Any, table: str, kind: str) -> str | None:
    for name, _, inf in b.instances:
        if inf["type"] == kind and inf.get("binding") == table:
            return name
    return None


def _key_name(k: A.KeyElement) -> str:
    from p4sim.backend.naming import expr_text
    return expr_text(k.expr)
