"""`fabricctl` subcommands that talk P4Runtime to one switch: tables, table, groups, counters,
registers, mcast, pipeline. Each takes the connection and the parsed arguments and returns
what to print (a string, or a JSON-able value with --json)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controlplane import cli_format as fmt
from controlplane.admin import AdminChannel, AdminError
from controlplane.connection import SwitchConnection
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    CounterEntry,
    DirectCounterEntry,
    MulticastGroup,
    RegisterEntry,
    Replica,
    TableEntry,
)
from controlplane.errors import (
    ControlPlaneError,
    EncodeError,
    P4InfoLookupError,
    P4RuntimeError,
    code_name,
)


class UsageError(ControlPlaneError):
    """Bad command-line input (exit status 2, like every other error)."""


# ---- table words ------------------------------------------------------------------------------


def parse_entry(sw: SwitchConnection, table: str, words: list[str], op: str) -> TableEntry:
    ix = sw.index
    tname = ix.table(table).preamble.name
    entry = TableEntry(tname, is_default=op == "default")
    seen_action = False
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"table {op} {tname}: expected key=value, got '{word}'")
        if key == "action":
            entry.action = ix.table_action(tname, value).preamble.name
            seen_action = True
        elif key in ("priority", "member", "group"):
            try:
                setattr(entry, key, int(value, 0))
            except ValueError:
                raise UsageError(f"table {op} {tname}: {key} must be an integer, got "
                                 f"'{value}'") from None
        elif seen_action:
            entry.params[key] = value
        else:
            ix.match_field(tname, key)  # unknown field -> one line with suggestions
            entry.match[key] = value
    if entry.params and entry.action is None:
        raise UsageError(f"table {op} {tname}: params given without action=NAME")
    return entry


# ---- commands ---------------------------------------------------------------------------------


def cmd_tables(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    ix = sw.index
    counts: dict[str, int] = {}
    for e in sw.read(TableEntry()):
        if isinstance(e, TableEntry) and not e.is_default and e.table:
            counts[e.table] = counts.get(e.table, 0) + 1
    rows = []
    for name in ix.names("table"):
        t = ix.table(name)
        keys = " ".join(f"{f.name}:{f.match_type}" for f in ix.match_fields(name))
        rows.append({"name": name, "id": t.preamble.id, "keys": keys, "size": t.size,
                     "entries": counts.get(name, 0)})
    if args.json:
        return rows
    return fmt.render_table(["table", "keys", "size", "entries"],
                            [[r["name"], r["keys"], r["size"], r["entries"]] for r in rows])


def cmd_table(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    ix = sw.index
    tname = ix.table(args.name).preamble.name
    if args.op == "show":
        return _table_show(sw, tname, args.json)
    if args.op == "dump":
        if args.words:
            raise UsageError(f"table dump {tname}: takes no key=value words")
        entries = [e for e in sw.read(TableEntry(tname)) if isinstance(e, TableEntry)
                   and not e.is_default]
        if args.json:
            return [fmt.entry_dict(ix, e) for e in entries]
        return fmt.entries_text(ix, tname, entries)
    entry = parse_entry(sw, tname, args.words, args.op)
    if args.op == "add":
        sw.insert(entry)
    elif args.op == "modify":
        sw.modify(entry)
    elif args.op == "delete":
        if entry.action or entry.params:
            raise UsageError(f"table delete {tname}: give only the match key (and priority)")
        sw.delete(entry)
    elif args.op == "default":
        if entry.match:
            raise UsageError(f"table default {tname}: the default entry has no match key")
        if entry.action is None:
            sw.reset_default(tname)
        else:
            sw.modify(entry)
    desc = sw.codec.describe(entry)
    done = {"add": "added", "modify": "modified", "delete": "deleted", "default": "set"}[args.op]
    return {"ok": True, "op": args.op, "entry": desc} if args.json else f"{done}: {desc}"


# fabric.p4's concerns, by the control blocks their tables live in (p4src/include/*.p4).
CONCERNS = {
    "ecn": (".ecn.", ".feedback."),
    "int": (".int_ingress.", ".int_egress.", ".report."),
}


def cmd_concern(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    """`fabricctl ecn` / `fabricctl int`: every table of that concern, dumped."""
    ix = sw.index
    tables = [t for t in ix.names("table") if any(part in t for part in CONCERNS[args.cmd])]
    if not tables:
        raise UsageError(f"{args.cmd}: the pipeline has no {args.cmd.upper()} tables "
                         f"(looked for names containing {', '.join(CONCERNS[args.cmd])})")
    dumps = {t: [e for e in sw.read(TableEntry(t))
                 if isinstance(e, TableEntry) and not e.is_default] for t in tables}
    if args.json:
        return {t: [fmt.entry_dict(ix, e) for e in es] for t, es in dumps.items()}
    return "\n".join(f"table {t}\n{fmt.entries_text(ix, t, es)}" for t, es in dumps.items())


def _table_show(sw: SwitchConnection, tname: str, as_json: bool) -> Any:
    ix = sw.index
    t = ix.table(tname)
    profile = ix.action_profile_of(tname)
    info: dict[str, Any] = {
        "name": tname, "id": t.preamble.id, "size": t.size,
        "match_fields": [{"name": f.name, "match_type": f.match_type, "bitwidth": f.bitwidth}
                         for f in ix.match_fields(tname)],
        "actions": [{"name": a.preamble.name,
                     "params": [{"name": p.name, "bitwidth": p.bitwidth} for p in a.params]}
                    for a in ix.table_actions(tname)],
        "implementation": profile.preamble.name if profile else None,
        "direct_resources": [obj.preamble.name for _, obj in ix.direct_resources(tname)],
        "is_const": t.is_const_table,
    }
    try:
        default = [e for e in sw.read(TableEntry(tname, is_default=True))
                   if isinstance(e, TableEntry) and e.is_default]
    except ControlPlaneError:
        default = []  # reading the default entry is optional for servers
    if default:
        d = fmt.entry_dict(ix, default[0])
        info["default_action"] = {"action": d.get("action"), "params": d.get("params", {})}
    if as_json:
        return info
    lines = [f"table {tname} (id {t.preamble.id}, size {t.size}"
             + (", const" if t.is_const_table else "") + ")"]
    for f in info["match_fields"]:
        lines.append(f"  key    {f['name']}: {f['match_type']} bit<{f['bitwidth']}>")
    for a in info["actions"]:
        params = ", ".join(f"{p['name']}: bit<{p['bitwidth']}>" for p in a["params"])
        lines.append(f"  action {a['name']}({params})")
    if profile:
        kind = "action selector" if profile.with_selector else "action profile"
        lines.append(f"  implementation: {kind} {profile.preamble.name}")
    for res in info["direct_resources"]:
        lines.append(f"  direct resource: {res}")
    if "default_action" in info:
        da = info["default_action"]
        lines.append(f"  default: {fmt.action_text(da['action'], da['params'])}")
    return "\n".join(lines)


def cmd_groups(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    ix = sw.index
    profiles = [ix.action_profile(args.profile).preamble.name] if args.profile else \
        ix.names("action_profile")
    out: dict[str, Any] = {}
    for prof in profiles:
        members = [m for m in sw.read(ActionProfileMember(prof))
                   if isinstance(m, ActionProfileMember)]
        groups = [g for g in sw.read(ActionProfileGroup(prof))
                  if isinstance(g, ActionProfileGroup)]
        out[prof] = {"members": [fmt.member_dict(ix, m) for m in members],
                     "groups": [fmt.group_dict(g) for g in groups]}
    if args.json:
        return out
    text = []
    for prof, data in out.items():
        text.append(f"action profile {prof}")
        text.append(fmt.render_table(["member", "action"], [
            [m["member_id"], fmt.action_text(m["action"], m["params"])] for m in data["members"]]))
        text.append(fmt.render_table(["group", "members (id*weight@watch_port)"], [
            [g["group_id"], " ".join(
                f"{m['member_id']}*{m['weight']}"
                + (f"@{m['watch_port']}" if m["watch_port"] is not None else "")
                for m in g["members"])] for g in data["groups"]]))
    return "\n".join(text) if text else "(no action profiles)"


def cmd_counters(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    ix = sw.index
    names = [args.name] if args.name else ix.names("counter") + ix.names("direct_counter")
    out: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        kind = _counter_kind(ix, name)
        if kind == "counter":
            full = ix.counter(name).preamble.name
            rows = [{"index": c.index, "packets": c.packets, "bytes": c.bytes}
                    for c in sw.read(CounterEntry(full)) if isinstance(c, CounterEntry)]
            if not args.name:  # the overview shows only indices that counted something
                rows = [r for r in rows if r["packets"] or r["bytes"]]
        else:
            dc = ix.direct_counter(name)
            full, table = dc.preamble.name, ix.name_of(dc.direct_table_id)
            rows = []
            for d in sw.read(DirectCounterEntry(TableEntry(table))):
                if isinstance(d, DirectCounterEntry):
                    e = fmt.entry_dict(ix, d.table_entry)
                    rows.append({"match": e["match"], "packets": d.packets, "bytes": d.bytes})
        out[full] = rows
    if args.json:
        return out
    text = []
    for name, rows in out.items():
        text.append(f"counter {name}")
        if name in ix.names("counter"):
            text.append(fmt.render_table(["index", "packets", "bytes"],
                                         [[r["index"], r["packets"], r["bytes"]] for r in rows]))
        else:
            text.append(fmt.render_table(["entry", "packets", "bytes"], [
                [" ".join(f"{k}={v}" for k, v in r["match"].items()), r["packets"], r["bytes"]]
                for r in rows]))
    return "\n".join(text) if text else "(no counters)"


def _counter_kind(ix: Any, name: str) -> str:
    try:
        ix.counter(name)
        return "counter"
    except P4InfoLookupError:
        try:
            ix.direct_counter(name)
            return "direct_counter"
        except P4InfoLookupError:
            known = ix.names("counter") + ix.names("direct_counter")
            raise P4InfoLookupError(f"unknown counter '{name}' (known: "
                                    f"{', '.join(known) or 'none'})") from None


def cmd_registers(sw: SwitchConnection, args: argparse.Namespace,
                  admin: Callable[[], AdminChannel]) -> Any:
    """Registers over P4Runtime; where the switch does not implement that (BMv2's PI answers
    UNIMPLEMENTED, and p4sim does the same), over the admin channel as simple_switch_CLI's
    register_read/register_write."""
    ix = sw.index
    reg = ix.register(args.name)
    name, size = reg.preamble.name, reg.size
    if args.index is not None and not 0 <= args.index < size:
        raise EncodeError(f"register {name}: index {args.index} out of range 0..{size - 1}")
    if args.op == "write":
        if args.index is None or args.value is None:
            raise UsageError(f"registers write {name}: needs INDEX and VALUE")
        entry = RegisterEntry(name, args.index, args.value)
        sw.codec.to_proto(entry)  # value checked against the register's width before anything
        try:
            sw.modify(entry)
        except P4RuntimeError as err:
            if err.code != "UNIMPLEMENTED" and not _unimplemented(err):
                raise
            _via_admin(admin, err, "register_write", name, args.index, args.value)
        msg = f"wrote {name}[{args.index}] = {args.value}"
        return {"ok": True, "register": name, "index": args.index} if args.json else msg
    if args.value is not None:
        raise UsageError(f"registers read {name}: takes no VALUE")
    try:
        rows = [{"index": r.index, "value": r.value}
                for r in sw.read(RegisterEntry(name, args.index)) if isinstance(r, RegisterEntry)]
    except P4RuntimeError as err:
        if err.code != "UNIMPLEMENTED":
            raise
        indices = range(size) if args.index is None else [args.index]
        rows = [{"index": i, "value": _via_admin(admin, err, "register_read", name, i)}
                for i in indices]
    if args.json:
        return rows
    return fmt.render_table(["index", "value"], [[r["index"], r["value"]] for r in rows])


def _unimplemented(err: P4RuntimeError) -> bool:
    return any(u.code == 12 for u in err.failed)  # google.rpc.Code UNIMPLEMENTED


def _via_admin(admin: Callable[[], AdminChannel], err: P4RuntimeError, *words: Any) -> Any:
    code = code_name(err.failed[0].code) if err.failed else err.code
    try:
        return admin().run(*words)
    except AdminError as admin_err:
        raise UsageError(f"registers: the switch does not implement register access over "
                         f"P4Runtime ({code}) and the admin channel failed too: "
                         f"{admin_err}") from None


def _replicas(words: list[str]) -> list[Replica]:
    out = []
    for w in words:
        port, _, inst = w.partition(":")
        try:
            out.append(Replica(int(port, 0), int(inst, 0) if inst else 0))
        except ValueError:
            raise UsageError(f"mcast: bad replica '{w}' (expected PORT[:INSTANCE])") from None
    return out


def cmd_mcast(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    if args.op != "show":
        if not args.group:
            raise UsageError(f"mcast {args.op}: needs a group id > 0")
        group = MulticastGroup(args.group, _replicas(args.replicas))
        if args.op == "add":
            sw.insert(group)
        elif args.op == "modify":
            sw.modify(group)
        else:
            sw.delete(group)
        msg = f"multicast group {args.group}: {args.op} done"
        return {"ok": True, "op": args.op, "group": args.group} if args.json else msg
    entries = sw.read(MulticastGroup(args.group or 0)) + sw.read(CloneSession(0))
    if args.json:
        return [fmt.pre_dict(e) for e in entries if isinstance(e, MulticastGroup | CloneSession)]
    rows = [["multicast" if isinstance(e, MulticastGroup) else "clone",
             e.group_id if isinstance(e, MulticastGroup) else e.session_id,
             fmt.replicas_text(e)] for e in entries if isinstance(e, MulticastGroup | CloneSession)]
    return fmt.render_table(["kind", "id", "replicas (port[:instance])"], rows)


def cmd_pipeline(sw: SwitchConnection, args: argparse.Namespace) -> Any:
    if args.op == "push":
        if not args.p4info or not args.json_file:
            raise UsageError("pipeline push: needs P4INFO and JSON files")
        for f in (args.p4info, args.json_file):
            if not Path(f).is_file():
                raise UsageError(f"pipeline push: no such file: {f}")
        sw.set_pipeline(args.p4info, args.json_file)
        ix = sw.index
        msg = f"pushed {args.p4info} + {args.json_file}: {len(ix.names('table'))} tables"
        return {"ok": True, "tables": len(ix.names("table"))} if args.json else msg
    pipe = sw.get_pipeline()
    if not len(pipe.p4info.tables) and not len(pipe.p4info.actions):
        info: dict[str, Any] = {"loaded": False}
        return info if args.json else "no pipeline loaded"
    counts = {k: len(getattr(pipe.p4info, k)) for k in (
        "tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
        "registers", "digests")}
    info = {"loaded": True, "arch": pipe.p4info.pkg_info.arch, "cookie": pipe.cookie,
            "device_config_bytes": len(pipe.device_config), **counts}
    if args.json:
        return info
    return "\n".join(f"{k}: {v}" for k, v in info.items())
