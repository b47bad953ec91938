"""Action profile members and groups, indirect counters/meters/registers and the packet
replication engine (multicast groups, clone sessions), as PI's DeviceMgr handles them."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from typing import Any

from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch import api

from .codec import (
    ALREADY_EXISTS,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OUT_OF_RANGE,
    RESOURCE_EXHAUSTED,
    UNIMPLEMENTED,
    UNKNOWN,
    P4RTError,
    port_bytes,
    to_bytes,
    to_int,
    to_port,
)
from .context import Context, GroupMeta, WatchSpelling, target
from .p4info import Prefix, ProfileInfo
from .tables import (
    action_to_proto,
    build_action,
    check_rate_order,
    counter_to_proto,
    counter_values,
    meter_to_proto,
    to_meter,
)

Update = p4rt.Update
FIRST_RESERVED_GROUP = 1 << 15  # PI reserves group ids from 2^15 (clone sessions live there)
MAX_CLONE_SESSION = 32768
CLONE_KEY_OFFSET = 1 << 16  # clone sessions' slot in Context.replica_width


def _err(message: str, code: int = INVALID_ARGUMENT) -> P4RTError:
    return P4RTError(code, message)


def _update_type(utype: int) -> None:
    if utype == Update.UNSPECIFIED:
        raise _err("Update type is not set")
    if utype not in (Update.INSERT, Update.MODIFY, Update.DELETE):
        raise _err("Invalid update type")


def _profile(ctx: Context, pid: int) -> ProfileInfo:
    ctx.check_id(pid, Prefix.ACTION_PROFILE)
    return ctx.info.profiles[pid]


def _manual_profiles(ctx: Context, pid: int) -> list[ProfileInfo]:
    """Profiles a member/group read covers: one (which must not be in one-shot use, as in PI),
    or for the wildcard every profile programmed with explicit members and groups."""
    if pid == 0:
        return [p for p in ctx.info.profiles.values()
                if ctx.selector_mode.get(p.id) != "oneshot"]
    prof = _profile(ctx, pid)
    ctx.use_selector_mode(prof.id, "manual")
    return [prof]


# ---- action profile members --------------------------------------------------------------------


def member_write(ctx: Context, utype: int, m: p4rt.ActionProfileMember) -> None:
    prof = _profile(ctx, m.action_profile_id)
    ctx.use_selector_mode(prof.id, "manual")
    _update_type(utype)
    if utype in (Update.INSERT, Update.MODIFY):
        ctx.check_id(m.action.action_id, Prefix.ACTION)
        if m.action.action_id not in ctx.info.profile_actions(prof.id):
            raise _err("Invalid action for action profile")
        call = build_action(ctx, m.action)
    existing = ctx.dp.members(prof.name)
    if utype == Update.INSERT:
        if m.member_id in existing:
            raise _err(f"Duplicate member id: {m.member_id}", ALREADY_EXISTS)
        target(lambda: ctx.dp.member_add(prof.name, m.member_id, call),
               "Error when creating member on target")
        return
    if m.member_id not in existing:
        raise _err(f"Member id does not exist: {m.member_id}", NOT_FOUND)
    if utype == Update.MODIFY:
        target(lambda: ctx.dp.member_modify(prof.name, m.member_id, call),
               "Error when modifying member on target")
    else:
        target(lambda: ctx.dp.member_delete(prof.name, m.member_id),
               "Error when deleting member on target")


def _profile_items(ctx: Context, profile_id: int, wanted: int,
                   read: Callable[[str], dict[int, Any]]
                   ) -> Iterator[tuple[ProfileInfo, int, Any]]:
    """(profile, id, value) of the members or groups (``read``) a read names: of one profile or
    all (id 0), one id or all (0), in id order."""
    for prof in _manual_profiles(ctx, profile_id):
        items = target(lambda p=prof: read(p.name),
                       "Error when reading action profile entries from target")
        for item_id in sorted(items):
            if not wanted or item_id == wanted:
                yield prof, item_id, items[item_id]


def member_read(ctx: Context, m: p4rt.ActionProfileMember, out: list[p4rt.Entity]) -> None:
    for prof, mid, action in _profile_items(ctx, m.action_profile_id, m.member_id,
                                            ctx.dp.members):
        ent = p4rt.Entity()
        em = ent.action_profile_member
        em.action_profile_id, em.member_id = prof.id, mid
        action_to_proto(ctx, action, em.action)
        out.append(ent)


# ---- action profile groups ---------------------------------------------------------------------


def _group_members(ctx: Context, prof: ProfileInfo, g: p4rt.ActionProfileGroup, max_size: int):
    total = 0
    for m in g.members:
        if m.weight <= 0:
            raise _err("Member weight must be a positive integer value")
        total += m.weight
    limit = max_size or prof.max_group_size
    if limit > 0 and total > limit:
        raise _err("Sum of member weights exceeds maximum group size", RESOURCE_EXHAUSTED)
    existing = ctx.dp.members(prof.name)
    members: list[api.GroupMember] = []
    spelling: dict[int, WatchSpelling] = {}
    for m in g.members:
        if m.member_id not in existing:
            raise _err(f"Member id does not exist: {m.member_id}", NOT_FOUND)
        if any(x.member_id == m.member_id for x in members):
            raise _err(f"Duplicate member id {m.member_id} for group {g.group_id}, "
                       "use weights instead")
        watch = None
        kind = m.WhichOneof("watch_kind")
        if kind == "watch_port":
            watch = to_port(m.watch_port)
            spelling[m.member_id] = WatchSpelling("watch_port", len(m.watch_port))
        elif kind == "watch":
            watch = m.watch
            spelling[m.member_id] = WatchSpelling("watch")
        members.append(api.GroupMember(m.member_id, m.weight, watch))
    return members, spelling


def group_write(ctx: Context, utype: int, g: p4rt.ActionProfileGroup) -> None:
    prof = _profile(ctx, g.action_profile_id)
    ctx.use_selector_mode(prof.id, "manual")
    _update_type(utype)
    existing = ctx.dp.groups(prof.name)
    meta_key = (prof.id, g.group_id)
    if utype == Update.INSERT:
        if g.max_size < 0:
            raise _err("Group max_size cannot be less than 0")
        if prof.max_group_size > 0 and g.max_size > prof.max_group_size:
            raise _err("Group max_size cannot exceed static max_group_size (from P4Info)")
        if g.group_id in existing:
            raise _err(f"Duplicate group id: {g.group_id}", ALREADY_EXISTS)
        if not prof.with_selector:
            raise _err("Error when creating group on target: action profile "
                       f"'{prof.name}' has no selector", UNKNOWN)
        members, spelling = _group_members(ctx, prof, g, g.max_size)
        target(lambda: ctx.dp.group_add(prof.name, g.group_id, members, g.max_size),
               "Error when creating group on target")
        ctx.groups[meta_key] = GroupMeta(g.max_size, spelling)
        return
    if g.group_id not in existing:
        raise _err(f"Group id does not exist: {g.group_id}", NOT_FOUND)
    meta = ctx.groups.get(meta_key) or GroupMeta(0)
    if utype == Update.MODIFY:
        if g.max_size != 0 and g.max_size != meta.max_size:
            raise _err("Cannot change group max_size after group creation")
        members, spelling = _group_members(ctx, prof, g, meta.max_size)
        target(lambda: ctx.dp.group_modify(prof.name, g.group_id, members),
               "Error when adding member to group on target")
        ctx.groups[meta_key] = GroupMeta(meta.max_size, spelling)
    else:
        target(lambda: ctx.dp.group_delete(prof.name, g.group_id),
               "Error when deleting group on target")
        ctx.groups.pop(meta_key, None)


def group_read(ctx: Context, g: p4rt.ActionProfileGroup, out: list[p4rt.Entity]) -> None:
    for prof, gid, members in _profile_items(ctx, g.action_profile_id, g.group_id,
                                             ctx.dp.groups):
        meta = ctx.groups.get((prof.id, gid)) or GroupMeta(0)
        ent = p4rt.Entity()
        eg = ent.action_profile_group
        eg.action_profile_id, eg.group_id, eg.max_size = prof.id, gid, meta.max_size
        for gm in sorted(members, key=lambda x: x.member_id):
            pm = eg.members.add(member_id=gm.member_id, weight=gm.weight)
            spelled = meta.watch.get(gm.member_id)
            if gm.watch_port is None or spelled is None:
                continue
            if spelled.kind == "watch":
                pm.watch = gm.watch_port
            else:
                pm.watch_port = port_bytes(gm.watch_port, spelled.nbytes)
        out.append(ent)


# ---- indirect counters, meters, registers ------------------------------------------------------


def _index(has_index: bool, index: int, what: str) -> int:
    if not has_index:
        raise _err(f"Wildcard write is not supported for indirect {what} yet", UNIMPLEMENTED)
    if index < 0:
        raise _err("A negative number is not a valid index value")
    return index


def counter_write(ctx: Context, utype: int, c: p4rt.CounterEntry) -> None:
    ctx.check_id(c.counter_id, Prefix.COUNTER)
    info = ctx.info.counters[c.counter_id]
    index = _index(c.HasField("index"), c.index.index, "counters")
    _update_type(utype)
    if utype == Update.INSERT:
        raise _err("INSERT update type not supported for counters")
    values = (0, 0) if utype == Update.DELETE else counter_values(info.unit, c.data)
    target(lambda: ctx.dp.counter_write(info.name, index, *values),
           "Error when writing to counter")


def _cells(ctx: Context, entry_id: int, infos: dict, prefix: int, has_index: bool,
           index: int, kind: str = "", direct: Container[int] = ()
           ) -> Iterator[tuple[Any, int]]:
    """(info, index) of every cell a counter, meter or register read names: one array (id) or
    all (id 0), one index or all. A ``direct`` array's id is refused, naming the ``kind``."""
    if entry_id == 0:
        chosen = list(infos.values())
    else:
        if entry_id in direct:
            raise _err(f"Cannot use {kind.capitalize()}Entry with a direct {kind}")
        ctx.check_id(entry_id, prefix)
        chosen = [infos[entry_id]]
    for info in chosen:
        if has_index and index < 0:
            raise _err("A negative number is not a valid index value")
        for i in [index] if has_index else range(info.size):
            yield info, i


