"""An index of one P4Info (ids -> objects) plus the few facts the server needs from the BMv2
JSON: the order of each table's key fields and of each action's parameters in the JSON, since
the data-plane contract takes values in JSON order while P4Runtime addresses them by P4Info id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2

from .codec import UNKNOWN, P4RTError

Prefix = p4info_pb2.P4Ids
MatchType = p4info_pb2.MatchField

# The last few device configs parsed, for the two read-only readers below: a simulated fabric
# pushes one JSON to every switch, and parsing it twice per switch was 2 of k=8's set-up
# seconds. Looked up by the bytes themselves (equal bytes, equal document).
_DOCS: dict[bytes, object] = {}
_NOT_JSON = object()


def _json_doc(bmv2_json: bytes | str) -> object:
    """The parsed JSON (shared: callers only read it), or _NOT_JSON."""
    key = bmv2_json if isinstance(bmv2_json, bytes | str) else bytes(bmv2_json)
    doc = _DOCS.get(key)
    if doc is None:
        try:
            doc = json.loads(key)
        except (ValueError, UnicodeDecodeError):
            doc = _NOT_JSON
        if len(_DOCS) >= 4:
            _DOCS.clear()
        _DOCS[key] = doc
    return doc


@dataclass
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int


@dataclass
class TableInfo:
    id: int
    name: str
    match_fields: list[MatchFieldInfo]
    action_scopes: dict[int, int]  # action id -> ActionRef scope
    const_default_action_id: int
    implementation_id: int
    direct_counter_id: int = 0
    direct_meter_id: int = 0
    supports_idle_timeout: bool = False
    # json_key_order[i] = index into match_fields of the i-th key field in the JSON table
    json_key_order: list[int] = field(default_factory=list)

    @property
    def needs_priority(self) -> bool:
        kinds = (MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL)
        return any(mf.match_type in kinds for mf in self.match_fields)

    def field(self, field_id: int) -> MatchFieldInfo | None:
        for mf in self.match_fields:
            if mf.id == field_id:
                return mf
        return None


@dataclass
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass
class ActionInfo:
    id: int
    name: str
    params: list[ParamInfo]
    json_param_order: list[int] = field(default_factory=list)  # indices into params


@dataclass
class ProfileInfo:
    id: int
    name: str
    table_ids: list[int]
    with_selector: bool
    size: int
    max_group_size: int


@dataclass
class ResourceInfo:
    """Counter, meter or register array (indirect or direct)."""

    id: int
    name: str
    size: int = 0
    unit: int = 0
    table_id: int = 0  # for direct resources
    bitwidth: int = 0  # for registers


@dataclass
class DigestInfo:
    id: int
    name: str
    kind: str  # "bitstring", "struct" or "tuple"
    bitwidths: list[int]


@dataclass
class ControllerHeader:
    id: int
    name: str
    fields: list[tuple[int, str, int]]  # (metadata id, name, bitwidth) in P4Info order


class PipelineInfo:
    """Read-only view of one P4Info; construction fails with UNKNOWN as PI's P4Info import does."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.proto = p4info
        self.ids: dict[int, str] = {}
        self.tables: dict[int, TableInfo] = {}
        self.actions: dict[int, ActionInfo] = {}
        self.profiles: dict[int, ProfileInfo] = {}
        self.counters: dict[int, ResourceInfo] = {}
        self.direct_counters: dict[int, ResourceInfo] = {}
        self.meters: dict[int, ResourceInfo] = {}
        self.direct_meters: dict[int, ResourceInfo] = {}
        self.registers: dict[int, ResourceInfo] = {}
        self.digests: dict[int, DigestInfo] = {}
        self.packet_in: ControllerHeader | None = None
        self.packet_out: ControllerHeader | None = None
        self._build(p4info)

    # ---- construction -----------------------------------------------------------------------

    def _claim(self, preamble: p4info_pb2.Preamble, prefix: int, what: str) -> int:
        pid = preamble.id
        if pid >> 24 != prefix:
            raise _bad(f"{what} '{preamble.name}' has id {pid:#x} without the {what} prefix")
        if pid in self.ids:
            raise _bad(f"duplicate id {pid:#x} ('{preamble.name}' and '{self.ids[pid]}')")
        self.ids[pid] = preamble.name
        return pid

    def _build(self, p: p4info_pb2.P4Info) -> None:
        for a in p.actions:
            aid = self._claim(a.preamble, Prefix.ACTION, "action")
            params = [ParamInfo(x.id, x.name, x.bitwidth) for x in a.params]
            if len({x.id for x in params}) != len(params):
                raise _bad(f"action '{a.preamble.name}' has duplicate parameter ids")
            self.actions[aid] = ActionInfo(aid, a.preamble.name, params,
                                           list(range(len(params))))
        for t in p.tables:
            tid = self._claim(t.preamble, Prefix.TABLE, "table")
            fields = [MatchFieldInfo(m.id, m.name, m.bitwidth, m.match_type)
                      for m in t.match_fields]
            scopes = {}
            for ref in t.action_refs:
                if ref.id not in self.actions:
                    raise _bad(f"table '{t.preamble.name}' refers to unknown action {ref.id:#x}")
                scopes[ref.id] = ref.scope
            self.tables[tid] = TableInfo(
                tid, t.preamble.name, fields, scopes, t.const_default_action_id,
                t.implementation_id,
                supports_idle_timeout=(t.idle_timeout_behavior
                                       == p4info_pb2.Table.NOTIFY_CONTROL),
                json_key_order=list(range(len(fields))))
        for ap in p.action_profiles:
            pid = self._claim(ap.preamble, Prefix.ACTION_PROFILE, "action profile")
            self.profiles[pid] = ProfileInfo(pid, ap.preamble.name, list(ap.table_ids),
                                             ap.with_selector, ap.size, ap.max_group_size)
        arrays = ((p.counters, Prefix.COUNTER, "counter", self.counters),
                  (p.direct_counters, Prefix.DIRECT_COUNTER, "direct counter",
                   self.direct_counters),
                  (p.meters, Prefix.METER, "meter", self.meters),
                  (p.direct_meters, Prefix.DIRECT_METER, "direct meter", self.direct_meters))
        for items, prefix, what, infos in arrays:
            for x in items:
                xid = self._claim(x.preamble, prefix, what)
                # A direct array has no size of its own: it has one cell per table entry.
                direct = prefix in (Prefix.DIRECT_COUNTER, Prefix.DIRECT_METER)
                infos[xid] = ResourceInfo(xid, x.preamble.name, 0 if direct else x.size,
                                          x.spec.unit, x.direct_table_id if direct else 0)
        for r in p.registers:
            rid = self._claim(r.preamble, Prefix.REGISTER, "register")
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            self.registers[rid] = ResourceInfo(rid, r.preamble.name, r.size, bitwidth=width)
        for d in p.digests:
            did = self._claim(d.preamble, Prefix.DIGEST, "digest")
            self.digests[did] = _digest_info(did, d, p.type_info)
        for h in p.controller_packet_metadata:
            hid = self._claim(h.preamble, Prefix.CONTROLLER_HEADER, "controller header")
            header = ControllerHeader(hid, h.preamble.name,
                                      [(m.id, m.name, m.bitwidth) for m in h.metadata])
            # PI recognises the two headers by these exact names
            if h.preamble.name == "packet_in":
                self.packet_in = header
            elif h.preamble.name == "packet_out":
                self.packet_out = header
        for v in p.value_sets:
            self._claim(v.preamble, Prefix.VALUE_SET, "value set")
        self._link_tables()

    def _link_tables(self) -> None:
        for t in self.tables.values():
            proto = next(x for x in self.proto.tables if x.preamble.id == t.id)
            if t.implementation_id and t.implementation_id not in self.profiles:
                raise _bad(f"table '{t.name}' has unknown implementation "
                           f"{t.implementation_id:#x}")
            for rid in proto.direct_resource_ids:
                if rid in self.direct_counters:
                    t.direct_counter_id = rid
                elif rid in self.direct_meters:
                    t.direct_meter_id = rid
                else:
                    raise _bad(f"table '{t.name}' has unknown direct resource {rid:#x}")

    # ---- BMv2 JSON ordering -------------------------------------------------------------------

    def bind_json(self, bmv2_json: bytes) -> None:
        """Learn key/parameter order from the JSON. Objects the JSON does not describe keep the
        P4Info order (which is the order p4c emits in both files)."""
        doc = _json_doc(bmv2_json)
        if not isinstance(doc, dict):
            return
        json_tables = {}
        for pipe in doc.get("pipelines") or []:
            for t in (pipe or {}).get("tables") or []:
                if isinstance(t, dict) and "name" in t:
                    json_tables[t["name"]] = t
        for t in self.tables.values():
            keys = (json_tables.get(t.name) or {}).get("key") or []
            t.json_key_order = _json_order(keys, t.match_fields) or t.json_key_order
        json_actions = {a.get("name"): a for a in doc.get("actions") or []
                        if isinstance(a, dict)}
        for a in self.actions.values():
            data = (json_actions.get(a.name) or {}).get("runtime_data") or []
            a.json_param_order = _json_order(data, a.params) or a.json_param_order

    def json_mismatch(self, bmv2_json: bytes) -> str | None:
        """What of this P4Info the BMv2 JSON does not describe (None: they belong together).
        Checked by name, as P4Info and JSON both name objects by their P4 names."""
        doc = _json_doc(bmv2_json)
        if not isinstance(doc, dict):
            return None  # not JSON (loading it reports the error), or not an object
        pipes = [p for p in doc.get("pipelines") or [] if isinstance(p, dict)]
        tables = {t.get("name"): t for pipe in pipes for t in pipe.get("tables") or []
                  if isinstance(t, dict)}
        actions = {a.get("name") for a in doc.get("actions") or [] if isinstance(a, dict)}
        arrays = {a.get("name") for kind in ("counter_arrays", "meter_arrays", "register_arrays")
                  for a in doc.get(kind) or [] if isinstance(a, dict)}
        arrays |= {a.get("name") for p in pipes for a in p.get("action_profiles") or []
                   if isinstance(a, dict)}
        for t in self.tables.values():
            if t.name not in tables:
                return f"table '{t.name}' (id {t.id}) is not in the device config"
            if len(tables[t.name].get("key") or []) != len(t.match_fields):
                return (f"table '{t.name}' has {len(t.match_fields)} match fields in the P4Info "
                        f"and {len(tables[t.name].get('key') or [])} in the device config")
        for a in self.actions.values():
            if a.name not in actions:
                return f"action '{a.name}' (id {a.id}) is not in the device config"
        for kind, objs in (("counter", self.counters), ("meter", self.meters),
                           ("register", self.registers), ("action profile", self.profiles)):
            for obj in objs.values():
                if obj.name not in arrays:
                    return f"{kind} '{obj.name}' (id {obj.id}) is not in the device config"
        return None

    # ---- lookups --------------------------------------------------------------------------------

    def action_by_name(self, name: str) -> ActionInfo | None:
        for a in self.actions.values():
            if a.name == name:
                return a
        return None

    def profile_actions(self, profile_id: int) -> set[int]:
        actions: set[int] = set()
        for tid in self.profiles[profile_id].table_ids:
            if tid in self.tables:
                actions.update(self.tables[tid].action_scopes)
        return actions


