"""Writes of SwitchConnection: batches split to fit, per-update outcomes, and an intended state
that records exactly what the switch applied (a part of SwitchConnection, like PacketIO).

A failed WriteRequest returns its per-update results in trailing metadata. When they do not come
back (an error without them: RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, a broken connection), the
outcome is ambiguous and the switch is read back (controlplane.readback) to learn it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controlplane.codec import Codec
from controlplane.entities import Entity, TableEntry
from controlplane.errors import (
    AmbiguousWriteError,
    ControlPlaneError,
    P4RuntimeError,
    SwitchUnavailableError,
    UpdateError,
    decode_update_errors,
    rpc_error_to_exception,
)
from controlplane.readback import reconcile_updates
from controlplane.state import IntendedState

log = logging.getLogger("controlplane")
Update = p4runtime_pb2.Update

# Updates per WriteRequest. A failed batch returns one p4.v1.Error per update in its trailing
# metadata (~45 bytes per successful update once base64-encoded, more with a message): gRPC's
# default 16 KiB limit overflows past ~360 updates with one failure. The client raises its limit
# (MAX_METADATA) and keeps each batch small enough that its results fit with room to spare.
WRITE_BATCH = 1000
MAX_METADATA = 32 << 20
# Codes after which the switch may have applied part of a batch whose results did not come back.
AMBIGUOUS_CODES = frozenset({
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.ABORTED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS})


class Writes:
    # Provided by SwitchConnection.
    addr: str
    who: str
    device_id: int
    election_id: tuple[int, int]
    role: str
    timeout: float
    intended: IntendedState
    _write_lock: threading.RLock

    @property
    def codec(self) -> Codec:
        raise NotImplementedError

    def _check_primary(self, what: str) -> None:
        raise NotImplementedError

    def _stub_or_raise(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        raise NotImplementedError

    def read_protos(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        raise NotImplementedError

    def write(self, updates: Iterable[tuple[int, Entity]]) -> None:
        """One WriteRequest with all ``(Update.INSERT|MODIFY|DELETE, entity)`` pairs. Encoding
        errors raise before anything is sent; on a server error the updates that succeeded are
        still recorded in the intended state."""
        codec = self.codec
        req = p4runtime_pb2.WriteRequest()
        sent: list[tuple[int, Entity]] = []
        for kind, entity in updates:
            u = req.updates.add()
            u.type = kind
            codec.to_proto(entity, for_delete=kind == Update.DELETE, out=u.entity)
            sent.append((kind, entity))
        if sent:
            # Described (as the user named them) only if the write fails: it is not free.
            self._send_write(req, descriptions=lambda: [
                f"{Update.Type.Name(k).lower()} {codec.describe(e)}" for k, e in sent])

    def write_protos(self, updates: Iterable[p4runtime_pb2.Update],
                     descriptions: list[str] | None = None) -> None:
        """One WriteRequest of prebuilt ``p4.v1.Update`` messages (recorded in the intended
        state like ``write``). Without ``descriptions`` errors name updates by index."""
        self._write_raw(list(updates), descriptions=descriptions)

    def _write_raw(self, updates: list[p4runtime_pb2.Update], record: bool = True,
                   descriptions: list[str] | None = None) -> None:
        req = p4runtime_pb2.WriteRequest()
        req.updates.extend(updates)
        self._send_write(req, record, descriptions)

    def _send_write(self, req: p4runtime_pb2.WriteRequest, record: bool = True,
                    descriptions: list[str] | Callable[[], list[str]] | None = None) -> None:
        """Send ``req`` (split into WriteRequests of WRITE_BATCH updates) and record in the
        intended state exactly the updates the switch applied: from its per-update results,
        or, after an error without them, from reading the switch back."""
        self._check_primary("Write")
        updates = list(req.updates)
        described: list[str] = []

        def describe() -> list[str]:
            if not described:  # described only on failure: it is not free
                described.extend(descriptions() if callable(descriptions) else descriptions
                                 or [self._describe_update(u) for u in updates])
            return described

        # Outcomes of failed batches only; whole batches that succeeded are filled in (as OK)
        # when something failed: a successful write builds no per-update objects.
        outcomes: list[UpdateError] = []
        with self._write_lock:
            for start in range(0, len(updates), WRITE_BATCH):
                chunk = updates[start:start + WRITE_BATCH]
                err = self._write_chunk(req if len(chunk) == len(updates) else
                                        p4runtime_pb2.WriteRequest(updates=chunk))
                if err is None:
                    if record:
                        for u in chunk:
                            self.intended.apply(u)
                    continue
                per_update = decode_update_errors(err, describe()[start:])
                if len(per_update) != len(chunk):
                    done = _with_successes(outcomes, start)
                    self._write_failed(err, updates, start, done, record, describe())
                for outcome in per_update:
                    if outcome.ok and record:
                        self.intended.apply(chunk[outcome.index])
                    outcomes.append(dataclasses.replace(outcome, index=start + outcome.index))
        if any(not o.ok for o in outcomes):
            first = next(o for o in outcomes if not o.ok)
            raise P4RuntimeError("Write", "UNKNOWN", first.message,
                                 _with_successes(outcomes, len(updates)))

    def _write_chunk(self, req: p4runtime_pb2.WriteRequest) -> grpc.RpcError | None:
        req.device_id = self.device_id
        req.role = self.role
        req.election_id.high, req.election_id.low = self.election_id
        try:
            self._stub_or_raise().Write(req, timeout=max(self.timeout, 30))
        except grpc.RpcError as err:
            return err
        except ValueError:  # grpc: the channel was closed under us (a reconnect): not sent
            raise SwitchUnavailableError(f"{self.who}: connection closed during Write") from None
        return None

    def _write_failed(self, err: grpc.RpcError, updates: list[p4runtime_pb2.Update], start: int,
                      done: Sequence[UpdateError], record: bool, descriptions: list[str]) -> None:
        """A WriteRequest (updates[start:start+WRITE_BATCH]) failed without per-update results.
        A request-level refusal (not primary, no pipeline, bad device...) applied nothing;
        any other error may have applied part of it: read the switch back. Always raises."""
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        if code not in AMBIGUOUS_CODES or not record:
            raise rpc_error_to_exception(err, "Write", self.addr, descriptions) from None
        chunk = updates[start:start + WRITE_BATCH]
        try:
            applied = reconcile_updates(self.read_protos, chunk, self.intended)
        except ControlPlaneError:  # no pipeline or not connected: nothing can be learned
            applied = [None] * len(chunk)
        known = [o.ok for o in done] + applied
        known += [False] * (len(updates) - len(known))  # later batches were not sent
        details = (err.details() if hasattr(err, "details") else "") or ""
        log.warning("%s: Write failed with %s and no per-update results; read back %d/%d "
                    "applied", self.who, code.name, sum(bool(a) for a in applied), len(chunk))
        raise AmbiguousWriteError("Write", code.name, details, tuple(known)) from None

    def _describe_update(self, u: p4runtime_pb2.Update) -> str:
        kind = Update.Type.Name(u.type).lower()
        try:
            return f"{kind} {self.codec.describe(self.codec.from_proto(u.entity))}"
        except ControlPlaneError:
            return f"{kind} {u.entity.WhichOneof('entity')}"

    def insert(self, *entities: Entity) -> None:
        self.write((Update.INSERT, e) for e in entities)

    def modify(self, *entities: Entity) -> None:
        self.write((Update.MODIFY, e) for e in entities)

    def delete(self, *entities: Entity) -> None:
        self.write((Update.DELETE, e) for e in entities)

    @contextlib.contextmanager
    def batch(self) -> Iterator[Batch]:
        """``with conn.batch() as b: b.insert(...)``: everything goes in one WriteRequest when
        the block exits without an exception."""
        b = Batch()
        yield b
        self.write(b.updates)

    def set_default(self, table: str, action: str, **params: object) -> None:
        self.modify(TableEntry(table=table, action=action, params=params, is_default=True))

    def reset_default(self, table: str) -> None:
        """Back to the P4 program's default action (MODIFY of the default with no action)."""
        req = p4runtime_pb2.WriteRequest()
        u = req.updates.add(type=Update.MODIFY)
        self.codec.to_proto(TableEntry(table=table, is_default=True), out=u.entity)
        self._send_write(req, descriptions=[f"reset default entry of table {table}"])


def _with_successes(outcomes: list[UpdateError], count: int) -> tuple[UpdateError, ...]:
    """Outcomes of updates 0..count-1: those recorded, the rest OK (their batch succeeded)."""
    known = {o.index: o for o in outcomes}
    return tuple(known.get(i) or UpdateError(i, 0, "", "") for i in range(count))


class Batch:
    def __init__(self) -> None:
        self.updates: list[tuple[int, Entity]] = []

    def insert(self, *entities: Entity) -> None:
        self.updates.extend((Update.INSERT, e) for e in entities)

    def modify(self, *entities: Entity) -> None:
        self.updates.extend((Update.MODIFY, e) for e in entities)

    def delete(self, *entities: Entity) -> None:
        self.updates.extend((Update.DELETE, e) for e in entities)
