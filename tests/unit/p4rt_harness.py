"""Shared helpers of the P4Runtime server tests: a real gRPC server on 127.0.0.1 (ephemeral
port) over a data plane, a raw p4runtime_pb2_grpc stub, a StreamChannel client, and builders
for P4Runtime messages addressed by P4Info names."""

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

from p4sim.switch.p4runtime import serve

FIXTURES = Path(__file__).parent / "p4rt_fixtures"
P4INFO_PATH = FIXTURES / "p4rt_test.p4info.txtpb"
JSON_PATH = FIXTURES / "p4rt_test.json"
DEVICE_ID = 1
CPU_PORT = 510


def load_p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_PATH.read_text(), p4info_pb2.P4Info())


def make_dataplane(device_id: int = DEVICE_ID):
    from p4sim.switch.dataplane import DataPlane
    return DataPlane(device_id=device_id, cpu_port=CPU_PORT)


def ipv4_frame(dst: bytes, src_mac: bytes = bytes.fromhex("aabbccddeeff"),
               length: int = 34) -> bytes:
    """Ethernet + IPv4 (protocol 6) to ``dst``, zero-padded to ``length`` bytes."""
    eth = bytes(6) + src_mac + b"\x08\x00"
    ip = bytes.fromhex("45000014000000004006000001020304") + dst
    return (eth + ip).ljust(length, b"\x00")


class Switch:
    """A running server + its data plane + a stub; ``close()`` stops everything."""

    def __init__(self, dataplane=None, **serve_kwargs) -> None:
        self.dp = dataplane if dataplane is not None else make_dataplane()
        self.egress: list[tuple[int, bytes]] = []  # frames the switch sent out of its ports
        self.packet_outs: list[bytes] = []  # frames the server handed to dp.packet_out
        self.dp.tx = lambda port, frame: self.egress.append((port, frame))
        real_packet_out = self.dp.packet_out

        def spy_packet_out(frame: bytes) -> None:
            self.packet_outs.append(frame)
            real_packet_out(frame)

        self.dp.packet_out = spy_packet_out
        self.handle = serve(self.dp, "127.0.0.1:0", DEVICE_ID, **serve_kwargs)
        self.addr = f"127.0.0.1:{self.handle.port}"
        self.channel = grpc.insecure_channel(self.addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.info = load_p4info()
        self.streams: list[Stream] = []

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.channel.close()
        self.handle.stop()

    def inject(self, port: int, frame: bytes) -> None:
        """A frame arrives on ``port``; run the pipeline until the queues are empty."""
        self.dp.receive(port, frame)
        self.dp.drain(2.0)

    # ---- ids by name ----
    def table_id(self, name: str) -> int:
        return next(t.preamble.id for t in self.info.tables if t.preamble.name == name)

    def action_id(self, name: str) -> int:
        return next(a.preamble.id for a in self.info.actions if a.preamble.name == name)

    def obj_id(self, kind: str, name: str) -> int:
        return next(o.preamble.id for o in getattr(self.info, kind) if o.preamble.name == name)

    # ---- requests ----
    def set_pipeline(self, action=p4rt.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     p4info=None, device_config=None, cookie=None, device_id=DEVICE_ID,
                     election=None):
        req = p4rt.SetForwardingPipelineConfigRequest(device_id=device_id, action=action)
        req.config.p4info.CopyFrom(p4info if p4info is not None else self.info)
        req.config.p4_device_config = (device_config if device_config is not None
                                       else JSON_PATH.read_bytes())
        if cookie is not None:
            req.config.cookie.cookie = cookie
        if election is not None:
            req.election_id.high, req.election_id.low = election
        return self.stub.SetForwardingPipelineConfig(req)

    def write(self, *updates: p4rt.Update, election=None, device_id=DEVICE_ID):
        req = p4rt.WriteRequest(device_id=device_id, updates=updates)
        if election is not None:
            req.election_id.high, req.election_id.low = election
        return self.stub.Write(req)

    def read(self, *entities: p4rt.Entity, device_id=DEVICE_ID) -> list[p4rt.Entity]:
        req = p4rt.ReadRequest(device_id=device_id, entities=entities)
        out: list[p4rt.Entity] = []
        for rep in self.stub.Read(req):
            out.extend(rep.entities)
        return out

    def stream(self, election=(0, 1), device_id=DEVICE_ID) -> Stream:
        s = Stream(self.stub)
        self.streams.append(s)
        if election is not None:
            s.arbitrate(election, device_id)
        return s


class Stream:
    """A StreamChannel client: messages sent through a queue, responses collected by kind."""

    def __init__(self, stub) -> None:
        self.out: queue.Queue = queue.Queue()
        self.inbox: dict[str, queue.Queue] = {k: queue.Queue() for k in
                                              ("arbitration", "packet", "digest", "error", "other")}
        self.error: grpc.RpcError | None = None
        self.ended = threading.Event()
        self.call = stub.StreamChannel(iter(self.out.get, None))
        self.thread = threading.Thread(target=self._recv, daemon=True)
        self.thread.start()

    def _recv(self) -> None:
        try:
            for msg in self.call:
                kind = msg.WhichOneof("update")
                self.inbox[kind if kind in self.inbox else "other"].put(msg)
        except grpc.RpcError as err:
            self.error = err
        finally:
            self.ended.set()

    def send(self, msg: p4rt.StreamMessageRequest) -> None:
        self.out.put(msg)

    def arbitrate(self, election, device_id=DEVICE_ID) -> None:
        req = p4rt.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = election
        self.send(req)

    def get(self, kind: str, timeout: float = 3.0):
        return self.inbox[kind].get(timeout=timeout)

    def nothing(self, kind: str, wait: float = 0.3) -> bool:
        try:
            self.inbox[kind].get(timeout=wait)
            return False
        except queue.Empty:
            return True

    def close(self) -> None:
        self.out.put(None)
        self.call.cancel()
        self.thread.join(timeout=3)


# ---- message builders ------------------------------------------------------------------------


def update(kind: int, **entity) -> p4rt.Update:
    return p4rt.Update(type=kind, entity=p4rt.Entity(**entity))


INSERT, MODIFY, DELETE = p4rt.Update.INSERT, p4rt.Update.MODIFY, p4rt.Update.DELETE


def action(sw: Switch, name: str, *values: bytes) -> p4rt.Action:
    a = p4rt.Action(action_id=sw.action_id(name))
    info = next(x for x in sw.info.actions if x.preamble.name == name)
    for p, v in zip(info.params, values):
        a.params.add(param_id=p.id, value=v)
    return a


def lpm_entry(sw: Switch, value: bytes, plen: int, port: bytes = b"\x01",
              dmac: bytes = b"\x02\x00\x00\x00\x00\x01") -> p4rt.TableEntry:
    te = p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm"))
    m = te.match.add(field_id=1).lpm
    m.value, m.prefix_len = value, plen
    te.action.action.CopyFrom(action(sw, "MyIngress.set_nhop", port, dmac))
    return te


# ---- status helpers --------------------------------------------------------------------------


def details(err: grpc.RpcError) -> status_pb2.Status | None:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def write_errors(err: grpc.RpcError) -> list[p4rt.Error]:
    """The per-update p4.v1.Error list of a failed Write."""
    status = details(err)
    assert status is not None, "failed Write without grpc-status-details-bin"
    assert status.code == code_pb2.UNKNOWN
    out = []
    for any_ in status.details:
        e = p4rt.Error()
        assert any_.Unpack(e)
        out.append(e)
    return out
