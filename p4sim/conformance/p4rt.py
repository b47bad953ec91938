"""A minimal P4Runtime client for the conformance runner, on the p4runtime protos only.

p4sim is a standalone toolchain (it may not import the project's controlplane), and the runner
needs only a few calls: become primary, push a pipeline, write table entries, default actions,
multicast groups and clone sessions. Errors come back as ``P4RuntimeError`` carrying the gRPC
code and the per-update messages the switch (BMv2/PI or p4sim) returned.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4.v1 import p4runtime_pb2_grpc

ELECTION = p4rt.Uint128(high=0, low=1)


class P4RuntimeError(RuntimeError):
    def __init__(self, what: str, err: grpc.RpcError) -> None:
        details = _error_details(err)
        code = err.code().name if hasattr(err, "code") else "UNKNOWN"
        super().__init__(f"{what}: {code}: {details}")
        self.code = code


def _error_details(err: grpc.RpcError) -> str:
    """The switch's own messages: per-update p4.v1.Error entries when present."""
    text = err.details() if hasattr(err, "details") else str(err)
    try:
        from google.rpc import status_pb2

        for key, value in err.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                msgs = []
                for detail in status.details:
                    e = p4rt.Error()
                    if detail.Unpack(e) and e.canonical_code:
                        msgs.append(e.message)
                if msgs:
                    return "; ".join(msgs)
    except Exception:
        pass
    return text or ""


def load_p4info(path: str) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".bin"):
        info.ParseFromString(data)
    else:
        text_format.Parse(data.decode("utf-8"), info)
    return info


class Client:
    """One primary connection to one device."""

    def __init__(self, addr: str, device_id: int, timeout: float = 10.0) -> None:
        self.device_id = device_id
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[Any] = queue.Queue()
        self._responses: queue.Queue[Any] = queue.Queue()
        # The stream waits for the channel to connect, and the arbitration reply's timeout
        # below bounds that wait. (grpc.channel_ready_future would start the channel's
        # connectivity poller, which then held up close() by ~0.2 s, a third of a test.)
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None),
                                               wait_for_ready=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        req = p4rt.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.CopyFrom(ELECTION)
        self._requests.put(req)
        reply = self._responses.get(timeout=timeout)
        if reply is None or reply.WhichOneof("update") != "arbitration":
            raise RuntimeError("P4Runtime: no arbitration reply from the switch")
        if reply.arbitration.status.code != 0:
            raise RuntimeError(f"P4Runtime: not primary: {reply.arbitration.status.message}")

    def _read(self) -> None:
        try:
            for msg in self._stream:
                if msg.WhichOneof("update") == "arbitration":
                    self._responses.put(msg)
        except grpc.RpcError:
            pass
        self._responses.put(None)

    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_json: bytes) -> None:
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=ELECTION,
            action=p4rt.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_json
        try:
            self.stub.SetForwardingPipelineConfig(req)
        except grpc.RpcError as e:
            raise P4RuntimeError("SetForwardingPipelineConfig", e) from None

    def write(self, update_type: int, entity: p4rt.Entity, what: str) -> None:
        req = p4rt.WriteRequest(device_id=self.device_id, election_id=ELECTION)
        upd = req.updates.add(type=update_type)
        upd.entity.CopyFrom(entity)
        try:
            self.stub.Write(req)
        except grpc.RpcError as e:
            raise P4RuntimeError(what, e) from None

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()
