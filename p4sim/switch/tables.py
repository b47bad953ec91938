"""Match-action tables with BMv2's match kinds and priority rules.

- exact / valid keys: one dict lookup.
- lpm (+ exact) keys: one dict per prefix length, longest first (longest prefix wins).
- ternary / range / optional (and lpm inside them): entries scanned in priority order; the
  larger P4Runtime priority wins (BMv2's JSON and CLI priorities, where smaller wins, are
  converted on load).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from p4sim.switch.api import (
    ActionCall,
    ApiError,
    Code,
    Exact,
    GroupRef,
    KeyField,
    Lpm,
    MemberRef,
    MeterConfig,
    Optional_,
    Range,
    TableEntry,
    Ternary,
)
from p4sim.switch.externs import Meter

# BMv2 JSON priorities (smaller wins) become P4Runtime ones (larger wins) as BIG - p.
JSON_PRIORITY_BASE = 1 << 24

_KIND_CLASS = {"exact": Exact, "valid": Exact, "lpm": Lpm, "ternary": Ternary, "range": Range,
               "optional": Optional_}


@dataclass
class ActionDef:
    id: int
    name: str
    fn: Any
    widths: tuple[int, ...]

    def check_args(self, args: tuple[int, ...], where: str) -> tuple[int, ...]:
        if len(args) != len(self.widths):
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: action '{self.name}' expects "
                           f"{len(self.widths)} parameters, got {len(args)}")
        for i, (value, width) in enumerate(zip(args, self.widths)):
            if not isinstance(value, int) or value < 0 or value >> width:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: action '{self.name}' parameter "
                               f"{i} value {value!r} does not fit in {width} bits")
        return tuple(args)


class Entry:
    __slots__ = ("action", "bytes", "data", "fn", "idle_notified", "key", "last_hit", "matchers",
                 "meter", "name", "next", "packets", "priority", "timeout_ms")

    def __init__(self, key: tuple, priority: int, action: Any) -> None:
        self.key = key
        self.priority = priority
        self.action = action
        self.fn: Any = None
        self.data: tuple[int, ...] = ()
        self.name = ""
        self.next: Any = None
        self.packets = 0
        self.bytes = 0
        self.meter: Meter | None = None
        self.matchers: tuple = ()
        self.timeout_ms: int | None = None
        self.last_hit = 0  # ns on the data plane's clock
        self.idle_notified = False


class MatchTable:
    def __init__(self, name: str, keys: list[tuple[str, int, str]], actions: dict[str, ActionDef],
                 max_size: int, key_fn: Any, clock: Any, profile: Any = None) -> None:
        self.name = name
        self.clock = clock  # the data plane's clock (ns): meters and idle timeouts
        self.keys = keys  # (match kind, bit width, key name)
        self.kinds = [k for k, _, _ in keys]
        self.actions = actions
        self.max_size = max_size
        self.key_fn = key_fn  # fn(P, F, D) -> key tuple
        self.profile = profile  # ActionProfile for indirect tables
        self.const_entries = False
        self.with_counters = False
        self.meter_result_slot: int | None = None
        self.meter_by_bytes = False
        self.supports_timeout = False  # JSON "support_timeout": hits refresh entry.last_hit
        self.hit_miss = False
        self.next_hit: Any = None
        self.next_miss: Any = None
        self.next_by_action: dict[str, Any] = {}
        self.base_default_next: Any = None
        self.default_action: ActionDef | None = None
        self.default_data: tuple[int, ...] = ()
        self.default_const = False
        self.json_default: tuple[ActionDef | None, tuple[int, ...]] = (None, ())
        kinds = set(self.kinds)
        if kinds <= {"exact", "valid"}:
            self.mode = "exact"
        elif kinds <= {"exact", "valid", "lpm"} and self.kinds.count("lpm") == 1:
            self.mode = "lpm"
            self.lpm_index = self.kinds.index("lpm")
        else:
            self.mode = "priority"
        self.entries: dict[tuple, Entry] = {}  # (canonical key, priority) -> entry
        self.exact: dict[tuple, Entry] = {}
        self.by_plen: dict[int, dict[tuple, Entry]] = {}
        self.plens: list[int] = []
        self.lpm_probe: list[tuple[int, dict[tuple, Entry]]] = []  # (mask, entries), longest first
        self.sorted: list[Entry] = []

    # -- lookup (hot path) -------------------------------------------------------------------

    def lookup_fn(self) -> Any:
        """``lookup`` specialised for this table's mode (fixed at construction): the exact
        index's own ``dict.get``, or a function that skips the mode tests."""
        if self.mode == "exact":
            return self.exact.get  # the dict is cleared in place, never replaced
        if self.mode == "lpm" and len(self.keys) == 1:
            return self._lpm_one_field
        return self.lookup

    def _lpm_one_field(self, key: tuple) -> Entry | None:
        k = key[0]
        for mask, d in self.lpm_probe:  # single-field tables index by the bare value
            entry = d.get(k & mask)
            if entry is not None:
                return entry
        return None

    def lookup(self, key: tuple) -> Entry | None:
        if self.mode == "exact":
            return self.exact.get(key)
        if self.mode == "lpm":
            if len(key) == 1:
                return self._lpm_one_field(key)
            li = self.lpm_index
            head, value, tail = key[:li], key[li], key[li + 1:]
            for mask, d in self.lpm_probe:
                entry = d.get((*head, value & mask, *tail))
                if entry is not None:
                    return entry
            return None
        for entry in self.sorted:
            for k, (is_range, a, b) in zip(key, entry.matchers):
                if is_range:
                    if not a <= k <= b:
                        break
                elif k & a != b:
                    break
            else:
                return entry
        return None

    # -- control plane -----------------------------------------------------------------------

    def _canonical(self, key: tuple[KeyField, ...], priority: int) -> tuple[tuple, int, tuple]:
        where = f"table '{self.name}'"
        if len(key) != len(self.keys):
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: expected {len(self.keys)} key "
                           f"fields, got {len(key)}")
        canon: list[Any] = []
        matchers: list[tuple[bool, int, int]] = []
        for i, (kf, (kind, width, kname)) in enumerate(zip(key, self.keys)):
            fw = f"{where} key field {i} '{kname}'"
            cls = _KIND_CLASS[kind]
            if not isinstance(kf, cls):
                raise ApiError(Code.INVALID_ARGUMENT, f"{fw}: expected a {kind} match, got "
                               f"{type(kf).__name__}")
            full = (1 << width) - 1
            if isinstance(kf, Exact):
                _fits(kf.value, width, fw)
                canon.append(kf.value)
                matchers.append((False, full, kf.value))
            elif isinstance(kf, Lpm):
                _fits(kf.value, width, fw)
                if not 0 <= kf.prefix_len <= width:
                    raise ApiError(Code.INVALID_ARGUMENT, f"{fw}: prefix length "
                                   f"{kf.prefix_len} out of range 0..{width}")
                mask = ((1 << kf.prefix_len) - 1) << (width - kf.prefix_len)
                canon.append((kf.value & mask, kf.prefix_len))
                matchers.append((False, mask, kf.value & mask))
            elif isinstance(kf, Ternary):
                _fits(kf.value, width, fw)
                _fits(kf.mask, width, fw)
                canon.append((kf.value & kf.mask, kf.mask))
                matchers.append((False, kf.mask, kf.value & kf.mask))
            elif isinstance(kf, Range):
                _fits(kf.low, width, fw)
                _fits(kf.high, width, fw)
                if kf.low > kf.high:
                    raise ApiError(Code.INVALID_ARGUMENT, f"{fw}: range low {kf.low} > high "
                                   f"{kf.high}")
                canon.append((kf.low, kf.high))
                matchers.append((True, kf.low, kf.high))
            else:
                if kf.value is not None:
                    _fits(kf.value, width, fw)
                canon.append(kf.value)
                matchers.append((False, full, kf.value) if kf.value is not None
                                else (False, 0, 0))
        if self.mode != "priority":
            priority = 0
        return tuple(canon), priority, tuple(matchers)

    def _resolve(self, action: Any, where: str) -> tuple[ActionDef | None, tuple[int, ...]]:
        if isinstance(action, ActionCall):
            if self.profile is not None:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: table is indirect; give a "
                               "member or group, not an action")
            adef = self.actions.get(action.action)
            if adef is None:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: action '{action.action}' is "
                               "not one of the table's actions")
            return adef, adef.check_args(tuple(action.args), where)
        if isinstance(action, MemberRef | GroupRef):
            if self.profile is None:
                raise ApiError(Code.INVALID_ARGUMENT, f"{where}: table is direct; give an action")
            self.profile.check_ref(action, where)
            return None, ()
        raise ApiError(Code.INVALID_ARGUMENT, f"{where}: bad action {action!r}")

    def _fill(self, entry: Entry, action: Any, adef: ActionDef | None, data: tuple) -> None:
        entry.action = action
        entry.fn = adef.fn if adef else None
        entry.name = adef.name if adef else ""
        entry.data = data
        entry.next = self.next_by_action.get(adef.name, self.base_default_next) if adef else None

    def insert(self, te: TableEntry, const_ok: bool = False) -> None:
        where = f"table '{self.name}'"
        if self.const_entries and not const_ok:
            raise ApiError(Code.PERMISSION_DENIED, f"{where}: entries are const")
        if not self.keys:
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: table has no key; only its default "
                           "action can be set")
        canon, prio, matchers = self._canonical(te.key, te.priority)
        if (canon, prio) in self.entries:
            raise ApiError(Code.ALREADY_EXISTS, f"{where}: entry already exists")
        if len(self.entries) >= self.max_size > 0:
            raise ApiError(Code.RESOURCE_EXHAUSTED, f"{where}: table is full ({self.max_size})")
        adef, data = self._resolve(te.action, where)
        entry = Entry(canon, prio, te.action)
        entry.matchers = matchers
        entry.timeout_ms = te.timeout_ms
        entry.last_hit = self.clock()
        self._fill(entry, te.action, adef, data)
        if self.meter_result_slot is not None:
            entry.meter = Meter(self.clock)
            entry.meter.configure(te.meter)
        self.entries[(canon, prio)] = entry
        self._index_add(entry)

    def _index_add(self, entry: Entry) -> None:
        if self.mode == "exact":
            self.exact[entry.key] = entry
        elif self.mode == "lpm":
            plen, probe = self._lpm_probe_key(entry)
            d = self.by_plen.get(plen)
            if d is None:
                d = self.by_plen[plen] = {}
                self._lpm_reindex()
            d[probe] = entry
        else:
            # insort_right keeps the earlier entry first among equal priorities.
            bisect.insort_right(self.sorted, entry, key=_neg_priority)

    def _lpm_reindex(self) -> None:
        width = self.keys[self.lpm_index][1]
        self.plens = sorted(self.by_plen, reverse=True)
        self.lpm_probe = [(((1 << p) - 1) << (width - p), self.by_plen[p]) for p in self.plens]

    def _lpm_probe_key(self, entry: Entry) -> tuple[int, Any]:
        """(prefix length, dict key): the bare value for single-field tables (the hot path
        then skips building a tuple), else the key tuple with the masked prefix value."""
        li = self.lpm_index
        value, plen = entry.key[li]
        if len(self.keys) == 1:
            return plen, value
        return plen, (*entry.key[:li], value, *entry.key[li + 1:])

    def _index_remove(self, entry: Entry) -> None:
        if self.mode == "exact":
            del self.exact[entry.key]
        elif self.mode == "lpm":
            plen, probe = self._lpm_probe_key(entry)
            del self.by_plen[plen][probe]
            if not self.by_plen[plen]:
                del self.by_plen[plen]
                self._lpm_reindex()
        else:
            self.sorted = [e for e in self.sorted if e is not entry]

    def find(self, key: tuple[KeyField, ...], priority: int) -> Entry:
        canon, prio, _ = self._canonical(key, priority)
        entry = self.entries.get((canon, prio))
        if entry is None:
            raise ApiError(Code.NOT_FOUND, f"table '{self.name}': no such entry")
        return entry

    def modify(self, te: TableEntry) -> None:
        if self.const_entries:
            raise ApiError(Code.PERMISSION_DENIED, f"table '{self.name}': entries are const")
        entry = self.find(te.key, te.priority)
        adef, data = self._resolve(te.action, f"table '{self.name}'")
        self._fill(entry, te.action, adef, data)
        if te.meter is not None and entry.meter is not None:
            entry.meter.configure(te.meter)
        if te.timeout_ms is not None:
            entry.timeout_ms = te.timeout_ms
            entry.last_hit = self.clock()
            entry.idle_notified = False

    def delete(self, key: tuple[KeyField, ...], priority: int) -> None:
        if self.const_entries:
            raise ApiError(Code.PERMISSION_DENIED, f"table '{self.name}': entries are const")
        entry = self.find(key, priority)
        del self.entries[(entry.key, entry.priority)]
        self._index_remove(entry)

    def clear(self) -> None:
        if self.const_entries:
            raise ApiError(Code.PERMISSION_DENIED, f"table '{self.name}': entries are const")
        self.entries.clear()
        self.exact.clear()
        self.by_plen.clear()
        self.plens = []
        self.lpm_probe = []
        self.sorted = []

    def entry_list(self) -> list[TableEntry]:
        return [self.to_api(e) for e in self.entries.values()]

    def idle_entries(self, now: int) -> list[Entry]:
        """Entries idle longer than their timeout, each reported once per idle period."""
        out = []
        for e in self.entries.values():
            if (e.timeout_ms and not e.idle_notified
                    and now - e.last_hit >= e.timeout_ms * 1_000_000):
                e.idle_notified = True
                out.append(e)
        return out

    def to_api(self, e: Entry) -> TableEntry:
        return TableEntry(key=tuple(_key_field(k, c) for k, c in zip(self.kinds, e.key)),
                          action=e.action, priority=e.priority, timeout_ms=e.timeout_ms,
                          meter=e.meter.config if e.meter else None,
                          counter=(e.packets, e.bytes) if self.with_counters else None)

    def set_default(self, action: ActionCall | None) -> None:
        where = f"table '{self.name}' default action"
        if self.default_const:
            raise ApiError(Code.PERMISSION_DENIED, f"{where}: is const")
        if action is None:
            self.default_action, self.default_data = self.json_default
            return
        if self.profile is not None:
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: table is indirect")
        adef = self.actions.get(action.action)
        if adef is None:
            raise ApiError(Code.INVALID_ARGUMENT, f"{where}: action '{action.action}' is not "
                           "one of the table's actions")
        self.default_data = adef.check_args(tuple(action.args), where)
        self.default_action = adef

    def get_default(self) -> ActionCall:
        if self.default_action is None:
            return ActionCall("NoAction", ())
        return ActionCall(self.default_action.name, self.default_data)

    def set_direct_counter(self, key: tuple[KeyField, ...], priority: int, packets: int,
                           bytes_: int) -> None:
        if not self.with_counters:
            raise ApiError(Code.INVALID_ARGUMENT, f"table '{self.name}' has no direct counter")
        entry = self.find(key, priority)
        entry.packets, entry.bytes = packets, bytes_

    def set_direct_meter(self, key: tuple[KeyField, ...], priority: int,
                         config: MeterConfig | None) -> None:
        entry = self.find(key, priority)
        if entry.meter is None:
            raise ApiError(Code.INVALID_ARGUMENT, f"table '{self.name}' has no direct meter")
        entry.meter.configure(config)


def _neg_priority(entry: Entry) -> int:
    return -entry.priority


def _fits(value: Any, width: int, where: str) -> None:
    if not isinstance(value, int) or value < 0 or value >> width:
        raise ApiError(Code.INVALID_ARGUMENT, f"{where}: value {value!r} does not fit in "
                       f"{width} bits")


def _key_field(kind: str, c: Any) -> KeyField:
    if kind in ("exact", "valid"):
        return Exact(c)
    if kind == "lpm":
        return Lpm(c[0], c[1])
    if kind == "ternary":
        return Ternary(c[0], c[1])
    if kind == "range":
        return Range(c[0], c[1])
    return Optional_(c)
