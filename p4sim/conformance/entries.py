"""STF table and replication commands as P4Runtime entities, by name through P4Info.

Names follow p4c's BMv2 STF driver: a table or action is found by its full name or, failing
that, by a unique suffix; a match field by its name or a ``.``-suffix, with ``hdr$0.f`` meaning
``hdr[0].f``. Values as simple_switch_CLI reads them: a ternary value's mask covers the digits
written (``*`` digits and digits not written are don't-care); an lpm value without ``/LEN``
has a prefix of the digits written. STF priorities rank as P4Runtime's (larger wins); STF allows
0, so they are shifted by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4rt

from p4sim.conformance.stf import Add, Direct, SetDefault

MF = p4info_pb2.MatchField
_STACK_INDEX = re.compile(r"\$([0-9]+)")


class EntryError(ValueError):
    """An STF line that names something the program lacks, or a value that does not fit."""


def _by_name(items: Iterable, name: str, what: str) -> object:
    items = list(items)
    for it in items:
        if it.preamble.name == name:
            return it
    for suffix_ok in (lambda n: n.endswith("." + name), lambda n: n.endswith(name)):
        found = [it for it in items if suffix_ok(it.preamble.name)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(it.preamble.name for it in found)
            raise EntryError(f"{what} '{name}' is ambiguous ({names})")
    raise EntryError(f"no {what} '{name}' in the program")


def parse_number(text: str, what: str) -> int:
    t = text.strip().lower()
    try:
        if t.startswith("0x"):
            return int(t[2:].replace("*", "0"), 16)
        if t.startswith("0b"):
            return int(t[2:].replace("*", "0"), 2)
        if t.startswith("0o"):
            return int(t[2:].replace("*", "0"), 8)
        if t.startswith("-"):
            return int(t, 10)
        return int(t, 10)
    except ValueError:
        raise EntryError(f"{what}: bad number '{text}'") from None


def _digits(text: str) -> tuple[str, int]:
    """(digits, bits per digit) of a prefixed literal; decimal gives ('', 0)."""
    t = text.lower()
    for prefix, bits in (("0x", 4), ("0b", 1), ("0o", 3)):
        if t.startswith(prefix):
            return t[2:], bits
    return "", 0


def _wildcard_mask(text: str, width: int) -> int:
    digits, bits = _digits(text)
    if not bits:
        return (1 << width) - 1
    mask = 0
    for d in digits:
        mask = (mask << bits) | (0 if d == "*" else (1 << bits) - 1)
    return mask & ((1 << width) - 1)


def _encode(value: int, width: int, what: str) -> bytes:
    if value < 0:
        value &= (1 << width) - 1  # two's complement, as the CLI reads "-1"
    if value >> width:
        raise EntryError(f"{what}: value {value:#x} does not fit in {width} bits")
    return value.to_bytes(max(1, (width + 7) // 8), "big")


def _field_for(table: p4info_pb2.Table, name: str) -> p4info_pb2.MatchField:
    name = _STACK_INDEX.sub(r"[\1]", name)
    fields = list(table.match_fields)
    for f in fields:
        if f.name == name:
            return f
    found = [f for f in fields if f.name.endswith("." + name)]
    if len(found) == 1:
        return found[0]
    if name.endswith(".valid") or name == "valid":
        base = name[: -len("valid")]
        found = [f for f in fields if f.name.endswith(base + "isValid()")]
        if len(found) == 1:
            return found[0]
    raise EntryError(f"table {table.preamble.name}: no match field '{name}'")


def _match(field: p4info_pb2.MatchField, text: str) -> p4rt.FieldMatch | None:
    """The FieldMatch for one STF key value, or None for a don't-care."""
    width, what = field.bitwidth, f"field {field.name}"
    fm = p4rt.FieldMatch(field_id=field.id)
    kind = field.match_type
    if kind == MF.EXACT:
        fm.exact.value = _encode(parse_number(text, what), width, what)
    elif kind == MF.TERNARY:
        if "&&&" in text:
            v, m = (parse_number(p, what) for p in text.split("&&&", 1))
        else:
            v, m = parse_number(text, what), _wildcard_mask(text, width)
        if m == 0:
            return None
        fm.ternary.value = _encode(v & m, width, what)
        fm.ternary.mask = _encode(m, width, what)
    elif kind == MF.LPM:
        if "/" in text:
            v_text, l_text = text.split("/", 1)
            v, plen = parse_number(v_text, what), parse_number(l_text, what)
        else:
            digits, bits = _digits(text)
            v = parse_number(text, what)
            plen = (len(digits) - digits.count("*")) * bits if bits else width
        plen = min(plen, width)
        if plen == 0:
            return None
        keep = ((1 << plen) - 1) << (width - plen)
        fm.lpm.value = _encode(v & keep, width, what)
        fm.lpm.prefix_len = plen
    elif kind == MF.RANGE:
        lo, _, hi = text.partition("->")
        fm.range.low = _encode(parse_number(lo, what), width, what)
        fm.range.high = _encode(parse_number(hi or lo, what), width, what)
    elif kind == MF.OPTIONAL:
        if text.strip() == "*":
            return None
        fm.optional.value = _encode(parse_number(text, what), width, what)
    else:
        raise EntryError(f"{what}: match kind {kind} not supported by the STF runner")
    return fm


