"""TableEntry, DirectCounterEntry and DirectMeterEntry: P4Runtime <-> the data-plane contract,
with the validation and error messages of PI's DeviceMgr (p4lang/PI proto/frontend)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.switch import api

from . import oneshot
from .codec import (
    ALREADY_EXISTS,
    INVALID_ARGUMENT,
    NOT_FOUND,
    PERMISSION_DENIED,
    UNIMPLEMENTED,
    UNKNOWN,
    P4RTError,
    to_bytes,
    to_int,
)
from .context import Context, EntryKey, EntryMeta, OneShotGroup, target
from .p4info import ActionInfo, MatchType, Prefix, TableInfo

Update = p4rt.Update
Scope = p4info_pb2.ActionRef
UINT32_MAX = (1 << 32) - 1


def _err(message: str, code: int = INVALID_ARGUMENT) -> P4RTError:
    return P4RTError(code, message)


# ---- match keys --------------------------------------------------------------------------------


def build_key(t: TableInfo, te: p4rt.TableEntry) -> EntryKey:
    """The contract key (JSON order) and priority of ``te``, validated as PI does."""
    if te.is_default_action:
        if te.match:
            raise _err("Non-empty key for default entry")
        if te.priority != 0:
            raise _err("Non-zero priority for default entry")
        return (), 0
    if len(te.match) > len(t.match_fields):
        raise _err("Too many fields in match key")
    given = {}
    for fm in te.match:
        given.setdefault(fm.field_id, fm)
    fields: list[api.KeyField] = []
    matched = 0
    for mf in t.match_fields:
        fm = given.get(mf.id)
        if fm is None:
            fields.append(_wildcard(mf.match_type, mf.bitwidth))
            continue
        matched += 1
        fields.append(_field(mf.match_type, mf.bitwidth, fm))
    if matched != len(te.match):
        raise _err("Unknown field in match key")
    if not t.needs_priority and te.priority > 0:
        raise _err("Non-zero priority for non-ternary match")
    if t.needs_priority and te.priority == 0:
        raise _err("Zero priority for ternary match")
    if te.priority < 0:
        raise _err("Priority must be positive")
    key = tuple(fields[i] for i in t.json_key_order)
    return key, te.priority


def _wildcard(kind: int, width: int) -> api.KeyField:
    if kind == MatchType.LPM:
        return api.Lpm(0, 0)
    if kind == MatchType.TERNARY:
        return api.Ternary(0, 0)
    if kind == MatchType.OPTIONAL:
        return api.Optional_(None)
    if kind == MatchType.RANGE:
        return api.Range(0, (1 << width) - 1)
    raise _err("Missing non-ternary field in match key")


def _field(kind: int, width: int, fm: p4rt.FieldMatch) -> api.KeyField:
    which = fm.WhichOneof("field_match_type")
    expected = {MatchType.EXACT: "exact", MatchType.LPM: "lpm", MatchType.TERNARY: "ternary",
                MatchType.RANGE: "range", MatchType.OPTIONAL: "optional"}.get(kind)
    if which != expected:
        raise _err("Invalid match type")
    if kind == MatchType.EXACT:
        return api.Exact(to_int(fm.exact.value, width))
    if kind == MatchType.LPM:
        value = to_int(fm.lpm.value, width)
        plen = fm.lpm.prefix_len
        if plen < 0:
            raise _err("Prefix length cannot be < 0")
        if plen > width:
            raise _err("Prefix length cannot be > bitwidth")
        if plen == 0:
            raise _err("Invalid reprsentation of 'don't care' LPM match, "
                       "omit match field instead of using a prefix length of 0")
        if value & ((1 << (width - plen)) - 1):
            raise _err("Invalid LPM value, incorrect number of trailing zeros")
        return api.Lpm(value, plen)
    if kind == MatchType.TERNARY:
        value = to_int(fm.ternary.value, width)
        mask = to_int(fm.ternary.mask, width)
        if mask == 0:
            raise _err("Invalid representation of 'don't care' ternary match, "
                       "omit match field instead of using 0 mask")
        if value & ~mask:
            raise _err("Invalid ternary value, make sure value & mask == value")
        return api.Ternary(value, mask)
    if kind == MatchType.RANGE:
        low = to_int(fm.range.low, width)
        high = to_int(fm.range.high, width)
        if low == 0 and high == (1 << width) - 1:
            raise _err("Invalid representation of 'don't care' range match, "
                       "omit match field instead of using low=0 and high=2**bitwidth-1")
        if low > high:
            raise _err("Invalid range value, make sure low <= high")
        return api.Range(low, high)
    return api.Optional_(to_int(fm.optional.value, width))


def key_to_proto(t: TableInfo, key: tuple[api.KeyField, ...], out: p4rt.TableEntry) -> None:
    """Fill ``out.match`` (P4Info order, don't-care fields omitted) from a contract key."""
    by_p4info: dict[int, api.KeyField] = {}
    for pos, kf in enumerate(key):
        if pos < len(t.json_key_order):
            by_p4info[t.json_key_order[pos]] = kf
    for i, mf in enumerate(t.match_fields):
        kf = by_p4info.get(i)
        if kf is None:
            continue
        if isinstance(kf, api.Exact):
            out.match.add(field_id=mf.id).exact.value = to_bytes(kf.value)
        elif isinstance(kf, api.Lpm):
            if kf.prefix_len:
                m = out.match.add(field_id=mf.id).lpm
                m.value, m.prefix_len = to_bytes(kf.value), kf.prefix_len
        elif isinstance(kf, api.Ternary):
            if kf.mask:
                m = out.match.add(field_id=mf.id).ternary
                m.value, m.mask = to_bytes(kf.value), to_bytes(kf.mask)
        elif isinstance(kf, api.Range):
            if not (kf.low == 0 and kf.high == (1 << mf.bitwidth) - 1):
                m = out.match.add(field_id=mf.id).range
                m.low, m.high = to_bytes(kf.low), to_bytes(kf.high)
        elif isinstance(kf, api.Optional_) and kf.value is not None:
            out.match.add(field_id=mf.id).optional.value = to_bytes(kf.value)


# ---- actions -----------------------------------------------------------------------------------


def build_action(ctx: Context, action: p4rt.Action) -> api.ActionCall:
    """Contract action call from a P4Runtime Action (id, parameter count and widths checked)."""
    ctx.check_id(action.action_id, Prefix.ACTION)
    a = ctx.info.actions[action.action_id]
    if len(action.params) != len(a.params):
        raise _err("Unexpected number of action parameters")
    values: dict[int, int] = {}
    for p in action.params:
        idx = next((i for i, x in enumerate(a.params) if x.id == p.param_id), None)
        if idx is None:
            raise _err("Unknown action parameter")
        values[idx] = to_int(p.value, a.params[idx].bitwidth)
    if len(values) != len(a.params):
        raise _err("Unexpected number of action parameters")
    return api.ActionCall(a.name, tuple(values[i] for i in a.json_param_order))


def action_to_proto(ctx: Context, call: api.ActionCall, out: p4rt.Action) -> None:
    a: ActionInfo | None = ctx.info.action_by_name(call.action)
    if a is None:  # an action the P4Info does not know (e.g. a JSON-only default)
        return
    out.action_id = a.id
    by_index = {idx: call.args[pos] for pos, idx in enumerate(a.json_param_order)
                if pos < len(call.args)}
    for i, p in enumerate(a.params):
        out.params.add(param_id=p.id, value=to_bytes(by_index.get(i, 0)))


def _validate_action(ctx: Context, t: TableInfo, te: p4rt.TableEntry) -> None:
    indirect = t.implementation_id != 0
    if indirect and te.is_default_action:
        raise _err(f"Cannot set / reset default action for indirect table {t.id}")
    if te.is_default_action and t.const_default_action_id:
        raise _err(f"Cannot set / reset default action for table {t.id} which has a const "
                   "default action", PERMISSION_DENIED)
    if not te.HasField("action"):
        return
    kind = te.action.WhichOneof("type")
    if indirect and kind == "action":
        raise _err(f"Cannot provide direct action for indirect table {t.id}")
    if not indirect and kind != "action":
        raise _err(f"Cannot provide indirect action for direct table {t.id}")
    if indirect:
        return
    ctx.check_id(te.action.action.action_id, Prefix.ACTION)
    scope = t.action_scopes.get(te.action.action.action_id)
    if scope is None:
        raise _err("Invalid action for table")
    if scope == Scope.TABLE_ONLY and te.is_default_action:
        raise _err("Cannot use TABLE_ONLY action as default action", PERMISSION_DENIED)
    if scope == Scope.DEFAULT_ONLY and not te.is_default_action:
        raise _err("Cannot use DEFAULT_ONLY action in table entry", PERMISSION_DENIED)


def _entry_action(ctx: Context, t: TableInfo,
                  ta: p4rt.TableAction) -> api.EntryAction | p4rt.ActionProfileActionSet:
    """The contract action, or the one-shot action set whose group is made once the rest of
    the update has been validated."""
    kind = ta.WhichOneof("type")
    if kind == "action":
        return build_action(ctx, ta.action)
    if kind == "action_profile_action_set":
        return ta.action_profile_action_set
    ctx.use_selector_mode(t.implementation_id, "manual")
    profile = ctx.info.profiles[t.implementation_id].name
    if kind == "action_profile_member_id":
        if ta.action_profile_member_id not in ctx.dp.members(profile):
            raise _err("Invalid member / group id")
        return api.MemberRef(ta.action_profile_member_id)
    if kind == "action_profile_group_id":
        if ta.action_profile_group_id not in ctx.dp.groups(profile):
            raise _err("Invalid member / group id")
        return api.GroupRef(ta.action_profile_group_id)
    raise _err("Invalid table action type")


def meter_config(ctx_table_has_meter: bool, cfg: p4rt.MeterConfig) -> api.MeterConfig | None:
    """Validate a MeterConfig as PI does; all -1 (PI's 'always green') reads as unset."""
    if not ctx_table_has_meter:
        raise _err("Table has no direct meters")
    return to_meter(cfg)


def to_meter(cfg: p4rt.MeterConfig) -> api.MeterConfig | None:
    for name, value in (("CIR", cfg.cir), ("CBurst", cfg.cburst), ("PIR", cfg.pir),
                        ("PBurst", cfg.pburst)):
        if value < -1:
            raise _err(f"Negative meter {name}")
    if cfg.cburst > UINT32_MAX:
        raise _err("CBurst too large", UNIMPLEMENTED)
    if cfg.pburst > UINT32_MAX:
        raise _err("Pburst too large", UNIMPLEMENTED)
    if cfg.cir == cfg.cburst == cfg.pir == cfg.pburst == -1:
        return None
    return api.MeterConfig(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)


def check_rate_order(cfg: api.MeterConfig | None, target_error: str) -> None:
    """BMv2's meters refuse a committed rate above the peak rate (rates compared unsigned, so a
    lone -1 is the largest rate); PI reports it as the target error of the operation (UNKNOWN).
    Refused before anything is written: BMv2 adds a table entry before failing on its meter."""
    if cfg is not None and cfg.cir % (1 << 64) > cfg.pir % (1 << 64):
        raise P4RTError(UNKNOWN, target_error)


def meter_to_proto(m: api.MeterConfig, out: p4rt.MeterConfig) -> None:
    out.cir, out.cburst, out.pir, out.pburst = m.cir, m.cburst, m.pir, m.pburst


def counter_values(unit: int, data: p4rt.CounterData) -> tuple[int, int]:
    """(packets, bytes) to write; the half the counter's unit does not count is written as 0."""
    unit_kind = p4info_pb2.CounterSpec
    packets = data.packet_count if unit in (unit_kind.PACKETS, unit_kind.BOTH) else 0
    bytes_ = data.byte_count if unit in (unit_kind.BYTES, unit_kind.BOTH) else 0
    return packets, bytes_


def counter_to_proto(unit: int, packets: int, bytes_: int, out: p4rt.CounterData) -> None:
    unit_kind = p4info_pb2.CounterSpec
    if unit in (unit_kind.PACKETS, unit_kind.BOTH, unit_kind.UNSPECIFIED):
        out.packet_count = packets
    if unit in (unit_kind.BYTES, unit_kind.BOTH, unit_kind.UNSPECIFIED):
        out.byte_count = bytes_


# ---- TableEntry writes -------------------------------------------------------------------------


def table_write(ctx: Context, utype: int, te: p4rt.TableEntry) -> None:
    t = ctx.table(te.table_id)
    if te.HasField("time_since_last_hit"):
        raise _err("has_time_since_last_hit must not be set in WriteRequest")
    if utype == Update.INSERT:
        _insert(ctx, t, te)
    elif utype == Update.MODIFY:
        _modify(ctx, t, te)
    elif utype == Update.DELETE:
        _delete(ctx, t, te)
    elif utype == Update.UNSPECIFIED:
        raise _err("Update type is not set")
    else:
        raise _err("Invalid update type")


def _resources(ctx: Context, t: TableInfo, te: p4rt.TableEntry, target_error: str):
    meter = None
    if te.HasField("meter_config"):
        meter = meter_config(bool(t.direct_meter_id), te.meter_config)
        check_rate_order(meter, target_error)
    counter = None
    if te.HasField("counter_data"):
        if not t.direct_counter_id:
            raise _err("Table has no direct counters")
        counter = counter_values(ctx.info.direct_counters[t.direct_counter_id].unit,
                                 te.counter_data)
    if te.idle_timeout_ns < 0:
        raise _err("idle_timeout_ns must be a positive value")
    if te.idle_timeout_ns > 0 and not t.supports_idle_timeout:
        raise _err("idle_timeout_ns must be set to 0 for tables which do not support "
                   "idle timeout")
    return meter, counter


def _timeout_ms(te: p4rt.TableEntry) -> int | None:
    return -(-te.idle_timeout_ns // 1_000_000) if te.idle_timeout_ns else None


def _write_entry(ctx: Context, t: TableInfo, te: p4rt.TableEntry, key: tuple, prio: int,
                 action: Any, meter: api.MeterConfig | None, write: Callable[[str, api.TableEntry], None],
                 error: str) -> OneShotGroup | None:
    """Insert or modify (``write``) the entry in the target, an action set first made a
    one-shot group (returned; deleted again if the write fails)."""
    group = None
    if isinstance(action, p4rt.ActionProfileActionSet):
        group = oneshot.create(ctx, t, action)
        action = api.GroupRef(group.group_id)
    entry = api.TableEntry(key, action, prio, _timeout_ms(te), meter)
    try:
        target(lambda: write(t.name, entry), error)
    except P4RTError:
        if group is not None:
            oneshot.delete(ctx, t, group)
        raise
    return group


def _insert(ctx: Context, t: TableInfo, te: p4rt.TableEntry) -> None:
    if te.is_default_action:
        raise _err("Cannot use INSERT for default entry")
    if not te.HasField("action"):
        raise _err("'action' field must be set")
    key, prio = build_key(t, te)
    _validate_action(ctx, t, te)
    action = _entry_action(ctx, t, te.action)
    meter, counter = _resources(ctx, t, te, "Error when adding match entry to target")
    store = ctx.table_entries_meta(t.id)
    if (key, prio) in store:
        raise _err("Match entry exists, use MODIFY if you wish to change action", ALREADY_EXISTS)
    group = _write_entry(ctx, t, te, key, prio, action, meter, ctx.dp.table_insert,
                         "Error when adding match entry to target")
    if counter is not None:
        try:
            target(lambda: ctx.dp.direct_counter_write(t.name, key, prio, *counter),
                   "Error when writing to direct counter")
        except P4RTError:
            ctx.dp.table_delete(t.name, key, prio)  # a failed update changes nothing
            if group is not None:
                oneshot.delete(ctx, t, group)
            raise
    store[(key, prio)] = EntryMeta(te.controller_metadata, te.metadata, te.idle_timeout_ns)
    if group is not None:
        ctx.oneshot[(t.id, (key, prio))] = group


def _modify(ctx: Context, t: TableInfo, te: p4rt.TableEntry) -> None:
    key, prio = build_key(t, te)
    _validate_action(ctx, t, te)
    action = None
    if te.HasField("action"):
        action = _entry_action(ctx, t, te.action)
    elif not te.is_default_action:
        raise _err("'action' field must be set for non-default entries")
    meter, counter = _resources(ctx, t, te, "Error when modifying match entry in target")
    if te.is_default_action:
        assert action is None or isinstance(action, api.ActionCall)
        target(lambda: ctx.dp.table_set_default(t.name, action),
               "Error when modifying match entry in target")
        return
    store = ctx.table_entries_meta(t.id)
    if (key, prio) not in store:
        raise _err("Cannot find match entry", NOT_FOUND)
    assert action is not None
    group = _write_entry(ctx, t, te, key, prio, action, meter, ctx.dp.table_modify,
                         "Error when modifying match entry in target")
    old_group = ctx.oneshot.pop((t.id, (key, prio)), None)
    if old_group is not None:
        oneshot.delete(ctx, t, old_group)
    if group is not None:
        ctx.oneshot[(t.id, (key, prio))] = group
    if counter is not None:
        target(lambda: ctx.dp.direct_counter_write(t.name, key, prio, *counter),
               "Error when writing to direct counter")
    store[(key, prio)] = EntryMeta(te.controller_metadata, te.metadata, te.idle_timeout_ns)


def _delete(ctx: Context, t: TableInfo, te: p4rt.TableEntry) -> None:
    if te.is_default_action:
        raise _err("Cannot use DELETE for default entry")
    key, prio = build_key(t, te)
    store = ctx.table_entries_meta(t.id)
    if (key, prio) not in store:
        raise _err("Cannot find match entry", NOT_FOUND)
    target(lambda: ctx.dp.table_delete(t.name, key, prio),
           "Error when deleting match entry in target")
    del store[(key, prio)]
    group = ctx.oneshot.pop((t.id, (key, prio)), None)
    if group is not None:
        oneshot.delete(ctx, t, group)


# ---- TableEntry reads --------------------------------------------------------------------------


def table_read(ctx: Context, te: p4rt.TableEntry, out: list[p4rt.Entity]) -> None:
    if te.table_id == 0:
        for tid in ctx.info.tables:
            _read_one_table(ctx, ctx.info.tables[tid], te, out)
    else:
        _read_one_table(ctx, ctx.table(te.table_id), te, out)


def _read_one_table(ctx: Context, t: TableInfo, req: p4rt.TableEntry,
                    out: list[p4rt.Entity]) -> None:
    if req.is_default_action:
        if req.HasField("time_since_last_hit"):
            raise _err("Default table entries do not support entry ageing, do not set "
                       "'time_since_last_hit' in your ReadRequest")
        ent = p4rt.Entity()
        ent.table_entry.table_id = t.id
        ent.table_entry.is_default_action = True
        if not t.implementation_id:
            call = target(lambda: ctx.dp.table_get_default(t.name),
                          "Error when reading default entry from target")
            if call is not None:
                action_to_proto(ctx, call, ent.table_entry.action.action)
        out.append(ent)
        return
    if req.HasField("time_since_last_hit") and not t.supports_idle_timeout:
        raise _err("Do not set time_since_last_hit for a ReadRequest if the table does not "
                   "support idle timeout; yes, that includes wildcard reads")
    wanted = build_key(t, req) if req.match else None
    entries = target(lambda: ctx.dp.table_entries(t.name),
                     "Error when reading table entries from target")
    store = ctx.table_entries_meta(t.id)
    for e in entries:
        if wanted is not None and (e.key, e.priority) != wanted:
            continue
        ent = p4rt.Entity()
        pe = ent.table_entry
        pe.table_id = t.id
        key_to_proto(t, e.key, pe)
        pe.priority = e.priority
        group = ctx.oneshot.get((t.id, (e.key, e.priority)))
        if group is not None:
            pe.action.action_profile_action_set.CopyFrom(group.action_set)
        else:
            _entry_action_to_proto(ctx, e.action, pe.action)
        meta = store.get((e.key, e.priority), EntryMeta())
        pe.controller_metadata = meta.controller_metadata
        pe.metadata = meta.metadata
        pe.idle_timeout_ns = meta.idle_timeout_ns
        if req.HasField("time_since_last_hit"):
            pe.time_since_last_hit.elapsed_ns = 0
        if req.HasField("counter_data") and t.direct_counter_id:
            packets, bytes_ = e.counter or (0, 0)
            counter_to_proto(ctx.info.direct_counters[t.direct_counter_id].unit, packets,
                             bytes_, pe.counter_data)
        if req.HasField("meter_config") and e.meter is not None:
            meter_to_proto(e.meter, pe.meter_config)
        out.append(ent)


def _entry_action_to_proto(ctx: Context, action: api.EntryAction, out: p4rt.TableAction) -> None:
    if isinstance(action, api.MemberRef):
        out.action_profile_member_id = action.member_id
    elif isinstance(action, api.GroupRef):
        out.action_profile_group_id = action.group_id
    else:
        action_to_proto(ctx, action, out.action)

