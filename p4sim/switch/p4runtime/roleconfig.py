"""p4sim's role configuration: the target-defined message a controller packs into
``MasterArbitrationUpdate.role.config`` (a ``google.protobuf.Any``). The P4Runtime specification
leaves the format to the target; p4sim's is ``p4sim.v1.RoleConfig``::

    message RoleConfig {
      repeated uint32 p4_ids = 1;      // P4Info ids of the entities the role may write
      repeated string p4_names = 2;    // the same by P4Info name ("MyIngress.acl" or "acl")
      bool packet_replication = 3;     // may write multicast groups and clone sessions
      bool receives_packet_ins = 4;    // its primary gets PacketIns
      bool can_send_packet_outs = 5;   // its primary may send PacketOuts
      bool can_push_pipeline = 6;      // may SetForwardingPipelineConfig
    }

An entity is named by its own P4Info id: a table entry (and its direct counter/meter data) by the
table, members and groups by the action profile, counter/meter/register entries by their
extern, a DigestEntry (and the DigestLists it produces) by the digest. A role with no config
(and the default role) has full pipeline access, as the specification says.

The descriptor is built here at import (no protoc step), so the server and any Python client
share one definition; a client packs one with ``controlplane.roles.role_config``.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from p4.v1 import p4runtime_pb2 as p4rt

from .codec import INVALID_ARGUMENT, P4RTError

FULL_NAME = "p4sim.v1.RoleConfig"
TYPE_URL = f"type.googleapis.com/{FULL_NAME}"


def _build_message_class() -> type[Message]:
    fdp = descriptor_pb2.FileDescriptorProto(name="p4sim/v1/role_config.proto",
                                             package="p4sim.v1", syntax="proto3")
    msg = fdp.message_type.add(name="RoleConfig")
    fields = [("p4_ids", 1, "TYPE_UINT32", True), ("p4_names", 2, "TYPE_STRING", True),
              ("packet_replication", 3, "TYPE_BOOL", False),
              ("receives_packet_ins", 4, "TYPE_BOOL", False),
              ("can_send_packet_outs", 5, "TYPE_BOOL", False),
              ("can_push_pipeline", 6, "TYPE_BOOL", False)]
    fdp_field = descriptor_pb2.FieldDescriptorProto
    for name, number, ftype, repeated in fields:
        msg.field.add(name=name, number=number, type=getattr(fdp_field, ftype),
                      label=fdp_field.LABEL_REPEATED if repeated else fdp_field.LABEL_OPTIONAL)
    pool = descriptor_pool.Default()
    try:
        pool.FindMessageTypeByName(FULL_NAME)
    except KeyError:
        pool.Add(fdp)
    descriptor = pool.FindMessageTypeByName(FULL_NAME)
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.21
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


RoleConfig = _build_message_class()


@dataclass(frozen=True)
class RoleGrant:
    """What a restricted role may do (parsed from its RoleConfig)."""

    ids: frozenset[int]
    names: frozenset[str]
    packet_replication: bool
    receives_packet_ins: bool
    can_send_packet_outs: bool
    can_push_pipeline: bool

    def allows_id(self, pid: int, names_by_id: dict[int, str]) -> bool:
        if pid in self.ids:
            return True
        name = names_by_id.get(pid)
        return name is not None and any(name == n or name.endswith("." + n)
                                        for n in self.names)


def parse_role(role: p4rt.Role | None) -> tuple[str, RoleGrant | None]:
    """(role name, its grant or None for full access); a config that is not a well-formed
    p4sim.v1.RoleConfig is INVALID_ARGUMENT, as the specification asks."""
    if role is None:
        return "", None
    if not role.HasField("config"):
        return role.name, None
    if not role.name:
        raise P4RTError(INVALID_ARGUMENT, "A role config needs a role name "
                        "(the default role has full pipeline access)")
    cfg = role.config
    if cfg.type_url.rsplit("/", 1)[-1] != FULL_NAME:
        raise P4RTError(INVALID_ARGUMENT, f"Role config must be a {FULL_NAME}, "
                        f"not '{cfg.type_url or 'unset'}'")
    parsed = RoleConfig()
    try:
        parsed.ParseFromString(cfg.value)
    except DecodeError as err:
        raise P4RTError(INVALID_ARGUMENT, f"Malformed {FULL_NAME}: {err}") from None
    if any(not n for n in parsed.p4_names):
        raise P4RTError(INVALID_ARGUMENT, f"{FULL_NAME}: empty entity name in p4_names")
    return role.name, RoleGrant(frozenset(parsed.p4_ids), frozenset(parsed.p4_names),
                                parsed.packet_replication, parsed.receives_packet_ins,
                                parsed.can_send_packet_outs, parsed.can_push_pipeline)


# the entity field whose P4 id decides which role owns an update
_OWNER_ID = {
    "table_entry": lambda e: e.table_id,
    "action_profile_member": lambda e: e.action_profile_id,
    "action_profile_group": lambda e: e.action_profile_id,
    "meter_entry": lambda e: e.meter_id,
    "direct_meter_entry": lambda e: e.table_entry.table_id,
    "counter_entry": lambda e: e.counter_id,
    "direct_counter_entry": lambda e: e.table_entry.table_id,
    "register_entry": lambda e: e.register_id,
    "digest_entry": lambda e: e.digest_id,
    "value_set_entry": lambda e: e.value_set_id,
    "extern_entry": lambda e: e.extern_id,
}


def entity_allowed(grant: RoleGrant | None, entity: p4rt.Entity,
                   names_by_id: dict[int, str]) -> bool:
    """Whether ``grant`` covers ``entity`` (None: full access). An entity with no kind set is
    let through, so it gets the usual error for a malformed update."""
    if grant is None:
        return True
    kind = entity.WhichOneof("entity")
    if kind is None:
        return True
    if kind == "packet_replication_engine_entry":
        return grant.packet_replication
    owner = _OWNER_ID.get(kind)
    return owner is not None and grant.allows_id(owner(getattr(entity, kind)), names_by_id)