def _needs_priority(table: p4info_pb2.Table) -> bool:
    return any(f.match_type in (MF.TERNARY, MF.RANGE, MF.OPTIONAL) for f in table.match_fields)


class Translator:
    def __init__(self, info: p4info_pb2.P4Info) -> None:
        self.info = info
        self.actions = {a.preamble.id: a for a in info.actions}

    def table(self, name: str) -> p4info_pb2.Table:
        return _by_name(self.info.tables, name, "table")  # type: ignore[return-value]

    def _action(self, table: p4info_pb2.Table, name: str, args, out: p4rt.Action) -> None:
        candidates = [self.actions[r.id] for r in table.action_refs if r.id in self.actions]
        action = _by_name(candidates, name, f"action of table {table.preamble.name}")
        out.action_id = action.preamble.id  # type: ignore[attr-defined]
        params = {p.name: p for p in action.params}  # type: ignore[attr-defined]
        given = dict(args)
        for pname in given:
            p = params.get(pname)
            if p is None:
                raise EntryError(f"action {action.preamble.name}: no parameter '{pname}'")  # type: ignore[attr-defined]
        for p in action.params:  # type: ignore[attr-defined]
            if p.name not in given:
                raise EntryError(f"action {action.preamble.name}: parameter '{p.name}' missing")  # type: ignore[attr-defined]
            what = f"action parameter {p.name}"
            out.params.add(param_id=p.id,
                           value=_encode(parse_number(given[p.name], what), p.bitwidth, what))

    def add(self, cmd: Add) -> p4rt.Entity:
        table = self.table(cmd.table)
        ent = p4rt.Entity()
        te = ent.table_entry
        te.table_id = table.preamble.id
        seen = set()
        for name, value in cmd.keys:
            field = _field_for(table, name)
            if field.id in seen:
                raise EntryError(f"table {table.preamble.name}: field '{name}' given twice")
            seen.add(field.id)
            fm = _match(field, value)
            if fm is not None:
                te.match.append(fm)
        te.match.sort(key=lambda m: m.field_id)
        if _needs_priority(table):
            te.priority = (cmd.priority or 0) + 1
        self._action(table, cmd.action, cmd.args, te.action.action)
        return ent

    def set_default(self, cmd: SetDefault) -> p4rt.Entity:
        table = self.table(cmd.table)
        ent = p4rt.Entity()
        te = ent.table_entry
        te.table_id = table.preamble.id
        te.is_default_action = True
        self._action(table, cmd.action, cmd.args, te.action.action)
        return ent


class Replication:
    """simple_switch_CLI's multicast node model folded into P4Runtime multicast groups.

    ``mc_node_create RID PORT...`` makes node handles 0, 1, ... (as BMv2 numbers them);
    ``mc_node_associate GROUP NODE`` adds the node's (port, rid) replicas to the group."""

    def __init__(self) -> None:
        self.nodes: list[tuple[int, list[int]]] = []
        self.groups: dict[int, list[tuple[int, int]]] = {}

    def apply(self, cmd: Direct) -> list[tuple[int, p4rt.Entity]]:
        """The (update type, entity) writes one command needs (none for pure bookkeeping)."""
        nums = [parse_number(a, cmd.name) for a in cmd.args]
        if cmd.name == "mc_mgrp_create":
            self.groups[nums[0]] = []
            return [(p4rt.Update.INSERT, self._group(nums[0]))]
        if cmd.name == "mc_node_create":
            self.nodes.append((nums[0], nums[1:]))
            return []
        if cmd.name == "mc_node_associate":
            group, handle = nums
            if group not in self.groups:
                raise EntryError(f"mc_node_associate: no multicast group {group}")
            if not 0 <= handle < len(self.nodes):
                raise EntryError(f"mc_node_associate: no node handle {handle}")
            rid, ports = self.nodes[handle]
            self.groups[group] += [(port, rid) for port in ports]
            return [(p4rt.Update.MODIFY, self._group(group))]
        if cmd.name == "mirroring_add":
            session, port = nums
            ent = p4rt.Entity()
            cs = ent.packet_replication_engine_entry.clone_session_entry
            cs.session_id = session
            cs.replicas.add(egress_port=port, instance=0)
            return [(p4rt.Update.INSERT, ent)]
        raise EntryError(f"STF command '{cmd.name}' not supported by the runner over P4Runtime")

    def _group(self, group: int) -> p4rt.Entity:
        ent = p4rt.Entity()
        mg = ent.packet_replication_engine_entry.multicast_group_entry
        mg.multicast_group_id = group
        for port, rid in self.groups[group]:
            mg.replicas.add(egress_port=port, instance=rid)
        return ent
