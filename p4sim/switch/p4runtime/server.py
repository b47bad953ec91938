"""The P4Runtime gRPC service of the p4sim switch (what simple_switch_grpc serves through PI).

``serve(dataplane, "127.0.0.1:9559")`` starts it; the returned handle's ``stop()`` ends it.
Status shapes follow PI's server: request-level failures carry a serialized google.rpc.Status in
the ``grpc-status-details-bin`` trailer; a failed Write is UNKNOWN with one p4.v1.Error per update.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import TypeVar

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4.v1 import p4runtime_pb2_grpc

from p4sim.switch.api import DataPlaneApi

from .arbitration import MAX_STREAMS, Arbiter, Connection, election_id
from .codec import FAILED_PRECONDITION, INTERNAL, RESOURCE_EXHAUSTED, P4RTError
from .device import Device
from .roleconfig import parse_role
from .tls import ServerTls

log = logging.getLogger("p4sim.p4runtime")
T = TypeVar("T")
API_VERSION = "1.4.1"
MAX_MESSAGE = 256 * 1024 * 1024  # sent (as PI's server)
# Received: PI takes 256 MiB, but a Python process that takes in a 64 MiB request keeps that
# much more resident memory afterwards; 32 MiB still holds any realistic pipeline (fabric.p4's
# BMv2 JSON is under 0.5 MiB). gRPC refuses a longer message with RESOURCE_EXHAUSTED.
MAX_RECEIVE = 32 * 1024 * 1024
# Updates in one WriteRequest: counted in the raw bytes before they are parsed, so a Write of
# 100,000 updates is refused (RESOURCE_EXHAUSTED) without building 100,000 Python messages.
MAX_WRITE_UPDATES = 10_000
_WRITE_METHOD = "/p4.v1.P4Runtime/Write"
# HTTP/2 streams one client connection may have open at once (streams and unary calls):
# past it the connection refuses new ones (REFUSED_STREAM, UNAVAILABLE at the client) before
# they cost the server anything.
MAX_HTTP2_STREAMS = MAX_STREAMS + 16
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _abort(context: grpc.ServicerContext, err: P4RTError) -> None:
    context.set_code(_GRPC_CODES.get(err.code, grpc.StatusCode.UNKNOWN))
    context.set_details(err.message)
    if not err.plain:
        status = status_pb2.Status(code=err.code, message=err.message)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))


def _guarded(context: grpc.ServicerContext, rpc: str, call: Callable[[], T], failed: T) -> T:
    """Run one RPC's work: a P4RTError becomes its status, a bug becomes INTERNAL (logged),
    never a dead server thread; ``failed`` is what the RPC then returns."""
    try:
        return call()
    except P4RTError as err:
        _abort(context, err)
    except Exception as exc:
        log.exception("%s failed", rpc)
        _abort(context, P4RTError(INTERNAL, f"internal error: {exc}"))
    return failed


@dataclass(frozen=True)
class TooManyUpdates:
    """What the Write deserializer hands on instead of a request over MAX_WRITE_UPDATES."""

    count: int


def count_updates(raw: bytes) -> int:
    """Occurrences of WriteRequest field 4 (``updates``) in a serialized WriteRequest, read
    off the wire format without parsing the updates; -1 if the bytes are not well-formed."""
    pos, end, count = 0, len(raw), 0
    try:
        while pos < end:
            key, pos = _varint(raw, pos)
            wire = key & 7
            if wire == 0:
                _, pos = _varint(raw, pos)
            elif wire == 2:
                length, pos = _varint(raw, pos)
                pos += length
                count += key >> 3 == 4
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return -1
    except IndexError:
        return -1
    return count if pos == end else -1


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _parse_write(raw: bytes) -> p4rt.WriteRequest | TooManyUpdates:
    count = count_updates(raw)
    if count > MAX_WRITE_UPDATES:
        return TooManyUpdates(count)
    return p4rt.WriteRequest.FromString(raw)


class _WriteHandler(grpc.GenericRpcHandler):
    """Serves Write with ``_parse_write`` as its deserializer (the generated handler parses
    first and asks later); every other method falls through to the generated handlers."""

    def __init__(self, servicer: P4RuntimeServicer) -> None:
        self._handler = grpc.unary_unary_rpc_method_handler(
            servicer.Write, request_deserializer=_parse_write,
            response_serializer=p4rt.WriteResponse.SerializeToString)

    def service(self, handler_call_details):
        return self._handler if handler_call_details.method == _WRITE_METHOD else None


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device: Device) -> None:
        self.device = device
        self._streams = threading.BoundedSemaphore(MAX_STREAMS)

    def Write(self, request, context):
        if isinstance(request, TooManyUpdates):
            _abort(context, P4RTError(RESOURCE_EXHAUSTED, f"Too many updates in one "
                                      f"WriteRequest: {request.count} (limit "
                                      f"{MAX_WRITE_UPDATES})"))
            return p4rt.WriteResponse()
        status = _guarded(context, "Write", lambda: self.device.write(request), None)
        if status is not None and status.code:
            context.set_code(grpc.StatusCode.UNKNOWN)
            context.set_details(status.message)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),))
        return p4rt.WriteResponse()

    def Read(self, request, context) -> Iterator[p4rt.ReadResponse]:
        result = _guarded(context, "Read", lambda: self.device.read(request), None)
        if result is None:
            return
        found, err = result
        # PI sends what it read before an error, then the error status
        yield p4rt.ReadResponse(entities=found)
        if err is not None:
            _abort(context, err)

    def SetForwardingPipelineConfig(self, request, context):
        _guarded(context, "SetForwardingPipelineConfig",
                 lambda: self.device.set_pipeline(request), None)
        return p4rt.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        def get() -> p4rt.GetForwardingPipelineConfigResponse:
            rep = p4rt.GetForwardingPipelineConfigResponse()
            self.device.get_pipeline(request, rep.config)
            return rep

        return _guarded(context, "GetForwardingPipelineConfig", get,
                        p4rt.GetForwardingPipelineConfigResponse())

    def Capabilities(self, request, context):
        return p4rt.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def StreamChannel(self, request_iterator, context) -> Iterator[p4rt.StreamMessageResponse]:
        # Each open stream holds a server thread: past MAX_STREAMS a new one is refused at
        # once, so a client opening streams by the thousand cannot starve Write and Read.
        if not self._streams.acquire(blocking=False):
            _abort(context, P4RTError(RESOURCE_EXHAUSTED,
                                      f"Too many open streams (limit {MAX_STREAMS})"))
            return
        try:
            yield from self._stream(request_iterator, context)
        finally:
            self._streams.release()

    def _stream(self, request_iterator, context) -> Iterator[p4rt.StreamMessageResponse]:
        conn = Connection()
        arbiter = self.device.arbiter
        ended: list[P4RTError] = []

        def read_requests() -> None:
            try:
                for req in request_iterator:
                    if req.WhichOneof("update") == "arbitration":
                        err = self._arbitrate(conn, req.arbitration)
                        if err is not None:
                            ended.append(err)
                            break
                    else:
                        self.device.stream_message(conn, req)
            except grpc.RpcError:
                pass  # the client went away
            except Exception:
                log.exception("StreamChannel reader failed")
            finally:
                end()

        def end() -> None:
            # Leave arbitration as soon as the client is gone (half-close, cancel or a dropped
            # connection), not only once this generator runs again: a client that reconnects
            # at once with the same election id must not find its old stream still holding it.
            conn.close()
            arbiter.remove(conn)

        context.add_callback(end)
        reader = threading.Thread(target=read_requests, name=f"p4rt-stream-{conn.id}",
                                  daemon=True)
        reader.start()
        try:
            while True:
                msg = conn.outbox.get()
                if msg is None:
                    break
                yield msg
        finally:
            arbiter.remove(conn)
        if ended:
            _abort(context, ended[0])

    def _arbitrate(self, conn: Connection, arb: p4rt.MasterArbitrationUpdate) -> P4RTError | None:
        eid = election_id(arb.election_id)
        try:
            role, grant = parse_role(arb.role if arb.HasField("role") else None)
            config = arb.role.config if arb.role.HasField("config") else None
            if conn.election is None:
                self.device.arbiter.add(conn, arb.device_id, eid, role, grant, config)
            elif conn.device_id != arb.device_id:
                return P4RTError(FAILED_PRECONDITION, "Invalid device id")
            elif conn.role != role:
                return P4RTError(FAILED_PRECONDITION, "A stream cannot change its role; "
                                 "open a new stream for another role")
            else:
                self.device.arbiter.update(conn, eid, grant, config)
        except P4RTError as err:
            return err
        return None


class ServerHandle:
    """What ``serve`` returns: the listening port and ``stop()``."""

    def __init__(self, server: grpc.Server, device: Device, port: int) -> None:
        self.stopped = threading.Event()
        self.server = server
        self.device = device
        self.port = port

    def stop(self, grace: float | None = 0.5) -> None:
        self.stopped.set()
        self.server.stop(grace).wait()
        self.device.close()

    def wait(self) -> None:
        self.server.wait_for_termination()


def _start_every_worker(pool: futures.ThreadPoolExecutor, workers: int) -> None:
    """Make the pool start all its threads now (it starts them lazily, one per task that finds
    none idle): a storm of streams then finds them running and grows the process no further."""
    barrier = threading.Barrier(workers + 1)
    for _ in range(workers):
        pool.submit(barrier.wait)
    barrier.wait()


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
BIG_ALLOCATION = 1 << 20


def _malloc_trim() -> Callable[[], None] | None:
    """glibc's malloc_trim, after fixing its mmap threshold at 1 MiB: a fixed threshold
    keeps every buffer of a big request (a 5 MiB Write) in its own mapping, returned to the
    OS when freed; glibc's default raises the threshold to the largest buffer freed so far, so
    that the next big one lands in the heap and stays resident. None if this is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt(M_MMAP_THRESHOLD, BIG_ALLOCATION)
    return lambda: trim(0)


