"""The switch-to-switch part of the simulated fabric in C (p4sim/switch/native/fabric.c): the
switches' hops, every wire that leaves a switch port, and the events of both (queue-service
deadlines, frame arrivals) in C's own heap, which Engine.run merges with its own by (time,
sequence). A cell then crosses the fabric's switches in one C call instead of returning to
the engine at each hop. A frame for a host goes to the C hosts when the run has them
(cellfabric.sim.chosts: fabric.c's endpoints, whose timers share C's heap), else it is handed
back; so is a frame for a switch whose hop is not active in C, or a hop result that needs the
Python path (a packet-in, a packet leaving the C hop): at its turn, to the Python path's own
code.

The plain path (SimFabric.native_fabric off: net.Wire, SimSwitch._schedule / _poll on the
engine) is the reference: the same events, in the same order, with the same sequence numbers
(C takes them from the engine's counter at the points the plain path calls Engine.at), so a
run's metrics.json is the same either way (tests/sim/test_sim_fabric.py).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from cellfabric.sim.engine import Engine
from p4sim.switch.native import build
from p4sim.switch.native import hop as native_hop

if TYPE_CHECKING:
    from cellfabric.sim.net import SimFabric, SimSwitch, Wire

# fabric.c's io slots and hand-over kinds (enum there)
IO_NOW, IO_SEQ, IO_RAN, IO_BOUND_T, IO_BOUND_SEQ, IO_UNTIL = 0, 1, 2, 3, 4, 5
IO_TOP_T, IO_TOP_SEQ, IO_BUDGET, IO_A, IO_B, IO_LEN, IO_PENDING = 6, 7, 8, 9, 10, 11, 12
ACT_DELIVER, ACT_POLL, ACT_POST_ARRIVE, ACT_POST_SERVICE, ACT_ENDPOINT = 1, 2, 3, 4, 5


def refusal(fabric: SimFabric, traced: bool) -> str | None:
    """None when the C fabric can run this fabric, else why not (decided once, at start)."""
    from cellfabric.sim.net import SimSwitch

    if not SimSwitch.native_hop:
        return "the C hop is off"
    if not fabric.model.rate_bps:
        return "packet mode (the C hop covers bit-rate mode only)"
    if traced or any(sw.dp.trace is not None for sw in fabric.switches.values()):
        return "packet trace on"  # tracing wraps the wires' deliver functions
    if native_hop.library() is None:
        return native_hop._why_not or "no hop library"
    if not any(sw.dp.dataplane == "native" for sw in fabric.switches.values()):
        return "no switch on the native data plane"
    return None


class FabricWire:
    """net.Wire's interface for a switch port's wire whose state lives in C."""

    __slots__ = ("delay_ns", "deliver", "engine", "fab", "index", "rate_bps")

    def __init__(self, fab: NativeFabric, index: int, wire: Wire) -> None:
        self.fab, self.index = fab, index
        self.engine, self.delay_ns = wire.engine, wire.delay_ns
        self.rate_bps = getattr(wire, "rate_bps", 0)  # a host's wire: its host serializes
        self.deliver = wire.deliver

    def transmit(self, frame: bytes) -> None:
        self.fab.transmit(self.index, frame)

    def _get(self, what: int) -> int:
        return int(self.fab.lib.fab_wire_get(self.fab.X, self.index, what))

    @property
    def up(self) -> bool:
        return bool(self._get(0))

    @up.setter
    def up(self, value: bool) -> None:
        self.fab.lib.fab_set_up(self.fab.X, self.index, int(bool(value)))

    @property
    def frames(self) -> int:
        return self._get(1)

    @property
    def bytes(self) -> int:
        return self._get(2)

    @property
    def dropped(self) -> int:
        return self._get(3)


class NativeFabric:
    """The C fabric of a built SimFabric; ``start`` puts it under the engine."""

    runs = 0  # C runs made (fab_run calls), over the process: tests check that it ran

    def __init__(self, fabric: SimFabric, host_wires: bool = False) -> None:
        """``host_wires``: the hosts' wires are C's too (for cellfabric.sim.chosts), each
        switch-to-host wire ending at its host as an endpoint."""
        from cellfabric.sim.hostsim import HostWire
        from cellfabric.sim.net import Wire

        self.engine: Engine = fabric.engine
        self.lib = lib = native_hop.library()
        ffi = self.ffi = build.ffi()
        self.switches: list[SimSwitch] = list(fabric.switches.values())
        index = {name: i for i, name in enumerate(fabric.switches)}
        # (link name, direction, source switch, source port, far end, far port, Wire)
        legs = []
        for lk in fabric.topo.links:
            pair = fabric.link_wires[lk.name]
            for k, (src, sport, dst, dport) in enumerate(((lk.a, lk.a_port, lk.b, lk.b_port),
                                                          (lk.b, lk.b_port, lk.a, lk.a_port))):
                if type(pair[k]) is Wire or (host_wires and type(pair[k]) is HostWire):
                    legs.append((lk.name, k, src, sport, dst, dport, pair[k]))
        if host_wires:  # NVLinks: GPU to GPU, both ends the C hosts' (no link name: the
            # fabric's counters never see their frames, as on the Python path)
            ends = [e for nv in fabric.topo.nvlinks
                    for e in ((nv.a, nv.a_port, nv.b, nv.b_port),
                              (nv.b, nv.b_port, nv.a, nv.a_port))]
            legs += [(None, k, *end, hw) for k, (end, hw) in
                     enumerate(zip(ends, fabric.nvlink_wires, strict=True))]
        self.io = ffi.new("i64[16]")
        X = lib.fab_new(len(self.switches), len(legs), self.io)
        if X == ffi.NULL:
            raise MemoryError("fab_new")
        self.X = ffi.gc(X, lib.fab_free)
        self.wires: list[FabricWire] = []
        self.host_wire_index: dict[str, list[int]] = {}  # host -> its ports' wires
        self.to_host: dict[int, tuple[str, int]] = {}  # wire -> (host, port from 0)
        for w, (name, k, src, sport, dst, dport, wire) in enumerate(legs):
            lib.fab_wire(X, w, index.get(src, -1), sport, index.get(dst, -1), dport,
                         wire.delay_ns, int(getattr(wire, "rate_bps", 0)), int(wire.up),
                         wire.frames, getattr(wire, "bytes", 0), wire.dropped)
            fw = FabricWire(self, w, wire)
            self.wires.append(fw)
            if name is not None:
                fabric.link_wires[name][k] = fw
            else:  # its frames counted in C from now on, as a link's host wire's are
                fabric.nvlink_wires[k] = fw
            if src in index:
                fabric.switches[src].wires[sport] = fw
            else:
                ports = self.host_wire_index.setdefault(src, [])
                ports.extend([-1] * (sport - len(ports)))
                ports[sport - 1] = w
            if dst not in index:
                self.to_host[w] = (dst, dport - 1)
        # the hops C holds pointers to: kept alive here while the fabric lives (a switch that
        # left the C hop drops its NativeHop; C never runs it again, but must not see it freed)
        self._hops: dict[int, Any] = {}
        self.endpoints: Any = None  # cellfabric.sim.chosts.NativeHosts, when the hosts are C's
        # switches whose tables changed since C last ran them: synced before each C run
        self.stale: list[Any] = []
        for i, sw in enumerate(self.switches):
            lib.fab_set_poll_at(X, i, -1 if sw.poll_at is None else sw.poll_at)
            sw.poll_at = None  # C's from now on (a deadline already on the engine reads it)
            sw._fab, sw._fab_index = self, i
            native = getattr(sw.dp.flow, "native", None)
            if native is not None:
                native.on_mark = partial(self.stale.append, native)
                if native.dirty:
                    self.stale.append(native)
            if sw._hop:
                self.register(i, sw._hop)
                self.set_on(i, sw._hop.active)

    def start(self) -> None:
        self.engine.native = self

    # -- the switches' side -----------------------------------------------------------------

    def register(self, i: int, hop: Any) -> None:
        """Switch ``i``'s NativeHop (C runs it while the switch says it is on)."""
        self._hops[i] = hop
        cpu = self.switches[i].dp.cpu_port
        self.lib.fab_set_hop(self.X, i, hop.T, hop.F, hop.out, hop.res,
                             -1 if cpu is None else cpu)

    def set_on(self, i: int, on: bool) -> None:
        self.lib.fab_set_on(self.X, i, int(on))

    def received(self, i: int) -> int:
        return int(self.lib.fab_received(self.X, i))

    def take_poll(self, i: int, t: int) -> bool:
        """SimSwitch._poll's check for a deadline the engine holds: is it still the one?"""
        if self.lib.fab_poll_at(self.X, i) != t:
            return False
        self.lib.fab_set_poll_at(self.X, i, -1)
        return True

    # -- calls that may schedule: the clock and the sequence counter go in and come back -------

    def transmit(self, w: int, frame: bytes) -> None:
        io, eng = self.io, self.engine
        if type(frame) is not bytes:
            frame = bytes(frame)
        io[IO_NOW], io[IO_SEQ] = eng.now, eng._seq
        self.lib.fab_transmit(self.X, w, frame, len(frame))
        eng._seq = io[IO_SEQ]

    def schedule(self, i: int, deadline: int) -> None:
        io, eng = self.io, self.engine
        io[IO_NOW], io[IO_SEQ] = eng.now, eng._seq
        self.lib.fab_schedule(self.X, i, deadline)
        eng._seq = io[IO_SEQ]

    def arrive(self, i: int, port: int, frame: bytes) -> int:
        """A frame into switch ``i`` (active hop, tables synced): 0 when C did it all."""
        io, eng = self.io, self.engine
        io[IO_NOW], io[IO_SEQ] = eng.now, eng._seq
        act = self.lib.fab_arrive(self.X, i, port, frame, len(frame))
        eng._seq = io[IO_SEQ]
        return act

    def service(self, i: int) -> int:
        io, eng = self.io, self.engine
        io[IO_NOW], io[IO_SEQ] = eng.now, eng._seq
        act = self.lib.fab_service(self.X, i)
        eng._seq = io[IO_SEQ]
        return act

    # -- the engine's side --------------------------------------------------------------------

    def pending(self) -> int:
        return int(self.io[IO_PENDING])

    def run(self, bound_t: int, bound_seq: int, until: int, budget: int) -> int:
        """Run C's events before (bound_t, bound_seq) (the engine's next), at or before
        ``until``, at most ``budget`` (-1: any); then what C handed over. Events run."""
        if self.stale:
            for native in self.stale:
                if native.dirty:
                    native.sync()
            self.stale.clear()
        io, eng = self.io, self.engine
        io[IO_NOW], io[IO_SEQ] = eng.now, eng._seq
        io[IO_BOUND_T], io[IO_BOUND_SEQ], io[IO_UNTIL], io[IO_BUDGET] = \
            bound_t, bound_seq, until, budget
        act = self.lib.fab_run(self.X)
        NativeFabric.runs += 1
        eng.now, eng._seq = io[IO_NOW], io[IO_SEQ]
        ran = io[IO_RAN]
        if act:
            self._hand_over(act)
        return ran

    def _hand_over(self, act: int) -> None:
        """What the Python path does for the event C stopped at (already counted)."""
        io = self.io
        if act == ACT_POLL:
            self.switches[io[IO_A]]._poll_fired()
            return
        if act == ACT_POST_SERVICE:
            self.switches[io[IO_A]]._hop_post(False, 0, b"")
            return
        if act == ACT_ENDPOINT:
            self.endpoints.finished(io[IO_A])
            return
        frame = self.ffi.unpack(self.ffi.cast("char *", self.lib.fab_handed(self.X)),
                                io[IO_LEN])
        if act == ACT_DELIVER:
            self.wires[io[IO_A]].deliver(frame)
        else:
            self.switches[io[IO_A]]._hop_post(True, io[IO_B], frame)
