"""Re-sync after a reconnect: decide whether the switch lost our state, and restore it.

A switch that restarted comes back with no pipeline (BMv2/PI answer GetForwardingPipelineConfig
with FAILED_PRECONDITION) or with a different one (another cookie). Then the pipeline this
client pushed is pushed again and its intended state (controlplane.state) replayed, in
dependency order and in batches, and the switch is read back to verify it holds exactly that.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from p4.v1 import p4runtime_pb2

from controlplane.errors import ControlPlaneError, P4RuntimeError
from controlplane.readback import verify
from controlplane.state import MODIFIED_ON_REPLAY, identity

if TYPE_CHECKING:
    from controlplane.connection import SwitchConnection

log = logging.getLogger("controlplane")


def restore_after_restart(conn: SwitchConnection) -> int | None:
    """Number of entities restored, or None when nothing had to (or could) be done."""
    if not conn.is_primary:
        log.warning("%s: reconnected as backup; not re-syncing", conn.who)
        return None
    try:
        cookie: int | None = conn.get_pipeline(
            p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY).cookie
    except P4RuntimeError as err:
        if err.code != "FAILED_PRECONDITION":  # BMv2/PI's answer for "no pipeline"
            raise
        cookie = None
    pushed = conn._pipeline_files
    if pushed is None:
        if cookie is None and len(conn.intended):
            log.error("%s came back without a pipeline, and this client did not push one: "
                      "%d written entities not restored", conn.who, len(conn.intended))
        else:
            log.warning("%s: reconnected", conn.who)
        return None
    if conn._cookie and cookie == conn._cookie:
        log.warning("%s: reconnected; pipeline intact", conn.who)
        return None
    with conn._write_lock:
        conn._push_pipeline(*pushed)
        updates = list(conn.intended.replay_updates())
        _replay(conn, updates)
        check = verify(conn.read_protos, conn.intended)
        if check.missing:  # one more try for what did not land (a transient failure)
            log.warning("%s: %d entities missing after replay; writing them again", conn.who,
                        len(check.missing))
            _replay(conn, [p4runtime_pb2.Update(type=_replay_type(e), entity=e)
                           for e in check.missing])
            check = verify(conn.read_protos, conn.intended)
    conn.last_verification = check
    if not check.ok:
        raise ControlPlaneError(
            f"{conn.who}: re-sync incomplete after restart: read back {len(check.missing)} "
            f"intended entities missing and {len(check.unexpected)} unexpected")
    unread = f" ({check.unreadable} of a kind the switch cannot read)" if check.unreadable else ""
    log.warning("%s came back without our pipeline: re-pushed pipeline and %d entities, "
                "verified by read-back%s", conn.who, len(updates), unread)
    return len(updates)


def _replay(conn: SwitchConnection, updates: list[p4runtime_pb2.Update]) -> None:
    try:
        conn._write_raw(updates, record=False)
    except P4RuntimeError as err:  # the read-back that follows says what is missing
        log.warning("%s: replay: %s", conn.who, err)


def _replay_type(entity: p4runtime_pb2.Entity) -> int:
    ident = identity(entity)
    always_there = ident is not None and ident[0] in MODIFIED_ON_REPLAY
    return p4runtime_pb2.Update.MODIFY if always_there else p4runtime_pb2.Update.INSERT
