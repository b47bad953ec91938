"""simple_switch's v1model packet flow around a compiled program.

The stage functions themselves (receive -> to_egress -> egress, BMv2 simple_switch's receive,
egress buffers and egress threads as calls) are in ``p4sim.switch.stages``, built per program
with this flow's constants; here are the less common steps they call (clones, multicast,
digests, resubmit, recirculation), the queue service loop and the state they share. Every
packet, whatever its kind, goes through the same stage functions: there is no second copy of
the path.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from p4sim.switch import stages
from p4sim.switch.api import ApiError, CloneSession, Code, Digest, Replica
from p4sim.switch.packet import (
    EGRESS_CLONE,
    INGRESS_CLONE,
    RECIRC,
    REPLICATION,
    RESUBMIT,
    Packet,
)
from p4sim.switch.pipeline import CompiledProgram
from p4sim.switch.primitives import DROP_PORT
from p4sim.switch.tm import TrafficManager

MAX_PASSES = 16  # resubmit/recirculate loop guard per original packet


class Counters:
    def __init__(self) -> None:
        self.parser_errors = 0
        self.pipeline_drops = 0
        self.aborted = 0
        self.last_abort = ""

# the stage functions stages.build makes, and every attribute a lazy flow builds on first use
_STAGE_NAMES = ("receive", "prologue", "to_egress", "egress")
_LAZY_NAMES = (*_STAGE_NAMES, "ingress", "egress_pipe")


class V1Model:
    def __init__(self, cp: CompiledProgram, tm: TrafficManager, output: Any,
                 digest_out: Any, clock: Any, t0: int, log: Any = None,
                 trace: Any = None, fuse: bool = True, lazy: bool = False) -> None:
        self.cp = cp
        self.log = log
        p = cp.p
        self.tm = tm
        self.output = output  # fn(port, frame)
        self.digest_out = digest_out  # fn(Digest)
        self.clock = clock  # integer nanoseconds; timestamps count microseconds from t0
        self.t0 = t0
        self.trace = trace  # p4sim.switch.trace.Tracer, or None (no cost)
        self.mcast: dict[int, list[Replica]] = {}
        self.clones: dict[int, CloneSession] = {}
        self.counters = Counters()
        self.pending: deque[tuple[int, bytes, int, list[tuple[int, int]], int]] = deque()
        self.template = p.initial_phv()
        self.metadata_slots = [f.slot for h in p.headers.values() if h.metadata
                               for f in h.fields]
        self.too_short = p.errors["PacketTooShort"]
        s = p.std_slot
        self.s_in, self.s_es, self.s_ep = s("ingress_port"), s("egress_spec"), s("egress_port")
        self.s_it, self.s_len = s("instance_type"), s("packet_length")
        self.s_enq_ts, self.s_enq_qd = s("enq_timestamp"), s("enq_qdepth")
        self.s_deq_td, self.s_deq_qd = s("deq_timedelta"), s("deq_qdepth")
        self.s_igts, self.s_egts = s("ingress_global_timestamp"), s("egress_global_timestamp")
        self.s_mcast, self.s_rid, self.s_prio = s("mcast_grp"), s("egress_rid"), s("priority")
        self.s_perr, self.s_qid = s("parser_error"), s("qid")
        self._in_egress = False
        # Timestamps are stored truncated to their fields' widths, as BMv2's Field::set does
        # (enq_timestamp and deq_timedelta are 32-bit microsecond counts in v1model).
        self.m_enq_ts = self._width_mask(self.s_enq_ts)
        self.m_deq_td = self._width_mask(self.s_deq_td)
        self._fuse = fuse
        self._stages: dict[str, Any] | None = None
        if not lazy:
            self._build_stages()

    def _build_stages(self) -> dict[str, Any]:
        """The Python path's stage functions, built (with the program's code) on first use
        for a ``lazy`` flow, whose packets normally run elsewhere (the native path): the
        stage names below are then found by ``__getattr__`` when first read."""
        if self._stages is None:
            cp, trace = self.cp, self.trace
            cp.build_code()
            self.ingress = cp.pipelines.get("ingress") or (lambda P, F: None)
            self.egress_pipe = cp.pipelines.get("egress") if cp.pipeline_init.get("egress") \
                else None
            self._stages = stages.build(
                self._bindings(), fuse=self._fuse and trace is None,
                wrap=trace.stage_wrapper(self) if trace is not None else None)
            for name in _STAGE_NAMES:
                if name not in self.__dict__:  # a subclass's own (native) stage stays
                    setattr(self, name, self._stages[name])
        return self._stages

    def __getattr__(self, name: str) -> Any:
        # reached only for attributes never set: a lazy flow's Python-path functions
        if name in _LAZY_NAMES and self.__dict__.get("_stages", False) is None:
            self._build_stages()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def stages_unfused(self) -> dict[str, Any]:
        """The stage functions one by one (no inlining), for tests that hold the fused path
        to them."""
        return stages.build(self._bindings(), fuse=False)

    def _bindings(self) -> dict[str, Any]:
        """The names ``p4sim.switch.stages`` runs with (stages.BOUND), for this program."""
        cp, tm = self.cp, self.tm
        cp.build_code()
        return {
            "flow": self, "counters": self.counters, "template": self.template,
            "clock": self.clock, "t0": self.t0, "parser_start": cp.parser_start,
            "too_short": self.too_short, "verify": cp.verify_checksums,
            "ingress": self.ingress, "egress_pipe": self.egress_pipe,
            "update": cp.update_checksums, "deparse": cp.deparse,
            "special": self._after_ingress_special, "clone_e2e": self._clone_e2e,
            "recirculate": self._recirculate, "abort": self._abort, "output": self.output,
            "priorities": tm.priorities, "queues": tm.queues, "new_queue": tm.queue,
            "may_pass": tm.may_pass, "enqueue": tm.enqueue, "start_link": tm.start_link,
            "settle": tm.settle, "links": tm.links,
            **{name: getattr(self, name) for name in stages.BOUND
               if name.startswith(("s_", "m_"))},
        }

    def _width_mask(self, slot: int) -> int:
        info = self.cp.p.slot_fields[slot]
        return info.mask if info is not None and info.width else -1

    # -- ingress -----------------------------------------------------------------------------

    def _abort(self, e: Exception) -> None:
        self._in_egress = False
        self.counters.aborted += 1
        self.counters.pipeline_drops += 1
        self.counters.last_abort = f"{type(e).__name__}: {e}"
        if self.trace is not None:
            self.trace.warning(f"packet dropped: {self.counters.last_abort}")
        elif self.log is not None:
            self.log(f"packet dropped: {self.counters.last_abort}")

    def _preserve(self, F: list[int], fl_id: int) -> list[tuple[int, int]]:
        return [(slot, F[slot]) for slot in self.cp.field_lists.get(fl_id, ())]

    def _after_ingress_special(self, P: Packet, F: list[int]) -> None:
        """The end of ingress when it asked for more than unicast or drop: I2E clone,
        digests, resubmit, multicast (in simple_switch's order)."""
        if P.clone_session is not None:
            self._clone_i2e(P, F)
        if P.digests:
            self._digests(P, F)
        if P.resubmit_fl is not None:
            if P.passes < MAX_PASSES:
                self.pending.append((P.ingress_port, P.original, RESUBMIT,
                                     self._preserve(F, P.resubmit_fl), P.passes + 1))
            return
        grp = F[self.s_mcast]
        if grp:
            self._multicast(P, F, grp)
            return
        port = F[self.s_es]
        if port == DROP_PORT:
            self.counters.pipeline_drops += 1
            return
        P.clone_session = None  # ingress's clone is done; egress may request its own
        self.to_egress(P, port)

    def set_mcast_group(self, group_id: int, replicas: list[Replica]) -> None:
        if not 0 < group_id < 1 << 16:
            raise ApiError(Code.INVALID_ARGUMENT, f"multicast group id {group_id} out of range")
        self.mcast[group_id] = [Replica(r.egress_port, r.instance) for r in replicas]

    def delete_mcast_group(self, group_id: int) -> None:
        if self.mcast.pop(group_id, None) is None:
            raise ApiError(Code.NOT_FOUND, f"multicast group {group_id} does not exist")

    def _multicast(self, P: Packet, F: list[int], grp: int) -> None:
        replicas = self.mcast.get(grp)
        if not replicas:
            self.counters.pipeline_drops += 1
            return
        for r in replicas:
            C = self._copy(P, F[:], REPLICATION)
            C.truncate = P.truncate
            C.F[self.s_rid] = r.instance
            self.to_egress(C, r.egress_port)

    def _copy(self, P: Packet, G: list[int], instance_type: int) -> Packet:
        """A copy of parsed packet ``P`` with field values ``G`` (a replica, an E2E clone)."""
        C = Packet(G, P.data, P.ingress_port)
        C.payload = P.payload
        C.length = P.length
        C.passes = P.passes
        C.instance_type = G[self.s_it] = instance_type
        return C

    def _clone_session(self, P: Packet,
                       F: list[int]) -> tuple[CloneSession | None, list[tuple[int, int]]]:
        """The clone session the packet asked for (None: no such session) and the values of
        the field list it preserves."""
        session = self.clones.get(P.clone_session)  # type: ignore[arg-type]
        return session, (self._preserve(F, P.clone_fl) if session is not None else [])

    def _clone_i2e(self, P: Packet, F: list[int]) -> None:
        session, preserved = self._clone_session(P, F)
        for r in session.replicas if session is not None else ():
            # Parsed again from the original bytes by the same prologue as every packet
            # entering ingress. Then, as simple_switch does (checked on BMv2 1.15.5), its
            # metadata is reset: egress sees the preserved field list, instance_type and
            # packet_length; ingress_port, ingress_global_timestamp and parser_error read 0.
            C = self.prologue(P.ingress_port, P.original, 0, INGRESS_CLONE, None, P.passes)
            G = C.F
            for slot in self.metadata_slots:
                G[slot] = self.template[slot]
            for slot, value in preserved:
                G[slot] = value
            G[self.s_it] = INGRESS_CLONE
            G[self.s_len] = len(P.original)
            C.truncate = session.packet_length_bytes
            G[self.s_es] = r.egress_port
            self.to_egress(C, r.egress_port)

    def _digests(self, P: Packet, F: list[int]) -> None:
        for lid in P.digests or ():
            ll = self.cp.learn_lists.get(lid)
            if ll is not None and self.digest_out is not None:
                name, slots = ll
                self.digest_out(Digest(name, [tuple(F[s] for s in slots)], lid))

    # -- traffic manager ---------------------------------------------------------------------

    def service(self) -> int:
        """Run egress for every packet the traffic manager lets out now; returns how many."""
        n = 0
        tm, clock, egress = self.tm, self.clock, self.egress
        while tm.backlog:
            now = clock()
            item = tm.dequeue(now)
            if item is None:
                break
            port, prio, P, left = item
            n += 1
            try:
                egress(P, port, prio, left, now)
            except Exception as e:
                self._abort(e)
        while self.pending:
            port_in, frame, itype, preserved, passes = self.pending.popleft()
            self.receive(port_in, frame, itype, preserved, passes)
            n += 1 + self.service()
        return n

    # -- egress ------------------------------------------------------------------------------

    def _clone_e2e(self, P: Packet, F: list[int]) -> None:
        session, preserved = self._clone_session(P, F)
        for r in session.replicas if session is not None else ():
            # Headers as they are at the end of egress; metadata starts afresh (as BMv2 resets
            # it) except the preserved field list.
            G = F[:]
            for slot in self.metadata_slots:
                G[slot] = self.template[slot]
            C = self._copy(P, G, EGRESS_CLONE)
            G[self.s_len] = P.length
            for slot, value in preserved:
                C.F[slot] = value
            C.truncate = session.packet_length_bytes
            self.to_egress(C, r.egress_port)

    def _recirculate(self, P: Packet, F: list[int], port: int, frame: bytes) -> None:
        if self.tm.links:
            self.tm.settle(port, P.length, 0, F[self.s_qid])  # it never went on the wire
        if P.passes < MAX_PASSES:
            self.pending.append((P.ingress_port, frame, RECIRC,
                                 self._preserve(F, P.recirc_fl), P.passes + 1))  # type: ignore