def counter_read(ctx: Context, c: p4rt.CounterEntry, out: list[p4rt.Entity]) -> None:
    for info, i in _cells(ctx, c.counter_id, ctx.info.counters, Prefix.COUNTER,
                          c.HasField("index"), c.index.index, "counter",
                          ctx.info.direct_counters):
        packets, bytes_ = target(lambda n=info.name, i=i: ctx.dp.counter_read(n, i),
                                 "Error when reading counter from target")
        ent = p4rt.Entity()
        ent.counter_entry.counter_id = info.id
        ent.counter_entry.index.index = i
        counter_to_proto(info.unit, packets, bytes_, ent.counter_entry.data)
        out.append(ent)


def meter_write(ctx: Context, utype: int, m: p4rt.MeterEntry) -> None:
    ctx.check_id(m.meter_id, Prefix.METER)
    info = ctx.info.meters[m.meter_id]
    index = _index(m.HasField("index"), m.index.index, "meters")
    _update_type(utype)
    if utype != Update.MODIFY:
        kind = "INSERT" if utype == Update.INSERT else "DELETE"
        raise _err(f"{kind} update type not supported for meters")
    cfg = to_meter(m.config) if m.HasField("config") else None
    check_rate_order(cfg, "Error when writing meter spec")
    target(lambda: ctx.dp.meter_set(info.name, index, cfg), "Error when writing meter spec")