def _bad(message: str) -> P4RTError:
    return P4RTError(UNKNOWN, f"Error when importing p4info: {message}")


def _bitstring_width(spec: p4info_pb2.P4DataTypeSpec) -> int | None:
    if not spec.HasField("bitstring"):
        return None
    bs = spec.bitstring
    if bs.HasField("bit"):
        return bs.bit.bitwidth
    if bs.HasField("int"):
        return bs.int.bitwidth
    return None


def _digest_info(did: int, d: p4info_pb2.Digest, type_info: p4info_pb2.P4TypeInfo) -> DigestInfo:
    spec = d.type_spec
    kind = spec.WhichOneof("type_spec")
    widths: list[int | None]
    if kind == "bitstring":
        widths = [_bitstring_width(spec)]
    elif kind == "struct":
        struct = type_info.structs.get(spec.struct.name)
        if struct is None:
            raise _bad(f"digest '{d.preamble.name}' uses unknown struct '{spec.struct.name}'")
        widths = [_bitstring_width(m.type_spec) for m in struct.members]
    elif kind == "tuple":
        widths = [_bitstring_width(m) for m in spec.tuple.members]
    else:
        raise _bad(f"digest '{d.preamble.name}' must be a bitstring, struct or tuple")
    if any(w is None for w in widths):
        raise _bad(f"digest '{d.preamble.name}' may only hold fixed-width bitstrings")
    return DigestInfo(did, d.preamble.name, kind, [w for w in widths if w is not None])


def _json_order(json_items: list, infos: list) -> list[int] | None:
    """The P4Info positions of ``infos`` (match fields or parameters, each with a name) in the
    order the JSON lists the same names; None when the two do not name the same ones."""
    names = [item.get("name") for item in json_items if isinstance(item, dict)]
    by_name = {info.name: i for i, info in enumerate(infos)}
    if len(names) == len(infos) and set(names) == set(by_name):
        return [by_name[n] for n in names]
    return None
