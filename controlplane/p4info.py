"""P4Info index: resolve names (fully qualified or alias) and ids of every P4Info object.

A name is looked up as a fully-qualified name ("MyIngress.ipv4_lpm"), then as an alias
("ipv4_lpm"), then as a unique dotted suffix ("ingress.ipv4_lpm" style partial names), which is
how p4runtime-shell and finsy let users write names. Unknown names raise
:class:`P4InfoLookupError` whose message names the kind, the name and the close candidates.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from controlplane.errors import P4InfoLookupError

# P4Info repeated fields with a preamble, by the kind name used in messages and lookups.
KINDS = {
    "table": "tables",
    "action": "actions",
    "action_profile": "action_profiles",
    "counter": "counters",
    "direct_counter": "direct_counters",
    "meter": "meters",
    "direct_meter": "direct_meters",
    "register": "registers",
    "digest": "digests",
    "controller_packet_metadata": "controller_packet_metadata",
    "value_set": "value_sets",
}


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info file, text format (.txt/.txtpb/.pb.txt) or binary (anything else that does
    not parse as text)."""
    data = Path(path).read_bytes()
    info = p4info_pb2.P4Info()
    try:
        text_format.Parse(data.decode("utf-8"), info)
        return info
    except (UnicodeDecodeError, text_format.ParseError) as text_err:
        try:
            info.ParseFromString(data)
        except Exception:
            raise P4InfoLookupError(f"{path}: not a P4Info file ({text_err})") from None
        return info


@dataclass(frozen=True)
class Field:
    """A named, fixed-width piece of an object: match field, action param, packet metadata,
    digest struct member."""

    id: int
    name: str
    bitwidth: int
    match_type: str = ""  # lowercase P4Info match type for match fields, else ""


def _match_type_name(mf: p4info_pb2.MatchField) -> str:
    if mf.WhichOneof("match") == "other_match_type":
        return mf.other_match_type
    return p4info_pb2.MatchField.MatchType.Name(mf.match_type).lower()


