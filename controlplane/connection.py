"""One P4Runtime connection to one switch: stream channel, arbitration, pipeline, writes, reads,
packet I/O, digests, and reconnect + re-sync after a switch restart.

Each :class:`SwitchConnection` owns its gRPC channel and a background thread reading its
StreamChannel, so any number of connections live side by side in one process (unlike
p4runtime-shell, whose client is a process-wide singleton).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
from google.protobuf import any_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controlplane.channel import Pipeline
from controlplane.codec import Codec
from controlplane.entities import DigestList, Entity, PacketIn
from controlplane.errors import (
    ControlPlaneError,
    NoPipelineError,
    NotPrimaryError,
    SwitchUnavailableError,
    rpc_error_to_exception,
)
from controlplane.p4info import P4InfoIndex, load_p4info
from controlplane.packetio import PacketIO
from controlplane.readback import Verification
from controlplane.resync import restore_after_restart
from controlplane.state import IntendedState
from controlplane.tls import ClientTls, open_channel, unreachable_reason
from controlplane.writes import MAX_METADATA, Writes

log = logging.getLogger("controlplane")

Update = p4runtime_pb2.Update
ResyncCallback = Callable[["SwitchConnection", int], None]


class SwitchConnection(PacketIO, Writes):
    """A typed P4Runtime client for one device.

    ``election_id`` is (high, low) as in the spec; the highest id among connected clients is
    primary. With ``reconnect=True`` a broken stream is re-established in the background; if the
    switch came back without our pipeline, the pipeline and everything written through this
    connection are pushed again and ``on_resync(conn, n_entities)`` is called. ``tls``: connect
    over TLS (with a client certificate: mutual TLS) instead of plaintext.

    ``role`` (with an optional ``role_config``, an ``Any``; for p4sim a p4sim.v1.RoleConfig)
    makes this client arbitrate for that P4Runtime role: its writes, pipeline pushes and reads
    name the role, and reads return only the role's entities. The default ("") is the default
    role, with full pipeline access.
    """

    def __init__(self, addr: str, device_id: int = 0, election_id: tuple[int, int] = (0, 1),
                 name: str | None = None, *, reconnect: bool = True,
                 on_resync: ResyncCallback | None = None, timeout: float = 5.0,
                 max_metadata: int = MAX_METADATA, tls: ClientTls | None = None,
                 role: str = "", role_config: any_pb2.Any | None = None) -> None:
        self.addr = addr
        self.tls = tls
        self.role = role
        self.role_config = role_config
        self.max_metadata = max_metadata  # bytes of response metadata accepted (gRPC: 16 KiB)
        self.device_id = device_id
        self.election_id = election_id
        self.name = name or addr
        self.reconnect = reconnect
        self.on_resync = on_resync
        self.timeout = timeout
        self.intended = IntendedState()
        self.resync_count = 0
        self.primary_election_id: tuple[int, int] | None = None  # from the last arbitration
        self.last_verification: Verification | None = None  # read-back after the last re-sync
        self.packets_in: queue.Queue[PacketIn] = queue.Queue(maxsize=10000)
        self.digests: queue.Queue[DigestList] = queue.Queue(maxsize=10000)
        self.stream_errors: queue.Queue[p4runtime_pb2.StreamError] = queue.Queue(maxsize=1000)
        self.packet_in_handler: Callable[[PacketIn], None] | None = None
        self.digest_handler: Callable[[DigestList], None] | None = None
        self._index: P4InfoIndex | None = None
        self._codec: Codec | None = None
        # What we pushed, to push again after a restart: (serialized P4Info, device config).
        self._pipeline_files: tuple[bytes, bytes] | None = None
        self._cookie = 0
        self._primary = False
        self._arbitrated = threading.Event()
        self._connected = threading.Event()
        self._closing = threading.Event()
        self._write_lock = threading.RLock()
        self._resynced = threading.Condition()
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] | None = None
        self._thread: threading.Thread | None = None
        self._stream_failure: str | None = None  # why a stream died before arbitration

    # ---- connection lifecycle --------------------------------------------------------------

    def connect(self) -> SwitchConnection:
        """Open the channel and stream, run arbitration, fetch the current P4Info if any.
        Raises SwitchUnavailableError if the switch does not answer within ``timeout``."""
        self._closing.clear()
        self._open_stream()
        if self._index is None:
            with contextlib.suppress(ControlPlaneError):
                self.refresh_p4info()
        return self

    def __enter__(self) -> SwitchConnection:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        if self._requests is not None:
            # Half-close first and let the switch end the stream: it does so once it has read
            # the half-close and dropped this client from arbitration, so a client that
            # connects right after with the same election id is not refused as a duplicate.
            self._requests.put(None)
            self._requests = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        self._drop_stream()
        self._thread = None

    @property
    def who(self) -> str:
        """How messages name this switch: "switch s1 at 127.0.0.1:9559" (or without the name)."""
        return f"switch {self.name} at {self.addr}" if self.name != self.addr else \
            f"switch at {self.addr}"

    @property
    def is_primary(self) -> bool:
        return self._primary and self._connected.is_set()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def _open_stream(self) -> None:
        self._drop_stream()
        channel = open_channel(self.addr, self.tls, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_metadata_size", self.max_metadata),
            ("grpc.absolute_max_metadata_size", self.max_metadata)])
        try:
            grpc.channel_ready_future(channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            # A refused TLS handshake (wrong CA, no client certificate, plaintext on one side)
            # looks like silence to channel_ready_future: ask gRPC why.
            why = unreachable_reason(channel, self.tls is not None)
            channel.close()
            over = " over TLS" if self.tls is not None else ""
            raise SwitchUnavailableError(
                f"cannot connect to {self.who} (device_id "
                f"{self.device_id}): no answer within {self.timeout:g}s{over}"
                f"{f' ({why})' if why else ''}") from None
        self._channel = channel
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        self._requests = queue.Queue()
        self._arbitrated.clear()
        self._stream_failure = None
        requests = self._requests
        responses = self._stub.StreamChannel(iter(requests.get, None))
        self._thread = threading.Thread(target=self._stream_loop, args=(responses,),
                                        name=f"p4rt-stream-{self.name}", daemon=True)
        self._thread.start()
        self._send_arbitration()
        answered = self._arbitrated.wait(self.timeout)
        if not answered or self._stream_failure is not None:
            self._thread = None  # the dying stream thread must not start a reconnect
            self._drop_stream()
            why = self._stream_failure or f"no answer within {self.timeout:g}s"
            if "election id" in why.lower():
                why += f" (another client holds election id {self.election_id}; use another)"
            raise SwitchUnavailableError(
                f"{self.who}: arbitration for device_id "
                f"{self.device_id} failed: {why}")
        self._connected.set()

    def _drop_stream(self) -> None:
        self._connected.clear()
        self._primary = False
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _send_arbitration(self) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = self.election_id
        if self.role:
            req.arbitration.role.name = self.role
            if self.role_config is not None:
                req.arbitration.role.config.CopyFrom(self.role_config)
        assert self._requests is not None
        self._requests.put(req)

    def _stream_loop(self, responses: Iterator[p4runtime_pb2.StreamMessageResponse]) -> None:
        reason = "stream ended"
        try:
            for resp in responses:
                self._on_stream_message(resp)
        except grpc.RpcError as err:
            reason = f"{err.code().name}: {err.details()}"
        except Exception as err:  # a handler bug must not kill the connection silently
            reason = f"{type(err).__name__}: {err}"
            log.exception("switch %s: stream handler failed", self.name)
        if self._closing.is_set() or threading.current_thread() is not self._thread:
            return
        if not self._connected.is_set():  # died during arbitration: tell the waiter why
            self._stream_failure = reason
            self._arbitrated.set()
            return
        self._connected.clear()
        self._primary = False
        log.warning("%s: stream broke (%s)", self.who, reason)
        if self.reconnect:
            self._reconnect_loop()

    def _on_stream_message(self, resp: p4runtime_pb2.StreamMessageResponse) -> None:
        which = resp.WhichOneof("update")
        if which == "arbitration":
            arb = resp.arbitration
            self._primary = arb.status.code == 0
            # The spec has the server send the primary's election id (or the highest seen).
            self.primary_election_id = (arb.election_id.high, arb.election_id.low)
            self._arbitrated.set()
        elif which == "packet":
            self._on_packet_in(resp.packet)
        elif which == "digest":
            self._on_digest(resp.digest)
        elif which == "error":
            log.warning("switch %s: stream error %s: %s", self.name, resp.error.canonical_code,
                        resp.error.message)
            with contextlib.suppress(queue.Full):
                self.stream_errors.put_nowait(resp.error)

    def _reconnect_loop(self) -> None:
        delay = 0.1
        while not self._closing.is_set():
            try:
                self._open_stream()
            except ControlPlaneError:
                self._closing.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            if self._closing.is_set():  # close() ran while we were reconnecting
                self._drop_stream()
                return
            try:
                self._resync()
            except ControlPlaneError as err:
                log.error("%s: re-sync after reconnect failed: %s", self.who, err)
            return

    def _resync(self) -> None:
        n = restore_after_restart(self)
        if n is None:
            return
        with self._resynced:
            self.resync_count += 1
            self._resynced.notify_all()
        if self.on_resync:
            self.on_resync(self, n)

    def wait_until_primary(self, timeout: float = 5.0) -> bool:
        return wait_until(lambda: self.is_primary, timeout)

    def wait_until_backup(self, timeout: float = 5.0) -> bool:
        return wait_until(lambda: self.connected and not self._primary, timeout)

    def wait_resync(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``resync_count >= count``; True if it got there in time."""
        with self._resynced:
            return self._resynced.wait_for(lambda: self.resync_count >= count, timeout)

    # ---- RPC helpers ------------------------------------------------------------------------

    def _stub_or_raise(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None or not self._connected.is_set():
            raise SwitchUnavailableError(f"{self.who}: not connected")
        return self._stub

    def _check_primary(self, what: str) -> None:
        if not self.is_primary:
            raise NotPrimaryError(
                f"{what} refused: this client (election id {self.election_id}) is not primary "
                f"for device {self.device_id} ({self.who}; the primary's election id is "
                f"{self.primary_election_id})")

    def refresh_p4info(self) -> None:
        """Fetch the switch's current P4Info (after another controller pushed a pipeline)."""
        req_type = p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        self._adopt_p4info(self.get_pipeline(req_type).p4info)

    @property
    def index(self) -> P4InfoIndex:
        if self._index is None and self.connected:
            with contextlib.suppress(ControlPlaneError):
                self.refresh_p4info()
        if self._index is None:
            raise NoPipelineError(f"{self.who} has no pipeline (push one "
                                  "with set_pipeline / `fabricctl pipeline push`)")
        return self._index

    @property
    def codec(self) -> Codec:
        self.index  # noqa: B018 - raises NoPipelineError
        assert self._codec is not None
        return self._codec

    def _adopt_p4info(self, info: p4info_pb2.P4Info) -> None:
        if len(info.tables) or len(info.actions):
            self._index = P4InfoIndex(info)
            self._codec = Codec(self._index)

    def capabilities(self) -> str:
        try:
            resp = self._stub_or_raise().Capabilities(p4runtime_pb2.CapabilitiesRequest(),
                                                      timeout=self.timeout)
        except grpc.RpcError as err:
            raise rpc_error_to_exception(err, "Capabilities", self.addr) from None
        return resp.p4runtime_api_version

    # ---- pipeline ---------------------------------------------------------------------------

    def set_pipeline(self, p4info_path: str | Path, json_path: str | Path) -> None:
        """Push P4Info + BMv2 JSON (VERIFY_AND_COMMIT). The switch drops all its state, so the
        intended-state store is cleared too."""
        info = load_p4info(p4info_path)  # fail early, with the file name, on a bad P4Info
        self._push_pipeline(info.SerializeToString(), Path(json_path).read_bytes())
        self.intended.clear()

    def _push_pipeline(self, p4info_bin: bytes, device_config: bytes) -> None:
        self._check_primary("SetForwardingPipelineConfig")
        info = p4info_pb2.P4Info()
        info.ParseFromString(p4info_bin)
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            role=self.role)
        req.election_id.high, req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = device_config
        cookie = random.getrandbits(63) or 1
        req.config.cookie.cookie = cookie
        try:
            self._stub_or_raise().SetForwardingPipelineConfig(req, timeout=60)
        except grpc.RpcError as err:
            raise rpc_error_to_exception(err, "SetForwardingPipelineConfig", self.addr) from None
        self._cookie = cookie
        self._pipeline_files = (p4info_bin, device_config)
        self._adopt_p4info(info)

    def get_pipeline(self, response_type: int = p4runtime_pb2.GetForwardingPipelineConfigRequest.ALL) -> Pipeline:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id,
                                                               response_type=response_type)
        try:
            resp = self._stub_or_raise().GetForwardingPipelineConfig(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise rpc_error_to_exception(err, "GetForwardingPipelineConfig", self.addr) from None
        cfg = resp.config
        return Pipeline(cfg.p4info, cfg.p4_device_config, cfg.cookie.cookie)

    # ---- reads ------------------------------------------------------------------------------

    def read(self, *entities: Entity) -> list[Entity]:
        """Read with wildcards: unset fields (table None, empty match, index None...) match all."""
        codec = self.codec
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, role=self.role)
        for e in entities:
            req.entities.append(codec.to_proto(e, for_read=True))
        out: list[Entity] = []
        try:
            for resp in self._stub_or_raise().Read(req, timeout=max(self.timeout, 30)):
                out.extend(codec.from_proto(ent) for ent in resp.entities)
        except grpc.RpcError as err:
            what = ", ".join(codec.describe(e) for e in entities)
            raise rpc_error_to_exception(err, f"Read of {what}", self.addr) from None
        except ValueError:  # grpc: the channel was closed under us (a reconnect)
            raise SwitchUnavailableError(f"{self.who}: connection closed during Read") from None
        return out

    def read_protos(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, role=self.role,
                                        entities=entities)
        try:
            return [e for r in self._stub_or_raise().Read(req, timeout=30) for e in r.entities]
        except grpc.RpcError as err:
            raise rpc_error_to_exception(err, "Read", self.addr) from None
        except ValueError:  # grpc: the channel was closed under us (a reconnect)
            raise SwitchUnavailableError(f"{self.who}: connection closed during Read") from None


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