def meter_read(ctx: Context, m: p4rt.MeterEntry, out: list[p4rt.Entity]) -> None:
    for info, i in _cells(ctx, m.meter_id, ctx.info.meters, Prefix.METER,
                          m.HasField("index"), m.index.index, "meter", ctx.info.direct_meters):
        cfg = target(lambda n=info.name, i=i: ctx.dp.meter_get(n, i),
                     "Error when reading meter spec from target")
        ent = p4rt.Entity()
        ent.meter_entry.meter_id = info.id
        ent.meter_entry.index.index = i
        if cfg is not None:
            meter_to_proto(cfg, ent.meter_entry.config)
        out.append(ent)


def register_write(ctx: Context, utype: int, r: p4rt.RegisterEntry) -> None:
    if not ctx.registers_enabled:  # what PI (and so simple_switch_grpc) answers
        raise _err("Register writes are not supported yet", UNIMPLEMENTED)
    ctx.check_id(r.register_id, Prefix.REGISTER)
    info = ctx.info.registers[r.register_id]
    index = _index(r.HasField("index"), r.index.index, "registers")
    _update_type(utype)
    if utype != Update.MODIFY:
        raise _err("Only MODIFY is supported for registers")
    if r.data.WhichOneof("data") != "bitstring":
        raise _err("Register data must be a bitstring")
    value = to_int(r.data.bitstring, info.bitwidth)
    target(lambda: ctx.dp.register_write(info.name, index, value),
           "Error when writing register")


