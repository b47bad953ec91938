"""Small dataclasses for P4Runtime entities, addressed by names, that encode and decode
themselves against the P4Info (finsy's style): ``encode(codec, out, ...)`` fills a
``p4.v1.Entity``, ``decode(codec, msg)`` builds the dataclass back, ``describe(codec)`` names it
for error messages. The :class:`~controlplane.codec.Codec` carries the P4Info index and the
shared encoders (actions, table entries); it dispatches to these by type, and back by the
entity's oneof through :data:`DECODERS`.

Values in ``match``/``params`` may be anything :mod:`controlplane.encoding` parses (ints, IP/MAC
strings, "10.0.0.0/8", "v&&&m", "lo..hi"); entities read back from a switch carry ints for
exact/optional keys and params, and :class:`~controlplane.encoding.Match` objects otherwise.
A field left out of ``match`` is "don't care" (allowed for ternary/lpm/range/optional keys).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from p4.v1 import p4data_pb2, p4runtime_pb2

from controlplane import encoding
from controlplane.errors import EncodeError

if TYPE_CHECKING:
    from controlplane.codec import Codec

Proto = p4runtime_pb2.Entity
_PORT_BITS = 32  # watch_port/replica port are opaque bytestrings; BMv2 ports are 9 bits


@dataclass(frozen=True)
class MeterConfig:
    cir: int
    cburst: int
    pir: int
    pburst: int

    def to_proto(self) -> p4runtime_pb2.MeterConfig:
        return p4runtime_pb2.MeterConfig(cir=self.cir, cburst=self.cburst, pir=self.pir,
                                         pburst=self.pburst)

    @classmethod
    def from_proto(cls, m: p4runtime_pb2.MeterConfig) -> MeterConfig:
        return cls(m.cir, m.cburst, m.pir, m.pburst)


@dataclass
class TableEntry:
    """One entry of ``table``. Exactly one of ``action`` (direct), ``member`` or ``group``
    (indirect tables) is set; ``is_default`` addresses the table's default entry (no match).
    For reads, ``table=None`` reads every table and an empty ``match`` every entry."""

    KIND: ClassVar[tuple[str, str | None]] = ("table_entry", None)
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

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        codec.fill_table_entry(out.table_entry, self, for_read, for_delete)

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> TableEntry:
        return codec.table_entry_from(msg.table_entry)

    def describe(self, codec: Codec) -> str:
        table = codec.full_name("table", self.table)
        if self.is_default:
            return f"default entry of table {table}"
        keys = " ".join(f"{k}={codec.format_key(table, k, v)}"
                        for k, v in self.match.items()) or "(no key)"
        prio = f" priority={self.priority}" if self.priority else ""
        return f"table {table} entry {keys}{prio}"


@dataclass
class ActionProfileMember:
    KIND: ClassVar[tuple[str, str | None]] = ("action_profile_member", None)
    profile: str | None = None
    member_id: int | None = None
    action: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        m = out.action_profile_member
        m.SetInParent()
        if self.profile is not None:
            m.action_profile_id = codec.index.id("action_profile", self.profile)
        m.member_id = self.member_id or 0
        where = f"action profile {self.profile} member {self.member_id}"
        if self.action is not None:
            codec.fill_action(m.action, self.action, self.params, where)
        elif not (for_read or for_delete):
            raise EncodeError(f"{where}: missing action")

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> ActionProfileMember:
        m = msg.action_profile_member
        action, params = codec.action_from(m.action)
        return cls(codec.index.name_of(m.action_profile_id), m.member_id, action, params)

    def describe(self, codec: Codec) -> str:
        return (f"action profile {codec.full_name('action_profile', self.profile)} "
                f"member {self.member_id}")


@dataclass(frozen=True)
class GroupMember:
    member_id: int
    weight: int = 1
    watch_port: int | None = None  # skip this member while that port is down


@dataclass
class ActionProfileGroup:
    KIND: ClassVar[tuple[str, str | None]] = ("action_profile_group", None)
    profile: str | None = None
    group_id: int | None = None
    members: list[GroupMember] = field(default_factory=list)
    max_size: int = 0

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        g = out.action_profile_group
        g.SetInParent()
        if self.profile is not None:
            g.action_profile_id = codec.index.id("action_profile", self.profile)
        g.group_id = self.group_id or 0
        g.max_size = self.max_size
        for gm in self.members:
            pm = g.members.add(member_id=gm.member_id, weight=gm.weight)
            if gm.watch_port is not None:
                pm.watch_port = encoding.encode_value(
                    gm.watch_port, _PORT_BITS, f"group {self.group_id}: watch_port")

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> ActionProfileGroup:
        g = msg.action_profile_group
        members = [GroupMember(pm.member_id, pm.weight, _watch_port(pm)) for pm in g.members]
        return cls(codec.index.name_of(g.action_profile_id), g.group_id, members, g.max_size)

    def describe(self, codec: Codec) -> str:
        return (f"action profile {codec.full_name('action_profile', self.profile)} "
                f"group {self.group_id}")


@dataclass(frozen=True)
class Replica:
    port: int
    instance: int = 0

    @classmethod
    def from_proto(cls, r: p4runtime_pb2.Replica) -> Replica:
        port = encoding.decode(r.port) if r.WhichOneof("port_kind") == "port" else r.egress_port
        return cls(port, r.instance)


@dataclass
class MulticastGroup:
    KIND: ClassVar[tuple[str, str | None]] = ("packet_replication_engine_entry",
                                              "multicast_group_entry")
    group_id: int | None = None  # None (or 0) on read: all groups
    replicas: list[Replica] = field(default_factory=list)

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        mg = out.packet_replication_engine_entry.multicast_group_entry
        mg.SetInParent()
        mg.multicast_group_id = self.group_id or 0
        for r in self.replicas:
            mg.replicas.add(egress_port=r.port, instance=r.instance)

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> MulticastGroup:
        mg = msg.packet_replication_engine_entry.multicast_group_entry
        return cls(mg.multicast_group_id, [Replica.from_proto(r) for r in mg.replicas])

    def describe(self, codec: Codec) -> str:
        return f"multicast group {self.group_id}"


@dataclass
class CloneSession:
    KIND: ClassVar[tuple[str, str | None]] = ("packet_replication_engine_entry",
                                              "clone_session_entry")
    session_id: int | None = None
    replicas: list[Replica] = field(default_factory=list)
    class_of_service: int = 0
    packet_length_bytes: int = 0

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        cs = out.packet_replication_engine_entry.clone_session_entry
        cs.SetInParent()
        cs.session_id = self.session_id or 0
        cs.class_of_service = self.class_of_service
        cs.packet_length_bytes = self.packet_length_bytes
        for r in self.replicas:
            cs.replicas.add(egress_port=r.port, instance=r.instance)

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> CloneSession:
        cs = msg.packet_replication_engine_entry.clone_session_entry
        return cls(cs.session_id, [Replica.from_proto(r) for r in cs.replicas],
                   cs.class_of_service, cs.packet_length_bytes)

    def describe(self, codec: Codec) -> str:
        return f"clone session {self.session_id}"


def _describe_indexed(codec: Codec, kind: str, name: str | None, index: int | None) -> str:
    return f"{kind} {codec.full_name(kind, name)}[{'*' if index is None else index}]"


@dataclass
class CounterEntry:
    KIND: ClassVar[tuple[str, str | None]] = ("counter_entry", None)
    counter: str | None = None
    index: int | None = None  # None: every index
    packets: int = 0
    bytes: int = 0

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        c = out.counter_entry
        c.SetInParent()
        if self.counter is not None:
            c.counter_id = codec.index.id("counter", self.counter)
        if self.index is not None:
            c.index.index = self.index
        if not for_read:
            c.data.packet_count, c.data.byte_count = self.packets, self.bytes

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> CounterEntry:
        c = msg.counter_entry
        return cls(codec.index.name_of(c.counter_id), c.index.index, c.data.packet_count,
                   c.data.byte_count)

    def describe(self, codec: Codec) -> str:
        return _describe_indexed(codec, "counter", self.counter, self.index)


@dataclass
class DirectCounterEntry:
    KIND: ClassVar[tuple[str, str | None]] = ("direct_counter_entry", None)
    table_entry: TableEntry
    packets: int = 0
    bytes: int = 0

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        d = out.direct_counter_entry
        d.SetInParent()
        codec.fill_table_entry(d.table_entry, self.table_entry, True, False)
        if not for_read:
            d.data.packet_count, d.data.byte_count = self.packets, self.bytes

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> DirectCounterEntry:
        d = msg.direct_counter_entry
        return cls(codec.table_entry_from(d.table_entry), d.data.packet_count,
                   d.data.byte_count)

    def describe(self, codec: Codec) -> str:
        return f"direct resource of {self.table_entry.describe(codec)}"


@dataclass
class MeterEntry:
    KIND: ClassVar[tuple[str, str | None]] = ("meter_entry", None)
    meter: str | None = None
    index: int | None = None
    config: MeterConfig | None = None  # None: reset to default (all packets green)

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        me = out.meter_entry
        me.SetInParent()
        if self.meter is not None:
            me.meter_id = codec.index.id("meter", self.meter)
        if self.index is not None:
            me.index.index = self.index
        if self.config is not None:
            me.config.CopyFrom(self.config.to_proto())

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> MeterEntry:
        me = msg.meter_entry
        cfg = MeterConfig.from_proto(me.config) if me.HasField("config") else None
        return cls(codec.index.name_of(me.meter_id), me.index.index, cfg)

    def describe(self, codec: Codec) -> str:
        return _describe_indexed(codec, "meter", self.meter, self.index)


@dataclass
class DirectMeterEntry:
    KIND: ClassVar[tuple[str, str | None]] = ("direct_meter_entry", None)
    table_entry: TableEntry
    config: MeterConfig | None = None

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        dm = out.direct_meter_entry
        dm.SetInParent()
        codec.fill_table_entry(dm.table_entry, self.table_entry, True, False)
        if self.config is not None:
            dm.config.CopyFrom(self.config.to_proto())

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> DirectMeterEntry:
        dm = msg.direct_meter_entry
        cfg = MeterConfig.from_proto(dm.config) if dm.HasField("config") else None
        return cls(codec.table_entry_from(dm.table_entry), cfg)

    def describe(self, codec: Codec) -> str:
        return f"direct resource of {self.table_entry.describe(codec)}"


@dataclass
class RegisterEntry:
    KIND: ClassVar[tuple[str, str | None]] = ("register_entry", None)
    register: str | None = None
    index: int | None = None  # None: every index
    value: Any = 0

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        r = out.register_entry
        r.SetInParent()
        if self.register is not None:
            r.register_id = codec.index.id("register", self.register)
        if self.index is not None:
            r.index.index = self.index
        if not for_read:
            width = codec.index.register_bitwidth(self.register) \
                if self.register is not None else 0
            r.data.bitstring = encoding.encode_value(
                self.value, width, f"register {self.register}[{self.index}]")

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> RegisterEntry:
        r = msg.register_entry
        return cls(codec.index.name_of(r.register_id), r.index.index, p4data_int(r.data))

    def describe(self, codec: Codec) -> str:
        return _describe_indexed(codec, "register", self.register, self.index)


@dataclass
class DigestConfig:
    KIND: ClassVar[tuple[str, str | None]] = ("digest_entry", None)
    digest: str
    max_timeout_ns: int = 0
    max_list_size: int = 1
    ack_timeout_ns: int = 1_000_000_000

    def encode(self, codec: Codec, out: Proto, for_read: bool, for_delete: bool) -> None:
        d = out.digest_entry
        d.SetInParent()
        d.digest_id = codec.index.id("digest", self.digest)
        d.config.max_timeout_ns = self.max_timeout_ns
        d.config.max_list_size = self.max_list_size
        d.config.ack_timeout_ns = self.ack_timeout_ns

    @classmethod
    def decode(cls, codec: Codec, msg: Proto) -> DigestConfig:
        d = msg.digest_entry
        return cls(codec.index.name_of(d.digest_id), d.config.max_timeout_ns,
                   d.config.max_list_size, d.config.ack_timeout_ns)

    def describe(self, codec: Codec) -> str:
        return f"digest {self.digest} config"


Entity = (TableEntry | ActionProfileMember | ActionProfileGroup | MulticastGroup | CloneSession
          | CounterEntry | DirectCounterEntry | MeterEntry | DirectMeterEntry | RegisterEntry
          | DigestConfig)

# Back from the wire: (Entity oneof, inner oneof for PRE entries) -> the class's decoder.
DECODERS: dict[tuple[str, str | None], Callable[[Codec, Proto], Entity]] = {
    cls.KIND: cls.decode for cls in (
        TableEntry, ActionProfileMember, ActionProfileGroup, MulticastGroup, CloneSession,
        CounterEntry, DirectCounterEntry, MeterEntry, DirectMeterEntry, RegisterEntry,
        DigestConfig)}


def kind_of(msg: Proto) -> tuple[str, str | None]:
    which = msg.WhichOneof("entity") or ""
    if which == "packet_replication_engine_entry":
        return which, msg.packet_replication_engine_entry.WhichOneof("type")
    return which, None


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


def _watch_port(pm: p4runtime_pb2.ActionProfileGroup.Member) -> int | None:
    which = pm.WhichOneof("watch_kind")
    if which == "watch_port":
        return encoding.decode(pm.watch_port)
    if which == "watch":
        return pm.watch
    return None


def p4data_int(d: p4data_pb2.P4Data) -> int:
    which = d.WhichOneof("data")
    if which == "bitstring":
        return encoding.decode(d.bitstring)
    if which == "bool":
        return int(d.bool)
    return 0
