"""Build a runnable program from a loaded BMv2 JSON: actions, tables, profiles, control flow.

A control pipeline is a graph of nodes (tables and conditionals); each node is a closure
``node(P, F) -> next node`` and ``run`` walks it until the end or until ``exit`` was executed.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

from p4sim.switch import api
from p4sim.switch.api import ActionCall, Exact, Lpm, Optional_, Range, TableEntry, Ternary
from p4sim.switch.calculations import compile_calculations, compile_checksums, compile_hash
from p4sim.switch.codegen import Gen, hexstr
from p4sim.switch.deparser import compile_deparser
from p4sim.switch.externs import CounterArray, MeterArray, RegisterArray
from p4sim.switch.parser import ParserCompiler
from p4sim.switch.primitives import ActionCompiler, const_action_data
from p4sim.switch.profiles import ActionProfile
from p4sim.switch.program import Program, ProgramError
from p4sim.switch.tables import JSON_PRIORITY_BASE, ActionDef, MatchTable


@contextlib.contextmanager
def _section(where: str) -> Iterator[None]:
    """Name the JSON object being built in errors that are not already ProgramErrors."""
    try:
        yield
    except ProgramError:
        raise
    except Exception as e:
        raise ProgramError(f"{where}: malformed ({type(e).__name__}: {e})") from None


def _run_pipeline(init: Any) -> Any:
    def run(P: Any, F: list[int]) -> None:
        node = init
        while node is not None:
            node = node(P, F)
            if P.exit:
                return
    return run


class CompiledProgram:
    """A switch's program: its control state (tables, action profiles, registers, counters,
    meters, value sets) and, once ``build_code`` has run, the Python path's code (parser,
    actions, control flow, deparser, checksums) that runs packets against that state.

    ``code=False`` leaves the code for later: a switch whose packets run on the native path
    needs the state only, and building 80 switches' code was most of a k=8 fabric's set-up.
    ``build_code`` runs before anything executes on the Python path (``V1Model`` calls it),
    so the code is never missing, only late. A program's errors are found by building its
    code, so a data plane defers it only for a program another switch has built in full."""

    def __init__(self, program: Program, port_up: Any, log: Any, clock: Any,
                 trace: Any = None, rng: random.Random | None = None, code: bool = True) -> None:
        self.p = program
        self.port_up = port_up
        self.log = log
        self.clock = clock  # the data plane's clock, integer nanoseconds
        self.trace = trace  # p4sim.switch.trace.Tracer: build traced nodes (None: plain)
        ns: dict[str, Any] = {}
        self.ns = ns
        self.registers = {n: RegisterArray(n, int(r.get("size", 0)), int(r.get("bitwidth", 32)))
                          for n, r in program.register_arrays.items()}
        self.counters = {n: CounterArray(n, int(c.get("size", 0)))
                         for n, c in program.counter_arrays.items() if not c.get("is_direct")}
        self.meters = {n: MeterArray(n, int(m.get("size", 0)), m.get("type") == "bytes", clock)
                       for n, m in program.meter_arrays.items() if not m.get("is_direct")}
        ns["REGISTERS"] = self.registers
        ns["COUNTERS"] = self.counters
        ns["METERS"] = self.meters
        self.gen = Gen(program, ns, rng)
        self.vsets: dict[str, set[int]] = {n: set() for n in program.parse_vsets}
        # an action's function is filled in by build_code (the ActionDef objects stay: tables
        # and profiles hold them)
        self.actions: dict[int, ActionDef] = {}
        for aid, act in program.actions.items():
            with _section(f"action '{act.get('name')}'"):
                widths = tuple(int(p.get("bitwidth", 0)) for p in act.get("runtime_data") or [])
                self.actions[aid] = ActionDef(aid, act["name"], None, widths)
        if not program.parsers:
            raise ProgramError("parsers: the program has no parser")
        if not program.deparsers:
            raise ProgramError("deparsers: the program has no deparser")
        self.tables: dict[str, MatchTable] = {}
        self.profiles: dict[str, ActionProfile] = {}
        self.pipelines: dict[str, Any] = {}
        self._key_src: dict[str, list[str]] = {}  # table -> its key's source expressions
        # tables bound to a direct counter (looked up once, not once per table: 0.2 s of a k=8
        # fabric's set-up went to scanning every counter for each table)
        self._direct_counted = {c.get("binding") for c in program.counter_arrays.values()
                                if c.get("is_direct")}
        self.pipeline_init = {name: pipe.get("init_table")
                              for name, pipe in program.pipelines.items()}
        for pipe in program.pipelines.values():
            self._build_state(pipe)
        self.field_lists = {fid: self._slots(elems, f"field_lists id {fid}")
                            for fid, elems in program.field_lists.items()}
        self.learn_lists = {lid: (ll.get("name", str(lid)),
                                  self._slots(ll.get("elements") or [], f"learn_lists id {lid}"))
                            for lid, ll in program.learn_lists.items()}
        self.code_built = False
        if code:
            self.build_code()

    def build_code(self) -> None:
        """Generate the Python path's functions (once) and point every table entry already
        written at its action's function and next node."""
        if self.code_built:
            return
        program, trace = self.p, self.trace
        with _section("calculations"):
            self.calcs = compile_calculations(self.gen)
        self.ns["CALCS"] = self.calcs
        self.action_compiler = ActionCompiler(self.gen, self.log)
        for aid, adef in self.actions.items():
            act = program.actions[aid]
            with _section(f"action '{act.get('name')}'"):
                fn = self.action_compiler.compile_action(act)
                adef.fn = trace.wrap_action(act["name"], fn) if trace is not None else fn
        pc = ParserCompiler(self.gen, self.action_compiler, self.vsets)
        with _section(f"parser '{program.parsers[0].get('name')}'"):
            self.parser_start = pc.compile(program.parsers[0])
        if trace is not None:
            self.parser_start = trace.wrap_parser_states(self.ns, self.parser_start,
                                                         pc.state_names)
        with _section("deparser"):
            self.deparse = compile_deparser(self.gen, program.deparsers[0])
        self.verify_checksums, self.update_checksums = compile_checksums(
            self.gen, self.calcs, program.std_slot("checksum_error"))
        for name, pipe in program.pipelines.items():
            self.pipelines[name] = self._build_pipeline(pipe)
        for table in self.tables.values():
            for entry in table.entries.values():  # written before the code existed, or const
                adef = table.actions.get(entry.name) if entry.name else None
                if adef is not None:
                    entry.fn = adef.fn
                    entry.next = table.next_by_action.get(entry.name, table.base_default_next)
        self.code_built = True

    def refers_to(self, profile: str, ref: Any) -> bool:
        """Whether an entry of a table of action profile ``profile`` holds ``ref`` (a member
        or group reference): such a member or group may not be deleted."""
        return any(t.profile is not None and t.profile.name == profile and e.action == ref
                   for t in self.tables.values() for e in t.entries.values())

    def idle_entries(self, now: int) -> dict[str, list[TableEntry]]:
        """{table: entries} of tables with idle timeouts whose entries are due a notice."""
        expired = {name: [t.to_api(e) for e in t.idle_entries(now)]
                   for name, t in self.tables.items() if t.supports_timeout}
        return {name: entries for name, entries in expired.items() if entries}

    def vset(self, name: str) -> set[int]:
        """The members of parser value set ``name`` (the set the parser reads)."""
        if name not in self.vsets:
            raise api.ApiError(api.Code.NOT_FOUND, f"unknown parser value set '{name}'")
        return self.vsets[name]

    def set_vset(self, name: str, values: list[int]) -> None:
        """Replace the members of ``name``: values of its compressed width, or nothing."""
        members = self.vset(name)
        width = int(self.p.parse_vsets[name].get("compressed_bitwidth") or 0)
        for v in values:
            if not isinstance(v, int) or v < 0 or (width and v >> width):
                raise api.ApiError(api.Code.INVALID_ARGUMENT, f"parser value set '{name}': "
                                   f"value {v!r} does not fit in {width} bits")
        members.clear()
        members.update(values)

    def _slots(self, elements: list, where: str) -> list[int]:
        slots = []
        for el in elements:
            if el.get("type") == "field":
                slots.append(self.p.field(el.get("value"), where).slot)
            elif el.get("type") == "header":
                inst = self.p.header(el.get("value"), where)
                slots += [f.slot for f in inst.fields] + [inst.valid_slot]
        return slots

    # -- pipelines ---------------------------------------------------------------------------

    def _build_state(self, pipe: dict) -> None:
        """A pipeline's action profiles and tables, without their code."""
        pname = pipe.get("name")
        for prof in pipe.get("action_profiles") or []:
            with _section(f"action profile '{prof.get('name')}'"):
                self._build_profile(prof)
        for t in pipe.get("tables") or []:
            with _section(f"pipeline '{pname}' table '{t.get('name')}'"):
                table = self._build_table(t, f"pipeline '{pname}' table '{t.get('name')}'")
            self.tables[table.name] = table

    def _build_pipeline(self, pipe: dict) -> Any:
        """A pipeline's code: selector hashes, table keys and nodes, conditionals and action
        calls, linked into the graph ``run`` walks."""
        pname = pipe.get("name")
        nodes: dict[str, Any] = {}
        fixups: list[tuple[Any, str, Any]] = []  # (object, attribute, node name)
        for prof in pipe.get("action_profiles") or []:
            sel = prof.get("selector")
            if sel:
                with _section(f"action profile '{prof.get('name')}'"):
                    self.profiles[prof.get("name")].selector_hash = compile_hash(
                        self.gen, sel.get("algo", ""), sel.get("input") or [],
                        f"action profile '{prof.get('name')}'")
        for t in pipe.get("tables") or []:
            table = self.tables[t.get("name")]
            key_src = self._key_src[table.name]
            table.key_fn = self.gen.make_function(
                "_key", [f"return ({', '.join(key_src)}{',' if key_src else ''})"],
                f"pipeline '{pname}' table '{table.name}'")
            nodes[table.name] = _table_node(table, self.trace)
            nt = t.get("next_tables") or {}
            if "__HIT__" in nt or "__MISS__" in nt:
                table.hit_miss = True
                fixups.append((table, "next_hit", nt.get("__HIT__")))
                fixups.append((table, "next_miss", nt.get("__MISS__")))
            for aname, nxt in nt.items():
                if aname not in ("__HIT__", "__MISS__"):
                    fixups.append((table.next_by_action, aname, nxt))
            fixups.append((table, "base_default_next", t.get("base_default_next")))
        for c in pipe.get("conditionals") or []:
            where = f"pipeline '{pname}' conditional '{c.get('name')}'"
            holder = _Branch()
            # One generated function evaluates the condition and returns the next node.
            br = self.gen.const(holder, "br")
            expression = c.get("expression")
            src = self.gen.shared_source(
                ("condition", id(c)),
                lambda e=expression, w=where: self.gen.expr(e, w))
            nodes[c["name"]] = self.gen.make_function(
                "_cond", [f"return {br}.true_next if {src} else {br}.false_next"], where,
                params="P, F, D=()")
            if self.trace is not None:
                nodes[c["name"]] = self.trace.wrap_node("condition", c["name"], nodes[c["name"]],
                                                        holder)
            fixups.append((holder, "true_next", c.get("true_next")))
            fixups.append((holder, "false_next", c.get("false_next")))
        for ac in pipe.get("action_calls") or []:
            adef = self.actions.get(ac.get("action_id"))
            if adef is None:
                raise ProgramError(f"pipeline '{pname}' action_call '{ac.get('name')}': "
                                   "unknown action id")
            holder = _Branch()
            nodes[ac["name"]] = _action_node(adef, holder)
            fixups.append((holder, "true_next", ac.get("next_node")))
        for obj, attr, name in fixups:
            if name is not None and name not in nodes:
                raise ProgramError(f"pipeline '{pname}': unknown next node {name!r}")
            target = nodes.get(name) if name is not None else None
            if isinstance(obj, dict):
                obj[attr] = target
            else:
                setattr(obj, attr, target)
        init = pipe.get("init_table")
        if init is not None and init not in nodes:
            raise ProgramError(f"pipeline '{pname}': unknown init_table {init!r}")
        return _run_pipeline(nodes.get(init) if init else None)

    def _build_profile(self, prof: dict) -> None:
        name = prof.get("name")
        actions = {a.name: a for a in self.actions.values()}
        # the selector's hash is code: build_code compiles it
        profile = ActionProfile(name, int(prof.get("max_size", 0)), actions, None, self.port_up)
        profile.has_selector = bool(prof.get("selector"))
        self.profiles[name] = profile

    def _build_table(self, t: dict, where: str) -> MatchTable:
        name = t.get("name")
        keys: list[tuple[str, int, str]] = []
        key_src: list[str] = []
        for i, k in enumerate(t.get("key") or []):
            kind = k.get("match_type")
            target = k.get("target")
            kw = f"{where} key[{i}]"
            if kind == "valid":
                inst = self.p.header(target, kw)
                src, width = f"F[{inst.valid_slot}]", 1
                kname = k.get("name") or f"{target}.$valid$"
            elif kind in ("exact", "lpm", "ternary", "range", "optional"):
                info = self.p.field(target, kw)
                src, width = f"(F[{info.slot}] & {info.mask})", info.width
                kname = k.get("name") or ".".join(target)
            else:
                raise ProgramError(f"{kw}: unsupported match type {kind!r}")
            if k.get("mask"):
                src = f"({src} & {hexstr(k['mask'], kw)})"
            keys.append((kind, width, kname))
            key_src.append(src)
        ids = t.get("action_ids")
        if ids is not None:
            adefs = [self.actions[a] for a in ids if a in self.actions]
        else:
            by_name = {a.name: a for a in self.actions.values()}
            adefs = [by_name[n] for n in t.get("actions") or [] if n in by_name]
        actions = {a.name: a for a in adefs}
        profile = None
        if t.get("type") in ("indirect", "indirect_ws"):
            profile = self.profiles.get(t.get("action_profile"))
            if profile is None:
                raise ProgramError(f"{where}: unknown action_profile {t.get('action_profile')!r}")
            profile.actions = actions
        # the key's function is code: build_code generates it from this source
        table = MatchTable(name, keys, actions, int(t.get("max_size") or 0), None, self.clock,
                           profile)
        self._key_src[name] = key_src
        table.supports_timeout = bool(t.get("support_timeout"))
        table.with_counters = bool(t.get("with_counters")) or name in self._direct_counted
        dm = t.get("direct_meters")
        if dm:
            marr = self.p.meter_arrays.get(dm)
            if marr is None:
                raise ProgramError(f"{where}: unknown direct meter {dm!r}")
            table.meter_result_slot = self.p.field(marr.get("result_target"), where).slot
            table.meter_by_bytes = marr.get("type") == "bytes"
        de = t.get("default_entry")
        if de:
            adef = self.actions.get(de.get("action_id"))
            if adef is None:
                raise ProgramError(f"{where}: default_entry has unknown action id")
            data = const_action_data(self.p.actions[adef.id], de.get("action_data") or [], where)
            table.json_default = (adef, data)
            table.default_action, table.default_data = adef, data
            table.default_const = bool(de.get("action_const"))
        for j, e in enumerate(t.get("entries") or []):
            self._const_entry(table, e, f"{where} entries[{j}]")
        if t.get("entries"):
            table.const_entries = True
        return table

    def _const_entry(self, table: MatchTable, e: dict, where: str) -> None:
        key = []
        for mk in e.get("match_key") or []:
            kind = mk.get("match_type")
            if kind == "valid":
                key.append(Exact(1 if mk.get("key") else 0))
            elif kind == "exact":
                key.append(Exact(hexstr(mk.get("key"), where)))
            elif kind == "lpm":
                key.append(Lpm(hexstr(mk.get("key"), where), int(mk.get("prefix_length", 0))))
            elif kind == "ternary":
                key.append(Ternary(hexstr(mk.get("key"), where), hexstr(mk.get("mask"), where)))
            elif kind == "range":
                key.append(Range(hexstr(mk.get("start"), where), hexstr(mk.get("end"), where)))
            elif kind == "optional":
                key.append(Optional_(hexstr(mk.get("key"), where)))
            else:
                raise ProgramError(f"{where}: unsupported match type {kind!r}")
        ae = e.get("action_entry") or {}
        adef = self.actions.get(ae.get("action_id"))
        if adef is None:
            raise ProgramError(f"{where}: unknown action id {ae.get('action_id')!r}")
        data = const_action_data(self.p.actions[adef.id], ae.get("action_data") or [], where)
        prio = JSON_PRIORITY_BASE - int(e.get("priority", 0) or 0)
        try:
            table.insert(TableEntry(tuple(key), ActionCall(adef.name, data), prio), const_ok=True)
        except Exception as exc:
            raise ProgramError(f"{where}: {exc}") from None