def register_read(ctx: Context, r: p4rt.RegisterEntry, out: list[p4rt.Entity]) -> None:
    if not ctx.registers_enabled:
        raise _err("Register reads are not supported yet", UNIMPLEMENTED)
    for info, i in _cells(ctx, r.register_id, ctx.info.registers, Prefix.REGISTER,
                          r.HasField("index"), r.index.index):
        value = target(lambda n=info.name, i=i: ctx.dp.register_read(n, i),
                       "Error when reading register")
        ent = p4rt.Entity()
        ent.register_entry.register_id = info.id
        ent.register_entry.index.index = i
        ent.register_entry.data.bitstring = to_bytes(value)
        out.append(ent)


# ---- packet replication engine -----------------------------------------------------------------


def _replicas(replicas) -> tuple[list[api.Replica], dict[tuple[int, int], int]]:
    out: list[api.Replica] = []
    widths: dict[tuple[int, int], int] = {}
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        if kind == "egress_port":
            port, width = r.egress_port, 0
        elif kind == "port":
            port, width = to_port(r.port), len(r.port)
        else:
            raise _err("Missing port in multicast group replica")
        if (r.instance, port) in widths:
            raise _err("Duplicate replica in multicast group")
        widths[(r.instance, port)] = width
        out.append(api.Replica(port, r.instance))
    return out, widths


def _replicas_to_proto(replicas: list[api.Replica], widths: dict[tuple[int, int], int], out):
    # PI lists replicas by instance, then port
    for r in sorted(replicas, key=lambda x: (x.instance, x.egress_port)):
        width = widths.get((r.instance, r.egress_port), 0)
        pr = out.add(instance=r.instance)
        if width:
            pr.port = port_bytes(r.egress_port, width)
        else:
            pr.egress_port = r.egress_port


def pre_write(ctx: Context, utype: int, pre: p4rt.PacketReplicationEngineEntry) -> None:
    kind = pre.WhichOneof("type")
    if kind == "multicast_group_entry":
        _mc_write(ctx, utype, pre.multicast_group_entry)
    elif kind == "clone_session_entry":
        _clone_write(ctx, utype, pre.clone_session_entry)
    else:
        raise _err("Invalid PRE operation")