def _resident_pages() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _trim_memory_forever(stop: threading.Event, period_s: float = 1.0,
                         growth: float = 1.02) -> None:
    """Hand the heap's free pages back to the OS once the resident size has grown by 2%:
    after a storm (a 5 MiB Write request, a thousand refused streams) glibc keeps the freed
    memory mapped otherwise, and the switch would keep the storm's high-water mark. In steady
    state nothing grows and nothing is trimmed (a trim holds the allocator for milliseconds)."""
    trim = _malloc_trim()
    settled = _resident_pages()
    while trim is not None and not stop.wait(period_s):
        if _resident_pages() > settled * growth:
            trim()
            settled = _resident_pages()


def serve(dataplane: DataPlaneApi, grpc_addr: str, device_id: int | None = None, *,
          registers: bool = False, max_workers: int = MAX_STREAMS + 16,
          bound_memory: bool = False, tls: ServerTls | None = None) -> ServerHandle:
    """Start the P4Runtime server for ``dataplane`` on ``grpc_addr`` ("host:port", port 0 picks
    a free one). ``registers=True`` enables RegisterEntry reads/writes, which PI/BMv2 answer
    with UNIMPLEMENTED (so the default keeps BMv2's behavior). ``max_workers`` leaves room for
    unary RPCs beside MAX_STREAMS open streams. ``bound_memory`` (``p4sim switch`` sets it)
    starts every worker thread at once and returns freed heap memory to the OS every second,
    so a storm of requests leaves the process's resident size where it was. ``tls``: serve
    TLS (and, with client auth, mutual TLS) instead of plaintext."""
    dev_id = dataplane.device_id if device_id is None else device_id
    device = Device(dataplane, dev_id, Arbiter(), registers=registers)
    pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt")
    if bound_memory:
        _start_every_worker(pool, max_workers)
    server = grpc.server(
        pool,
        options=[("grpc.max_receive_message_length", MAX_RECEIVE),
                 ("grpc.max_send_message_length", MAX_MESSAGE),
                 ("grpc.max_metadata_size", MAX_MESSAGE),
                 ("grpc.max_concurrent_streams", MAX_HTTP2_STREAMS),
                 ("grpc.so_reuseport", 0)])
    servicer = P4RuntimeServicer(device)
    server.add_generic_rpc_handlers((_WriteHandler(servicer),))  # before the generated ones
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    try:
        port = server.add_secure_port(grpc_addr, tls.credentials()) if tls is not None \
            else server.add_insecure_port(grpc_addr)
    except RuntimeError:  # gRPC raises "failed to bind" for a port in use or a bad cert/key
        port = 0
    if port == 0:
        device.close()
        raise OSError(f"cannot listen on {grpc_addr} (in use, or not an address of this host?)")
    server.start()
    handle = ServerHandle(server, device, port)
    if bound_memory:
        threading.Thread(target=_trim_memory_forever, args=(handle.stopped,),
                         name="p4rt-trim", daemon=True).start()
    return handle
