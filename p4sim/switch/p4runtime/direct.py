"""DirectCounterEntry and DirectMeterEntry: the direct resources of table entries, addressed by
the entry's key, with PI's checks and messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from p4.v1 import p4runtime_pb2 as p4rt

from .codec import INVALID_ARGUMENT, UNIMPLEMENTED, P4RTError
from .context import Context, EntryKey, target
from .p4info import TableInfo
from .tables import (
    build_key,
    check_rate_order,
    counter_to_proto,
    counter_values,
    key_to_proto,
    meter_to_proto,
    to_meter,
)

Update = p4rt.Update


def _err(message: str, code: int = INVALID_ARGUMENT) -> P4RTError:
    return P4RTError(code, message)



# ---- direct counters and meters ----------------------------------------------------------------


def _direct_target(ctx: Context, te: p4rt.TableEntry, kind: str) -> tuple[TableInfo, EntryKey]:
    t = ctx.table(te.table_id)
    key = build_key(t, te)
    if te.is_default_action:
        raise _err(f"Direct {kind}s of the default entry are not supported by p4sim",
                   UNIMPLEMENTED)
    if key not in ctx.table_entries_meta(t.id):
        raise _err("Cannot map table entry to handle")
    return t, key


def _read_targets(ctx: Context, t: TableInfo, req: p4rt.TableEntry, kind: str
                  ) -> Iterator[tuple[Any, p4rt.TableEntry]]:
    """The entries a direct-resource read asks for (one, by key, or all of the table), each
    with the TableEntry the reply carries: the request's own for a keyed read."""
    single = bool(req.match) or req.is_default_action
    if single:
        _direct_target(ctx, req, kind)
    wanted = build_key(t, req) if single else None
    for entry in target(lambda: ctx.dp.table_entries(t.name),
                        f"Error when reading {kind} from target"):
        if wanted is not None and (entry.key, entry.priority) != wanted:
            continue
        if single:
            yield entry, req
            continue
        te = p4rt.TableEntry(table_id=t.id, priority=entry.priority)
        key_to_proto(t, entry.key, te)
        yield entry, te


def _write_target(ctx: Context, utype: int, e: Any, kind: str
                  ) -> tuple[TableInfo, EntryKey, int]:
    """(table, key, priority) of a direct counter or meter write, after BMv2's checks of the
    entry and the update type (a counter's DELETE resets it; a meter has only MODIFY)."""
    if not e.HasField("table_entry"):
        raise _err(f"Missing table_entry field in Direct{kind.capitalize()}Entry")
    t, (key, prio) = _direct_target(ctx, e.table_entry, kind)
    if not (t.direct_counter_id if kind == "counter" else t.direct_meter_id):
        raise _err(f"Table has no direct {kind}s")
    if utype == Update.UNSPECIFIED:
        raise _err("Update type is not set")
    if utype == Update.INSERT:
        raise _err(f"INSERT update type not supported for {kind}s")
    if utype == Update.DELETE and kind == "meter":
        raise _err("DELETE update type not supported for meters")
    if utype not in (Update.MODIFY, Update.DELETE):
        raise _err("Invalid update type")
    return t, key, prio


def direct_counter_write(ctx: Context, utype: int, e: p4rt.DirectCounterEntry) -> None:
    t, key, prio = _write_target(ctx, utype, e, "counter")
    values = (0, 0) if utype == Update.DELETE else counter_values(
        ctx.info.direct_counters[t.direct_counter_id].unit, e.data)
    target(lambda: ctx.dp.direct_counter_write(t.name, key, prio, *values),
           "Error when writing to direct counter")


def _read_table(ctx: Context, e: Any, kind: str) -> TableInfo:
    """The table a direct counter or meter read names (one table: BMv2 reads no other)."""
    if not e.HasField("table_entry"):
        raise _err(f"Missing table_entry field in Direct{kind.capitalize()}Entry")
    if e.table_entry.table_id == 0:
        raise _err(f"Reading all direct {kind}s for ALL tables is not supported yet",
                   UNIMPLEMENTED)
    t = ctx.table(e.table_entry.table_id)
    if not (t.direct_counter_id if kind == "counter" else t.direct_meter_id):
        raise _err(f"Table has no direct {kind}s")
    return t


def direct_counter_read(ctx: Context, e: p4rt.DirectCounterEntry,
                        out: list[p4rt.Entity]) -> None:
    t = _read_table(ctx, e, "counter")
    unit = ctx.info.direct_counters[t.direct_counter_id].unit
    for entry, te in _read_targets(ctx, t, e.table_entry, "counter"):
        ent = p4rt.Entity()
        ent.direct_counter_entry.table_entry.CopyFrom(te)
        packets, bytes_ = entry.counter or (0, 0)
        counter_to_proto(unit, packets, bytes_, ent.direct_counter_entry.data)
        out.append(ent)


def direct_meter_write(ctx: Context, utype: int, e: p4rt.DirectMeterEntry) -> None:
    t, key, prio = _write_target(ctx, utype, e, "meter")
    cfg = to_meter(e.config) if e.HasField("config") else None
    check_rate_order(cfg, "Error when writing direct meter spec")
    target(lambda: ctx.dp.direct_meter_set(t.name, key, prio, cfg),
           "Error when writing direct meter spec")


def direct_meter_read(ctx: Context, e: p4rt.DirectMeterEntry, out: list[p4rt.Entity]) -> None:
    t = _read_table(ctx, e, "meter")
    for entry, te in _read_targets(ctx, t, e.table_entry, "meter"):
        ent = p4rt.Entity()
        ent.direct_meter_entry.table_entry.CopyFrom(te)
        if entry.meter is not None:
            meter_to_proto(entry.meter, ent.direct_meter_entry.config)
        out.append(ent)
