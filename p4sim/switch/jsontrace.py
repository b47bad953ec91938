"""Structured packet trace: one JSON record per sampled packet per switch.

A ``JsonTracer`` is passed to ``DataPlane(trace=...)`` like ``p4sim.switch.trace.Tracer`` (it
has the same building hooks), but instead of text lines it fills one dict per packet and
writes it as one JSON line when the packet's last copy has left the switch or was dropped:

    {"switch", "pkt", "t_in" (ns on the data plane's clock), "in_port", "len", "instance",
     "id": {"src", "dst", "proto", "ip_id", "sport", "dport"},
     "hdr": {"ttl", "dscp", "ecn", "ip_len"} as received,
     "ingress": [events], "copies": [{"port", "prio", "t_enq", "depth", "t_deq", "wait_ns",
       "left", "egress": [events], "t_out", "out_len", "changes": {...}}],
     "drop": {"stage", "reason", ...} (only when a copy was dropped)}

Events, in the order they happened: {"ev": "parser", "headers", "error"} (the headers the
parser made valid, as the first table found them; ``error``: its parser_error, if any),
{"ev": "table", "table",
"hit", "key", "entry", "priority", "action"}, {"ev": "action", "name", "args"}
(named actions: not p4c's act_N glue nor NoAction), {"ev": "choice", "table", "group", "members",
"chosen"} (an action-selector group: every member with its action, arguments and liveness,
and which one the selector hash took), {"ev": "error", "msg"}.

Sampling, so a fabric run can afford it: p4sim.switch.tracesample (1 packet in N by a hash
of the fields no hop rewrites, so every switch keeps the same packets; or a filter). Two packet
paths are built once per pipeline load over the same tables, registers and queues: the plain
fused stages with the program's own table nodes, for every packet not sampled (it pays the
sampling decision and a call through two stage hooks), and the stage-by-stage functions whose
pipelines walk a traced twin of each table node, for the sampled ones. Nothing is swapped per
packet, so CPython's specialisation of the fast path is never undone by a sampled packet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from p4sim.switch import stages
from p4sim.switch.api import ActionCall, GroupRef
from p4sim.switch.pipeline import _table_node_for
from p4sim.switch.trace import fmt
from p4sim.switch.tracesample import TraceSampler, ip_header, packet_identity


class JsonTracer:
    """Tracer-compatible sink of structured per-packet records (see the module docstring)."""

    def __init__(self, out: TextIO, switch: str = "", sampler: TraceSampler | None = None,
                 flush: bool = False) -> None:
        self.out = out
        self.switch = switch
        self.sampler = sampler or TraceSampler()
        self.flush = flush
        self.clock: Callable[[], int] = lambda: 0
        self.t0 = 0
        self.level = 1  # as Tracer's "debug": pipeline code may ask
        self.records = 0
        self._ids = 0
        self._rec: dict[str, Any] | None = None  # the sampled packet in ingress
        self._events: list[dict[str, Any]] | None = None  # where its next event goes
        self._pf: tuple[Any, list[int]] | None = None  # the sampled packet's (P, F)
        # plain table node -> its traced twin, for the program being built (stage_wrapper
        # takes them: one map per pipeline load)
        self._twins: dict[Any, Any] = {}
        self._pending_lookup: tuple[Any, Any] | None = None
        self._headers: list[tuple[str, int]] = []
        self._perr_slot: int | None = None
        # table entry -> (its action, key shown, priority, action shown): entries repeat
        self._entries: dict[Any, tuple[Any, list[str], int, str]] = {}
        self._drop_slot: int | None = None
        self._drop_names: dict[int, str] = {}

    def now(self) -> int:
        # The clock itself, not since t0: every p4sim switch process on a machine reads the
        # same monotonic clock, so records of several switches join on one time line (the
        # simulator's clock is virtual ns from 0).
        return self.clock()

    def enabled(self, level: str) -> bool:
        return level != "trace"

    # -- text-log compatibility: messages land in the current record --------------------------
    def _note(self, msg: str) -> None:
        if self._events is not None:
            self._events.append({"ev": "error", "msg": msg})

    event = detail = info = warning = _note

    def set_drop_reasons(self, names: dict[int, str]) -> None:
        """Names for the program's ``drop_reason`` metadata values (read when a copy drops)."""
        self._drop_names = dict(names)

    # -- program building (called by CompiledProgram) -------------------------------------------
    # An unsampled packet pays nothing here: the program's nodes keep the plain lookups, and
    # the traced ones live in twins that only sampled packets walk (see _traced_run). Actions
    # are not wrapped (a table event names the action and arguments it ran).
    def wrap_action(self, name: str, fn: Any) -> Any:
        return fn

    def wrap_parser_states(self, ns: dict[str, Any], start: Any,
                           state_names: dict[str, str] | None = None) -> Any:
        """Unwrapped: a wrapper per state would cost every packet a call per state, and
        swapping wrappers in per sampled packet changes the generated code's globals (CPython
        then re-specializes every function reading them). A record names instead the headers
        the parser made valid, read when its first table applies (``_capturing``)."""
        return start

    def wrap_lookup(self, table: Any, lookup: Any) -> Any:
        names = [kname for _, _, kname in table.keys]

        def traced_lookup(key: tuple) -> Any:
            entry = lookup(key)
            events = self._events
            if events is None:
                return entry
            try:  # a fault in the trace must never change what the switch does
                self._table_event(events, table, names, key, entry)
            except Exception as e:
                events.append({"ev": "error", "msg": f"trace: {type(e).__name__}: {e}"})
            return entry
        self._pending_lookup = (table, traced_lookup)
        return lookup  # the program's node stays plain; wrap_node makes the traced twin

    def _table_event(self, events: list[dict[str, Any]], table: Any, names: list[str],
                     key: tuple, entry: Any) -> None:
        ev: dict[str, Any] = {"ev": "table", "table": table.name, "hit": entry is not None,
                              "key": {n: v for n, v in zip(names, key)}}
        events.append(ev)
        if entry is None:
            adef = table.default_action
            if adef is not None and not _anonymous_action(adef.name):
                events.append({"ev": "action", "name": adef.name,
                               "args": list(table.default_data), "default": True})
            return
        shown = self._entries.get(entry)
        if shown is None or shown[0] is not entry.action:  # first seen, or modified since
            api = table.to_api(entry)
            shown = self._entries[entry] = (entry.action, [fmt(k) for k in api.key],
                                            api.priority, fmt(api.action))
        action, ev["entry"], ev["priority"], ev["action"] = shown
        if isinstance(action, ActionCall):
            events.append({"ev": "action", "name": action.action, "args": list(action.args)})
        elif table.profile is not None:
            choice = _profile_choice(table, action, self._pf)
            if choice is not None:
                events.append(choice)
            chosen = choice and choice["chosen"] is not None and choice["members"][choice["chosen"]]
            if chosen:
                events.append({"ev": "action", "name": chosen["action"], "args": chosen["args"]})

    def wrap_node(self, kind: str, name: str, node: Any, holder: Any = None) -> Any:
        """A table's node is returned as it is, with the plain lookup, and a traced twin of it
        is kept (the same table, the traced lookup, the packet's fields captured for the
        record) for the sampled packets' pipelines (``_traced_run``). A condition (p4c's
        node_N: dozens per packet) is never wrapped: both paths share it."""
        pending, self._pending_lookup = self._pending_lookup, None
        if kind != "table" or pending is None:
            return node
        table, traced = pending
        self._twins[node] = self._capturing(_table_node_for(table, traced))
        return node

    def _capturing(self, twin: Any) -> Any:
        def captured(P: Any, F: list[int]) -> Any:
            rec = self._rec
            if rec is not None and self._events is rec["ingress"]:
                self._pf = (P, F)
                if "_F" not in rec:
                    rec["_F"] = F  # read back for the drop reason, if the packet drops
                    rec["ingress"].insert(0, self._parsed(F))
            return twin(P, F)
        return captured

    def _parsed(self, F: list[int]) -> dict[str, Any]:
        ev: dict[str, Any] = {"ev": "parser", "headers": [n for n, slot in self._headers
                                                          if F[slot]]}
        if self._perr_slot is not None and F[self._perr_slot]:
            ev["error"] = F[self._perr_slot]
        return ev

    def _traced_run(self, run: Any, twins: dict[Any, Any]) -> Any:
        """The sampled packets' version of a pipeline ``run`` (pipeline._run_pipeline): the
        same walk from the same first node, each table node replaced by its traced twin (the
        next nodes the tables hold are the plain ones: each is mapped as it is reached)."""
        init = _closure_value(run, "init")
        if init is _MISSING:  # not a walk this tracer knows: tables go unrecorded
            return run
        twin_of = twins.get

        def traced_run(P: Any, F: list[int]) -> None:
            node = init
            while node is not None:
                node = twin_of(node, node)(P, F)
                if P.exit:
                    return
        return traced_run

    # -- the packet path (called by V1Model) ------------------------------------------------------
    def stage_wrapper(self, flow: Any) -> Callable[[str, Any], Any]:
        program = flow.cp.p
        self._drop_slot = _drop_reason_slot(program)
        self._headers = [(name, h.valid_slot) for name, h in program.headers.items()
                         if not h.metadata]
        self._perr_slot = flow.s_perr
        builders = {"receive": self._receive, "to_egress": self._to_egress,
                    "egress": self._egress, "enqueue": self._enqueue, "output": self._output}
        twins, self._twins = self._twins, {}
        pipelines = {"ingress": self._traced_run(flow.ingress, twins),
                     "egress_pipe": None if flow.egress_pipe is None
                     else self._traced_run(flow.egress_pipe, twins)}

        def wrap(name: str, fn: Any) -> Any:
            if name in builders and name not in ("enqueue", "output"):
                # These stage functions are the sampled packets' path: their namespace (one
                # per build, not the fast path's) walks the traced pipelines. Set once here.
                fn.__globals__.update(pipelines)
            build = builders.get(name)
            return build(fn, flow) if build is not None else fn
        return wrap

    def _plain_stages(self, flow: Any) -> dict[str, Any]:
        """The untraced stages of ``flow`` (a V1Model), receive fused, for the packets not
        sampled: the same stage code over the same tables and queues, without any hook.
        Empty if this build of the stages cannot make them (then every packet takes the
        traced stages, which is correct, only slower)."""
        if getattr(self, "_plain_flow", None) is not flow:
            try:
                self._plain = stages.build(flow._bindings(), fuse=True)
            except Exception:
                self._plain = {}
            self._plain_flow = flow
        return self._plain

    def _receive(self, fn: Any, flow: Any) -> Any:
        counters, wants = flow.counters, self.sampler.fast()
        plain = self._plain_stages(flow).get("receive", fn)

        def receive(port: int, frame: bytes, *rest: Any) -> None:
            if not wants(frame):
                # a plain call for a plain arrival (a resubmit or recirculation has more)
                return plain(port, frame, *rest) if rest else plain(port, frame)
            outer = self._rec, self._events, self._pf
            self._ids += 1
            rec = {"switch": self.switch, "pkt": self._ids, "t_in": self.now(),
                   "in_port": port, "len": len(frame), "instance": rest[0] if rest else 0,
                   "id": packet_identity(frame), "hdr": ip_header(frame),
                   "ingress": [],
                   "copies": [], "_open": 1}
            self._rec, self._events, self._pf = rec, rec["ingress"], None
            drops = counters.pipeline_drops
            try:
                fn(port, frame, *rest)
            finally:
                if counters.pipeline_drops > drops and not rec["copies"]:
                    self._drop(rec, "ingress", flow, None)
                self._rec, self._events, self._pf = outer
                self._close(rec)
        return receive

    def _to_egress(self, fn: Any, flow: Any) -> Any:
        def to_egress(P: Any, port: int) -> None:
            rec = self._rec
            if rec is None:
                P.trace_id = None
                return fn(P, port)
            copy = {"port": port, "prio": 0, "t_enq": self.now(), "egress": [],
                    "_rec": rec}
            rec["copies"].append(copy)
            rec["_open"] += 1
            P.trace_id = copy  # the packet carries its record through the queue
            fn(P, port)
            if "depth" not in copy:  # neither queued nor sent on: its priority has no queue
                self._drop(rec, "queue", flow, copy, f"priority {copy['prio']} has no queue")
                self._finish(copy)
        return to_egress

    def _enqueue(self, fn: Any, flow: Any) -> Any:
        def enqueue(port: int, prio: int, P: Any, now: int) -> int:
            depth = fn(port, prio, P, now)
            copy = getattr(P, "trace_id", None)
            if type(copy) is dict:
                copy["prio"], copy["depth"] = prio, depth
                if depth < 0:
                    copy["depth"] = None
                    self._drop(copy["_rec"], "queue", flow, copy,
                               f"tail drop: queue ({port}, {prio}) full")
                    self._finish(copy)
            return depth
        return enqueue

    def _egress(self, fn: Any, flow: Any) -> Any:
        counters = flow.counters
        plain = self._plain_stages(flow).get("egress", fn)

        def egress(P: Any, port: int, prio: int, left: int, now: int) -> None:
            copy = getattr(P, "trace_id", None)
            if type(copy) is not dict:  # not sampled: the stage without any hook
                return plain(P, port, prio, left, now)
            outer = self._rec, self._events
            self._rec, self._events = copy["_rec"], copy["egress"]
            outer_pf, self._pf = self._pf, (P, P.F)
            copy["_F"] = P.F
            t = now
            copy.update(prio=prio, t_deq=t, wait_ns=t - copy["t_enq"], left=left)
            copy.setdefault("depth", 0)  # went on at once: nothing queued before it
            drops = counters.pipeline_drops
            try:
                fn(P, port, prio, left, now)
            finally:
                if counters.pipeline_drops > drops and "t_out" not in copy:
                    self._drop(copy["_rec"], "egress", flow, copy)
                self._rec, self._events = outer
                self._pf = outer_pf
                self._finish(copy)
        return egress

    def _output(self, fn: Any, flow: Any) -> Any:
        def output(port: int, frame: bytes) -> None:
            rec = self._rec
            if rec is not None and rec["copies"]:
                copy = next((c for c in reversed(rec["copies"])
                             if c["port"] == port and "t_out" not in c), None)
                if copy is not None:
                    copy["t_out"] = self.now()
                    copy["out_len"] = len(frame)
                    copy["changes"] = _changes(rec["hdr"], ip_header(frame), rec["len"],
                                               len(frame))
            fn(port, frame)
        return output

    # -- records --------------------------------------------------------------------------------
    def _drop(self, rec: dict[str, Any], stage: str, flow: Any, copy: dict[str, Any] | None,
              reason: str = "") -> None:
        drop: dict[str, Any] = {"stage": stage, "t": self.now()}
        if copy is not None:
            drop["port"] = copy["port"]
            copy["dropped"] = True
        if not reason:
            reason = f"dropped in {stage} (egress_spec = drop port)"
            if flow.counters.last_abort and stage == "ingress":
                reason = f"dropped in {stage}"
        drop["reason"] = reason
        phv = (copy or rec).get("_F")
        if self._drop_slot is not None and phv is not None and phv[self._drop_slot]:
            code = phv[self._drop_slot]
            drop["code"] = code
            drop["code_name"] = self._drop_names.get(code, str(code))
        rec["drop"] = drop

    def _finish(self, copy: dict[str, Any]) -> None:
        if "_done" in copy:
            return
        copy["_done"] = True  # finished once: never counted twice
        self._close(copy["_rec"])

    def _close(self, rec: dict[str, Any]) -> None:
        rec["_open"] -= 1
        if rec["_open"] > 0:
            return
        del rec["_open"]
        rec.pop("_F", None)
        for c in rec["copies"]:
            for k in ("_rec", "_done", "_F"):
                c.pop(k, None)
        self.records += 1
        self.out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        if self.flush:
            self.out.flush()

    def close(self) -> None:
        self.out.flush()


