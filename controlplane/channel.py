"""What the controller needs of its switches, declared once: a P4Runtime channel per switch
and a set of them run together. ``controlplane.connection.SwitchConnection`` and
``controlplane.fabric.Fabric`` implement it over gRPC; the simulator implements it in process
(the same device code the P4Runtime server runs, no sockets)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controlplane.codec import Codec
from controlplane.entities import Entity

T = TypeVar("T")
C = TypeVar("C")


@dataclass
class Pipeline:
    """What GetForwardingPipelineConfig returned (``controlplane.connection`` re-exports it)."""

    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int


class SwitchChannel(Protocol):
    """One switch's P4Runtime channel, as primary."""

    name: str
    device_id: int

    @property
    def codec(self) -> Codec: ...

    def set_pipeline(self, p4info_path: str | Path, json_path: str | Path) -> None: ...

    def get_pipeline(self) -> Any: ...

    def write_protos(self, updates: Iterable[p4runtime_pb2.Update]) -> None: ...

    def read_protos(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]: ...

    def read(self, *entities: Entity) -> list[Entity]: ...


class SwitchChannels(Protocol):
    """Every switch's channel by name; ``run`` calls a function on each and returns the
    results by name (raising if any failed)."""

    def __getitem__(self, name: str) -> SwitchChannel: ...

    def __iter__(self) -> Iterator[SwitchChannel]: ...

    def __len__(self) -> int: ...

    def run(self, fn: Callable[[Any], T], what: str = "operation") -> dict[str, T]: ...

    def close(self) -> None: ...


class ChannelSet(Generic[C]):
    """The by-name container part of ``SwitchChannels``, shared by its implementations."""

    connections: dict[str, C]

    def __getitem__(self, name: str) -> C:
        return self.connections[name]

    def __iter__(self) -> Iterator[C]:
        return iter(self.connections.values())

    def __len__(self) -> int:
        return len(self.connections)
