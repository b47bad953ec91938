"""Rendering for `fabricctl`: entities to plain dicts (for --json) and to aligned text tables.

Values are rendered in the same syntax fabricctl accepts ("10.0.0.0/8", "00:11:..", "v&&&m",
"lo..hi"), so what `table dump --json` prints can be fed back to `table add`.
"""

from __future__ import annotations

from typing import Any

from controlplane.encoding import Match, format_match, format_value
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    MulticastGroup,
    TableEntry,
)
from controlplane.p4info import P4InfoIndex


def render_table(headers: list[str], rows: list[list[Any]]) -> str:
    """Aligned columns with a dashed rule under the header."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join([line, rule, *body])


def _key_value(ix: P4InfoIndex, table: str, field: str, value: Any) -> str:
    try:
        f = ix.match_field(table, field)
        width, name = f.bitwidth, f.name
    except LookupError:
        width, name = 0, field
    if isinstance(value, Match):
        return format_match(value, width, name)
    return format_value(int(value), width, name)


def _params(ix: P4InfoIndex, action: str | None, params: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in params.items():
        try:
            width = ix.param(action, name).bitwidth if action else 0
        except LookupError:
            width = 0
        out[name] = format_value(int(value), width, name)
    return out


def entry_dict(ix: P4InfoIndex, e: TableEntry) -> dict[str, Any]:
    table = e.table or ""
    d: dict[str, Any] = {
        "table": table,
        "match": {k: _key_value(ix, table, k, v) for k, v in e.match.items()},
    }
    if e.action is not None:
        d["action"] = e.action
        d["params"] = _params(ix, e.action, e.params)
    if e.member is not None:
        d["member"] = e.member
    if e.group is not None:
        d["group"] = e.group
    if e.priority:
        d["priority"] = e.priority
    if e.is_default:
        d["is_default"] = True
    if e.counter is not None:
        d["counter"] = {"packets": e.counter[0], "bytes": e.counter[1]}
    return d


def action_text(action: str | None, params: dict[str, str]) -> str:
    if action is None:
        return ""
    return f"{action}({', '.join(f'{k}={v}' for k, v in params.items())})"


def entries_text(ix: P4InfoIndex, table: str, entries: list[TableEntry]) -> str:
    fields = [f.name for f in ix.match_fields(table)]
    with_prio = any(f.match_type in ("ternary", "range", "optional")
                    for f in ix.match_fields(table))
    with_counter = any(e.counter is not None for e in entries)
    headers = [*fields, *(["priority"] if with_prio else []), "action",
               *(["packets", "bytes"] if with_counter else [])]
    rows = []
    for e in entries:
        d = entry_dict(ix, e)
        row: list[Any] = [d["match"].get(f, "*") for f in fields]
        if with_prio:
            row.append(e.priority)
        if e.member is not None:
            row.append(f"member {e.member}")
        elif e.group is not None:
            row.append(f"group {e.group}")
        else:
            row.append(action_text(e.action, d.get("params", {})))
        if with_counter:
            row += list(e.counter) if e.counter else ["", ""]
        rows.append(row)
    return render_table(headers, rows) + f"\n{len(entries)} entries"


def member_dict(ix: P4InfoIndex, m: ActionProfileMember) -> dict[str, Any]:
    return {"profile": m.profile, "member_id": m.member_id, "action": m.action,
            "params": _params(ix, m.action, m.params)}


def group_dict(g: ActionProfileGroup) -> dict[str, Any]:
    return {"profile": g.profile, "group_id": g.group_id, "max_size": g.max_size,
            "members": [{"member_id": m.member_id, "weight": m.weight,
                         "watch_port": m.watch_port} for m in g.members]}


def pre_dict(e: MulticastGroup | CloneSession) -> dict[str, Any]:
    replicas = [{"port": r.port, "instance": r.instance} for r in e.replicas]
    if isinstance(e, MulticastGroup):
        return {"multicast_group_id": e.group_id, "replicas": replicas}
    return {"clone_session_id": e.session_id, "replicas": replicas,
            "class_of_service": e.class_of_service,
            "packet_length_bytes": e.packet_length_bytes}


def replicas_text(e: MulticastGroup | CloneSession) -> str:
    return " ".join(f"{r.port}" + (f":{r.instance}" if r.instance else "") for r in e.replicas)
