"""Conversion between the named dataclasses of :mod:`controlplane.entities` and P4Runtime
protobuf messages, through a :class:`~controlplane.p4info.P4InfoIndex`.

Every error names the entity, field and value (e.g. ``table MyIngress.ipv4_lpm: match field
hdr.ipv4.dstAddr: value '300.0.0.1' ...``) so a CLI can print it as is.
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from controlplane import encoding
from controlplane.entities import (
    DECODERS,
    DigestList,
    Entity,
    MeterConfig,
    PacketIn,
    TableEntry,
    kind_of,
    p4data_int,
)
from controlplane.errors import EncodeError
from controlplane.p4info import P4InfoIndex


class Codec:
    def __init__(self, index: P4InfoIndex) -> None:
        self.index = index
        # An owner whose encoded entities are never changed after encoding (the simulator's
        # in-process channels, which share one codec per pipeline) sets a dict here:
        # ``desired_protos`` then encodes an entity planned alike for many switches once.
        self.shared_protos: dict[str, tuple[Any, p4runtime_pb2.Entity]] | None = None

    # ---- actions -----------------------------------------------------------------------------

    def fill_action(self, out: p4runtime_pb2.Action, action: str, params: dict[str, Any],
                where: str, table: str | None = None) -> None:
        """Fill ``out`` in place (protobuf here is pure Python: copies are costly)."""
        ix = self.index
        act = ix.table_action(table, action) if table else ix.action(action)
        aname = act.preamble.name
        out.action_id = act.preamble.id
        given = dict(params)
        for p in ix.params(aname):
            if p.name not in given:
                raise EncodeError(f"{where}: action {aname}: missing param '{p.name}' "
                                  f"(bit<{p.bitwidth}>)")
            value = given.pop(p.name)
            out.params.add(param_id=p.id, value=encoding.encode_value(
                value, p.bitwidth, f"{where}: action {aname}: param {p.name}"))
        for extra in given:
            ix.param(aname, extra)  # raises the "unknown param" error with suggestions

    def action_from(self, msg: p4runtime_pb2.Action) -> tuple[str, dict[str, int]]:
        name = self.index.name_of(msg.action_id)
        by_id = {p.id: p.name for p in self.index.params(msg.action_id)}
        return name, {by_id.get(p.param_id, str(p.param_id)): encoding.decode(p.value)
                      for p in msg.params}

    # ---- table entries ------------------------------------------------------------------------

    def table_entry(self, e: TableEntry, for_read: bool = False,
                    for_delete: bool = False) -> p4runtime_pb2.TableEntry:
        msg = p4runtime_pb2.TableEntry()
        self.fill_table_entry(msg, e, for_read, for_delete)
        return msg

    def fill_table_entry(self, msg: p4runtime_pb2.TableEntry, e: TableEntry, for_read: bool,
                          for_delete: bool) -> None:
        ix = self.index
        msg.SetInParent()  # an all-wildcard read is an empty but present table_entry
        if e.table is None:
            if not for_read:
                raise EncodeError("table entry without a table name")
            return
        tbl = ix.table(e.table)
        tname = tbl.preamble.name
        where = f"table {tname}"
        msg.table_id = tbl.preamble.id
        if e.priority:
            msg.priority = e.priority
        if e.is_default:
            msg.is_default_action = True
        needs_priority = False
        given = dict(e.match)
        if e.is_default and given:
            raise EncodeError(f"{where}: the default entry has no match key")
        for f in ix.match_fields(tname):
            if f.match_type in ("ternary", "range", "optional"):
                needs_priority = True
            key = self._pop_key(given, f.name)
            if key is _MISSING:
                if f.match_type == "exact" and not (for_read or e.is_default):
                    raise EncodeError(f"{where}: missing match field '{f.name}' "
                                      f"(exact, bit<{f.bitwidth}>)")
                continue
            m = encoding.parse_match(f.match_type, key, f.bitwidth,
                                     f"{where}: match field {f.name}")
            if m is not None:
                self._field_match(msg.match.add(field_id=f.id), m, f.bitwidth)
        for extra in given:
            ix.match_field(tname, extra)  # raises "unknown match field" with suggestions
        if not for_read and not e.is_default:
            if needs_priority and e.priority <= 0:
                raise EncodeError(f"{where}: needs priority > 0 (it has ternary/range/optional "
                                  "keys); add priority=N")
            if not needs_priority and e.priority != 0:
                raise EncodeError(f"{where}: priority {e.priority} given but the table has only "
                                  "exact/lpm keys (must be 0)")
        chosen = sum(x is not None for x in (e.action, e.member, e.group))
        if chosen > 1:
            raise EncodeError(f"{where}: give only one of action, member or group")
        if e.action is not None:
            self.fill_action(msg.action.action, e.action, e.params, where, tname)
        elif e.member is not None:
            msg.action.action_profile_member_id = e.member
        elif e.group is not None:
            msg.action.action_profile_group_id = e.group
        elif not (for_read or for_delete or e.is_default):
            raise EncodeError(f"{where}: missing action (give action=NAME, member= or group=)")
        if e.params and e.action is None:
            raise EncodeError(f"{where}: params given without an action")
        if e.meter is not None:
            msg.meter_config.CopyFrom(e.meter.to_proto())
        if e.counter is not None:
            msg.counter_data.packet_count, msg.counter_data.byte_count = e.counter
        if e.idle_timeout_ns:
            msg.idle_timeout_ns = e.idle_timeout_ns
        if e.metadata:
            msg.metadata = e.metadata

    @staticmethod
    def _pop_key(given: dict[str, Any], full: str) -> Any:
        if full in given:
            return given.pop(full)
        short = full.split(".")[-1]
        if short in given:
            return given.pop(short)
        return _MISSING

    @staticmethod
    def _field_match(fm: p4runtime_pb2.FieldMatch, m: encoding.Match, bitwidth: int) -> None:
        enc = encoding.encode
        if m.kind == "exact":
            fm.exact.value = enc(m.value, bitwidth)
        elif m.kind == "lpm":
            fm.lpm.value = enc(m.value, bitwidth)
            fm.lpm.prefix_len = m.prefix_len
        elif m.kind == "ternary":
            fm.ternary.value = enc(m.value, bitwidth)
            fm.ternary.mask = enc(m.mask, bitwidth)
        elif m.kind == "range":
            fm.range.low = enc(m.value, bitwidth)
            fm.range.high = enc(m.high, bitwidth)
        elif m.kind == "optional":
            fm.optional.value = enc(m.value, bitwidth)

    def table_entry_from(self, msg: p4runtime_pb2.TableEntry) -> TableEntry:
        ix = self.index
        tname = ix.name_of(msg.table_id)
        fields = {f.id: f for f in ix.match_fields(msg.table_id)}
        match: dict[str, Any] = {}
        for fm in msg.match:
            f = fields.get(fm.field_id)
            name = f.name if f else str(fm.field_id)
            which = fm.WhichOneof("field_match_type")
            dec = encoding.decode
            if which == "exact":
                match[name] = dec(fm.exact.value)
            elif which == "optional":
                match[name] = dec(fm.optional.value)
            elif which == "lpm":
                match[name] = encoding.Match("lpm", dec(fm.lpm.value),
                                             prefix_len=fm.lpm.prefix_len)
            elif which == "ternary":
                match[name] = encoding.Match("ternary", dec(fm.ternary.value),
                                             mask=dec(fm.ternary.mask))
            elif which == "range":
                match[name] = encoding.Match("range", dec(fm.range.low), high=dec(fm.range.high))
        e = TableEntry(table=tname, match=match, priority=msg.priority,
                       is_default=msg.is_default_action, idle_timeout_ns=msg.idle_timeout_ns,
                       metadata=msg.metadata)
        which = msg.action.WhichOneof("type")
        if which == "action":
            e.action, e.params = self.action_from(msg.action.action)
        elif which == "action_profile_member_id":
            e.member = msg.action.action_profile_member_id
        elif which == "action_profile_group_id":
            e.group = msg.action.action_profile_group_id
        if msg.HasField("counter_data"):
            e.counter = (msg.counter_data.packet_count, msg.counter_data.byte_count)
        if msg.HasField("meter_config"):
            e.meter = MeterConfig.from_proto(msg.meter_config)
        return e

    # ---- generic entity conversion -------------------------------------------------------------

    def to_proto(self, e: Entity, for_read: bool = False, for_delete: bool = False,
                 out: p4runtime_pb2.Entity | None = None) -> p4runtime_pb2.Entity:
        """``for_read``: unset names/keys are wildcards; ``for_delete``: no action needed.
        Fills ``out`` in place when given (e.g. ``request.updates.add().entity``). Each entity
        class encodes itself (controlplane.entities)."""
        if out is None:
            out = p4runtime_pb2.Entity()
        encode = getattr(e, "encode", None)
        if encode is None:
            raise EncodeError(f"not a P4Runtime entity: {e!r}")
        encode(self, out, for_read, for_delete)
        return out

    def from_proto(self, msg: p4runtime_pb2.Entity) -> Entity:
        decode = DECODERS.get(kind_of(msg))
        if decode is None:
            raise EncodeError(f"unsupported entity in response: {msg.WhichOneof('entity')}")
        return decode(self, msg)

    # ---- stream messages --------------------------------------------------------------------

    def packet_out(self, payload: bytes, metadata: dict[str, Any]) -> p4runtime_pb2.PacketOut:
        msg = p4runtime_pb2.PacketOut(payload=payload)
        given = dict(metadata)
        for f in self.index.packet_metadata("packet_out"):
            if f.name in given:
                msg.metadata.add(metadata_id=f.id, value=encoding.encode_value(
                    given.pop(f.name), f.bitwidth, f"packet_out metadata {f.name}"))
        if given:
            known = [f.name for f in self.index.packet_metadata("packet_out")]
            raise EncodeError(f"packet_out: unknown metadata {', '.join(given)} "
                              f"(known: {', '.join(known) or 'none'})")
        return msg

    def packet_in(self, msg: p4runtime_pb2.PacketIn) -> PacketIn:
        names = {f.id: f.name for f in self.index.packet_metadata("packet_in")}
        meta = {names.get(m.metadata_id, str(m.metadata_id)): encoding.decode(m.value)
                for m in msg.metadata}
        return PacketIn(msg.payload, meta)

    def digest_list(self, msg: p4runtime_pb2.DigestList) -> DigestList:
        name = self.index.name_of(msg.digest_id)
        fields = self.index.digest_fields(msg.digest_id)
        rows = []
        for data in msg.data:
            if data.WhichOneof("data") == "struct":
                values = [p4data_int(m) for m in data.struct.members]
            else:
                values = [p4data_int(data)]
            rows.append({(fields[i].name if i < len(fields) else str(i)): v
                         for i, v in enumerate(values)})
        return DigestList(name, msg.list_id, rows, msg.timestamp)

    # ---- descriptions for error messages -------------------------------------------------------

    def full_name(self, kind: str, name: str | None) -> str:
        """The P4Info's full name for ``name`` ("*" for a wildcard; as given if unknown)."""
        try:
            return self.index.get(kind, name).preamble.name if name is not None else "*"
        except LookupError:
            return str(name)

    def format_key(self, table: str, field: str, value: Any) -> str:
        if not isinstance(value, encoding.Match | int):
            return str(value)  # as the user wrote it
        try:
            f = self.index.match_field(table, field)
            width, name = f.bitwidth, f.name
        except LookupError:
            width, name = 0, field
        if isinstance(value, encoding.Match):
            return encoding.format_match(value, width, name)
        return encoding.format_value(value, width, name)

    def describe(self, e: Entity) -> str:
        """Short human description for error messages, with fully-qualified names."""
        describe = getattr(e, "describe", None)
        return describe(self) if describe is not None else repr(e)


class _Missing:
    pass


_MISSING = _Missing()