def _mc_write(ctx: Context, utype: int, g: p4rt.MulticastGroupEntry) -> None:
    gid = g.multicast_group_id
    if gid == 0:
        raise _err("0 is not a valid group id")
    if gid >= FIRST_RESERVED_GROUP:
        raise _err("Group id value is too high", OUT_OF_RANGE)
    _update_type(utype)
    exists = gid in ctx.dp.mcast_groups()
    if utype == Update.INSERT and exists:
        raise _err("Multicast group already exists", ALREADY_EXISTS)
    if utype != Update.INSERT and not exists:
        raise _err("Multicast group does not exist", NOT_FOUND)
    if utype == Update.DELETE:
        target(lambda: ctx.dp.mcast_group_delete(gid),
               "Error when deleting multicast group in target")
        ctx.replica_width.pop(gid, None)
        return
    replicas, widths = _replicas(g.replicas)
    target(lambda: ctx.dp.mcast_group_set(gid, replicas),
           "Error when creating multicast group in target")
    ctx.replica_width[gid] = widths


def _clone_write(ctx: Context, utype: int, s: p4rt.CloneSessionEntry) -> None:
    sid = s.session_id
    if sid == 0:
        raise _err("0 is not a valid session id")
    _update_type(utype)
    exists = sid in ctx.dp.clone_sessions()
    if utype == Update.DELETE:
        if not exists:
            raise _err("Clone session id does not exist", NOT_FOUND)
        target(lambda: ctx.dp.clone_session_delete(sid),
               "Error when resetting clone session in target")
        ctx.replica_width.pop(CLONE_KEY_OFFSET + sid, None)
        return
    if sid >= MAX_CLONE_SESSION:
        raise _err("Clone session id out-of-range")
    replicas, widths = _replicas(s.replicas)
    if s.class_of_service != 0:
        raise _err("COS for clone sessions not supported yet", UNIMPLEMENTED)
    if utype == Update.INSERT and exists:
        raise _err("Clone session id already exists", ALREADY_EXISTS)
    if utype == Update.MODIFY and not exists:
        raise _err("Clone session id does not exist", NOT_FOUND)
    session = api.CloneSession(sid, replicas, s.class_of_service, s.packet_length_bytes)
    target(lambda: ctx.dp.clone_session_set(session),
           "Error when creating clone session in target")
    ctx.replica_width[CLONE_KEY_OFFSET + sid] = widths


def pre_read(ctx: Context, pre: p4rt.PacketReplicationEngineEntry,
             out: list[p4rt.Entity]) -> None:
    kind = pre.WhichOneof("type")
    if kind == "multicast_group_entry":
        gid = pre.multicast_group_entry.multicast_group_id
        if gid >= FIRST_RESERVED_GROUP:
            raise _err("Group id value is too high", OUT_OF_RANGE)
        groups = ctx.dp.mcast_groups()
        if gid and gid not in groups:
            raise _err("Multicast group does not exist", NOT_FOUND)
        for g in sorted(groups):
            if (gid and g != gid) or g >= FIRST_RESERVED_GROUP:
                continue
            ent = p4rt.Entity()
            pg = ent.packet_replication_engine_entry.multicast_group_entry
            pg.multicast_group_id = g
            _replicas_to_proto(groups[g], ctx.replica_width.get(g, {}), pg.replicas)
            out.append(ent)
    elif kind == "clone_session_entry":
        sid = pre.clone_session_entry.session_id
        sessions = ctx.dp.clone_sessions()
        if sid and sid not in sessions:
            raise _err("Clone session id does not exist", NOT_FOUND)
        for s in sorted(sessions):
            if sid and s != sid:
                continue
            sess = sessions[s]
            ent = p4rt.Entity()
            pc = ent.packet_replication_engine_entry.clone_session_entry
            pc.session_id = s
            pc.class_of_service = sess.class_of_service
            pc.packet_length_bytes = sess.packet_length_bytes
            _replicas_to_proto(sess.replicas, ctx.replica_width.get(CLONE_KEY_OFFSET + s, {}),
                               pc.replicas)
            out.append(ent)
    else:
        raise _err("Invalid PRE operation")
