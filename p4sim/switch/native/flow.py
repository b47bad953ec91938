"""The v1model flow with the native pipeline: p4sim.switch.stages' receive / to_egress /
egress with the parser, ingress, egress and deparser in C. A packet that needs more than
unicast or drop (an ingress clone, multicast, an egress clone) continues on the Python path's
own functions with the same PHV, so those rarer paths exist once."""

from __future__ import annotations

from typing import Any

from p4sim.switch.native import build
from p4sim.switch.native.runtime import NativeState, abort_exception
from p4sim.switch.packet import Packet
from p4sim.switch.primitives import DROP_PORT
from p4sim.switch.tm import Queue
from p4sim.switch.v1model import V1Model


class NativePacket:
    """A packet between ingress and egress on the native path (what the queues hold)."""

    __slots__ = ("F", "data", "ingress_port", "length", "pos")

    def __init__(self, F: Any, data: bytes, pos: int, ingress_port: int) -> None:
        self.F = F
        self.data = data
        self.pos = pos
        self.length = len(data)
        self.ingress_port = ingress_port


class NativeFlow(V1Model):
    def __init__(self, cp: Any, tm: Any, output: Any, digest_out: Any, clock: Any, t0: int,
                 log: Any, state: NativeState) -> None:
        # the Python path's functions are built only if a packet needs them (py_receive,
        # py_egress, the special cases after ingress)
        super().__init__(cp, tm, output, digest_out, clock, t0, log, None, lazy=True)
        self.native = state
        ffi = build.ffi()
        self._ffi, self._lib, self._C = ffi, state.lib, state.C
        self._nslots = state.prog.nslots
        self._out = ffi.new("i64[8]")
        self._hdr_bytes = state.prog.hdr_bytes
        self._obuf_size = self._hdr_bytes + 16384
        self._obuf = ffi.new("uint8_t[]", self._obuf_size)
        self._F = ffi.new("i64[]", self._nslots)  # the PHV of the packet in ingress
        self._direct = ffi.new("uint8_t[]", 512)  # ports whose queue a packet bypasses
        self._direct_gen = [-1]
        self._phv_pool: list[Any] = []  # PHV buffers of packets egress is done with
        self._egress = self._make_egress()
        self._queue_up = self._make_queue_up()
        self.receive = self._make_receive()
        self.egress = self._egress_any  # type: ignore[method-assign]

    def py_receive(self, *args: Any) -> None:
        """The Python path's receive (resubmitted and recirculated packets)."""
        self._build_stages()["receive"](*args)

    def py_egress(self, *args: Any) -> None:
        """The Python path's egress (a packet that left ingress on the Python path)."""
        self._build_stages()["egress"](*args)

    # -- ingress --------------------------------------------------------------------------------

    def _make_receive(self) -> Any:
        """``receive`` with this flow's constants bound as locals (the hot path)."""
        native, clock, t0, tm, counters = self.native, self.clock, self.t0, self.tm, self.counters
        run, C, out, F, obuf = self._lib.nat_run, self._C, self._out, self._F, self._obuf
        limit = self._obuf_size - self._hdr_bytes
        unpack, obuf_c, NULL = self._ffi.unpack, self._ffi.cast("char *", obuf), self._ffi.NULL
        direct, gen, output, slow = self._direct, self._direct_gen, self.output, self._slow
        py_receive, queue_up, abort = self.py_receive, self._queue_up, self._abort

        def receive(port: int, frame: bytes, instance_type: int = 0, preserved: Any = None,
                    passes: int = 0) -> None:
            if instance_type:  # resubmitted and recirculated packets: the Python path
                py_receive(port, frame, instance_type, preserved, passes)
                return
            if native.dirty:
                native.sync()
            if type(frame) is not bytes:
                frame = bytes(frame)
            n = len(frame)
            if n > limit:
                self._grow(n)
                self.receive(port, frame)
                return
            igts = (clock() - t0) // 1000
            # Egress in the same call when the packet will find its queue empty and
            # unlimited (stages.to_egress's bypass); the ports that qualify are cached until
            # a queue's settings change.
            if not tm.backlog and not tm.links and tm.priorities == 1 and not self._in_egress:
                if Queue.generation != gen[0]:
                    self._rebuild_direct()
                rc = run(C, F, frame, n, port, igts, (clock() - t0) // 1000, direct, obuf, out)
            else:
                rc = run(C, F, frame, n, port, igts, -1, NULL, obuf, out)
            if out[2]:
                counters.parser_errors += 1
            if rc == 3:
                output(out[6], unpack(obuf_c, out[7]))
            elif rc == 2 or rc == 4:
                counters.pipeline_drops += 1
            elif rc == 0:  # the packet waits in its queue (or finds it free): the common case
                try:
                    queue_up(frame, out[1], port)
                except Exception as e:  # a bad packet never stops the switch
                    abort(e)
            elif rc == -1:
                abort(abort_exception(out[0]))
            else:
                slow(rc, port, frame)

        return receive

    def _make_queue_up(self) -> Any:
        """After nat_run said 0: the packet's PHV copied out of the ingress buffer into one of
        its own, then stages.to_egress for it with this flow's constants bound. The
        PHV buffers come back to a pool when egress is done with them, so a queued packet
        costs no allocation (every slot is overwritten by the copy)."""
        ffi, F, size, nslots, pool = self._ffi, self._F, self._nslots * 8, self._nslots, \
            self._phv_pool
        memmove, new = ffi.memmove, ffi.new
        tm, counters, clock, t0 = self.tm, self.counters, self.clock, self.t0
        queues, new_queue, may_pass, enqueue = tm.queues, tm.queue, tm.may_pass, tm.enqueue
        s_es, s_prio, s_enq_ts, s_enq_qd = self.s_es, self.s_prio, self.s_enq_ts, self.s_enq_qd
        m_enq_ts, abort = self.m_enq_ts, self._abort

        def queue_up(frame: bytes, pos: int, ingress_port: int) -> None:
            G = pool.pop() if pool else new("i64[]", nslots)
            memmove(G, F, size)
            P = NativePacket(G, frame, pos, ingress_port)
            port = G[s_es]
            prio = G[s_prio] if tm.priorities > 1 else 0
            if prio >= tm.priorities:
                pool.append(G)
                counters.pipeline_drops += 1
                return
            now = clock()
            G[s_enq_ts] = ((now - t0) // 1000) & m_enq_ts
            q = queues.get((port, prio)) or new_queue(port, prio)
            if not q.items and not self._in_egress and (q.bypass or may_pass(port, prio, now)):
                G[s_enq_qd] = 0
                if tm.links:
                    tm.start_link(port, P.length, now, prio)
                try:
                    self._egress(P, port, prio, 0, now)  # late bound: _grow rebuilds it
                except Exception as e:
                    abort(e)
                return
            depth = enqueue(port, prio, P, now)
            if depth >= 0:
                G[s_enq_qd] = depth
            else:
                pool.append(G)  # tail-dropped

        return queue_up

    def _slow(self, rc: int, port: int, frame: bytes) -> None:
        """After nat_run: the packet needs the Python path's special handling (1), or asked
        for an egress clone (5). (0, the packet queued, is ``_queue_up``.)"""
        out = self._out
        G = self._ffi.new("i64[]", self._nslots)
        self._ffi.memmove(G, self._F, self._nslots * 8)
        try:
            if rc == 1:
                P = self._to_python(G, frame, out[1], port)
                if out[3]:
                    P.clone_session, P.clone_fl = out[4], out[5]
                self._after_ingress_special(P, P.F)
            else:
                self._egress_clone_tail(NativePacket(G, frame, out[1], port), out[6],
                                        out[4], out[5])
        except Exception as e:  # a bad packet never stops the switch
            self._abort(e)

    def _rebuild_direct(self) -> None:
        self._direct_gen[0] = Queue.generation
        direct = self._direct
        direct[0:512] = bytes(512)
        for (port, prio), q in self.tm.queues.items():
            if prio == 0 and 0 <= port < 512 and q.bypass:
                direct[port] = 1

    def _grow(self, length: int) -> None:
        self._obuf_size = self._hdr_bytes + length
        self._obuf = self._ffi.new("uint8_t[]", self._obuf_size)
        self.receive = self._make_receive()  # bound to the new buffer
        self._egress = self._make_egress()

    def _to_python(self, F: Any, frame: bytes, pos: int, port: int) -> Packet:
        values = self._ffi.unpack(F, self._nslots)
        for slot in self.native.wide_slots:  # 64-bit fields: C holds their bit pattern
            if values[slot] < 0:
                values[slot] += 1 << 64
        P = Packet(values, frame, port)
        P.pos = pos
        P.payload = frame[pos:]
        return P

    # -- egress ---------------------------------------------------------------------------------

    def _egress_any(self, P: Any, port: int, prio: int, left: int, now: int) -> None:
        if type(P) is NativePacket:
            self._egress(P, port, prio, left, now)
        else:
            self.py_egress(P, port, prio, left, now)

    def _make_egress(self) -> Any:
        """Egress of a native packet with this flow's constants bound as locals (the queued
        packets' hot path, as ``receive`` is the arrivals')."""
        native, nat_egress, C, out = self.native, self._lib.nat_egress, self._C, self._out
        obuf, room = self._obuf, self._obuf_size - self._hdr_bytes
        unpack, obuf_c = self._ffi.unpack, self._ffi.cast("char *", self._obuf)
        t0, tm, output, counters = self.t0, self.tm, self.output, self.counters
        clone_tail, pool = self._egress_clone_tail, self._phv_pool

        def egress(P: NativePacket, port: int, prio: int, left: int, now: int) -> None:
            if native.dirty:
                native.sync()
            data = P.data
            n = len(data)
            if n > room:
                self._grow(n)
                self._egress(P, port, prio, left, now)
                return
            n = nat_egress(C, P.F, data, n, P.pos, port, (now - t0) // 1000, left, prio,
                           obuf, out)
            if n >= 0:
                frame = unpack(obuf_c, n)
                pool.append(P.F)  # nothing reads this PHV again
                if tm.links:
                    tm.settle(port, P.length, n, prio)
                output(port, frame)
            elif n == -3:
                pool.append(P.F)
                counters.pipeline_drops += 1
                if tm.links:
                    tm.settle(port, P.length, 0, prio)
            elif n == -2:
                clone_tail(P, port, out[4], out[5])
            else:
                raise abort_exception(out[0])

        return egress

    def _egress_clone_tail(self, NP: NativePacket, port: int, session: int, fl: int) -> None:
        """stages.egress after the pipeline, in Python, for a packet that asked for an E2E
        clone: the clone is made by the Python path's own function."""
        self._build_stages()  # the clone, checksums and deparser below are Python code
        P = self._to_python(NP.F, NP.data, NP.pos, NP.ingress_port)
        P.clone_session, P.clone_fl = session, fl
        F, cp, tm = P.F, self.cp, self.tm
        self._in_egress = True
        self._clone_e2e(P, F)
        if F[self.s_es] == DROP_PORT:
            self._in_egress = False
            self.counters.pipeline_drops += 1
            if tm.links:
                tm.settle(port, P.length, 0, F[self.s_qid])
            return
        if cp.update_checksums is not None:
            cp.update_checksums(P, F, ())
        frame = cp.deparse(P, F, ())
        self._in_egress = False
        if tm.links:
            tm.settle(port, P.length, len(frame), F[self.s_qid])
        self.output(port, frame)
