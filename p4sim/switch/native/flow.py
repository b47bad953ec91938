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
        super().__init__(cp, tm, output, digest_out, clock, t0, log, None)
        self.native = state
        ffi = build.ffi()
        self._ffi, self._lib, self._C = ffi, state.lib, state.C
        self._nslots = state.prog.nslots
        self._out = ffi.new("i64[8]")
        self._obuf_size = state.prog.hdr_bytes + 16384
        self._obuf = ffi.new("uint8_t[]", self._obuf_size)
        self.py_receive, self.py_egress = self.receive, self.egress
        self.receive = self._receive  # type: ignore[method-assign]
        self.egress = self._egress_any  # type: ignore[method-assign]

    # -- ingress --------------------------------------------------------------------------------

    def _receive(self, port: int, frame: bytes, instance_type: int = 0,
                 preserved: Any = None, passes: int = 0) -> None:
        if instance_type:  # resubmitted and recirculated packets: the Python path
            self.py_receive(port, frame, instance_type, preserved, passes)
            return
        if self.native.dirty:
            self.native.sync()
        if type(frame) is not bytes:
            frame = bytes(frame)
        F = self._ffi.new("i64[]", self._nslots)
        out = self._out
        rc = self._lib.nat_ingress(self._C, F, frame, len(frame), port,
                                   (self.clock() - self.t0) // 1000, out)
        if out[2]:
            self.counters.parser_errors += 1
        if rc < 0:
            self._abort(abort_exception(out[0]))
            return
        try:
            if out[3] or F[self.s_mcast]:
                P = self._to_python(F, frame, out[1], port)
                if out[3]:
                    P.clone_session, P.clone_fl = out[4], out[5]
                self._after_ingress_special(P, P.F)
                return
            eport = F[self.s_es]
            if eport == DROP_PORT:
                self.counters.pipeline_drops += 1
                return
            self._to_egress(NativePacket(F, frame, out[1], port), eport)
        except Exception as e:  # a bad packet never stops the switch
            self._abort(e)

    def _to_python(self, F: Any, frame: bytes, pos: int, port: int) -> Packet:
        values = self._ffi.unpack(F, self._nslots)
        for slot in self.native.wide_slots:  # 64-bit fields: C holds their bit pattern
            if values[slot] < 0:
                values[slot] += 1 << 64
        P = Packet(values, frame, port)
        P.pos = pos
        P.payload = frame[pos:]
        return P

    def _to_egress(self, P: NativePacket, port: int) -> None:
        """stages.to_egress for a native packet."""
        F, tm = P.F, self.tm
        prio = F[self.s_prio] if tm.priorities > 1 else 0
        if prio >= tm.priorities:
            self.counters.pipeline_drops += 1
            return
        now = self.clock()
        F[self.s_enq_ts] = ((now - self.t0) // 1000) & self.m_enq_ts
        q = tm.queues.get((port, prio)) or tm.queue(port, prio)
        if not q.items and not self._in_egress and (q.bypass or tm.may_pass(port, prio, now)):
            F[self.s_enq_qd] = 0
            if tm.links:
                tm.start_link(port, P.length, now)
            try:
                self._egress(P, port, prio, 0, now)
            except Exception as e:
                self._abort(e)
            return
        depth = tm.enqueue(port, prio, P, now)
        if depth >= 0:
            F[self.s_enq_qd] = depth

    # -- egress ---------------------------------------------------------------------------------

    def _egress_any(self, P: Any, port: int, prio: int, left: int, now: int) -> None:
        if type(P) is NativePacket:
            self._egress(P, port, prio, left, now)
        else:
            self.py_egress(P, port, prio, left, now)

    def _egress(self, P: NativePacket, port: int, prio: int, left: int, now: int) -> None:
        if self.native.dirty:
            self.native.sync()
        need = self.native.prog.hdr_bytes + len(P.data)
        if need > self._obuf_size:
            self._obuf_size = need
            self._obuf = self._ffi.new("uint8_t[]", need)
        out = self._out
        n = self._lib.nat_egress(self._C, P.F, P.data, len(P.data), P.pos, port,
                                 (now - self.t0) // 1000, left, prio, self._obuf, out)
        tm = self.tm
        if n >= 0:
            frame = self._ffi.buffer(self._obuf, n)[:]
            if tm.links:
                tm.settle(port, P.length, n)
            self.output(port, frame)
        elif n == -3:
            self.counters.pipeline_drops += 1
            if tm.links:
                tm.settle(port, P.length, 0)
        elif n == -2:
            self._egress_clone_tail(P, port, out[4], out[5])
        else:
            raise abort_exception(out[0])

    def _egress_clone_tail(self, NP: NativePacket, port: int, session: int, fl: int) -> None:
        """stages.egress after the pipeline, in Python, for a packet that asked for an E2E
        clone: the clone is made by the Python path's own function."""
        P = self._to_python(NP.F, NP.data, NP.pos, NP.ingress_port)
        P.clone_session, P.clone_fl = session, fl
        F, cp, tm = P.F, self.cp, self.tm
        self._in_egress = True
        self._clone_e2e(P, F)
        if F[self.s_es] == DROP_PORT:
            self._in_egress = False
            self.counters.pipeline_drops += 1
            if tm.links:
                tm.settle(port, P.length, 0)
            return
        if cp.update_checksums is not None:
            cp.update_checksums(P, F, ())
        frame = cp.deparse(P, F, ())
        self._in_egress = False
        if tm.links:
            tm.settle(port, P.length, len(frame))
        self.output(port, frame)
