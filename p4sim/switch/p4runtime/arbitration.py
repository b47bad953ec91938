"""Primary/backup arbitration between StreamChannel clients, per (device id, role) as the
P4Runtime specification states: within one (device, role) the live connection with the highest
election id is primary (PI's rule for the default role, which is the only one PI knows); every
change of primary is announced to all clients of that (device, role), other updates only to the
one concerned. The primary's role config (roleconfig.py) is what the role may do.

Limits, so that no client can exhaust the switch: MAX_CONNECTIONS arbitrated streams per
(device, role) as PI's per-device limit, MAX_STREAMS open StreamChannel RPCs in all (the server
refuses more at open), OUTBOX_LIMIT unread packet-ins/digests per client."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf import any_pb2
from p4.v1 import p4runtime_pb2 as p4rt

from .codec import ALREADY_EXISTS, INVALID_ARGUMENT, OK, RESOURCE_EXHAUSTED, P4RTError
from .roleconfig import RoleGrant

MAX_CONNECTIONS = 16  # PI's per-device limit, here per (device, role)
MAX_STREAMS = 32  # open StreamChannel RPCs, arbitrated or not (each holds a server thread)
OUTBOX_LIMIT = 256  # packet-ins/digests queued for a slow client before new ones are dropped
_ids = itertools.count(1)
RoleKey = tuple[int, str]  # (device id, role name; "" is the default role)


def election_id(msg: p4rt.Uint128) -> int:
    return (msg.high << 64) | msg.low


@dataclass(eq=False)
class Connection:
    """One StreamChannel; ``outbox`` feeds the response stream (None ends it)."""

    device_id: int = 0
    election: int | None = None  # None until the first arbitration update
    role: str = ""
    grant: RoleGrant | None = None  # what this client asked its role to allow
    config: any_pb2.Any | None = None  # the role config as sent, for notifications
    outbox: queue.Queue = field(default_factory=queue.Queue)
    id: int = field(default_factory=lambda: next(_ids))
    dropped: int = 0  # packet-ins/digests dropped because the client was not reading

    @property
    def key(self) -> RoleKey:
        return self.device_id, self.role

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


@dataclass
class _RoleState:
    conns: list[Connection] = field(default_factory=list)
    grant: RoleGrant | None = None  # set by the most recent primary
    config: any_pb2.Any | None = None


class Arbiter:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._roles: dict[RoleKey, _RoleState] = {}

    def add(self, conn: Connection, device_id: int, election: int, role: str = "",
            grant: RoleGrant | None = None, config: any_pb2.Any | None = None) -> None:
        with self._lock:
            state = self._roles.setdefault((device_id, role), _RoleState())
            if len(state.conns) >= MAX_CONNECTIONS:
                raise P4RTError(RESOURCE_EXHAUSTED, "Too many connections")
            if any(c.election == election for c in state.conns):
                raise P4RTError(INVALID_ARGUMENT, "Election id already exists")
            conn.device_id, conn.election, conn.role = device_id, election, role
            conn.grant, conn.config = grant, config
            state.conns.append(conn)
            if self._primary(conn.key) is conn:
                self._adopt_config(state, conn)
                self._notify_all(conn.key)
            else:
                self._notify(conn)

    def update(self, conn: Connection, election: int, grant: RoleGrant | None = None,
               config: any_pb2.Any | None = None) -> None:
        with self._lock:
            state = self._roles[conn.key]
            config_changed = (config or None) != (conn.config or None)
            conn.grant, conn.config = grant, config
            if conn.election == election and not config_changed:
                return
            if any(c.election == election for c in state.conns if c is not conn):
                raise P4RTError(INVALID_ARGUMENT, "New election id already exists")
            was_primary = self._primary(conn.key) is conn
            conn.election = election
            is_primary = self._primary(conn.key) is conn
            if is_primary:
                self._adopt_config(state, conn)
            if is_primary != was_primary or (is_primary and config_changed):
                self._notify_all(conn.key)
            else:
                self._notify(conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            state = self._roles.get(conn.key)
            if state is None or conn not in state.conns:
                return
            was_primary = self._primary(conn.key) is conn
            state.conns.remove(conn)
            if not state.conns and conn.role:
                del self._roles[conn.key]  # a role lives as long as one of its clients
            elif was_primary and state.conns:
                self._notify_all(conn.key)

    def count(self, device_id: int) -> int:
        """Live arbitrated connections of ``device_id`` in every role."""
        with self._lock:
            return sum(len(s.conns) for (dev, _), s in self._roles.items() if dev == device_id)

    def has_role(self, device_id: int, role: str) -> bool:
        with self._lock:
            state = self._roles.get((device_id, role))
            return state is not None and bool(state.conns)

    def grant(self, device_id: int, role: str) -> RoleGrant | None:
        """The role's access (None: full access), as its most recent primary configured it."""
        with self._lock:
            state = self._roles.get((device_id, role))
            return state.grant if state is not None else None

    def is_primary(self, device_id: int, election: int, role: str = "") -> bool:
        with self._lock:
            primary = self._primary((device_id, role))
            return primary is not None and primary.election == election

    def is_primary_conn(self, conn: Connection) -> bool:
        with self._lock:
            return self._primary(conn.key) is conn

    def send_to_primaries(self, device_id: int, msg: p4rt.StreamMessageResponse,
                          wants: Callable[[RoleGrant | None], bool]) -> int:
        """Queue ``msg`` for the primary of every role of the device whose access ``wants``;
        how many took it."""
        with self._lock:
            primaries = [(self._primary(key), s.grant) for key, s in self._roles.items()
                         if key[0] == device_id]
        return sum(1 for p, grant in primaries if p is not None and wants(grant) and p.send(msg))

    def _primary(self, key: RoleKey) -> Connection | None:
        state = self._roles.get(key)
        return max(state.conns, key=lambda c: c.election or 0) if state and state.conns \
            else None

    @staticmethod
    def _adopt_config(state: _RoleState, primary: Connection) -> None:
        state.grant, state.config = primary.grant, primary.config

    def _notify_all(self, key: RoleKey) -> None:
        for c in self._roles[key].conns:
            self._notify(c)

    def _notify(self, conn: Connection) -> None:
        primary = self._primary(conn.key)
        assert primary is not None and primary.election is not None
        state = self._roles[conn.key]
        msg = p4rt.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = conn.device_id
        if conn.role:
            arb.role.name = conn.role
            if state.config is not None:
                arb.role.config.CopyFrom(state.config)
        arb.election_id.high, arb.election_id.low = primary.election >> 64, \
            primary.election & ((1 << 64) - 1)
        if primary is conn:
            arb.status.code, arb.status.message = OK, "Is primary"
        else:
            arb.status.code, arb.status.message = ALREADY_EXISTS, "Is backup"
        conn.send(msg, droppable=False)
