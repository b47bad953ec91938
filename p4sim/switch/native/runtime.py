"""Run a program on the native path: the C library's per-switch state and the packet flow.

The Python tables stay the source of truth: every control-plane change marks the tables it may
affect, and the next packet copies them into flat arrays the C side searches (in the order the
Python lookup searches). Direct counter increments made in C are added into the Python entries
before any control call reads or changes a table. Registers and counter arrays are one memory
shared by both paths (the Python objects' lists are replaced by C arrays), so a packet that
leaves the native path half way (a clone, a multicast) continues on the Python path with the
same state.
"""

from __future__ import annotations

from typing import Any

from p4sim.switch.api import GroupRef, MemberRef
from p4sim.switch.native import build
from p4sim.switch.native.cgen import CGen, Unsupported
from p4sim.switch.native.crandom import SharedRandom
from p4sim.switch.packet import PacketAbort
from p4sim.switch.pipeline import CompiledProgram
from p4sim.switch.tables import MatchTable

_ABORTS = {1: (IndexError, "list index out of range"),
           2: (ZeroDivisionError, "integer division or modulo by zero"),
           3: (ValueError, "negative shift count"),
           4: (PacketAbort, "assertion failed"),
           5: (ValueError, "empty range for randrange()"),
           6: (ValueError, "parser moved before the start of the packet")}


def abort_exception(code: int) -> Exception:
    cls, msg = _ABORTS.get(code, (PacketAbort, f"native abort {code}"))
    return cls(msg)


_programs: dict[str, NativeProgram | Unsupported] = {}
INDEX_MIN = 8  # tables of more entries than this are indexed (when it pays: tbl_index)


def native_program(json_bytes: bytes, cp: CompiledProgram) -> NativeProgram:
    """The program's library, generated and built once per process and JSON (a simulator
    loads one program on many switches); raises Unsupported for a program not covered."""
    key = build.cache_key(json_bytes)
    prog = _programs.get(key)
    if prog is None:
        try:
            prog = NativeProgram(key, cp)
        except Unsupported as e:
            prog = e
        _programs[key] = prog
    if isinstance(prog, Unsupported):
        raise prog
    return prog


class NativeProgram:
    """The generated library of one program (shared by every switch running it)."""

    def __init__(self, key: str, cp: CompiledProgram) -> None:
        gen = CGen(cp.p)
        source = gen.generate()  # raises Unsupported first: nothing is built for it
        self.lib = build.build(key, source)
        self.table_names = [t["name"] for t in gen.tables]
        self.registers = gen.registers
        self.counters = gen.counters
        self.nslots = self.lib.nat_nslots()
        self.maxd = self.lib.nat_maxd()
        self.hdr_bytes = self.lib.nat_hdr_bytes()


