"""PacketOut/PacketIn through the P4Info controller headers, and digest lists (batching,
list ids, acks, the duplicate-suppression cache) as PI's PacketIOMgr and DigestMgr do them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch import api

from .codec import (
    ALREADY_EXISTS,
    INVALID_ARGUMENT,
    NOT_FOUND,
    UNIMPLEMENTED,
    P4RTError,
    pack_bits,
    to_bytes,
    to_int,
    unpack_bits,
)
from .p4info import ControllerHeader, DigestInfo, PipelineInfo

Send = Callable[[p4rt.StreamMessageResponse], None]
MIN_TIMEOUT_NS = 100_000_000  # PI never runs its digest timers faster than every 100 ms
# Bounds, so a digest storm cannot grow the switch's memory without limit: a list pending
# delivery is sent once it holds MAX_PENDING_SAMPLES (whatever max_list_size and the timeout
# say), and while MAX_UNACKED_LISTS lists wait for an ack new samples are dropped (counted).
MAX_PENDING_SAMPLES = 4_096
MAX_UNACKED_LISTS = 1_024


def packet_out_frame(info: PipelineInfo, msg: p4rt.PacketOut) -> bytes:
    """The frame to inject on the CPU port: packet_out header (P4Info field order, bit-packed,
    missing fields zero) followed by the payload."""
    header = info.packet_out
    if header is None:
        if msg.metadata:
            raise P4RTError(INVALID_ARGUMENT, "Unexpected metadata in PacketOut message")
        return msg.payload
    values: dict[int, int] = {}
    widths = {mid: width for mid, _, width in header.fields}
    for md in msg.metadata:
        if md.metadata_id not in widths:
            raise P4RTError(INVALID_ARGUMENT, "Unknown metadata id in PacketOut message")
        values[md.metadata_id] = to_int(md.value, widths[md.metadata_id])
    packed = pack_bits([(values.get(mid, 0), width) for mid, _, width in header.fields])
    return packed + msg.payload


def packet_in_message(header: ControllerHeader | None,
                      frame: bytes) -> p4rt.StreamMessageResponse | None:
    """Split a CPU-port frame into PacketIn metadata + payload; None when it is too short for
    the header (PI drops such frames)."""
    msg = p4rt.StreamMessageResponse()
    if header is None:
        msg.packet.payload = frame
        return msg
    widths = [width for _, _, width in header.fields]
    nbytes = (sum(widths) + 7) // 8
    if len(frame) < nbytes:
        return None
    for (mid, _, _), value in zip(header.fields, unpack_bits(frame, widths)):
        msg.packet.metadata.add(metadata_id=mid, value=to_bytes(value))
    msg.packet.payload = frame[nbytes:]
    return msg


class _DigestState:
    def __init__(self, info: DigestInfo) -> None:
        self.info = info
        self.config: p4rt.DigestEntry | None = None
        self.pending: list[tuple[int, ...]] = []
        self.next_list_id = 1
        self.timeout_bit = False  # set on one timer tick, list sent on the next if still set
        self.cache: set[tuple[int, ...]] = set()
        self.unacked: dict[int, tuple[list[tuple[int, ...]], bool]] = {}
        self.last_max_tick = 0.0
        self.last_ack_tick = 0.0
        self.dropped = 0  # samples dropped while MAX_UNACKED_LISTS lists waited for acks


class DigestManager:
    """Per-pipeline digest configuration and delivery; ``send`` reaches the primary client."""

    def __init__(self, info: PipelineInfo, send: Send) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._digests = {d.name: _DigestState(d) for d in info.digests.values()}
        self._by_id = {d.info.id: d for d in self._digests.values()}
        self._stop = threading.Event()
        # started by the first digest configured: a thread waking every 20 ms per switch took
        # the GIL from a simulation of hundreds of switches whose program has no digest
        self._timer: threading.Thread | None = None

    def close(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=2)

    def _start_timers(self) -> None:
        if self._timer is None and not self._stop.is_set():
            self._timer = threading.Thread(target=self._run_timers, name="p4rt-digest-timer",
                                           daemon=True)
            self._timer.start()

    @property
    def timers_running(self) -> bool:
        return self._timer is not None and self._timer.is_alive()

    # -- DigestEntry writes/reads --
    def config_write(self, utype: int, entry: p4rt.DigestEntry) -> None:
        with self._lock:
            d = self._by_id.get(entry.digest_id)
            if d is None:
                raise P4RTError(NOT_FOUND, f"{entry.digest_id} is not a valid digest id")
            if utype == p4rt.Update.INSERT:
                if d.config is not None:
                    raise P4RTError(ALREADY_EXISTS, f"Digest {entry.digest_id} already configured")
                d.config = p4rt.DigestEntry()
                d.config.CopyFrom(entry)
                self._start_timers()
            elif utype in (p4rt.Update.MODIFY, p4rt.Update.DELETE):
                if d.config is None:
                    raise P4RTError(NOT_FOUND, f"Digest {entry.digest_id} not configured")
                if utype == p4rt.Update.MODIFY:
                    d.config.CopyFrom(entry)
                else:
                    d.config = None
                    d.pending.clear()
                    d.cache.clear()
                    d.unacked.clear()
                    d.timeout_bit = False
            else:
                raise P4RTError(INVALID_ARGUMENT, "Invalid update type for DigestEntry")

    def config_read(self, entry: p4rt.DigestEntry, out: list[p4rt.Entity]) -> None:
        if entry.digest_id == 0:
            raise P4RTError(UNIMPLEMENTED, "digest_id must be set when reading DigestEntry")
        with self._lock:
            d = self._by_id.get(entry.digest_id)
            if d is None:
                raise P4RTError(NOT_FOUND, f"{entry.digest_id} is not a valid digest id")
            if d.config is None:
                raise P4RTError(NOT_FOUND, f"Digest {entry.digest_id} not configured")
            ent = p4rt.Entity()
            ent.digest_entry.CopyFrom(d.config)
            out.append(ent)

    # -- stream side --
    def ack(self, ack: p4rt.DigestListAck) -> None:
        with self._lock:
            d = self._by_id.get(ack.digest_id)
            if d is None:
                return
            samples, _ = d.unacked.pop(ack.list_id, ([], False))
            d.cache.difference_update(samples)

    def on_digest(self, digest: api.Digest) -> None:
        """Data-plane callback: one learn message with one or more samples."""
        with self._lock:
            d = self._digests.get(digest.name)
            if d is None or d.config is None:
                return  # PI drops samples of digests the controller has not configured
            cfg = d.config.config
            if len(d.unacked) >= MAX_UNACKED_LISTS:
                d.dropped += len(digest.values)
                return
            added = False
            for sample in digest.values:
                sample = tuple(sample)
                if cfg.ack_timeout_ns > 0:  # the cache is only used with an ack timeout
                    if sample in d.cache:
                        continue
                    d.cache.add(sample)
                d.pending.append(sample)
                added = True
            if not added:
                return
            if (cfg.max_list_size and len(d.pending) >= cfg.max_list_size) \
                    or cfg.max_timeout_ns == 0 or len(d.pending) >= MAX_PENDING_SAMPLES:
                self._flush(d)

    def _flush(self, d: _DigestState) -> None:
        msg = p4rt.StreamMessageResponse()
        msg.digest.digest_id = d.info.id
        msg.digest.list_id = d.next_list_id
        msg.digest.timestamp = time.monotonic_ns()
        for sample in d.pending:
            _sample_to_p4data(d.info, sample, msg.digest.data.add())
        if d.config is not None and d.config.config.ack_timeout_ns > 0:
            d.unacked[d.next_list_id] = (list(d.pending), False)
        d.next_list_id += 1
        d.pending = []
        d.timeout_bit = False
        self._send(msg)

    def _run_timers(self) -> None:
        while not self._stop.wait(0.02):
            now = time.monotonic()
            with self._lock:
                for d in self._digests.values():
                    if d.config is None:
                        continue
                    cfg = d.config.config
                    if cfg.max_timeout_ns:
                        period = max(cfg.max_timeout_ns, MIN_TIMEOUT_NS) / 1e9
                        if now - d.last_max_tick >= period:
                            d.last_max_tick = now
                            if d.pending:
                                if d.timeout_bit:
                                    self._flush(d)
                                else:
                                    d.timeout_bit = True
                    if cfg.ack_timeout_ns:
                        period = max(cfg.ack_timeout_ns, MIN_TIMEOUT_NS) / 1e9
                        if now - d.last_ack_tick >= period:
                            d.last_ack_tick = now
                            self._expire_unacked(d)

    @staticmethod
    def _expire_unacked(d: _DigestState) -> None:
        # a list survives one tick; unacknowledged on the next, its samples may be learnt again
        for list_id, (samples, marked) in list(d.unacked.items()):
            if marked:
                d.cache.difference_update(samples)
                del d.unacked[list_id]
            else:
                d.unacked[list_id] = (samples, True)


def _sample_to_p4data(info: DigestInfo, sample: tuple[int, ...], out) -> None:
    if info.kind == "bitstring":
        out.bitstring = to_bytes(sample[0] if sample else 0)
        return
    members = out.struct.members if info.kind == "struct" else out.tuple.members
    for value in sample:
        members.add().bitstring = to_bytes(value)