_MISSING = object()


def _closure_value(fn: Any, name: str) -> Any:
    """What free variable ``name`` of closure ``fn`` holds (_MISSING if it has none)."""
    code = getattr(fn, "__code__", None)
    if code is None or name not in code.co_freevars or fn.__closure__ is None:
        return _MISSING
    try:
        return fn.__closure__[code.co_freevars.index(name)].cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _anonymous_action(name: str) -> bool:
    """p4c's actions for statements outside any action (act, act_0, act_12) and NoAction."""
    return name == "NoAction" or name == "act" or (name.startswith("act_")
                                                   and name[4:].isdigit())


def _profile_choice(table: Any, ref: Any, pf: tuple[Any, list[int]] | None
                    ) -> dict[str, Any] | None:
    """An action-selector group's members (action, arguments, liveness) and the one the
    selector takes for this packet (the profile's own resolve, on the packet's fields)."""
    if type(ref) is not GroupRef:
        return None
    profile = table.profile
    members = []
    for gm in profile.groups.get(ref.group_id, ()):
        m = profile.members.get(gm.member_id)
        live = gm.watch_port is None or bool(profile.port_up(gm.watch_port))
        members.append({"member": gm.member_id, "action": m[0].name if m else None,
                        "args": list(m[1]) if m else [], "live": live,
                        "watch_port": gm.watch_port})
    chosen = None
    picked = profile.resolve(ref, *pf) if pf is not None else None
    if picked is not None:
        adef, data = picked
        chosen = next((i for i, m in enumerate(members) if m["live"]
                       and m["action"] == adef.name and m["args"] == list(data)), None)
    return {"ev": "choice", "table": table.name, "group": ref.group_id, "members": members,
            "chosen": chosen}


