"""simple_switch's v1model packet flow around a compiled program.

parser -> verify checksum -> ingress -> (clone / digest / resubmit / multicast / drop / unicast)
-> traffic manager -> egress -> (clone / drop / recirculate) -> compute checksum -> deparser.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from p4sim.switch.api import CloneSession, Digest, Replica
from p4sim.switch.packet import (
    EGRESS_CLONE,
    INGRESS_CLONE,
    NORMAL,
    RECIRC,
    REPLICATION,
    RESUBMIT,
    Packet,
)
from p4sim.switch.parser import run_parser
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


class V1Model:
    def __init__(self, cp: CompiledProgram, tm: TrafficManager, output: Any,
                 digest_out: Any, clock: Any, t0: int, log: Any = None) -> None:
        self.cp = cp
        self.log = log
        p = cp.p
        self.tm = tm
        self.output = output  # fn(port, frame)
        self.digest_out = digest_out  # fn(Digest)
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
        self.clock = clock  # integer nanoseconds; timestamps count microseconds from t0
        self.t0 = t0
        self._in_egress = False
        # Timestamps are stored truncated to their fields' widths, as BMv2's Field::set does
        # (enq_timestamp and deq_timedelta are 32-bit microsecond counts in v1model).
        self.m_enq_ts = self._width_mask(self.s_enq_ts)
        self.m_deq_td = self._width_mask(self.s_deq_td)
        self.ingress = cp.pipelines.get("ingress") or (lambda P, F: None)
        self.egress = cp.pipelines.get("egress") if cp.pipeline_init.get("egress") else None
        self.fast_receive = self._make_fast_receive()

    def _width_mask(self, slot: int) -> int:
        info = self.cp.p.slot_fields[slot]
        return info.mask if info is not None and info.width else -1

    def _make_fast_receive(self) -> Any:
        """``receive()`` for a frame arriving from a port, specialised with everything bound as
        closure constants. Unusual outcomes (clone, digest, resubmit, multicast, E2E clone,
        recirculate, truncate) hand over to the general methods at the same point, so both
        paths do exactly the same thing."""
        cp, tm, counters = self.cp, self.tm, self.counters
        template, t0, clock = self.template, self.t0, self.clock
        parser_start, too_short = cp.parser_start, self.too_short
        verify, update, deparse = cp.verify_checksums, cp.update_checksums, cp.deparse
        ingress, egress, output = self.ingress, self.egress, self.output
        s_in, s_len, s_igts, s_perr = self.s_in, self.s_len, self.s_igts, self.s_perr
        s_es, s_mcast, s_enq_ts = self.s_es, self.s_mcast, self.s_enq_ts
        s_enq_qd, s_ep, s_egts, s_deq_td = self.s_enq_qd, self.s_ep, self.s_egts, self.s_deq_td
        s_deq_qd, s_qid = self.s_deq_qd, self.s_qid
        queues, one_prio = tm.queues, tm.priorities == 1
        after_ingress, enqueue, finish = self._after_ingress, self.enqueue, self._egress_finish
        abort = self._abort
        m_enq_ts = self.m_enq_ts

        def fast_receive(port: int, frame: bytes) -> None:
            F = template[:]
            P = Packet(F, frame, port)
            ts = (clock() - t0) // 1000
            F[s_in] = port
            F[s_len] = len(frame)
            F[s_igts] = ts
            try:
                err = run_parser(parser_start, P, F, too_short)
                if err:
                    F[s_perr] = err
                    counters.parser_errors += 1
                if verify is not None:
                    verify(P, F, ())
                ingress(P, F)
                if (P.clone_session is not None or P.digests or P.resubmit_fl is not None
                        or F[s_mcast]):
                    after_ingress(P, F, 0)
                    return
                P.exit = False
                es = F[s_es]
                if es == DROP_PORT:
                    counters.pipeline_drops += 1
                    return
                q = queues.get((es, 0)) if one_prio else None
                if (q is None or q.items or q.pps or q.depth <= 0 or q.link is not None
                        or self._in_egress):
                    enqueue(P, es)
                    return
                # Cut-through (see enqueue): an empty unlimited queue.
                P.egress_port = es
                F[s_enq_ts] = ts & m_enq_ts
                F[s_enq_qd] = 0
                self._in_egress = True
                F[s_ep] = es
                F[s_egts] = ts
                F[s_deq_td] = 0
                F[s_deq_qd] = 0
                F[s_qid] = 0
                if egress is not None:
                    egress(P, F)
                    P.exit = False
                    if (P.clone_session is not None or P.recirc_fl is not None or P.truncate
                            or F[s_es] == DROP_PORT):
                        finish(P, F, es)
                        return
                elif P.truncate:
                    finish(P, F, es)
                    return
                if update is not None:
                    update(P, F, ())
                frame = deparse(P, F, ())
                self._in_egress = False
                output(es, frame)
            except Exception as e:  # a bad packet never stops the switch
                abort(e)

        return fast_receive

    # -- ingress -----------------------------------------------------------------------------

    def receive(self, port: int, frame: bytes, instance_type: int = NORMAL,
                preserved: list[tuple[int, int]] | None = None, passes: int = 0) -> None:
        F = self.template[:]
        P = Packet(F, frame, port)
        P.instance_type = instance_type
        P.passes = passes
        F[self.s_in] = port
        F[self.s_len] = len(frame)
        F[self.s_it] = instance_type
        F[self.s_igts] = (self.clock() - self.t0) // 1000
        if preserved:
            for slot, value in preserved:
                F[slot] = value
        cp = self.cp
        try:
            err = run_parser(cp.parser_start, P, F, self.too_short)
            if err:
                F[self.s_perr] = err
                self.counters.parser_errors += 1
            if cp.verify_checksums is not None:
                cp.verify_checksums(P, F, ())
            self.ingress(P, F)
            self._after_ingress(P, F, passes)
        except Exception as e:  # a bad packet never stops the switch
            self._abort(e)

    def _abort(self, e: Exception) -> None:
        self._in_egress = False
        self.counters.aborted += 1
        self.counters.pipeline_drops += 1
        self.counters.last_abort = f"{type(e).__name__}: {e}"
        if self.log is not None:
            self.log(f"packet dropped: {self.counters.last_abort}")

    def _preserve(self, F: list[int], fl_id: int) -> list[tuple[int, int]]:
        return [(slot, F[slot]) for slot in self.cp.field_lists.get(fl_id, ())]

    def _after_ingress(self, P: Packet, F: list[int], passes: int) -> None:
        P.exit = False
        if P.clone_session is not None:
            self._clone_i2e(P, F)
        if P.digests:
            self._digests(P, F)
        if P.resubmit_fl is not None:
            if passes < MAX_PASSES:
                self.pending.append((P.ingress_port, P.original, RESUBMIT,
                                     self._preserve(F, P.resubmit_fl), passes + 1))
            return
        grp = F[self.s_mcast]
        if grp:
            replicas = self.mcast.get(grp)
            if not replicas:
                self.counters.pipeline_drops += 1
                return
            for r in replicas:
                C = Packet(F[:], P.data, P.ingress_port)
                C.payload = P.payload
                C.length = P.length
                C.instance_type = REPLICATION
                C.truncate = P.truncate
                C.passes = P.passes
                C.F[self.s_it] = REPLICATION
                C.F[self.s_rid] = r.instance
                self.enqueue(C, r.egress_port)
            return
        port = F[self.s_es]
        if port == DROP_PORT:
            self.counters.pipeline_drops += 1
            return
        P.clone_session = None  # ingress's clone is done; egress may request its own
        self.enqueue(P, port)

    def _clone_i2e(self, P: Packet, F: list[int]) -> None:
        session = self.clones.get(P.clone_session)  # type: ignore[arg-type]
        if session is None:
            return
        preserved = self._preserve(F, P.clone_fl)
        for r in session.replicas:
            G = self.template[:]
            C = Packet(G, P.original, P.ingress_port)
            C.instance_type = INGRESS_CLONE
            G[self.s_in] = P.ingress_port
            G[self.s_len] = len(P.original)
            G[self.s_it] = INGRESS_CLONE
            for slot, value in preserved:
                G[slot] = value
            err = run_parser(self.cp.parser_start, C, G, self.too_short)
            if err:
                G[self.s_perr] = err
            C.truncate = session.packet_length_bytes
            G[self.s_es] = r.egress_port
            self.enqueue(C, r.egress_port)

    def _digests(self, P: Packet, F: list[int]) -> None:
        for lid in P.digests or ():
            ll = self.cp.learn_lists.get(lid)
            if ll is not None and self.digest_out is not None:
                name, slots = ll
                self.digest_out(Digest(name, [tuple(F[s] for s in slots)], lid))

    # -- traffic manager ---------------------------------------------------------------------

    def enqueue(self, P: Packet, port: int) -> None:
        F = P.F
        prio = F[self.s_prio] if self.tm.priorities > 1 else 0
        if prio >= self.tm.priorities:
            self.counters.pipeline_drops += 1
            return
        P.egress_port = port
        P.qprio = prio
        now = self.clock()
        F[self.s_enq_ts] = ((now - self.t0) // 1000) & self.m_enq_ts
        tm = self.tm
        if not self._in_egress and tm.may_pass(port, prio, now):
            # Unlimited rate and an empty queue: the packet would leave at once, so run egress
            # now instead of a queue round trip (its queue depth and delay are 0, as measured).
            F[self.s_enq_qd] = 0
            tm.start_link(port, P.length, now)
            try:
                self._egress(P, port, prio, 0)
            except Exception as e:
                self._abort(e)
            return
        depth = tm.enqueue(port, prio, P, now)
        if depth >= 0:
            F[self.s_enq_qd] = depth

    def service(self) -> int:
        """Run egress for every packet the traffic manager lets out now; returns how many."""
        n = 0
        tm = self.tm
        while tm.backlog:
            item = tm.dequeue(self.clock())
            if item is None:
                break
            port, prio, P, left = item
            n += 1
            try:
                self._egress(P, port, prio, left)
            except Exception as e:
                self._abort(e)
        while self.pending:
            port_in, frame, itype, preserved, passes = self.pending.popleft()
            self.receive(port_in, frame, itype, preserved, passes)
            n += 1 + self.service()
        return n

    # -- egress ------------------------------------------------------------------------------

    def _egress(self, P: Packet, port: int, prio: int, left: int) -> None:
        # _in_egress stops E2E clones made here from re-entering egress directly; _abort()
        # clears it if a packet fails half way.
        self._in_egress = True
        F = P.F
        ts = (self.clock() - self.t0) // 1000
        F[self.s_ep] = port
        F[self.s_egts] = ts
        F[self.s_deq_td] = (ts - F[self.s_enq_ts]) & self.m_deq_td
        F[self.s_deq_qd] = left
        F[self.s_qid] = prio
        if self.egress is not None:
            self.egress(P, F)
            P.exit = False
        self._egress_finish(P, F, port)

    def _egress_finish(self, P: Packet, F: list[int], port: int) -> None:
        """After the egress pipeline: E2E clone, drop, checksums, deparse, recirculate or send."""
        if P.clone_session is not None:
            session = self.clones.get(P.clone_session)
            if session is not None:
                preserved = self._preserve(F, P.clone_fl)
                for r in session.replicas:
                    # Headers as they are at the end of egress; metadata starts afresh (as
                    # BMv2 resets it) except the preserved field list.
                    G = F[:]
                    for slot in self.metadata_slots:
                        G[slot] = self.template[slot]
                    C = Packet(G, P.data, P.ingress_port)
                    C.payload = P.payload
                    C.length = P.length
                    C.passes = P.passes
                    C.instance_type = EGRESS_CLONE
                    G[self.s_it] = EGRESS_CLONE
                    G[self.s_len] = P.length
                    for slot, value in preserved:
                        C.F[slot] = value
                    C.truncate = session.packet_length_bytes
                    self.enqueue(C, r.egress_port)
        links = self.tm.links
        if F[self.s_es] == DROP_PORT:
            self._in_egress = False
            self.counters.pipeline_drops += 1
            if links:
                self.tm.settle(port, P.length, 0)
            return
        cp = self.cp
        if cp.update_checksums is not None:
            cp.update_checksums(P, F, ())
        frame = cp.deparse(P, F, ())
        if P.truncate and len(frame) > P.truncate:
            frame = frame[:P.truncate]
        self._in_egress = False
        if P.recirc_fl is not None:
            if links:
                self.tm.settle(port, P.length, 0)
            if P.passes < MAX_PASSES:
                self.pending.append((P.ingress_port, frame, RECIRC,
                                     self._preserve(F, P.recirc_fl), P.passes + 1))
            return
        if links:
            self.tm.settle(port, P.length, len(frame))
        self.output(port, frame)
