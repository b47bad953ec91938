"""The contract between the p4sim data plane and the servers that control it.

The data plane (``p4sim.switch.dataplane``) executes a BMv2 JSON pipeline; the P4Runtime server
(``p4sim.switch.p4runtime``) and the admin command (``p4sim ctl``) drive it only through the
``DataPlaneApi`` below. Everything is addressed by the *names* the BMv2 JSON uses (p4c gives the
same fully-qualified names to P4Info objects, e.g. ``MyIngress.ipv4_lpm``), so the server maps
P4Info ids to names and never reaches into the runtime's internals.

Conventions:
- Integers everywhere for field values; the server converts P4Runtime bytestrings.
- Key fields are given in the order of the JSON table's ``key`` list.
- ``priority`` follows P4Runtime: a larger value wins. (BMv2's JSON/CLI use the opposite sense;
  the data plane converts internally.) Tables without ternary/range/optional keys use priority 0.
- Action parameters are given in the order of the JSON action's ``runtime_data``.
- Every failure raises ``ApiError`` with a gRPC-style code; a failed call changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Code(enum.IntEnum):
    """Subset of google.rpc.Code used by BMv2/PI for P4Runtime errors."""

    OK = 0
    INVALID_ARGUMENT = 3
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


class ApiError(Exception):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---- match keys ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Exact:
    value: int


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True)
class Optional_:
    """P4Runtime 'optional' match: ``value=None`` is the wildcard."""

    value: int | None


KeyField = Exact | Lpm | Ternary | Range | Optional_


# ---- actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActionCall:
    action: str  # JSON action name, e.g. "MyIngress.set_nhop"
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class MemberRef:
    """Entry of an indirect table (action profile/selector) pointing at one member."""

    member_id: int


@dataclass(frozen=True)
class GroupRef:
    """Entry of an indirect table (action selector) pointing at one group."""

    group_id: int


EntryAction = ActionCall | MemberRef | GroupRef


@dataclass(frozen=True)
class MeterConfig:
    """Two-rate three-color meter; rates per second, bursts in units (packets or bytes)."""

    cir: int
    cburst: int
    pir: int
    pburst: int


@dataclass
class TableEntry:
    key: tuple[KeyField, ...]
    action: EntryAction
    priority: int = 0
    timeout_ms: int | None = None  # idle timeout, if the table supports it
    meter: MeterConfig | None = None  # direct meter config, if the table has one
    counter: tuple[int, int] | None = None  # direct counter (packets, bytes), on read


@dataclass(frozen=True)
class GroupMember:
    member_id: int
    weight: int = 1
    watch_port: int | None = None  # member is skipped while this port is down


@dataclass
class Replica:
    egress_port: int
    instance: int  # egress_rid for multicast; ignored by BMv2 for clone sessions


@dataclass
class CloneSession:
    session_id: int
    replicas: list[Replica]
    class_of_service: int = 0
    packet_length_bytes: int = 0  # 0 = do not truncate


@dataclass
class Digest:
    name: str  # learn list name in the JSON (== P4Info digest name)
    values: list[tuple[int, ...]]  # one tuple per digest message, fields in learn-list order
    list_id: int = 0


@dataclass
class PortStats:
    rx_packets: int = 0
    tx_packets: int = 0
    rx_dropped_malformed: int = 0  # truncated/garbage frames counted and dropped
    queue_drops: int = 0  # tail drops in the traffic manager for this egress port
    # For the runner's "could the machine keep up" check (see topologies/validity.py):
    rx_socket_drops: int = 0  # frames the kernel dropped because the switch read too slowly
    busy_seconds: float = 0.0  # time this port's queue was non-empty
    busy_tx_packets: int = 0  # packets dequeued while the queue was non-empty
    rate_pps: int = 0  # configured service rate (0 = unlimited)
    queue_depth: int = 0  # packets waiting in this port's queues now (all priorities)


@dataclass
class SwitchStats:
    ports: dict[int, PortStats] = field(default_factory=dict)
    parser_errors: int = 0
    pipeline_drops: int = 0


PacketInHandler = Callable[[bytes], None]
DigestHandler = Callable[[Digest], None]


class DataPlaneApi(Protocol):
    """What the data plane offers its control servers. Thread-safe: servers call it from gRPC
    worker threads while packets flow."""

    device_id: int
    cpu_port: int | None

    # -- pipeline --
    def load_pipeline(self, bmv2_json: bytes) -> None:
        """Validate and install a new pipeline, discarding all runtime state (entries, members,
        groups, registers, counters, meters, PRE). Raises ApiError(INVALID_ARGUMENT) on bad JSON."""

    def pipeline_json(self) -> bytes | None: ...

    # -- tables (by JSON table name) --
    def table_insert(self, table: str, entry: TableEntry) -> None: ...
    def table_modify(self, table: str, entry: TableEntry) -> None:
        """Replace action (and meter config if given) of the entry with the same key+priority."""

    def table_delete(self, table: str, key: tuple[KeyField, ...], priority: int) -> None: ...
    def table_entries(self, table: str) -> list[TableEntry]:
        """Current entries with their direct counter values filled in."""

    def table_clear(self, table: str) -> None: ...
    def table_set_default(self, table: str, action: ActionCall | None) -> None:
        """``None`` restores the JSON's default. ApiError(PERMISSION_DENIED) when it is const."""

    def table_get_default(self, table: str) -> ActionCall: ...

    # -- direct resources, addressed by the entry they belong to --
    def direct_counter_write(
        self, table: str, key: tuple[KeyField, ...], priority: int, packets: int, bytes_: int
    ) -> None: ...

    def direct_meter_set(
        self, table: str, key: tuple[KeyField, ...], priority: int, config: MeterConfig | None
    ) -> None: ...

    # -- action profiles / selectors (by JSON action_profiles name) --
    def member_add(self, profile: str, member_id: int, action: ActionCall) -> None: ...
    def member_modify(self, profile: str, member_id: int, action: ActionCall) -> None: ...
    def member_delete(self, profile: str, member_id: int) -> None: ...
    def members(self, profile: str) -> dict[int, ActionCall]: ...
    def group_add(
        self, profile: str, group_id: int, members: list[GroupMember], max_size: int = 0
    ) -> None: ...
    def group_modify(self, profile: str, group_id: int, members: list[GroupMember]) -> None: ...
    def group_delete(self, profile: str, group_id: int) -> None: ...
    def groups(self, profile: str) -> dict[int, list[GroupMember]]: ...

    # -- indirect counters, meters, registers (by JSON name) --
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...
    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None: ...
    def counter_size(self, name: str) -> int: ...
    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None: ...
    def meter_get(self, name: str, index: int) -> MeterConfig | None: ...
    def register_read(self, name: str, index: int) -> int: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_size(self, name: str) -> int: ...

    # -- packet replication engine --
    def mcast_group_set(self, group_id: int, replicas: list[Replica]) -> None:
        """Create or replace."""

    def mcast_group_delete(self, group_id: int) -> None: ...
    def mcast_groups(self) -> dict[int, list[Replica]]: ...
    def clone_session_set(self, session: CloneSession) -> None: ...
    def clone_session_delete(self, session_id: int) -> None: ...
    def clone_sessions(self) -> dict[int, CloneSession]: ...

    # -- packet I/O with the controller --
    def packet_out(self, frame: bytes) -> None:
        """Inject ``frame`` (controller header already prepended) as if it arrived on the CPU
        port."""

    def set_packet_in_handler(self, handler: PacketInHandler | None) -> None:
        """``handler(frame)`` receives every frame the pipeline emits on the CPU port (with the
        controller header at its front)."""

    def set_digest_handler(self, handler: DigestHandler | None) -> None: ...

    # -- ports and queues (simple_switch_CLI equivalents) --
    def port_up(self, port: int) -> bool: ...
    def set_port_up(self, port: int, up: bool) -> None: ...
    def set_queue_rate(self, pps: int, port: int | None = None, priority: int | None = None) -> None:
        """0 = unlimited. ``port=None`` sets every port."""

    def set_queue_depth(self, packets: int, port: int | None = None) -> None: ...
    def stats(self) -> SwitchStats: ...
