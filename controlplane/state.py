"""The intended-state store: what this client has successfully written to one switch.

After a switch restart (it comes back with no pipeline and no entries) the connection replays
this store, so the switch ends up where the controller left it. Entities are kept as P4Runtime
protobufs keyed by their identity (table+match+priority, profile+member id, group id, ...), so a
MODIFY replaces and a DELETE removes. Counter values are data-plane state, not intent, and are
not kept; register values and meter configs written by the controller are.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from p4.v1 import p4runtime_pb2

Update = p4runtime_pb2.Update

# Replay order: what entries refer to must exist first (members before groups before tables).
_ORDER = ["digest_entry", "action_profile_member", "action_profile_group", "table_entry",
          "default_entry", "packet_replication_engine_entry", "meter_entry",
          "direct_meter_entry", "register_entry"]

# Defaults, meters and registers always exist on a pipeline: they are modified, not inserted.
MODIFIED_ON_REPLAY = frozenset({"default_entry", "meter_entry", "direct_meter_entry",
                                "register_entry"})


def _field_key(fm: p4runtime_pb2.FieldMatch) -> tuple:
    # Plain attribute reads: protobuf is pure Python here, and serializing costs far more.
    # Values are keyed as numbers (leading zero bytes stripped): an entry read back from a
    # server that pads its bytestrings must have the identity of the one written canonically.
    which = fm.WhichOneof("field_match_type")
    if which == "exact":
        return fm.field_id, which, fm.exact.value.lstrip(b"\0")
    if which == "lpm":
        return fm.field_id, which, fm.lpm.value.lstrip(b"\0"), fm.lpm.prefix_len
    if which == "ternary":
        return fm.field_id, which, fm.ternary.value.lstrip(b"\0"), fm.ternary.mask.lstrip(b"\0")
    if which == "range":
        return fm.field_id, which, fm.range.low.lstrip(b"\0"), fm.range.high.lstrip(b"\0")
    if which == "optional":
        return fm.field_id, which, fm.optional.value.lstrip(b"\0")
    return fm.field_id, which, fm.SerializeToString()


def _table_identity(te: p4runtime_pb2.TableEntry) -> tuple:
    if te.is_default_action:
        return te.table_id, "default"
    return te.table_id, te.priority, tuple(sorted(_field_key(fm) for fm in te.match))


def identity(entity: p4runtime_pb2.Entity) -> tuple[str, object] | None:
    """(kind, key) for entities that represent intent; None for the rest (counters)."""
    which = entity.WhichOneof("entity")
    if which == "table_entry":
        te = entity.table_entry
        kind = "default_entry" if te.is_default_action else "table_entry"
        return kind, _table_identity(te)
    if which == "action_profile_member":
        m = entity.action_profile_member
        return which, (m.action_profile_id, m.member_id)
    if which == "action_profile_group":
        g = entity.action_profile_group
        return which, (g.action_profile_id, g.group_id)
    if which == "packet_replication_engine_entry":
        pre = entity.packet_replication_engine_entry
        if pre.WhichOneof("type") == "multicast_group_entry":
            return which, ("mc", pre.multicast_group_entry.multicast_group_id)
        return which, ("clone", pre.clone_session_entry.session_id)
    if which == "meter_entry":
        return which, (entity.meter_entry.meter_id, entity.meter_entry.index.index)
    if which == "direct_meter_entry":
        return which, _table_identity(entity.direct_meter_entry.table_entry)
    if which == "register_entry":
        return which, (entity.register_entry.register_id, entity.register_entry.index.index)
    if which == "digest_entry":
        return which, entity.digest_entry.digest_id
    return None


class IntendedState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entities: dict[str, dict[object, p4runtime_pb2.Entity]] = {k: {} for k in _ORDER}

    def apply(self, update: p4runtime_pb2.Update) -> None:
        """Record one update the switch accepted. The entity is kept by reference: callers
        hand over updates they no longer change (a sent WriteRequest's)."""
        ident = identity(update.entity)
        if ident is None:
            return
        kind, key = ident
        with self._lock:
            if update.type == Update.DELETE:
                self._entities[kind].pop(key, None)
            else:
                self._entities[kind][key] = update.entity

    def clear(self) -> None:
        with self._lock:
            for d in self._entities.values():
                d.clear()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(d) for d in self._entities.values())

    def replay_updates(self) -> Iterator[p4runtime_pb2.Update]:
        """Updates that rebuild the state on an empty switch, in dependency order."""
        with self._lock:
            snapshot = [(k, list(self._entities[k].values())) for k in _ORDER]
        for kind, entities in snapshot:
            modify = kind in MODIFIED_ON_REPLAY
            for e in entities:
                yield Update(type=Update.MODIFY if modify else Update.INSERT, entity=e)
