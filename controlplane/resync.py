"""Re-sync after a reconnect: decide whether the switch lost our state, and restore it.

A switch that restarted comes back with no pipeline (BMv2/PI answer GetForwardingPipelineConfig
with FAILED_PRECONDITION) or with a different one (another cookie). Then the pipeline this
client pushed is pushed again and its intended state (controlplane.state) replayed, in
dependency order and in batches.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from p4.v1 import p4runtime_pb2

from controlplane.errors import P4RuntimeError

if TYPE_CHECKING:
    from controlplane.connection import SwitchConnection

log = logging.getLogger("controlplane")

REPLAY_BATCH = 500  # updates per WriteRequest while restoring


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
        for start in range(0, len(updates), REPLAY_BATCH):
            conn._write_raw(updates[start:start + REPLAY_BATCH], record=False)
    log.warning("%s came back without our pipeline: re-pushed pipeline and %d entities",
                conn.who, len(updates))
    return len(updates)
