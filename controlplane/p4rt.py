"""cellfabric's P4Runtime client: the public names in one place.

    from controlplane.p4rt import SwitchConnection, TableEntry
    with SwitchConnection("127.0.0.1:9559", device_id=0) as sw:
        sw.set_pipeline("build/fabric.p4info.txtpb", "build/fabric.json")
        sw.insert(TableEntry("MyIngress.ipv4_lpm", match={"hdr.ipv4.dstAddr": "10.0.0.0/8"},
                             action="MyIngress.set_nhop", params={"port": 1}))

The implementation is split by job: :mod:`~controlplane.p4info` (names), :mod:`~controlplane.
encoding` (values), :mod:`~controlplane.entities` + :mod:`~controlplane.codec` (dataclasses <->
protobuf), :mod:`~controlplane.connection` + :mod:`~controlplane.packetio` (RPCs, stream),
:mod:`~controlplane.resync` + :mod:`~controlplane.state` (restore after a switch restart),
:mod:`~controlplane.fabric` (many switches), :mod:`~controlplane.errors`.
"""

from controlplane.codec import Codec
from controlplane.connection import Pipeline, SwitchConnection
from controlplane.encoding import Match, format_match, format_value, parse_match
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    CounterEntry,
    DigestConfig,
    DigestList,
    DirectCounterEntry,
    DirectMeterEntry,
    Entity,
    GroupMember,
    MeterConfig,
    MeterEntry,
    MulticastGroup,
    PacketIn,
    RegisterEntry,
    Replica,
    TableEntry,
)
from controlplane.errors import (
    ControlPlaneError,
    EncodeError,
    NoPipelineError,
    NotPrimaryError,
    P4InfoLookupError,
    P4RuntimeError,
    SwitchUnavailableError,
)
from controlplane.fabric import Fabric, FabricError
from controlplane.p4info import P4InfoIndex, load_p4info
from controlplane.writes import Batch, Update

__all__ = [
    "ActionProfileGroup", "ActionProfileMember", "Batch", "CloneSession", "Codec",
    "ControlPlaneError", "CounterEntry", "DigestConfig", "DigestList", "DirectCounterEntry",
    "DirectMeterEntry", "EncodeError", "Entity", "Fabric", "FabricError", "GroupMember", "Match",
    "MeterConfig", "MeterEntry", "MulticastGroup", "NoPipelineError", "NotPrimaryError",
    "P4InfoIndex", "P4InfoLookupError", "P4RuntimeError", "PacketIn", "Pipeline",
    "RegisterEntry", "Replica", "SwitchConnection", "SwitchUnavailableError", "TableEntry",
    "Update", "format_match", "format_value", "load_p4info", "parse_match",
]
