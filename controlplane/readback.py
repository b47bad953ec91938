"""Reading the switch back to learn what it really holds.

Two users: a Write whose outcome is ambiguous (the RPC failed without per-update results:
RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, a broken connection...) and the re-sync after a restart,
which checks that the replay left the switch holding exactly the intended state.

Reads are wildcards per table / profile / kind (one Read each, so an entity kind the target
cannot read — BMv2 answers register reads with UNIMPLEMENTED — only leaves its own updates
unknown), and entities are compared by the intended-state identity (controlplane.state).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from controlplane.errors import ControlPlaneError
from controlplane.state import IntendedState, identity

log = logging.getLogger("controlplane")
Update = p4runtime_pb2.Update
ReadFn = Callable[[p4runtime_pb2.Entity], list[p4runtime_pb2.Entity]]


def probe_for(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity | None:
    """The wildcard read that returns ``entity`` if the switch holds it (None: not intent)."""
    which = entity.WhichOneof("entity")
    probe = p4runtime_pb2.Entity()
    if which == "table_entry":
        probe.table_entry.table_id = entity.table_entry.table_id
        if entity.table_entry.is_default_action:
            probe.table_entry.is_default_action = True
    elif which == "action_profile_member":
        probe.action_profile_member.action_profile_id = \
            entity.action_profile_member.action_profile_id
    elif which == "action_profile_group":
        probe.action_profile_group.action_profile_id = \
            entity.action_profile_group.action_profile_id
    elif which == "packet_replication_engine_entry":
        kind = entity.packet_replication_engine_entry.WhichOneof("type")
        getattr(probe.packet_replication_engine_entry, kind).SetInParent()
    elif which in ("meter_entry", "register_entry", "direct_meter_entry", "digest_entry"):
        probe.CopyFrom(entity)  # addressed exactly (by index / by match key / by id)
        if which == "meter_entry":
            probe.meter_entry.ClearField("config")
        elif which == "register_entry":
            probe.register_entry.ClearField("data")
        elif which == "direct_meter_entry":
            probe.direct_meter_entry.ClearField("config")
        else:
            probe.digest_entry.ClearField("config")
    else:
        return None
    return probe


def _payload(entity: p4runtime_pb2.Entity) -> bytes:
    """What an update sets, beyond its identity (to tell a MODIFY that landed)."""
    which = entity.WhichOneof("entity")
    if which == "table_entry":
        ta = entity.table_entry.action
        if ta.WhichOneof("type") == "action":
            return _action_key(ta.action)
        return ta.SerializeToString(deterministic=True)
    if which == "action_profile_member":
        return _action_key(entity.action_profile_member.action)
    if which == "action_profile_group":
        members = sorted((m.member_id, m.weight) for m in entity.action_profile_group.members)
        return repr(members).encode()
    if which == "packet_replication_engine_entry":
        pre = entity.packet_replication_engine_entry
        entry = getattr(pre, pre.WhichOneof("type"))
        return repr(sorted((r.egress_port, r.instance) for r in entry.replicas)).encode()
    if which in ("meter_entry", "direct_meter_entry"):
        return getattr(entity, which).config.SerializeToString(deterministic=True)
    if which == "register_entry":
        return entity.register_entry.data.SerializeToString(deterministic=True)
    return entity.SerializeToString(deterministic=True)


def _action_key(action: p4runtime_pb2.Action) -> bytes:
    # Values compared as numbers: a server may answer with non-canonical (padded) bytestrings.
    params = sorted((p.param_id, p.value.lstrip(b"\0")) for p in action.params)
    return repr((action.action_id, params)).encode()


@dataclass
class SwitchView:
    """What the switch holds, by identity, for every probe that could be read."""

    found: dict[tuple[str, object], p4runtime_pb2.Entity] = field(default_factory=dict)
    unreadable: set[bytes] = field(default_factory=set)  # probes whose Read failed


def read_view(read: ReadFn, entities: Iterable[p4runtime_pb2.Entity]) -> SwitchView:
    view = SwitchView()
    probes: dict[bytes, p4runtime_pb2.Entity] = {}
    for e in entities:
        probe = probe_for(e)
        if probe is not None:
            probes.setdefault(probe.SerializeToString(deterministic=True), probe)
    for key, probe in probes.items():
        try:
            got = read(probe)
        except ControlPlaneError as err:
            log.warning("read-back of %s failed: %s", probe.WhichOneof("entity"), err)
            view.unreadable.add(key)
            continue
        for ent in got:
            ident = identity(ent)
            if ident is not None:
                view.found[ident] = ent
    return view


def _readable(view: SwitchView, entity: p4runtime_pb2.Entity) -> bool:
    probe = probe_for(entity)
    return probe is not None and \
        probe.SerializeToString(deterministic=True) not in view.unreadable


def reconcile_updates(read: ReadFn, updates: Sequence[p4runtime_pb2.Update],
                      intended: IntendedState) -> list[bool | None]:
    """After an ambiguous Write: for each update, was it applied (True/False, or None when the
    switch could not be read)? The intended state is set to what the switch holds for every
    readable update, whatever the answer; an unreadable DELETE is recorded (a restarted switch
    must not get back what was being deleted), an unreadable INSERT/MODIFY is not."""
    view = read_view(read, (u.entity for u in updates))
    applied: list[bool | None] = []
    for u in updates:
        ident = identity(u.entity)
        if ident is None or not _readable(view, u.entity):
            applied.append(None)
            if ident is not None and u.type == Update.DELETE:
                # Unknown outcome (the switch is gone): never replay what was being deleted.
                intended.apply(u)
            continue
        held = view.found.get(ident)
        if u.type == Update.DELETE:
            applied.append(held is None)
        else:  # an INSERT of a key that already held another value did not land either
            applied.append(held is not None and _payload(held) == _payload(u.entity))
        if held is None:
            intended.apply(Update(type=Update.DELETE, entity=u.entity))
        else:
            intended.apply(Update(type=Update.MODIFY, entity=_as_intent(held)))
    return applied


def _as_intent(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """A read-back entity as the store keeps intent: without counter data (data-plane state)."""
    if entity.WhichOneof("entity") == "table_entry" and \
            entity.table_entry.HasField("counter_data"):
        entity = p4runtime_pb2.Entity(table_entry=entity.table_entry)
        entity.table_entry.ClearField("counter_data")
    return entity


@dataclass
class Verification:
    missing: list[p4runtime_pb2.Entity]  # intended, not on the switch (or different there)
    unexpected: list[p4runtime_pb2.Entity]  # on the switch, never intended
    unreadable: int  # intended entities of kinds the switch would not let us read

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected


def verify(read: ReadFn, intended: IntendedState) -> Verification:
    """Compare the switch with the intended state (after a replay)."""
    wanted = {identity(u.entity): u.entity for u in intended.replay_updates()}
    view = read_view(read, wanted.values())
    missing, unreadable = [], 0
    for ident, ent in wanted.items():
        if not _readable(view, ent):
            unreadable += 1
            continue
        held = view.found.get(ident)
        if held is None or _payload(held) != _payload(ent):
            missing.append(ent)
    # Only kinds that can be created count as unexpected: every meter/register/default exists.
    creatable = ("table_entry", "action_profile_member", "action_profile_group",
                 "packet_replication_engine_entry")
    unexpected = [ent for ident, ent in view.found.items()
                  if ident not in wanted and ident[0] in creatable]
    return Verification(missing, unexpected, unreadable)
