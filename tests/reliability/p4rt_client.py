"""A raw P4Runtime client for the reliability tier: a primary stream, requests built by P4Info
name, and each outcome reduced to one gRPC code name (the per-update code of a one-update
Write, else the RPC's code), so one battery runs unchanged against p4sim and real BMv2."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4.v1 import p4runtime_pb2_grpc

Update = p4rt.Update
Action = p4rt.SetForwardingPipelineConfigRequest


def load_p4info(path: Path) -> p4info_pb2.P4Info:
    return text_format.Parse(path.read_text(), p4info_pb2.P4Info())


def code_of(err: grpc.RpcError) -> str:
    """A failed Write with per-update details reports the code of its first failed update."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            for detail in status.details:
                p4err = p4rt.Error()
                if detail.Unpack(p4err) and p4err.canonical_code:
                    return code_pb2.Code.Name(p4err.canonical_code)
    return err.code().name


class Stream:
    """One StreamChannel: arbitration sent at open; responses collected by kind."""

    def __init__(self, stub: p4runtime_pb2_grpc.P4RuntimeStub, device_id: int,
                 election: int) -> None:
        self.out: queue.Queue[p4rt.StreamMessageRequest | None] = queue.Queue()
        self.inbox: dict[str, queue.Queue] = {k: queue.Queue() for k in
                                              ("arbitration", "packet", "digest", "error")}
        self.ended = threading.Event()
        self.error: grpc.RpcError | None = None
        self.call = stub.StreamChannel(iter(self.out.get, None))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        self.arbitrate(device_id, election)

    def arbitrate(self, device_id: int, election: int) -> None:
        req = p4rt.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = election
        self.out.put(req)

    def _read(self) -> None:
        try:
            for msg in self.call:
                kind = msg.WhichOneof("update")
                self.inbox.setdefault(kind, queue.Queue()).put(msg)
        except grpc.RpcError as err:
            self.error = err
        self.ended.set()

    def send(self, msg: p4rt.StreamMessageRequest) -> None:
        self.out.put(msg)

    def close(self) -> None:
        self.out.put(None)
        self.call.cancel()
        self.thread.join(timeout=3)


class Client:
    """Requests by name against the program of ``p4info``; ``primary`` holds the election."""

    ELECTION = 10

    def __init__(self, addr: str, device_id: int, p4info_path: Path, json_path: Path,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self.addr = addr
        self.device_id = device_id
        self.info = load_p4info(p4info_path)
        self.json = json_path.read_bytes()
        options = [("grpc.max_metadata_size", 8 << 20)]
        self.channel = grpc.insecure_channel(addr, options=options) if credentials is None \
            else grpc.secure_channel(addr, credentials, options=options)  # TLS rows
        grpc.channel_ready_future(self.channel).result(timeout=20)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.primary = Stream(self.stub, device_id, self.ELECTION)
        self.primary.inbox["arbitration"].get(timeout=10)
        self.streams: list[Stream] = [self.primary]

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()

    def stream(self, device_id: int | None = None, election: int = 1) -> Stream:
        s = Stream(self.stub, self.device_id if device_id is None else device_id, election)
        self.streams.append(s)
        return s

    # ---- ids by name ----
    def id(self, kind: str, name: str) -> int:
        for obj in getattr(self.info, kind):
            if obj.preamble.name in (name, name.split(".")[-1]) or \
                    obj.preamble.name.endswith("." + name):
                return obj.preamble.id
        raise KeyError(f"{kind} {name}")

    def meta_id(self, header: str, field: str) -> int:
        cpm = next(c for c in self.info.controller_packet_metadata if c.preamble.name == header)
        return next(m.id for m in cpm.metadata if m.name == field)

    # ---- RPCs, each returning a code name ("OK" on success) ----
    def set_pipeline(self, action: int = Action.VERIFY_AND_COMMIT,
                     p4info: p4info_pb2.P4Info | None = None, device_config: bytes | None = None,
                     device_id: int | None = None, election: int | None = ELECTION) -> str:
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=self.device_id if device_id is None else device_id, action=action)
        if election is not None:
            req.election_id.low = election
        req.config.p4info.CopyFrom(self.info if p4info is None else p4info)
        req.config.p4_device_config = self.json if device_config is None else device_config
        req.config.cookie.cookie = 7
        return self._call(self.stub.SetForwardingPipelineConfig, req, timeout=60)

    def get_pipeline(self, response_type: int = 0, device_id: int | None = None) -> str:
        req = p4rt.GetForwardingPipelineConfigRequest(
            device_id=self.device_id if device_id is None else device_id,
            response_type=response_type)
        return self._call(self.stub.GetForwardingPipelineConfig, req)

    def write(self, *updates: p4rt.Update, election: int | None = ELECTION,
              device_id: int | None = None, atomicity: int = 0) -> str:
        req = p4rt.WriteRequest(device_id=self.device_id if device_id is None else device_id,
                                updates=updates, atomicity=atomicity)
        if election is not None:
            req.election_id.low = election
        return self._call(self.stub.Write, req)

    def write_errors(self, *updates: p4rt.Update) -> list[str]:
        """The per-update codes of a Write (all "OK" if it succeeded)."""
        req = p4rt.WriteRequest(device_id=self.device_id, updates=updates)
        req.election_id.low = self.ELECTION
        try:
            self.stub.Write(req, timeout=30)
        except grpc.RpcError as err:
            for key, value in err.trailing_metadata() or ():
                if key == "grpc-status-details-bin":
                    status = status_pb2.Status()
                    status.ParseFromString(value)
                    out = []
                    for detail in status.details:
                        p4err = p4rt.Error()
                        detail.Unpack(p4err)
                        out.append(code_pb2.Code.Name(p4err.canonical_code))
                    return out
            return [err.code().name]
        return ["OK"] * len(updates)

    def read(self, *entities: p4rt.Entity, device_id: int | None = None) -> str:
        req = p4rt.ReadRequest(device_id=self.device_id if device_id is None else device_id,
                               entities=entities)
        try:
            for _ in self.stub.Read(req, timeout=20):
                pass
        except grpc.RpcError as err:
            return code_of(err)
        return "OK"

    def read_entities(self, *entities: p4rt.Entity) -> list[p4rt.Entity]:
        req = p4rt.ReadRequest(device_id=self.device_id, entities=entities)
        return [e for r in self.stub.Read(req, timeout=20) for e in r.entities]

    @staticmethod
    def _call(rpc, req, timeout: float = 20) -> str:
        try:
            rpc(req, timeout=timeout)
        except grpc.RpcError as err:
            return code_of(err)
        return "OK"
