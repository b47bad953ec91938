"""P4Runtime role configs for the p4sim target, built on the client side.

The P4Runtime specification leaves ``Role.config`` (a ``google.protobuf.Any``) to the target;
p4sim's format is ``p4sim.v1.RoleConfig`` (documented in p4sim/switch/p4runtime/roleconfig.py):
the P4Info names or ids of the entities a role may write, and whether it may write multicast
groups and clone sessions, receive PacketIns, send PacketOuts and push the pipeline. The
message is declared again here, field for field, because controlplane speaks P4Runtime only
and never imports p4sim; real BMv2 (PI) ignores role configs altogether.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

ROLE_CONFIG_TYPE = "p4sim.v1.RoleConfig"
_FIELDS = [("p4_ids", 1, "TYPE_UINT32", True), ("p4_names", 2, "TYPE_STRING", True),
           ("packet_replication", 3, "TYPE_BOOL", False),
           ("receives_packet_ins", 4, "TYPE_BOOL", False),
           ("can_send_packet_outs", 5, "TYPE_BOOL", False),
           ("can_push_pipeline", 6, "TYPE_BOOL", False)]


def _role_config_class() -> type[Message]:
    pool = descriptor_pool.Default()
    try:  # p4sim's server, in the same process, may have declared it already
        descriptor = pool.FindMessageTypeByName(ROLE_CONFIG_TYPE)
    except KeyError:
        fdp = descriptor_pb2.FileDescriptorProto(name="p4sim/v1/role_config.proto",
                                                 package="p4sim.v1", syntax="proto3")
        msg = fdp.message_type.add(name="RoleConfig")
        field = descriptor_pb2.FieldDescriptorProto
        for name, number, ftype, repeated in _FIELDS:
            msg.field.add(name=name, number=number, type=getattr(field, ftype),
                          label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)
        pool.Add(fdp)
        descriptor = pool.FindMessageTypeByName(ROLE_CONFIG_TYPE)
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.21
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def role_config(p4_names: Iterable[str] = (), p4_ids: Iterable[int] = (), *,
                packet_replication: bool = False, receives_packet_ins: bool = False,
                can_send_packet_outs: bool = False, can_push_pipeline: bool = False,
                ) -> any_pb2.Any:
    """A p4sim.v1.RoleConfig packed for ``MasterArbitrationUpdate.role.config``."""
    cfg = _role_config_class()(p4_ids=list(p4_ids), p4_names=list(p4_names),
                               packet_replication=packet_replication,
                               receives_packet_ins=receives_packet_ins,
                               can_send_packet_outs=can_send_packet_outs,
                               can_push_pipeline=can_push_pipeline)
    out = any_pb2.Any()
    out.Pack(cfg)
    return out
