"""Small dataclasses for P4Runtime entities, addressed by names (see :mod:`controlplane.codec`
for the conversion to and from protobuf).

Values in ``match``/``params`` may be anything :mod:`controlplane.encoding` parses (ints, IP/MAC
strings, "10.0.0.0/8", "v&&&m", "lo..hi"); entities read back from a switch carry ints for
exact/optional keys and params, and :class:`~controlplane.encoding.Match` objects otherwise.
A field left out of ``match`` is "don't care" (allowed for ternary/lpm/range/optional keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MeterConfig:
    cir: int
    cburst: int
    pir: int
    pburst: int


@dataclass
class TableEntry:
    """One entry of ``table``. Exactly one of ``action`` (direct), ``member`` or ``group``
    (indirect tables) is set; ``is_default`` addresses the table's default entry (no match).
    For reads, ``table=None`` reads every table and an empty ``match`` every entry."""

    table: str | None = None
    match: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    member: int | None = None
    group: int | None = None
    is_default: bool = False
    idle_timeout_ns: int = 0
    meter: MeterConfig | None = None
    counter: tuple[int, int] | None = None  # (packets, bytes) of the direct counter
    metadata: bytes = b""


@dataclass
class ActionProfileMember:
    profile: str | None = None
    member_id: int | None = None
    action: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupMember:
    member_id: int
    weight: int = 1
    watch_port: int | None = None  # skip this member while that port is down


@dataclass
class ActionProfileGroup:
    profile: str | None = None
    group_id: int | None = None
    members: list[GroupMember] = field(default_factory=list)
    max_size: int = 0


@dataclass(frozen=True)
class Replica:
    port: int
    instance: int = 0


@dataclass
class MulticastGroup:
    group_id: int | None = None  # None (or 0) on read: all groups
    replicas: list[Replica] = field(default_factory=list)


@dataclass
class CloneSession:
    session_id: int | None = None
    replicas: list[Replica] = field(default_factory=list)
    class_of_service: int = 0
    packet_length_bytes: int = 0


@dataclass
class CounterEntry:
    counter: str | None = None
    index: int | None = None  # None: every index
    packets: int = 0
    bytes: int = 0


@dataclass
class DirectCounterEntry:
    table_entry: TableEntry
    packets: int = 0
    bytes: int = 0


@dataclass
class MeterEntry:
    meter: str | None = None
    index: int | None = None
    config: MeterConfig | None = None  # None: reset to default (all packets green)


@dataclass
class DirectMeterEntry:
    table_entry: TableEntry
    config: MeterConfig | None = None


@dataclass
class RegisterEntry:
    register: str | None = None
    index: int | None = None  # None: every index
    value: Any = 0


@dataclass
class DigestConfig:
    digest: str
    max_timeout_ns: int = 0
    max_list_size: int = 1
    ack_timeout_ns: int = 1_000_000_000


Entity = (TableEntry | ActionProfileMember | ActionProfileGroup | MulticastGroup | CloneSession
          | CounterEntry | DirectCounterEntry | MeterEntry | DirectMeterEntry | RegisterEntry
          | DigestConfig)


@dataclass
class PacketIn:
    payload: bytes
    metadata: dict[str, int]


@dataclass
class DigestList:
    digest: str
    list_id: int
    data: list[dict[str, int]]
    timestamp: int = 0
