"""Resource exhaustion against one switch (p4sim or real BMv2) while it forwards traffic: a
Write of 100,000 updates, a Write of 64 MiB, 1,000 concurrent StreamChannels, a flood of
packet-outs, a digest storm. Each storm returns its outcome as one line, to compare with the
target's expected answer; ``Traffic`` checks that frames kept crossing the switch meanwhile and
``rss_kib`` reads the switch's resident memory from /proc.

The switch runs cp_test.p4 with ports 0 and 1 on veths into two namespaces: frames sent into
port 0 to 10.0.2.1 leave on port 1 (an LPM route), where a receiver timestamps them. A
packet-out to the CPU port comes back as a packet-in plus a digest (cp_test.p4's loop).
"""

from __future__ import annotations

import collections
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4.v1 import p4runtime_pb2_grpc
from p4rt_client import load_p4info

from netlab.hosts import NetLab

PRIMARY = 1 << 64  # election id (high word 1): above every storm stream's
CPU_PORT = 510
ROUTE_DST = bytes([10, 0, 2, 1])
STORM_UPDATES = 100_000
BIG_WRITE = 64 << 20
STREAMS = 1_000
PACKET_OUTS = 20_000
TRAFFIC_PPS = 100
GRPC_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
                ("grpc.max_metadata_size", 64 << 20)]
# A storm comes over a connection of its own, as an attacker's would: gRPC otherwise shares one
# connection among channels to the same address, and the controller's would take the blows.
STORM_OPTIONS = [*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]

