"""SimSwitch's hop in C: a frame's arrival (ingress, the traffic manager, egress of whatever
may leave) and a queue service each cost one call into p4sim.switch.native.hop, instead of
the twenty Python calls of DataPlane.receive / poll. The plain path stays the reference.

A switch starts on the C hop at its first arrival when p4sim.switch.native.hop.refusal finds
nothing it does not cover; otherwise, and for good once a packet needs the Python path (an
ingress clone, multicast, an egress clone), it runs the plain path. Whatever reads or changes
the Python traffic manager (statistics, queue settings, DataPlane.poll / receive) gets it back
first, exactly (DataPlane.tm_owner); the next arrival takes it again.
"""

from __future__ import annotations

from typing import Any

from p4sim.switch.native import hop as native_hop


class HopSwitch:
    """The C-hop half of cellfabric.sim.net.SimSwitch (which defines what this reads)."""

    dp: Any
    engine: Any
    peak: dict[int, int]
    wires: dict[int, Any]
    _received: int
    native_hop: bool
    _hop: Any
    _enqueues: int
    _fab: Any  # cellfabric.sim.cfabric.NativeFabric, or None
    _fab_index: int

    def _schedule(self, deadline: int | None) -> None: ...
    def _after_receive(self) -> None: ...
    def _transmit(self, port: int, frame: bytes) -> None: ...

    def _hop_start(self) -> bool:
        """Put the switch on the C hop if it is covered (False: the plain path for good)."""
        if not self.native_hop or not self.wires or max(self.wires) >= native_hop.MAXP:
            self._hop = False
            return False
        dp = self.dp
        if native_hop.refusal(dp) is not None:
            self._hop = False
            return False
        fab = self._fab
        if self._hop is None:
            self._hop = native_hop.NativeHop(dp)
            if fab is not None:
                fab.register(self._fab_index, self._hop)
        self._hop.adopt(self.peak)
        dp.tm_owner = self._hop_release
        if fab is not None:
            fab.set_on(self._fab_index, True)
        return True

    def _hop_release(self) -> None:
        """DataPlane.tm_owner: the queues back to the Python traffic manager."""
        self.dp.tm_owner = None
        if self._fab is not None:
            self._fab.set_on(self._fab_index, False)
        self._hop.handback(self.peak)
        self._enqueues = self.dp.tm.enqueues

    def _hop_receive(self, port: int, frame: bytes) -> None:
        hop = self._hop
        native = hop.native
        if native.dirty:
            native.sync()
        if type(frame) is not bytes:
            frame = bytes(frame)
        fab = self._fab
        if fab is not None:  # the hop, its frames onto their wires, the deadline: one call
            if fab.arrive(self._fab_index, port, frame):
                self._hop_post(True, port, frame)
            return
        self._received += 1
        hop.lib.hop_arrive(hop.T, frame, len(frame), port, self.engine.now, hop.F, hop.out,
                           hop.res)
        self._hop_post(True, port, frame)

    def _hop_poll(self) -> None:
        hop = self._hop
        native = hop.native
        if native.dirty:
            native.sync()
        fab = self._fab
        if fab is not None:
            if fab.service(self._fab_index):
                self._hop_post(False, 0, b"")
            return
        hop.lib.hop_service(hop.T, self.engine.now, hop.out, hop.res)
        self._hop_post(False, 0, b"")

    def _hop_post(self, arrival: bool, port: int, frame: bytes) -> None:
        """What follows a hop's C call (made here, or by the C fabric for a result it left to
        Python: a frame for the CPU port, a packet that needs the Python path): its frames
        out, then the Python path (res[2], the call's return code) or the next deadline."""
        res = self._hop.res
        if res[0]:
            self._hop_send(res[0])
        rc = res[2]
        if rc:
            self._hop_leave(rc, port, frame, arrival)
        elif res[1] >= 0:
            self._schedule(res[1])

    def _hop_send(self, n: int) -> None:
        """DataPlane._output for the frames C sent (it counted them per port)."""
        dp = self.dp
        cpu = dp.cpu_port
        for port, frame in self._hop.frames(n):
            if port == cpu:
                if dp._packet_in is not None:
                    dp._packet_in(frame)
            else:
                self._transmit(port, frame)

    def _hop_leave(self, rc: int, port: int, frame: bytes, arrival: bool) -> None:
        """A packet needs the Python path: everything back to the Python TM, the packet
        continues there as NativeFlow would have run it, and so does the switch."""
        hop, dp = self._hop, self.dp
        flow, tm, res, out = dp.flow, dp.tm, hop.res, hop.out
        held = hop.take_held() if rc == 2 else None
        enq_port = res[5] if res[4] else -1
        ingress_rc = res[3]
        dp.tm_owner = None
        if self._fab is not None:
            self._fab.set_on(self._fab_index, False)
        hop.handback(self.peak)
        self._hop = False
        # this arrival's enqueue (if any) is the one the plain peak check looks at
        self._enqueues = tm.enqueues - (1 if enq_port >= 0 else 0)
        if enq_port >= 0:
            tm.last_enqueue_port = enq_port
        try:
            if held is not None:
                flow._egress_clone_tail(held[0], held[1], out[4], out[5])
            elif ingress_rc == 0:  # an egress port C does not index
                flow._queue_up(frame, out[1], port)
            else:
                flow._slow(ingress_rc, port, frame)
        except Exception as e:  # a bad packet never stops the switch
            flow._abort(e)
        if arrival:
            if tm.backlog or flow.pending:
                flow.service()
            self._after_receive()
        else:
            self._schedule(dp.poll())