class _Branch:
    true_next: Any = None
    false_next: Any = None


def _action_node(adef: ActionDef, br: _Branch) -> Any:
    def node(P: Any, F: list[int]) -> Any:
        adef.fn(P, F, ())
        return br.true_next
    return node


def _table_node(t: MatchTable, trace: Any = None) -> Any:
    if trace is not None:
        t_lookup = trace.wrap_lookup(t, t.lookup_fn())
        return trace.wrap_node("table", t.name, _table_node_for(t, t_lookup))
    return _table_node_for(t, t.lookup_fn())


def _table_node_for(t: MatchTable, lookup: Any) -> Any:
    key_fn, profile = t.key_fn, t.profile
    clock = t.clock

    def miss(P: Any, F: list[int]) -> Any:
        adef = t.default_action
        if adef is not None:
            adef.fn(P, F, t.default_data)
        if t.hit_miss:
            return t.next_miss
        if adef is None:
            return t.base_default_next
        return t.next_by_action.get(adef.name, t.base_default_next)

    if not t.keys and profile is None:
        # A keyless table (p4c's wrapper for an action called from a control) always misses:
        # skip the key and lookup and run the default action.
        return miss

    if profile is None and not t.with_counters and t.meter_result_slot is None \
            and not t.supports_timeout:
        def plain_node(P: Any, F: list[int]) -> Any:
            e = lookup(key_fn(P, F, ()))
            if e is None:
                return miss(P, F)
            e.fn(P, F, e.data)
            return t.next_hit if t.hit_miss else e.next
        return plain_node

    def node(P: Any, F: list[int]) -> Any:
        e = lookup(key_fn(P, F, ()))
        if e is None:
            return miss(P, F)
        if t.with_counters:
            e.packets += 1
            e.bytes += P.length
        if t.supports_timeout:
            e.last_hit = clock()
            e.idle_notified = False
        if e.meter is not None:
            units = P.length if t.meter_by_bytes else 1
            F[t.meter_result_slot] = e.meter.execute(units)  # type: ignore[index]
        if profile is not None:
            chosen = profile.resolve(e.action, P, F)
            if chosen is None:
                return miss(P, F)
            adef, data = chosen
            adef.fn(P, F, data)
            if t.hit_miss:
                return t.next_hit
            return t.next_by_action.get(adef.name, t.base_default_next)
        e.fn(P, F, e.data)
        return t.next_hit if t.hit_miss else e.next

    return node