SENDER = """
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
eth = bytes.fromhex("020000000201020000000101") + b"\\x08\\x00"
period, seq = 1.0 / float(sys.argv[2]), 0
while True:
    ip = bytes.fromhex("4500002e00000000401100000a000101") + bytes([10, 0, 2, 1])
    s.send(eth + ip + struct.pack("!HHHH", 4000, 4001, 26, 0) + b"CFTRAFFIC" +
           struct.pack("!Q", seq) + b"\\x00")
    seq += 1
    time.sleep(period)
"""
RECEIVER = """
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], "w", buffering=1)
while True:
    frame = s.recv(2048)
    i = frame.find(b"CFTRAFFIC")
    if i >= 0:
        out.write(f"{time.time():.4f} {struct.unpack('!Q', frame[i + 9:i + 17])[0]}\\n")
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Traffic:
    """Frames into port 0 at TRAFFIC_PPS from one namespace, timestamped out of port 1 in the
    other; ``delivered(t0, t1)`` counts those that arrived between two wall-clock times."""

    def __init__(self, lab: NetLab, tmp: Path) -> None:
        self.ns = {side: lab.netns(side) for side in ("tx", "rx")}
        self.switch_ports: dict[int, str] = {}
        self.host_ports: dict[str, str] = {}
        for num, side in enumerate(("tx", "rx")):
            s_end, h_end = lab.veth(f"x{num}", f"y{num}", None, self.ns[side])
            self.switch_ports[num], self.host_ports[side] = s_end, h_end
        self.lab, self.log = lab, tmp / "received.txt"
        self.log.touch()

    def start(self) -> None:
        self.lab.popen(self.ns["rx"], [sys.executable, "-c", RECEIVER, self.host_ports["rx"],
                                       str(self.log)], name="traffic-rx")
        time.sleep(0.5)
        self.lab.popen(self.ns["tx"], [sys.executable, "-c", SENDER, self.host_ports["tx"],
                                       str(TRAFFIC_PPS)], name="traffic-tx")

    def arrivals(self) -> list[float]:
        return [float(line.split()[0]) for line in self.log.read_text().splitlines()
                if line.count(" ") == 1]

    def delivered(self, t0: float, t1: float) -> int:
        return sum(1 for t in self.arrivals() if t0 <= t <= t1)


# ---- a raw client -------------------------------------------------------------------------


class Controller:
    """The primary (election id PRIMARY) of one switch, with a stream it can stop reading."""

    def __init__(self, addr: str, device_id: int, p4info_path: Path, json_path: Path) -> None:
        self.addr, self.device_id = addr, device_id
        self.info = load_p4info(p4info_path)
        self.json = json_path.read_bytes()
        self.channel = grpc.insecure_channel(addr, options=GRPC_OPTIONS)
        grpc.channel_ready_future(self.channel).result(timeout=20)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.out: queue.Queue[p4rt.StreamMessageRequest | None] = queue.Queue()
        self.reading = threading.Event()
        self.reading.set()
        self.received: collections.Counter[str] = collections.Counter()
        self.stream = self.stub.StreamChannel(iter(self.out.get, None))
        self.stream_error: grpc.RpcError | None = None
        self.arbitrated = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        arb = p4rt.StreamMessageRequest()
        arb.arbitration.device_id = device_id
        arb.arbitration.election_id.high = PRIMARY >> 64
        self.out.put(arb)
        assert self.arbitrated.wait(10), "no arbitration answer"

    def _read(self) -> None:
        try:
            for msg in self.stream:
                self.reading.wait()  # a stalled client: stops taking what the switch sends
                self.received[msg.WhichOneof("update")] += 1
                if msg.WhichOneof("update") == "arbitration":
                    self.arbitrated.set()
        except grpc.RpcError as err:
            self.stream_error = err

    def close(self) -> None:
        self.reading.set()
        self.out.put(None)
        self.stream.cancel()
        self.channel.close()

    def id(self, kind: str, name: str) -> int:
        return next(o.preamble.id for o in getattr(self.info, kind)
                    if o.preamble.name.split(".")[-1] == name)

    def set_pipeline(self) -> None:
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4rt.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.high = PRIMARY >> 64
        req.config.p4info.CopyFrom(self.info)
        req.config.p4_device_config = self.json
        self.stub.SetForwardingPipelineConfig(req, timeout=60)

    def write(self, updates: list[p4rt.Update], timeout: float = 300) -> str:
        """The outcome as "N CODE" counts per update (or the RPC's code)."""
        req = p4rt.WriteRequest(device_id=self.device_id, updates=updates)
        req.election_id.high = PRIMARY >> 64
        try:
            self.stub.Write(req, timeout=timeout)
        except grpc.RpcError as err:
            return summarize(err, len(updates))
        return f"{len(updates)} OK"

    def storm_write(self, raw: bytes, n_updates: int, timeout: float = 300) -> str:
        """A serialized WriteRequest sent over a connection of its own (STORM_OPTIONS); the
        outcome as ``write`` gives it."""
        with grpc.insecure_channel(self.addr, options=STORM_OPTIONS) as channel:
            call = channel.unary_unary("/p4.v1.P4Runtime/Write",
                                       request_serializer=lambda b: b,
                                       response_deserializer=p4rt.WriteResponse.FromString)
            try:
                call(raw, timeout=timeout)
            except grpc.RpcError as err:
                return summarize(err, n_updates)
        return f"{n_updates} OK"

    def route(self, dst: bytes, plen: int, port: int) -> p4rt.Update:
        e = p4rt.Entity()
        te = e.table_entry
        te.table_id = self.id("tables", "ipv4_lpm")
        m = te.match.add(field_id=1).lpm
        m.value, m.prefix_len = dst, plen
        te.action.action.action_id = self.id("actions", "set_nhop")
        te.action.action.params.add(param_id=1, value=bytes.fromhex("020000000201"))
        te.action.action.params.add(param_id=2, value=port.to_bytes(2, "big"))
        return p4rt.Update(type=p4rt.Update.INSERT, entity=e)

    def still_writes(self) -> str:
        """A MODIFY of the traffic's own route: the outcome of a write after a storm."""
        upd = self.route(ROUTE_DST, 32, 1)
        upd.type = p4rt.Update.MODIFY
        return self.write([upd])

    def packet_out(self, port: int, payload: bytes) -> None:
        msg = p4rt.StreamMessageRequest()
        msg.packet.payload = payload
        msg.packet.metadata.add(metadata_id=1, value=port.to_bytes(2, "big"))
        self.out.put(msg)


def summarize(err: grpc.RpcError, n_updates: int) -> str:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            counts: collections.Counter[str] = collections.Counter()
            for detail in status.details:
                p4err = p4rt.Error()
                detail.Unpack(p4err)
                counts[code_pb2.Code.Name(p4err.canonical_code)] += 1
            if counts:
                return ", ".join(f"{n} {code}" for code, n in sorted(counts.items()))
    return err.code().name


# ---- the storms -----------------------------------------------------------------------------


def write_100k_updates(c: Controller) -> str:
    """100,000 route inserts into a 1,024-entry table (one entry is the traffic's route),
    serialized by hand from one template update: pure-Python protobuf takes minutes to build
    and serialize that many messages on a loaded machine."""
    marker = bytes([12, 0xAB, 0xCD, 0xEF])
    template = c.route(marker, 32, 1).SerializeToString()
    assert template.count(marker) == 1
    tag = b"\x22" + _varint(len(template))  # WriteRequest field 4, length-delimited
    head = p4rt.WriteRequest(device_id=c.device_id)
    head.election_id.high = PRIMARY >> 64
    raw = head.SerializeToString() + b"".join(
        tag + template.replace(marker, bytes([12, i >> 16 & 255, i >> 8 & 255, i & 255]))
        for i in range(STORM_UPDATES))
    return c.storm_write(raw, STORM_UPDATES)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def write_64_mib(c: Controller) -> str:
    """One insert whose 9-bit port parameter is 64 MiB long."""
    upd = c.route(bytes([13, 0, 0, 1]), 32, 1)
    upd.entity.table_entry.action.action.params[1].value = b"\x01" * BIG_WRITE
    req = p4rt.WriteRequest(device_id=c.device_id, updates=[upd])
    req.election_id.high = PRIMARY >> 64
    return c.storm_write(req.SerializeToString(), 1)


def streams_1000(c: Controller) -> str:
    """1,000 StreamChannels opened at once, each arbitrating with its own (low) election id;
    how each ended up: arbitrated and still open, or the code that ended it. (The sync API,
    not grpc.aio: an aio write to a stream the switch has just refused fails on the client
    and masks the switch's status with INTERNAL.)"""
    hold = threading.Event()  # every stream stays open until all have their answer

    def requests(i: int) -> Iterator[p4rt.StreamMessageRequest]:
        req = p4rt.StreamMessageRequest()
        req.arbitration.device_id = c.device_id
        req.arbitration.election_id.low = i + 1
        yield req
        hold.wait()

    channel = grpc.insecure_channel(c.addr, options=STORM_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    calls = [stub.StreamChannel(requests(i), timeout=120) for i in range(STREAMS)]
    outcomes: collections.Counter[str] = collections.Counter()
    try:
        for call in calls:
            try:
                msg = next(call)
                outcomes["open" if msg.WhichOneof("update") == "arbitration" else "other"] += 1
            except StopIteration:
                outcomes["ended without status"] += 1
            except grpc.RpcError as err:
                outcomes[err.code().name] += 1
    finally:
        hold.set()
        for call in calls:
            call.cancel()
        channel.close()
    return stream_summary(outcomes)


# How a switch may refuse a stream: RESOURCE_EXHAUSTED (too many streams or clients), or,
# before the call reaches the P4Runtime server, HTTP/2 REFUSED_STREAM (p4sim's per-connection
# stream limit), which gRPC reports as UNAVAILABLE ("try again later").
REFUSALS = ("RESOURCE_EXHAUSTED", "UNAVAILABLE")


def stream_summary(outcomes: collections.Counter[str]) -> str:
    """"N open, M refused (CODES)"; anything else (no answer, ended without a status) is
    listed by itself, so it fails the comparison."""
    refused = {code: n for code, n in outcomes.items() if code in REFUSALS}
    others = {what: n for what, n in outcomes.items() if what not in REFUSALS and what != "open"}
    text = f"{outcomes['open']} open, {sum(refused.values())} refused " \
        f"({', '.join(sorted(refused))})"
    return text + "".join(f", {n} {what}" for what, n in sorted(others.items()))


def packet_out_flood(c: Controller) -> str:
    """PACKET_OUTS packet-outs to data port 1 as fast as the stream takes them; then a Write
    must still go through."""
    frame = bytes.fromhex("02000000020102000000ff01") + b"\x08\x06" + bytes(46)
    for _ in range(PACKET_OUTS):
        c.packet_out(1, frame)
    _wait_sent(c)
    after = c.still_writes()
    state = "stream open" if c.stream_error is None else c.stream_error.code().name
    return f"{state}, write after {after}"


def digest_storm(c: Controller) -> str:
    """PACKET_OUTS packet-outs to the CPU port from distinct source MACs: as many packet-ins
    and digests (one sample per list) to a client that does not read its stream meanwhile."""
    d = p4rt.Entity()
    d.digest_entry.digest_id = c.id("digests", "mac_learn_digest_t")
    d.digest_entry.config.max_list_size = 1
    assert c.write([p4rt.Update(type=p4rt.Update.INSERT, entity=d)]) == "1 OK"
    before = c.received.copy()
    c.reading.clear()
    for i in range(PACKET_OUTS):
        frame = bytes(6) + (0x020000000000 | i).to_bytes(6, "big") + b"\x08\x06" + bytes(46)
        c.packet_out(CPU_PORT, frame)
    _wait_sent(c)
    time.sleep(2.0)
    c.reading.set()
    time.sleep(3.0)  # drain what the switch kept for the client
    digests = c.received["digest"] - before["digest"]
    packets = c.received["packet"] - before["packet"]
    after = c.still_writes()
    state = "stream open" if c.stream_error is None else c.stream_error.code().name
    assert digests <= PACKET_OUTS and packets <= PACKET_OUTS
    return f"{state}, write after {after}"


def _wait_sent(c: Controller, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not c.out.empty() and time.monotonic() < deadline:
        time.sleep(0.05)


STORMS = {
    "Write of 100,000 updates": write_100k_updates,
    "Write of 64 MiB": write_64_mib,
    "1,000 concurrent StreamChannels": streams_1000,
    "packet-out flood": packet_out_flood,
    "digest storm": digest_storm,
}
