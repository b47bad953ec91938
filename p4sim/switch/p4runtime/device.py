"""One P4Runtime device: its forwarding pipeline config and the dispatch of Write/Read updates
to the entity handlers. gRPC-free, so the rules can be read apart from the transport."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch.api import ApiError, DataPlaneApi, Digest

from . import direct, entities, tables
from .arbitration import Arbiter, Connection, election_id
from .codec import (
    ERROR_SPACE,
    FAILED_PRECONDITION,
    INTERNAL,
    INVALID_ARGUMENT,
    NOT_FOUND,
    PERMISSION_DENIED,
    UNIMPLEMENTED,
    UNKNOWN,
    P4RTError,
)
from .context import Context
from .p4config import DEPRECATION_NOTE, unwrap_device_config
from .p4info import PipelineInfo
from .packetio import DigestManager, packet_in_message, packet_out_frame
from .roleconfig import RoleGrant, entity_allowed

log = logging.getLogger("p4sim.p4runtime")
Action = p4rt.SetForwardingPipelineConfigRequest
ResponseType = p4rt.GetForwardingPipelineConfigRequest

NOT_PRIMARY = P4RTError(PERMISSION_DENIED, "Not primary", plain=True)
OUTSIDE_ROLE = P4RTError(PERMISSION_DENIED, "Entity not in the scope of the writer's role")

# Entity handlers by the Entity oneof they serve: (ctx, update type, message) for writes,
# (ctx, message, out) for reads. Digest configs belong to the device's digest manager.
WRITERS: dict[str, Callable[[Context, int, Any], None]] = {
    "table_entry": tables.table_write,
    "action_profile_member": entities.member_write,
    "action_profile_group": entities.group_write,
    "meter_entry": entities.meter_write,
    "direct_meter_entry": direct.direct_meter_write,
    "counter_entry": entities.counter_write,
    "direct_counter_entry": direct.direct_counter_write,
    "packet_replication_engine_entry": entities.pre_write,
    "register_entry": entities.register_write,
}
READERS: dict[str, Callable[[Context, Any, list[p4rt.Entity]], None]] = {
    "table_entry": tables.table_read,
    "action_profile_member": entities.member_read,
    "action_profile_group": entities.group_read,
    "meter_entry": entities.meter_read,
    "direct_meter_entry": direct.direct_meter_read,
    "counter_entry": entities.counter_read,
    "direct_counter_entry": direct.direct_counter_read,
    "packet_replication_engine_entry": entities.pre_read,
    "register_entry": entities.register_read,
}
INCORRECT_ENTITY = P4RTError(UNKNOWN, "Incorrect entity type")
UNSUPPORTED_WRITES = {
    "value_set_entry": P4RTError(UNIMPLEMENTED, "ValueSet writes are not supported yet"),
    "extern_entry": P4RTError(UNIMPLEMENTED, "No extern support yet"),
}
UNSUPPORTED_READS = {
    "value_set_entry": P4RTError(UNIMPLEMENTED, "ValueSet reads are not supported yet"),
}
NO_PIPELINE = P4RTError(FAILED_PRECONDITION, "No forwarding pipeline config set for this device",
                        plain=True)


class Device:
    def __init__(self, dp: DataPlaneApi, device_id: int, arbiter: Arbiter,
                 registers: bool = False) -> None:
        self.dp = dp
        self.device_id = device_id
        self.arbiter = arbiter
        self.registers = registers
        self.lock = threading.RLock()
        self.ctx: Context | None = None
        self.config: p4rt.ForwardingPipelineConfig | None = None  # p4info + cookie, as set
        self.digests: DigestManager | None = None
        self.staged: tuple[PipelineInfo, p4rt.ForwardingPipelineConfig] | None = None
        self.packet_out_rejected = 0  # malformed packet-outs, dropped and reported
        dp.set_packet_in_handler(self._on_packet_in)
        dp.set_digest_handler(self._on_digest)

    def close(self) -> None:
        self.dp.set_packet_in_handler(None)
        self.dp.set_digest_handler(None)
        if self.digests is not None:
            self.digests.close()

    # ---- access checks ------------------------------------------------------------------------

    def check_writer(self, device_id: int, has_election: bool, election: int,
                     role: str = "") -> RoleGrant | None:
        """PI: with no stream open for the device, writes without an election id are accepted;
        otherwise the writer must carry the primary's election id for its (device, role). A
        role no live client holds is NOT_FOUND (spec). Returns the role's access (None: all)."""
        if role and not self.arbiter.has_role(device_id, role):
            raise P4RTError(NOT_FOUND, f"Role '{role}' not found for device {device_id}")
        count = self.arbiter.count(device_id)
        if count == 0 and has_election:
            raise NOT_PRIMARY.again()
        if count > 0 and not self.arbiter.is_primary(device_id, election, role):
            raise NOT_PRIMARY.again()
        return self.arbiter.grant(device_id, role) if role else None

    # ---- pipeline config ----------------------------------------------------------------------

    def set_pipeline(self, req: p4rt.SetForwardingPipelineConfigRequest) -> None:
        grant = self.check_writer(req.device_id, req.HasField("election_id"),
                                  election_id(req.election_id), req.role)
        if grant is not None and not grant.can_push_pipeline:
            raise P4RTError(PERMISSION_DENIED,
                            f"Role '{req.role}' may not set the forwarding pipeline")
        action = req.action
        if action == Action.UNSPECIFIED:
            raise P4RTError(INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
        info = None
        if action != Action.COMMIT:
            _unwrap_legacy_config(req.config)
            info = PipelineInfo(req.config.p4info)
            check_matches_json(info, req.config.p4_device_config)
        if action == Action.VERIFY:
            return
        if req.device_id != self.device_id:  # BMv2 refuses to be assigned another device id
            if action == Action.COMMIT:
                raise P4RTError(UNKNOWN, "Error in second phase of device update")
            raise P4RTError(UNKNOWN, "Error when trying to assign device")
        with self.lock:
            if action == Action.COMMIT:
                if self.staged is None:
                    raise P4RTError(UNKNOWN, "Error in second phase of device update")
                info, config = self.staged
                self._install(info, config)
            elif action == Action.VERIFY_AND_SAVE:
                assert info is not None
                if not device_config_is_json(req.config.p4_device_config):
                    raise P4RTError(UNKNOWN, "Error in first phase of device update: "
                                    "p4_device_config is not BMv2 JSON")
                self.staged = (info, req.config)
            elif action == Action.VERIFY_AND_COMMIT:
                assert info is not None
                self._install(info, req.config)
            elif action == Action.RECONCILE_AND_COMMIT:
                assert info is not None
                self._reconcile(info, req.config)
            else:
                raise P4RTError(INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")

    def commit_pipeline(self, config: p4rt.ForwardingPipelineConfig, device_id: int) -> None:
        """``set_pipeline`` of a VERIFY_AND_COMMIT request holding ``config`` (no election id,
        no role), for an in-process caller: the same checks and errors, and the device keeps
        ``config`` itself rather than a copy, so the caller must never change it (a simulated
        fabric's switches all keep one)."""
        self.check_writer(device_id, False, 0)
        _unwrap_legacy_config(config)
        info = _committed_info(config)
        if device_id != self.device_id:
            raise P4RTError(UNKNOWN, "Error when trying to assign device")
        with self.lock:
            self._install(info, config, keep=True)

    def _install(self, info: PipelineInfo, config: p4rt.ForwardingPipelineConfig,
                 keep: bool = False) -> None:
        try:
            self.dp.load_pipeline(config.p4_device_config)
        except ApiError as err:
            raise P4RTError(UNKNOWN, f"Error in first phase of device update: {err.message}") \
                from None
        self._adopt(info, config, keep)

    def _adopt(self, info: PipelineInfo, config: p4rt.ForwardingPipelineConfig,
               keep: bool = False) -> None:
        info.bind_json(config.p4_device_config)
        if self.digests is not None:
            self.digests.close()
        self.ctx = Context(self.dp, info, self.registers)
        self.digests = DigestManager(info, self._send_digest)
        if keep:  # commit_pipeline's: never changed by its caller
            self.config = config
        else:
            self.config = p4rt.ForwardingPipelineConfig()
            self.config.CopyFrom(config)
        self.staged = None

    def _reconcile(self, info: PipelineInfo, config: p4rt.ForwardingPipelineConfig) -> None:
        """Load the new pipeline and replay the forwarding state into it; if the state does
        not fit the new program, restore the old pipeline and its state."""
        old_ctx, old_config = self.ctx, self.config
        saved = self._save_state() if old_ctx is not None else []
        self._install(info, config)
        failed = self._replay(saved)
        if not failed:
            return
        if old_ctx is not None and old_config is not None:
            self._install(old_ctx.info, old_config)
            self._replay(saved)
        raise P4RTError(UNKNOWN, f"Error when reconciling config: {failed}")

    def _save_state(self) -> list[p4rt.Update]:
        probes = [p4rt.Entity(action_profile_member=p4rt.ActionProfileMember()),
                  p4rt.Entity(action_profile_group=p4rt.ActionProfileGroup())]
        te = p4rt.Entity()
        te.table_entry.counter_data.SetInParent()
        te.table_entry.meter_config.SetInParent()
        probes.append(te)
        probes += [p4rt.Entity(meter_entry=p4rt.MeterEntry()),
                   p4rt.Entity(counter_entry=p4rt.CounterEntry())]
        mc = p4rt.Entity()
        mc.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        cs = p4rt.Entity()
        cs.packet_replication_engine_entry.clone_session_entry.SetInParent()
        probes += [mc, cs]
        updates = []
        for probe in probes:
            found: list[p4rt.Entity] = []
            try:
                self._read_entity(probe, found)
            except P4RTError as err:
                log.warning("reconcile: cannot save %s: %s", probe.WhichOneof("entity"), err)
            for ent in found:
                kind = ent.WhichOneof("entity")
                utype = p4rt.Update.MODIFY if kind in ("meter_entry", "counter_entry") \
                    else p4rt.Update.INSERT
                updates.append(p4rt.Update(type=utype, entity=ent))
        return updates

    def _replay(self, updates: list[p4rt.Update]) -> str:
        for upd in updates:
            try:
                self._apply(upd)
            except P4RTError as err:
                return err.message
        return ""

    def get_pipeline(self, req: p4rt.GetForwardingPipelineConfigRequest,
                     out: p4rt.ForwardingPipelineConfig) -> None:
        if req.device_id != self.device_id:
            raise NO_PIPELINE.again()
        with self.lock:
            if self.config is None:
                raise NO_PIPELINE.again()
            rtype = req.response_type
            if rtype in (ResponseType.ALL, ResponseType.P4INFO_AND_COOKIE):
                out.p4info.CopyFrom(self.config.p4info)
            if rtype in (ResponseType.ALL, ResponseType.DEVICE_CONFIG_AND_COOKIE):
                out.p4_device_config = self.config.p4_device_config
            if rtype not in (ResponseType.ALL, ResponseType.COOKIE_ONLY,
                             ResponseType.P4INFO_AND_COOKIE,
                             ResponseType.DEVICE_CONFIG_AND_COOKIE):
                raise P4RTError(INVALID_ARGUMENT,
                                "Invalid response_type in GetForwardingPipelineConfigRequest")
            if self.config.HasField("cookie"):
                out.cookie.CopyFrom(self.config.cookie)

    # ---- Write ----------------------------------------------------------------------------------

    def write(self, req: p4rt.WriteRequest) -> status_pb2.Status:
        """Apply a WriteRequest; the google.rpc.Status to return (PI's shape)."""
        return self.write_updates(req.updates, req.device_id, req.HasField("election_id"),
                                  election_id(req.election_id), req.role, req.atomicity)

    def write_updates(self, updates: Iterable[p4rt.Update], device_id: int,
                      has_election: bool = False, election: int = 0, role: str = "",
                      atomicity: int = 0) -> status_pb2.Status:
        """``write`` of a request with these fields, for an in-process caller: the updates
        are not copied into a WriteRequest first (in pure-Python protobuf that copy cost as
        much as applying them)."""
        grant = self.check_writer(device_id, has_election, election, role)
        if device_id != self.device_id or self.ctx is None:
            raise NO_PIPELINE.again()
        if atomicity != p4rt.WriteRequest.CONTINUE_ON_ERROR:
            raise P4RTError(UNIMPLEMENTED,
                            "Support for atomic write modes has not been implemented yet")
        # (code, message) per update; p4.v1.Error messages only for a write that failed
        results: list[tuple[int, str]] = []
        with self.lock:
            for upd in updates:
                try:
                    if not entity_allowed(grant, upd.entity, self.ctx.info.ids):
                        raise OUTSIDE_ROLE.again()
                    self._apply(upd)
                    results.append(_APPLIED)
                except P4RTError as err:
                    results.append((err.code, err.message))
                except Exception as exc:  # a bug must not take the switch down
                    log.exception("P4Runtime write failed")
                    results.append((INTERNAL, f"internal error: {exc}"))
        status = status_pb2.Status()
        if any(code for code, _ in results):
            status.code = UNKNOWN
            for code, message in results:
                error = p4rt.Error()
                if code:
                    error.canonical_code, error.message = code, message
                    error.space = ERROR_SPACE
                status.details.add().Pack(error)
        return status

    def _apply(self, upd: p4rt.Update) -> None:
        ctx = self.ctx
        assert ctx is not None
        kind = upd.entity.WhichOneof("entity")
        if kind == "digest_entry":  # handled by the digest manager, not the context
            assert self.digests is not None
            self.digests.config_write(upd.type, upd.entity.digest_entry)
            return
        write = WRITERS.get(kind or "")
        if write is None:
            raise UNSUPPORTED_WRITES.get(kind or "", INCORRECT_ENTITY).again()
        write(ctx, upd.type, getattr(upd.entity, kind))

    # ---- Read -----------------------------------------------------------------------------------

    def read(self, req: p4rt.ReadRequest) -> tuple[list[p4rt.Entity], P4RTError | None]:
        """Entities read, and the error that stopped the read (PI stops at the first one).
        Reads need no election id (any client may read); ``role`` only filters the result to
        that role's entities, as the specification says (a role no one holds has none)."""
        if req.device_id != self.device_id or self.ctx is None:
            raise NO_PIPELINE.again()
        found: list[p4rt.Entity] = []
        err: P4RTError | None = None
        with self.lock:
            for ent in req.entities:
                try:
                    self._read_entity(ent, found)
                except P4RTError as failed:
                    err = failed
                    break
                except Exception as exc:
                    log.exception("P4Runtime read failed")
                    err = P4RTError(INTERNAL, f"internal error: {exc}")
                    break
            if req.role:
                found = self._role_filter(req.role, found)
        return found, err

    def _role_filter(self, role: str, found: list[p4rt.Entity]) -> list[p4rt.Entity]:
        assert self.ctx is not None
        if not self.arbiter.has_role(self.device_id, role):
            return []
        grant = self.arbiter.grant(self.device_id, role)
        return [e for e in found if entity_allowed(grant, e, self.ctx.info.ids)]

    def _read_entity(self, ent: p4rt.Entity, out: list[p4rt.Entity]) -> None:
        ctx = self.ctx
        assert ctx is not None
        kind = ent.WhichOneof("entity")
        if kind == "digest_entry":
            assert self.digests is not None
            self.digests.config_read(ent.digest_entry, out)
            return
        read = READERS.get(kind or "")
        if read is None:
            raise UNSUPPORTED_READS.get(kind or "", INCORRECT_ENTITY).again()
        read(ctx, getattr(ent, kind), out)

    # ---- stream ---------------------------------------------------------------------------------

    def stream_message(self, conn: Connection, req: p4rt.StreamMessageRequest) -> None:
        """Packet-out and digest acks; PI ignores them from backups and before arbitration."""
        if conn.election is None or conn.device_id != self.device_id:
            return
        if not self.arbiter.is_primary_conn(conn):
            return
        ctx, digests = self.ctx, self.digests
        if ctx is None:
            return
        kind = req.WhichOneof("update")
        if kind == "packet":
            grant = self.arbiter.grant(conn.device_id, conn.role) if conn.role else None
            if grant is not None and not grant.can_send_packet_outs:
                self._reject_packet_out(conn, req.packet, P4RTError(
                    PERMISSION_DENIED, f"Role '{conn.role}' may not send PacketOuts"))
                return
            try:
                frame = packet_out_frame(ctx.info, req.packet)
                self.dp.packet_out(frame)
            except (P4RTError, ApiError) as err:
                self._reject_packet_out(conn, req.packet, err)
        elif kind == "digest_ack" and digests is not None:
            grant = self.arbiter.grant(conn.device_id, conn.role) if conn.role else None
            if grant is None or grant.allows_id(req.digest_ack.digest_id, ctx.info.ids):
                digests.ack(req.digest_ack)

    def _reject_packet_out(self, conn: Connection, packet: p4rt.PacketOut,
                           err: P4RTError | ApiError) -> None:
        """A packet-out that does not fit the controller header is dropped, counted, and
        reported on the sender's stream as a StreamError carrying the packet (what PI does
        with stream error reporting DETAILED; PI's default, DISABLED, drops it silently)."""
        code = err.code if isinstance(err, P4RTError) else int(err.code)
        self.packet_out_rejected += 1
        log.warning("PacketOut dropped: %s", err.message)
        msg = p4rt.StreamMessageResponse()
        msg.error.canonical_code, msg.error.message = code, err.message
        msg.error.space = ERROR_SPACE
        msg.error.packet_out.packet_out.CopyFrom(packet)
        conn.send(msg)

    def _send_digest(self, msg: p4rt.StreamMessageResponse) -> None:
        """A DigestList goes to the primary of every role that owns the digest."""
        ctx = self.ctx
        names = ctx.info.ids if ctx is not None else {}
        did = msg.digest.digest_id
        self.arbiter.send_to_primaries(
            self.device_id, msg, lambda g: g is None or g.allows_id(did, names))

    def _on_packet_in(self, frame: bytes) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        try:
            msg = packet_in_message(ctx.info.packet_in, frame)
        except Exception:
            log.exception("cannot decode packet-in")
            return
        if msg is not None:  # to the primary of every role that takes PacketIns
            self.arbiter.send_to_primaries(
                self.device_id, msg, lambda g: g is None or g.receives_packet_ins)

    def _on_digest(self, digest: Digest) -> None:
        digests = self.digests
        if digests is not None:
            digests.on_digest(digest)


_APPLIED = (0, "")  # an update's result when it was applied


# The PipelineInfo of a config given to commit_pipeline, by the config's identity (the config
# is kept so that its id is not reused): a simulated fabric's switches all commit one config
# its caller never changes, and reading its P4Info again for each took 2 ms a switch. A
# PipelineInfo is read-only once bound to its JSON (binding it again changes nothing).
_COMMITTED: dict[int, tuple[p4rt.ForwardingPipelineConfig, PipelineInfo]] = {}


def _committed_info(config: p4rt.ForwardingPipelineConfig) -> PipelineInfo:
    """PipelineInfo(config.p4info), checked against the config's JSON, shared by the devices
    committing this very config."""
    found = _COMMITTED.get(id(config))
    if found is not None and found[0] is config:
        return found[1]
    info = PipelineInfo(config.p4info)
    check_matches_json(info, config.p4_device_config)  # not kept when it does not match
    if len(_COMMITTED) >= 8:
        _COMMITTED.clear()
    _COMMITTED[id(config)] = (config, info)
    return info


def _unwrap_legacy_config(config: p4rt.ForwardingPipelineConfig) -> None:
    """PI accepts the BMv2 JSON wrapped in the legacy p4.tmp.P4DeviceConfig (as p4lang/
    tutorials' p4runtime_lib sends it), logging that it is deprecated; so does p4sim. The
    config is kept unwrapped, so GetForwardingPipelineConfig returns the JSON itself."""
    inner = unwrap_device_config(config.p4_device_config)
    if inner is not None:
        log.warning(DEPRECATION_NOTE)
        config.p4_device_config = inner


def check_matches_json(info: PipelineInfo, device_config: bytes) -> None:
    """A P4Info from another program than the JSON is refused up front (P4Runtime spec: the
    server verifies the config it is given). BMv2 1.15.5/PI 0.1.2 accept such a pair, then fail
    on writes; this follows the spec and refuses it as INVALID_ARGUMENT."""
    why = info.json_mismatch(device_config)
    if why is not None:
        raise P4RTError(INVALID_ARGUMENT, f"P4Info does not match the P4 device config: {why}")


def device_config_is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except (ValueError, UnicodeDecodeError):
        return False