class NativeState:
    """One switch's C context: table arrays, shared registers and counters, the rng hook."""

    def __init__(self, prog: NativeProgram, cp: CompiledProgram, rng: Any) -> None:
        ffi = build.ffi()
        self.ffi, self.lib, self.prog = ffi, prog.lib, prog
        # 64-byte aligned (prelude.h tbl_t: a table's search fields in one cache line)
        self._ctx = ffi.new("char[]", self.lib.nat_ctx_size() + 64)
        addr = int(ffi.cast("uintptr_t", self._ctx))
        self.C = ffi.cast("void *", (addr + 63) & ~63)
        # random(): drawn in C from a SharedRandom's state (the Python path draws from the same
        # memory); any other generator (a caller's random.Random, a subclass that may draw
        # otherwise) is called back for every draw.
        self._rng = rng  # keeps the state C points to alive
        if type(rng) is SharedRandom:
            self._randint = ffi.NULL
            mt = ffi.cast("void *", rng.address)
        else:
            self._randint = ffi.callback("i64(i64, i64)", rng.randint)
            mt = ffi.NULL
        self.lib.nat_init(self.C, self._randint, mt)
        self._keep: dict[int, tuple] = {}
        self._empty: tuple[Any, Any] | None = None  # (i64[1], i32[1]) for empty tables
        for rid, name in enumerate(prog.registers):
            reg = cp.registers[name]
            arr = ffi.new("i64[]", max(1, reg.size))
            for i, v in enumerate(reg.values):
                arr[i] = v
            reg.values = arr  # one memory for both paths
            self.lib.nat_set_register(self.C, rid, arr)
        for cid, name in enumerate(prog.counters):
            ctr = cp.counters[name]
            # Unsigned: a counter written over P4Runtime may hold any 64-bit value.
            pk = ffi.new("uint64_t[]", max(1, ctr.size))
            by = ffi.new("uint64_t[]", max(1, ctr.size))
            for i in range(ctr.size):
                pk[i], by[i] = ctr.packets[i], ctr.bytes[i]
            ctr.packets, ctr.bytes = pk, by
            self.lib.nat_set_counter(self.C, cid, pk, by)
        self.wide_slots = [f.slot for f in cp.p.slot_fields
                           if f is not None and f.width == 64 and not f.signed]
        self.tables: list[MatchTable] = [cp.tables[n] for n in prog.table_names]
        self.table_ids = {n: i for i, n in enumerate(prog.table_names)}
        self.synced: list[list] = [[] for _ in self.tables]
        self.dirty: set[int] = set(range(len(self.tables)))
        # called after every mark(): the simulator's C fabric keeps a list of the switches
        # whose tables it must not run before they are copied again (cellfabric.sim.cfabric)
        self.on_mark: Any = None

    # -- control plane --------------------------------------------------------------------------

    def mark(self, table: str | None = None, profile: str | None = None) -> None:
        """Tables to copy again before the next packet: one table, those of a profile, or
        (neither given) every table bound to a profile (a port status changed)."""
        if table is not None:
            tid = self.table_ids.get(table)
            if tid is not None:
                self.dirty.add(tid)
        else:
            for tid, t in enumerate(self.tables):
                if t.profile is not None and (profile is None or t.profile.name == profile):
                    self.dirty.add(tid)
        if self.on_mark is not None and self.dirty:
            self.on_mark()

    def flush(self) -> None:
        """Add the direct counter increments made in C into the Python entries."""
        if not self.lib.nat_take_counted(self.C):
            return
        for tid, entries in enumerate(self.synced):
            if not entries:
                continue
            pk, by = self._keep[tid][5], self._keep[tid][6]
            for i, e in enumerate(entries):
                if pk[i]:
                    e.packets += pk[i]
                    e.bytes += by[i]
                    pk[i] = by[i] = 0

    def sync(self) -> None:
        self.flush()
        for tid in sorted(self.dirty):
            self._sync_table(tid)
        self.dirty.clear()

    def _entries(self, t: MatchTable) -> list:
        if t.mode == "priority":
            return list(t.sorted)
        if t.mode == "lpm":
            return [e for _mask, d in t.lpm_probe for e in d.values()]
        return list(t.exact.values())

    def _sync_table(self, tid: int) -> None:
        ffi, t, maxd = self.ffi, self.tables[tid], self.prog.maxd
        entries = self._entries(t) if t.keys else []
        n, nk = len(entries), len(t.keys)
        if n == 0:
            self._sync_empty(tid, t)
            return
        m = ffi.new("i64[]", max(1, n * nk * 3))
        act = ffi.new("i32[]", max(1, n))
        data = ffi.new("i64[]", max(1, n * maxd))
        goff, gcnt = ffi.new("i32[]", max(1, n)), ffi.new("i32[]", max(1, n))
        rows: list[tuple[int, tuple[int, ...]]] = []
        for i, e in enumerate(entries):
            base = i * nk * 3
            for k, (is_range, a, b) in enumerate(e.matchers):
                m[base + 3 * k], m[base + 3 * k + 1], m[base + 3 * k + 2] = int(is_range), a, b
            chosen = self._resolve(t, e)
            if isinstance(chosen, list):
                act[i], goff[i], gcnt[i] = -1, len(rows), len(chosen)
                rows += chosen
            else:
                act[i] = chosen[0]
                for j, v in enumerate(chosen[1]):
                    data[i * maxd + j] = v
        gact = ffi.new("i32[]", max(1, len(rows)))
        gdata = ffi.new("i64[]", max(1, len(rows) * maxd))
        for r, (aid, args) in enumerate(rows):
            gact[r] = aid
            for j, v in enumerate(args):
                gdata[r * maxd + j] = v
        pk, by = ffi.new("i64[]", max(1, n)), ffi.new("i64[]", max(1, n))
        def_data = ffi.new("i64[]", maxd)
        adef = t.default_action
        for j, v in enumerate(t.default_data if adef is not None else ()):
            def_data[j] = v
        # Tables past a few cache lines of entries get a hash index by runs of entries with
        # the same masks (prelude.h tbl_index; it keeps the scan when the runs are too many
        # to pay). Below, the scan reads fewer cold lines than a probe.
        hsize = 1 << (2 * n).bit_length() if n > INDEX_MIN else 0
        hidx = ffi.new("i32[]", max(1, hsize))
        runs = ffi.new("i64[]", (2 + nk) * n + 1)
        self._keep[tid] = (m, act, data, goff, gcnt, pk, by, gact, gdata, def_data, hidx, runs)
        self.synced[tid] = entries
        self.lib.nat_set_table(self.C, tid, n, m, act, data, goff, gcnt, gact, gdata, pk, by,
                               adef.id if adef is not None else -1, def_data, hidx, hsize, runs,
                               nk)

    def _sync_empty(self, tid: int, t: MatchTable) -> None:
        """A table of no entries (most of a fabric's, at first): C reads only its default, and
        with n = 0 and no index (hsize 0) never reads or writes the entry arrays, so they are
        one shared zero buffer per type (twelve allocations a table made 96,000 at k=8)."""
        if self._empty is None:
            self._empty = (self.ffi.new("i64[]", 1), self.ffi.new("i32[]", 1))
        z64, z32 = self._empty
        def_data = self.ffi.new("i64[]", self.prog.maxd)
        adef = t.default_action
        for j, v in enumerate(t.default_data if adef is not None else ()):
            def_data[j] = v
        self._keep[tid] = (def_data,)
        self.synced[tid] = []
        self.lib.nat_set_table(self.C, tid, 0, z64, z32, z64, z32, z32, z32, z64, z64, z64,
                               adef.id if adef is not None else -1, def_data, z32, 0, z64,
                               len(t.keys))

    @staticmethod
    def _resolve(t: MatchTable, e: Any) -> Any:
        """(action id, data) of a direct or member entry, or a group's live (id, data) rows
        (as ActionProfile.resolve builds them)."""
        prof = t.profile
        if prof is None:
            return t.actions[e.name].id, e.data
        ref = e.action
        if type(ref) is MemberRef:
            mem = prof.members.get(ref.member_id)
            return (mem[0].id, mem[1]) if mem else []
        assert isinstance(ref, GroupRef)
        live = []
        for gm in prof.groups.get(ref.group_id, ()):
            if gm.watch_port is not None and not prof.port_up(gm.watch_port):
                continue
            mem = prof.members.get(gm.member_id)
            if mem is not None:
                live.extend([(mem[0].id, mem[1])] * max(1, gm.weight))
        return live
