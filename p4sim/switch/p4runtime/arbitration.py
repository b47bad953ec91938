"""Primary/backup arbitration between StreamChannel clients, as PI's server does it: per
device id, the live connection with the highest election id is primary; every change of
primary is announced to all clients of the device, other updates only to the one concerned.
Roles are not distinguished (PI treats every client as the default role)."""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2 as p4rt

from .codec import ALREADY_EXISTS, INVALID_ARGUMENT, OK, RESOURCE_EXHAUSTED, P4RTError

MAX_CONNECTIONS = 16  # PI's per-device limit
OUTBOX_LIMIT = 10_000  # packet-ins queued for a slow client before new ones are dropped
_ids = itertools.count(1)


def election_id(msg: p4rt.Uint128) -> int:
    return (msg.high << 64) | msg.low


@dataclass(eq=False)
class Connection:
    """One StreamChannel; ``outbox`` feeds the response stream (None ends it)."""

    device_id: int = 0
    election: int | None = None  # None until the first arbitration update
    outbox: queue.Queue = field(default_factory=queue.Queue)
    id: int = field(default_factory=lambda: next(_ids))
    dropped: int = 0  # packet-ins/digests dropped because the client was not reading

    def send(self, msg: p4rt.StreamMessageResponse, droppable: bool = True) -> bool:
        """Queue ``msg`` for the client; data messages are dropped (and counted) while the
        client has OUTBOX_LIMIT messages unread, so a stalled client cannot exhaust memory."""
        if droppable and self.outbox.qsize() >= OUTBOX_LIMIT:
            self.dropped += 1
            return False
        self.outbox.put(msg)
        return True

    def close(self) -> None:
        """End the response stream (idempotent; never blocks)."""
        self.outbox.put(None)


class Arbiter:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._conns: dict[int, list[Connection]] = {}

    def add(self, conn: Connection, device_id: int, election: int) -> None:
        with self._lock:
            conns = self._conns.setdefault(device_id, [])
            if len(conns) >= MAX_CONNECTIONS:
                raise P4RTError(RESOURCE_EXHAUSTED, "Too many connections")
            if any(c.election == election for c in conns):
                raise P4RTError(INVALID_ARGUMENT, "Election id already exists")
            conn.device_id, conn.election = device_id, election
            conns.append(conn)
            if self._primary(device_id) is conn:
                self._notify_all(device_id)
            else:
                self._notify(conn)

    def update(self, conn: Connection, election: int) -> None:
        with self._lock:
            if conn.election == election:
                return
            conns = self._conns[conn.device_id]
            if any(c.election == election for c in conns if c is not conn):
                raise P4RTError(INVALID_ARGUMENT, "New election id already exists")
            was_primary = self._primary(conn.device_id) is conn
            conn.election = election
            if (self._primary(conn.device_id) is conn) != was_primary:
                self._notify_all(conn.device_id)
            else:
                self._notify(conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            conns = self._conns.get(conn.device_id, [])
            if conn not in conns:
                return
            was_primary = self._primary(conn.device_id) is conn
            conns.remove(conn)
            if was_primary and conns:
                self._notify_all(conn.device_id)

    def count(self, device_id: int) -> int:
        with self._lock:
            return len(self._conns.get(device_id, []))

    def is_primary(self, device_id: int, election: int) -> bool:
        with self._lock:
            primary = self._primary(device_id)
            return primary is not None and primary.election == election

    def is_primary_conn(self, conn: Connection) -> bool:
        with self._lock:
            return self._primary(conn.device_id) is conn

    def send_to_primary(self, device_id: int, msg: p4rt.StreamMessageResponse) -> bool:
        with self._lock:
            primary = self._primary(device_id)
        return primary.send(msg) if primary is not None else False

    def _primary(self, device_id: int) -> Connection | None:
        conns = self._conns.get(device_id)
        return max(conns, key=lambda c: c.election or 0) if conns else None

    def _notify_all(self, device_id: int) -> None:
        for c in self._conns.get(device_id, []):
            self._notify(c)

    def _notify(self, conn: Connection) -> None:
        primary = self._primary(conn.device_id)
        assert primary is not None and primary.election is not None
        msg = p4rt.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = conn.device_id
        arb.election_id.high, arb.election_id.low = primary.election >> 64, \
            primary.election & ((1 << 64) - 1)
        if primary is conn:
            arb.status.code, arb.status.message = OK, "Is primary"
        else:
            arb.status.code, arb.status.message = ALREADY_EXISTS, "Is backup"
        conn.send(msg, droppable=False)
