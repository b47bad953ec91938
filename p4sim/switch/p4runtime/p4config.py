"""PI's legacy pipeline wrapper `p4.tmp.P4DeviceConfig` (PI's proto/p4/tmp/p4config.proto).

Old P4Runtime clients, p4lang/tutorials' `p4runtime_lib` among them, put the BMv2 JSON in
`device_data` of this message and send the serialized message as `p4_device_config`. No wheel
ships the message (PI builds it), so it is declared here from its field layout, in a pool of
its own so that a process which also imports PI's generated module sees no clash.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="p4/tmp/p4config.proto", package="p4.tmp",
                                            syntax="proto3")
    msg = fd.message_type.add(name="P4DeviceConfig")
    msg.field.add(name="reassign", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_BOOL)
    msg.field.add(name="extras", number=2, label=_F.LABEL_OPTIONAL, type=_F.TYPE_MESSAGE,
                  type_name=".p4.tmp.P4DeviceConfig.Extras")
    msg.field.add(name="device_data", number=3, label=_F.LABEL_OPTIONAL, type=_F.TYPE_BYTES)
    extras = msg.nested_type.add(name="Extras")
    extras.field.add(name="kv", number=1, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
                     type_name=".p4.tmp.P4DeviceConfig.Extras.KvEntry")
    entry = extras.nested_type.add(name="KvEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
    return fd


_POOL = descriptor_pool.DescriptorPool()
DESCRIPTOR = _POOL.Add(_file())
P4DeviceConfig: Any = message_factory.MessageFactory(_POOL).GetPrototype(
    _POOL.FindMessageTypeByName("p4.tmp.P4DeviceConfig"))

# What PI logs when it unwraps one (its BMv2 target, PI 0.1.2).
DEPRECATION_NOTE = "p4::tmp::P4DeviceConfig is deprecated"


def unwrap_device_config(data: bytes) -> bytes | None:
    """The BMv2 JSON inside a serialized P4DeviceConfig, or None when ``data`` is not one.

    A JSON document never parses as this message with JSON in device_data: its first byte
    ('{' or whitespace) is not a valid tag of fields 1-3."""
    stripped = data.lstrip()
    if not data or stripped[:1] in (b"{", b"["):
        return None
    try:
        msg = P4DeviceConfig.FromString(data)
    except Exception:  # protobuf's DecodeError, or a C++ RuntimeError: not this message
        return None
    inner = bytes(msg.device_data)
    return inner if inner.lstrip()[:1] == b"{" else None
