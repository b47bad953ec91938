"""The controller's switch connections, in-process: the same FabricController, the same
P4Runtime protos, handled by the same device code the P4Runtime server runs
(``p4sim.switch.p4runtime.device``), without gRPC or sockets. A simulated fabric and an
emulated one of the same topology therefore hold identical tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4rt

from controlplane.channel import ChannelSet, Pipeline
from controlplane.codec import Codec
from controlplane.entities import Entity
from controlplane.errors import ControlPlaneError
from controlplane.p4info import P4InfoIndex, load_p4info
from p4sim.switch.p4runtime.arbitration import Arbiter
from p4sim.switch.p4runtime.codec import P4RTError
from p4sim.switch.p4runtime.device import Device

T = TypeVar("T")

# (path, mtime_ns, size) of the P4Info and of the JSON -> the pipeline they make. Every switch
# of a fabric loads the same two files: parsing the text P4Info took 33 ms a switch (10 s at
# k=16), and copying it into a request and again into the device 6 ms.
_PIPELINE_FILES: dict[tuple[str, int, int, str, int, int], LocalPipeline] = {}


class LocalPipeline(NamedTuple):
    """A pipeline's files, read once: the config every switch's device keeps (one message,
    never changed: see ``Device.commit_pipeline``) and one codec over its P4Info."""

    config: p4rt.ForwardingPipelineConfig
    codec: Codec


class LocalUpdate(NamedTuple):
    """What the device reads of a ``p4.v1.Update``: its type and its entity, which here is
    the controller's own message (the device reads entities, never keeps or changes them)."""

    type: int
    entity: p4rt.Entity


def _file_key(path: str | Path) -> tuple[str, int, int]:
    st = Path(path).stat()
    return str(Path(path).resolve()), st.st_mtime_ns, st.st_size


def pipeline_files(p4info_path: str | Path, json_path: str | Path) -> LocalPipeline:
    """The pipeline of a P4Info and a BMv2 JSON, read once while the files stay unchanged."""
    key = (*_file_key(p4info_path), *_file_key(json_path))
    found = _PIPELINE_FILES.get(key)
    if found is None:
        if len(_PIPELINE_FILES) > 8:  # a sweep compiles few programs: keep it small anyway
            _PIPELINE_FILES.clear()
        config = p4rt.ForwardingPipelineConfig(p4info=load_p4info(p4info_path),
                                               p4_device_config=Path(json_path).read_bytes())
        codec = Codec(P4InfoIndex(config.p4info))
        codec.shared_protos = {}  # the device never changes nor keeps what it is written
        found = _PIPELINE_FILES[key] = LocalPipeline(config, codec)
    return found


class LocalConnection:
    """What FabricController uses of a ``SwitchConnection``, served by a local ``Device``."""

    def __init__(self, name: str, dp: Any, device_id: int) -> None:
        self.name = name
        self.device_id = device_id
        self.device = Device(dp, device_id, Arbiter())
        self._codec: Codec | None = None

    @property
    def codec(self) -> Codec:
        if self._codec is None:
            raise ControlPlaneError(f"switch {self.name}: no pipeline")
        return self._codec

    def set_pipeline(self, p4info_path: str | Path, json_path: str | Path) -> None:
        # SetForwardingPipelineConfig(VERIFY_AND_COMMIT), its checks and its errors, without
        # building the request: the device keeps the fabric's one config message
        pipeline = pipeline_files(p4info_path, json_path)
        self._call("SetForwardingPipelineConfig", self.device.commit_pipeline,
                   pipeline.config, self.device_id)
        self._codec = pipeline.codec

    def get_pipeline(self) -> Pipeline:
        req = p4rt.GetForwardingPipelineConfigRequest(device_id=self.device_id)
        out = p4rt.ForwardingPipelineConfig()
        self._call("GetForwardingPipelineConfig", self.device.get_pipeline, req, out)
        return Pipeline(out.p4info, out.p4_device_config, out.cookie.cookie)

    def write_protos(self, updates: Iterable[p4rt.Update | LocalUpdate]) -> None:
        # The device's write of a WriteRequest(device_id, updates), without building one:
        # pure-Python protobuf copies every update into it (1 s of k=8's set-up).
        status = self._call("Write", self.device.write_updates, list(updates), self.device_id)
        if status.code:
            for i, detail in enumerate(status.details):
                err = p4rt.Error()
                detail.Unpack(err)
                if err.canonical_code:
                    raise ControlPlaneError(
                        f"switch {self.name}: Write: update {i}: "
                        f"{code_pb2.Code.Name(err.canonical_code)}: {err.message}")

    def write_entities(self, update_type: int, entities: Iterable[p4rt.Entity]) -> None:
        """``write_protos`` of an update of ``update_type`` per entity, without building the
        ``Update`` messages (each would copy its entity: 0.75 s of k=8's set-up)."""
        self.write_protos([LocalUpdate(update_type, e) for e in entities])

    def read_protos(self, *entities: p4rt.Entity) -> list[p4rt.Entity]:
        req = p4rt.ReadRequest(device_id=self.device_id, entities=entities)
        found, err = self._call("Read", self.device.read, req)
        if err is not None:
            raise ControlPlaneError(f"switch {self.name}: Read: {err.message}")
        return found

    def read(self, *entities: Entity) -> list[Entity]:
        protos = self.read_protos(*(self.codec.to_proto(e, for_read=True) for e in entities))
        return [self.codec.from_proto(p) for p in protos]

    def _call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except P4RTError as err:
            raise ControlPlaneError(f"switch {self.name}: {what}: "
                                    f"{code_pb2.Code.Name(err.code)}: {err.message}") from None


class LocalFabric(ChannelSet[LocalConnection]):
    """What FabricController uses of a ``Fabric``: run a function on every switch, here one
    after the other in name order (deterministic)."""

    def __init__(self, connections: dict[str, LocalConnection]) -> None:
        self.connections = dict(sorted(connections.items()))

    def run(self, fn: Callable[[LocalConnection], T], what: str = "operation") -> dict[str, T]:
        return {name: fn(conn) for name, conn in self.connections.items()}

    def close(self) -> None:
        for conn in self.connections.values():
            conn.device.close()
