"""Load and validate a BMv2 JSON program into the static layout the runtime compiles against.

Every packet's state is one flat Python list ``F`` ("the PHV"): each header instance owns one slot
per field plus a validity slot (and a length slot if it has a variable-length field); each header
stack owns a "next index" slot. Copying a packet's state is then a single list copy, and generated
code addresses fields as ``F[<constant>]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SUPPORTED_MAJOR = 2

# Core library errors, used when the JSON's "errors" list leaves them out.
CORE_ERRORS = {
    "NoError": 0, "PacketTooShort": 1, "NoMatch": 2, "StackOutOfBounds": 3,
    "HeaderTooShort": 4, "ParserTimeout": 5, "ParserInvalidArgument": 6,
}


class ProgramError(ValueError):
    """A one-line description of what is wrong with the BMv2 JSON and where."""


@dataclass
class FieldInfo:
    name: str
    width: int  # 0 for a variable-length field
    signed: bool
    slot: int

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass
class HeaderType:
    name: str
    fields: list[tuple[str, int | None, bool]]  # width None = variable length
    length_exp: Any = None
    max_length: int = 0

    @property
    def fixed_bits(self) -> int:
        return sum(w for _, w, _ in self.fields if w is not None)

    @property
    def has_varbit(self) -> bool:
        return any(w is None for _, w, _ in self.fields)


@dataclass
class HeaderInstance:
    name: str
    id: int
    htype: HeaderType
    metadata: bool
    fields: list[FieldInfo] = field(default_factory=list)
    valid_slot: int = 0
    vl_slot: int | None = None  # bit length of the variable-length field, if any
    union: str | None = None  # name of the header union this instance belongs to

    def field(self, name: str) -> FieldInfo:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


@dataclass
class HeaderStack:
    name: str
    headers: list[HeaderInstance]
    next_slot: int


@dataclass
class HeaderUnion:
    name: str
    members: dict[str, HeaderInstance]


@dataclass
class UnionStack:
    name: str
    unions: list[HeaderUnion]
    next_slot: int


def _req(obj: dict, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ProgramError(f"{where}: missing attribute '{key}'")
    return obj[key]


def _list(obj: dict, key: str, where: str = "top level") -> list:
    value = obj.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProgramError(f"{where}: '{key}' must be a JSON array")
    return value


class Program:
    """The static description of a BMv2 JSON program with its PHV slot layout."""

    def __init__(self, doc: dict) -> None:
        if not isinstance(doc, dict):
            raise ProgramError("top level: expected a JSON object")
        self.doc = doc
        # Generated Python source that names nothing of one switch's state, by what it was
        # generated from (p4sim.switch.codegen.Gen.shared_source): every switch loading this
        # program generates it once, not once each.
        self.generated: dict[Any, Any] = {}
        # set once a switch has built the whole program's code without an error: a later
        # switch running it natively may then leave its own code for when it is needed
        self.code_checked = False
        meta = doc.get("__meta__")
        if meta is not None:
            version = meta.get("version") if isinstance(meta, dict) else None
            if (not isinstance(version, list) or len(version) != 2
                    or not all(isinstance(v, int) for v in version)):
                raise ProgramError("__meta__.version: expected [major, minor]")
            if version[0] != SUPPORTED_MAJOR:
                raise ProgramError(f"__meta__.version: unsupported major version {version[0]} "
                                   f"(expected {SUPPORTED_MAJOR})")
        self.header_types: dict[str, HeaderType] = {}
        self.headers: dict[str, HeaderInstance] = {}
        self.headers_by_id: dict[int, HeaderInstance] = {}
        self.stacks: dict[str, HeaderStack] = {}
        self.unions: dict[str, HeaderUnion] = {}
        self.union_stacks: dict[str, UnionStack] = {}
        self.slot_fields: list[FieldInfo | None] = []
        self.errors: dict[str, int] = dict(CORE_ERRORS)
        self.enums: dict[str, dict[str, int]] = {}
        self.field_aliases: dict[str, tuple[str, str]] = {}
        self._load_types()
        self._load_instances()
        for i, item in enumerate(_list(doc, "errors")):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], int)):
                raise ProgramError(f"errors[{i}]: expected [name, value]")
            self.errors[item[0]] = item[1]
        for i, item in enumerate(_list(doc, "field_aliases")):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
                raise ProgramError(f"field_aliases[{i}]: expected [name, [header, field]]")
            self.field_aliases[item[0]] = (item[1][0], item[1][1])
        self.scratch_slot = self._new_slot(None)
        self.actions: dict[int, dict] = {}
        self.actions_by_name: dict[str, dict] = {}
        for i, act in enumerate(_list(doc, "actions")):
            where = f"actions[{i}]"
            name = _req(act, "name", where)
            aid = _req(act, "id", where)
            _req(act, "primitives", f"action '{name}'")
            self.actions[aid] = act
            # Several JSON actions may share a name (p4c disambiguates by id); the first wins.
            self.actions_by_name.setdefault(name, act)
        self.field_lists: dict[int, list] = {}
        for fl in _list(doc, "field_lists"):
            self.field_lists[_req(fl, "id", "field_lists")] = _list(fl, "elements", "field_list")
        self.learn_lists: dict[int, dict] = {}
        for ll in _list(doc, "learn_lists"):
            self.learn_lists[_req(ll, "id", "learn_lists")] = ll
        self.pipelines = {p["name"]: p for p in _list(doc, "pipelines")}
        self.parsers = _list(doc, "parsers")
        self.deparsers = _list(doc, "deparsers")
        self.calculations = {c["name"]: c for c in _list(doc, "calculations")}
        self.checksums = _list(doc, "checksums")
        self.counter_arrays = {c["name"]: c for c in _list(doc, "counter_arrays")}
        self.meter_arrays = {m["name"]: m for m in _list(doc, "meter_arrays")}
        self.register_arrays = {r["name"]: r for r in _list(doc, "register_arrays")}
        self.parse_vsets = {v["name"]: v for v in _list(doc, "parse_vsets")}
        self.extern_instances = {e["name"]: e for e in _list(doc, "extern_instances")}

    # -- layout ------------------------------------------------------------------------------

    def _new_slot(self, info: FieldInfo | None) -> int:
        self.slot_fields.append(info)
        return len(self.slot_fields) - 1

    def _load_types(self) -> None:
        for i, ht in enumerate(_list(self.doc, "header_types")):
            where = f"header_types[{i}]"
            name = _req(ht, "name", where)
            fields: list[tuple[str, int | None, bool]] = []
            for j, f in enumerate(_req(ht, "fields", f"header type '{name}'")):
                if not isinstance(f, list) or len(f) not in (2, 3):
                    raise ProgramError(f"header type '{name}': fields[{j}] must be [name, width]")
                width = f[1]
                if width == "*":
                    if "length_exp" not in ht and "max_length" not in ht:
                        raise ProgramError(f"header type '{name}': variable-length field "
                                           f"'{f[0]}' needs max_length")
                    fields.append((f[0], None, False))
                elif isinstance(width, int) and width > 0:
                    fields.append((f[0], width, bool(f[2]) if len(f) == 3 else False))
                else:
                    raise ProgramError(f"header type '{name}': field '{f[0]}' has bad width "
                                       f"{width!r}")
            self.header_types[name] = HeaderType(name, fields, ht.get("length_exp"),
                                                 int(ht.get("max_length") or 0))

    def _load_instances(self) -> None:
        for i, h in enumerate(_list(self.doc, "headers")):
            where = f"headers[{i}]"
            name = _req(h, "name", where)
            tname = _req(h, "header_type", f"header '{name}'")
            if tname not in self.header_types:
                raise ProgramError(f"header '{name}': unknown header_type '{tname}'")
            htype = self.header_types[tname]
            inst = HeaderInstance(name, _req(h, "id", where), htype, bool(h.get("metadata")))
            for fname, width, signed in htype.fields:
                info = FieldInfo(fname, width or 0, signed, 0)
                info.slot = self._new_slot(info)
                inst.fields.append(info)
            inst.valid_slot = self._new_slot(FieldInfo("$valid$", 1, False, 0))
            if htype.has_varbit:
                inst.vl_slot = self._new_slot(None)
            self.headers[name] = inst
            self.headers_by_id[inst.id] = inst
        for i, s in enumerate(_list(self.doc, "header_stacks")):
            name = _req(s, "name", f"header_stacks[{i}]")
            try:
                members = [self.headers_by_id[hid] for hid in _req(s, "header_ids", name)]
            except KeyError as e:
                raise ProgramError(f"header stack '{name}': unknown header id {e}") from None
            self.stacks[name] = HeaderStack(name, members, self._new_slot(None))
        for i, u in enumerate(_list(self.doc, "header_unions")):
            name = _req(u, "name", f"header_unions[{i}]")
            utype = next((t for t in _list(self.doc, "header_union_types")
                          if t.get("name") == u.get("union_type")), None)
            members: dict[str, HeaderInstance] = {}
            ids = _req(u, "header_ids", name)
            names = [m[0] for m in utype["headers"]] if utype else [str(k) for k in range(len(ids))]
            for mname, hid in zip(names, ids):
                if hid not in self.headers_by_id:
                    raise ProgramError(f"header union '{name}': unknown header id {hid}")
                inst = self.headers_by_id[hid]
                inst.union = name
                members[mname] = inst
            self.unions[name] = HeaderUnion(name, members)
        unions_by_id = {u["id"]: self.unions[u["name"]]
                        for u in _list(self.doc, "header_unions")}
        for i, s in enumerate(_list(self.doc, "header_union_stacks")):
            name = _req(s, "name", f"header_union_stacks[{i}]")
            members_u = [unions_by_id[uid] for uid in _req(s, "header_union_ids", name)]
            self.union_stacks[name] = UnionStack(name, members_u, self._new_slot(None))

    # -- lookups -----------------------------------------------------------------------------

    def header(self, name: str, where: str = "") -> HeaderInstance:
        try:
            return self.headers[name]
        except KeyError:
            raise ProgramError(f"{where}: unknown header instance '{name}'") from None

    def field(self, ref: Any, where: str = "") -> FieldInfo:
        """``ref`` is a JSON [header, field] pair; '$valid$' is the hidden validity field."""
        if not isinstance(ref, list) or len(ref) != 2:
            raise ProgramError(f"{where}: bad field reference {ref!r}")
        inst = self.header(ref[0], where)
        if ref[1] == "$valid$":
            return FieldInfo("$valid$", 1, False, inst.valid_slot)
        try:
            return inst.field(ref[1])
        except KeyError:
            raise ProgramError(f"{where}: header '{ref[0]}' has no field '{ref[1]}'") from None

    def std_slot(self, name: str) -> int:
        """Slot of a simple_switch intrinsic field, or the scratch slot if the program has none.

        Looks in standard_metadata, then the P4_14 intrinsic/queueing headers and aliases."""
        for qualified in (f"standard_metadata.{name}", f"intrinsic_metadata.{name}",
                          f"queueing_metadata.{name}"):
            if qualified in self.field_aliases:
                h, f = self.field_aliases[qualified]
                return self.field([h, f], "field_aliases").slot
        for hname in ("standard_metadata", "intrinsic_metadata", "queueing_metadata"):
            inst = self.headers.get(hname)
            if inst is not None:
                for f in inst.fields:
                    if f.name == name:
                        return f.slot
        return self.scratch_slot

    def initial_phv(self) -> list[int]:
        """PHV of a new packet: all zero, metadata headers valid."""
        phv = [0] * len(self.slot_fields)
        for inst in self.headers.values():
            if inst.metadata:
                phv[inst.valid_slot] = 1
        return phv


# Programs by their text: the switches of a simulated fabric load one program, and each
# parsing it kept its own ~1 MiB of JSON objects (350 MiB at k=16); building the Program (its
# PHV layout) again for each took 2 ms a switch. A Program is read-only once built, but for
# ``generated``, which only ever adds what any switch would generate the same.
_PROGRAMS: dict[bytes | str, Program] = {}


def load_program(data: bytes | str) -> Program:
    """Parse BMv2 JSON text; raises ProgramError with a one-line reason."""
    key = data if isinstance(data, bytes | str) else bytes(data)
    program = _PROGRAMS.get(key)
    if program is None:
        try:
            doc = json.loads(key)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if isinstance(e, json.JSONDecodeError):
                raise ProgramError(f"invalid JSON at line {e.lineno} column {e.colno}: "
                                   f"{e.msg}") from None
            raise ProgramError(f"invalid JSON: {e}") from None
        program = Program(doc)  # a ProgramError leaves nothing cached
        if len(_PROGRAMS) >= 4:
            _PROGRAMS.clear()
        _PROGRAMS[key] = program
    return program