def _changes(before: dict[str, int] | None, after: dict[str, int] | None, len_in: int,
             len_out: int) -> dict[str, Any]:
    """What this hop changed in the IPv4 header, and the bytes it added (INT) or removed."""
    out: dict[str, Any] = {}
    if before and after:
        for k in ("ttl", "dscp", "ecn"):
            if before[k] != after[k]:
                out[k] = [before[k], after[k]]
    if len_out != len_in:
        out["bytes"] = len_out - len_in
    return out


def _drop_reason_slot(program: Any) -> int | None:
    """The PHV slot of a metadata field named ``drop_reason``, if the program has one."""
    for inst in program.headers.values():
        for f in getattr(inst, "fields", ()):
            if getattr(f, "name", "").endswith("drop_reason"):
                return f.slot
    return None


def tracer_from_options(path: str, sample: int, filter_spec: str | None,
                        switch: str = "") -> JsonTracer:
    """`p4sim switch --trace-file PATH [--trace-sample N] [--trace-filter SPEC]`; raises
    ValueError (a bad sample or filter) or OSError (the file) with a one-line message."""
    sampler = TraceSampler(sample, TraceSampler.parse_filter(filter_spec or ""))
    out = open(path, "w", buffering=1)  # noqa: SIM115 - line-buffered: a record is a line
    return JsonTracer(out, switch, sampler)