class P4InfoIndex:
    """Lookups over one P4Info. Objects are the P4Info protobuf messages themselves."""

    def __init__(self, info: p4info_pb2.P4Info) -> None:
        self.info = info
        self._by_kind: dict[str, dict[str, Any]] = {}
        self._aliases: dict[str, dict[str, Any]] = {}
        self._by_id: dict[int, tuple[str, Any]] = {}
        # Memo of derived lookups (encoding runs them per entry; P4Info is immutable here).
        self._memo: dict[tuple[str, object], Any] = {}
        for kind, attr in KINDS.items():
            names: dict[str, Any] = {}
            aliases: dict[str, Any] = {}
            for obj in getattr(info, attr):
                names[obj.preamble.name] = obj
                if obj.preamble.alias:
                    aliases.setdefault(obj.preamble.alias, obj)
                self._by_id[obj.preamble.id] = (kind, obj)
            self._by_kind[kind] = names
            self._aliases[kind] = aliases

    @classmethod
    def from_file(cls, path: str | Path) -> P4InfoIndex:
        return cls(load_p4info(path))

    # ---- generic lookups ----

    def get(self, kind: str, name: str | int) -> Any:
        """The P4Info object of ``kind`` named ``name`` (or with that numeric id)."""
        key = (kind, name)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._get(kind, name)
        return found

    def _get(self, kind: str, name: str | int) -> Any:
        if isinstance(name, int):
            found = self._by_id.get(name)
            if found is None or found[0] != kind:
                raise P4InfoLookupError(f"unknown {kind} id {name}")
            return found[1]
        names = self._by_kind[kind]
        obj = names.get(name) or self._aliases[kind].get(name)
        if obj is not None:
            return obj
        suffix = [o for n, o in names.items() if n.endswith("." + name)]
        if len(suffix) == 1:
            return suffix[0]
        if len(suffix) > 1:
            opts = ", ".join(sorted(o.preamble.name for o in suffix))
            raise P4InfoLookupError(f"ambiguous {kind} name '{name}' (matches {opts})")
        raise P4InfoLookupError(self._unknown(kind, name, list(names)))

    @staticmethod
    def _unknown(kind: str, name: str, known: list[str], where: str = "") -> str:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        if close:
            hint = f"; did you mean {', '.join(close)}?"
        elif known:
            hint = f"; known: {', '.join(sorted(known)[:8])}{' ...' if len(known) > 8 else ''}"
        else:
            hint = f"; the P4Info declares no {kind}s"
        return f"unknown {kind.replace('_', ' ')} '{name}'{where}{hint}"

    def id(self, kind: str, name: str | int) -> int:
        return self.get(kind, name).preamble.id

    def name_of(self, obj_id: int) -> str:
        found = self._by_id.get(obj_id)
        return found[1].preamble.name if found else f"<id {obj_id}>"

    def names(self, kind: str) -> list[str]:
        return list(self._by_kind[kind])

    def kind_of(self, obj_id: int) -> str | None:
        found = self._by_id.get(obj_id)
        return found[0] if found else None

    # ---- tables ----

    def table(self, name: str | int) -> p4info_pb2.Table:
        return self.get("table", name)

    def match_fields(self, table: str | int) -> list[Field]:
        key = ("match_fields", table)
        if key not in self._memo:
            self._memo[key] = [Field(mf.id, mf.name, mf.bitwidth, _match_type_name(mf))
                               for mf in self.table(table).match_fields]
        return self._memo[key]

    def match_field(self, table: str | int, name: str | int) -> Field:
        fields = self.match_fields(table)
        for f in fields:
            if f.name == name or f.id == name:
                return f
        # Allow the last component ("dstAddr" for "hdr.ipv4.dstAddr") when unique.
        short = [f for f in fields if isinstance(name, str) and f.name.split(".")[-1] == name]
        if len(short) == 1:
            return short[0]
        tname = self.table(table).preamble.name
        raise P4InfoLookupError(self._unknown("match field", str(name), [f.name for f in fields],
                                              f" in table {tname}"))

    def table_actions(self, table: str | int) -> list[p4info_pb2.Action]:
        return [self.get("action", ref.id) for ref in self.table(table).action_refs]

    def table_action(self, table: str | int, action: str | int) -> p4info_pb2.Action:
        """The action, checked to be one the table may use."""
        key = ("table_action", (table, action))
        if key not in self._memo:
            self._memo[key] = self._table_action(table, action)
        return self._memo[key]

    def _table_action(self, table: str | int, action: str | int) -> p4info_pb2.Action:
        act = self.action(action)
        tbl = self.table(table)
        if not any(ref.id == act.preamble.id for ref in tbl.action_refs):
            allowed = ", ".join(a.preamble.name for a in self.table_actions(table))
            raise P4InfoLookupError(f"action '{act.preamble.name}' is not an action of table "
                                    f"{tbl.preamble.name} (allowed: {allowed})")
        return act

    def action_profile_of(self, table: str | int) -> p4info_pb2.ActionProfile | None:
        impl = self.table(table).implementation_id
        return self.get("action_profile", impl) if impl else None

    def direct_resources(self, table: str | int) -> list[tuple[str, Any]]:
        return [self._by_id[i] for i in self.table(table).direct_resource_ids if i in self._by_id]

    # ---- actions ----

    def action(self, name: str | int) -> p4info_pb2.Action:
        return self.get("action", name)

    def params(self, action: str | int) -> list[Field]:
        key = ("params", action)
        if key not in self._memo:
            self._memo[key] = [Field(p.id, p.name, p.bitwidth) for p in self.action(action).params]
        return self._memo[key]

    def param(self, action: str | int, name: str | int) -> Field:
        for p in self.params(action):
            if p.name == name or p.id == name:
                return p
        aname = self.action(action).preamble.name
        raise P4InfoLookupError(self._unknown("param", str(name),
                                              [p.name for p in self.params(action)],
                                              f" of action {aname}"))

    # ---- other objects ----

    def action_profile(self, name: str | int) -> p4info_pb2.ActionProfile:
        return self.get("action_profile", name)

    def counter(self, name: str | int) -> p4info_pb2.Counter:
        return self.get("counter", name)

    def direct_counter(self, name: str | int) -> p4info_pb2.DirectCounter:
        return self.get("direct_counter", name)

    def meter(self, name: str | int) -> p4info_pb2.Meter:
        return self.get("meter", name)

    def direct_meter(self, name: str | int) -> p4info_pb2.DirectMeter:
        return self.get("direct_meter", name)

    def register(self, name: str | int) -> p4info_pb2.Register:
        return self.get("register", name)

    def register_bitwidth(self, name: str | int) -> int:
        spec = self.register(name).type_spec
        if spec.WhichOneof("type_spec") == "bitstring":
            bs = spec.bitstring
            kind = bs.WhichOneof("type_spec")
            return getattr(bs, kind).bitwidth if kind in ("bit", "int") else 0
        return 0

    def digest(self, name: str | int) -> p4info_pb2.Digest:
        return self.get("digest", name)

    def digest_fields(self, name: str | int) -> list[Field]:
        """Members of the digest's struct (in order), with their bitwidths."""
        spec = self.digest(name).type_spec
        which = spec.WhichOneof("type_spec")
        if which == "bitstring":
            return [Field(1, "value", spec.bitstring.bit.bitwidth)]
        if which == "struct":
            struct = self.info.type_info.structs[spec.struct.name]
        elif which == "header":
            struct = self.info.type_info.headers[spec.header.name]
        else:
            return []
        out = []
        for i, member in enumerate(struct.members, 1):
            ts = member.type_spec
            width = 0
            if ts.WhichOneof("type_spec") == "bitstring":
                bs = ts.bitstring
                k = bs.WhichOneof("type_spec")
                width = getattr(bs, k).bitwidth if k in ("bit", "int") else 0
            elif ts.WhichOneof("type_spec") == "bool":
                width = 1
            out.append(Field(i, member.name, width))
        return out

    def packet_metadata(self, name: str) -> list[Field]:
        """Fields of controller header ``packet_in`` or ``packet_out`` (empty if absent)."""
        try:
            cpm = self.get("controller_packet_metadata", name)
        except P4InfoLookupError:
            return []
        return [Field(m.id, m.name, m.bitwidth) for m in cpm.metadata]
