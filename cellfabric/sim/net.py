"""The simulated fabric: one p4sim ``DataPlane`` per switch on the engine's clock, links with
propagation delay, host NICs, and link failures.

Switch egress is the data plane's own traffic manager: in bit-rate mode (``set_link_rate``) it
serializes each port at the link's rate and calls ``transmit`` when a frame's first bit leaves;
the link adds the serialization time (bytes x 8 / rate) and the propagation delay, so the far
end receives the frame when its last bit arrives (store and forward). In packet mode (the
emulation's settings: rates in packets per second, depths in packets) the queue paces the port
and the wire itself is instant, as a veth is.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from cellfabric.sim.engine import NS, Engine
from cellfabric.sim.hop import HopSwitch
from cellfabric.sim.hostsim import HostWire, SimHost
from controlplane.fabric_plan import QueuePlan
from p4sim.switch import native_select
from p4sim.switch.dataplane import DataPlane
from topologies.model import LinkSpec, Topology

if TYPE_CHECKING:
    from cellfabric.sim.cfabric import FabricWire

PRIORITY_QUEUES = 2  # as the emulated switches run (cellfabric.emulation.network)


@dataclass
class LinkModel:
    rate_bps: int  # 0: packet mode (the topology's queue rates); else bits per second
    delay_ns: int
    buffer_bytes: int


@dataclass
class Wire:
    """One direction of a link leaving a switch port."""

    engine: Engine
    rate_bps: int
    delay_ns: int
    deliver: Any  # fn(frame)
    up: bool = True
    frames: int = 0
    bytes: int = 0  # as sent on the wire (after this hop's changes, e.g. INT added)
    dropped: int = 0

    def transmit(self, frame: bytes) -> None:
        if not self.up:
            self.dropped += 1
            return
        self.frames += 1
        n = len(frame)
        self.bytes += n
        engine = self.engine
        rate = self.rate_bps
        ser = -(-n * 8 * NS // rate) if rate else 0
        engine.at(engine.now + ser + self.delay_ns, self._arrive, frame)

    def _arrive(self, frame: bytes) -> None:
        if self.up:
            self.deliver(frame)
        else:
            self.dropped += 1


class SimSwitch(HopSwitch):
    """A DataPlane driven by the engine: frames in at their arrival time, ``poll`` at every
    deadline the traffic manager names."""

    # After an arrival, ask the traffic manager for its deadline alone (False: the plain
    # path, a second dp.poll(); tests/sim/test_sim_fast_paths.py holds the two equal).
    deadline_only = True
    # After an arrival, check for a new peak only the port the traffic manager enqueued on
    # when it enqueued once since the last check (False: the plain path, every port; held
    # equal by the same test).
    peak_one_port = True
    # Run the hop (ingress, the traffic manager, egress) in one C call where the switch runs
    # the native data plane in bit-rate mode (p4sim.switch.native.hop; False: the plain path,
    # held equal by tests/sim/test_sim_hop.py).
    native_hop = True

    def __init__(self, engine: Engine, name: str, device_id: int, rng: random.Random) -> None:
        self.engine = engine
        self.name = name
        self.wires: dict[int, Wire | FabricWire] = {}  # FabricWire: the C fabric's
        self.dp = DataPlane(device_id=device_id, priorities=PRIORITY_QUEUES,
                            transmit=self._transmit, wake=self._wake,
                            clock=lambda: engine.now, rng=rng)
        self.poll_at: int | None = None
        self._received = 0
        # cellfabric.sim.cfabric.NativeFabric once the run has started it (None: the plain
        # path): then this switch's deadlines and its wires' frames are events of C's heap
        self._fab: Any = None
        self._fab_index = -1
        self.peak: dict[int, int] = {}  # port -> most packets queued at once
        self._enqueues = 0  # the traffic manager's enqueue count at the last peak check
        self._hop: Any = None  # NativeHop once made; False: this switch runs the plain path
        if not callable(getattr(self.dp.tm, "next_deadline", None)):
            self.deadline_only = False  # a traffic manager without it: the plain path
        if not hasattr(self.dp.tm, "enqueues"):
            self.peak_one_port = False  # a traffic manager that does not count them

    @property
    def received(self) -> int:
        """Frames that arrived (on the Python path and in the C fabric)."""
        fab = self._fab
        return self._received + (fab.received(self._fab_index) if fab is not None else 0)

    def _transmit(self, port: int, frame: bytes) -> None:
        wire = self.wires.get(port)
        if wire is not None:
            wire.transmit(frame)

    def receive(self, port: int, frame: bytes) -> None:
        hop = self._hop
        if hop is not False and ((hop is not None and hop.active) or self._hop_start()):
            self._hop_receive(port, frame)
            return
        self._received += 1
        self.dp.receive(port, frame)
        self._after_receive()

    def _after_receive(self) -> None:
        dp = self.dp
        tm = dp.tm
        if tm.backlog:
            # Only an arrival grows a queue, so checking here catches every peak exactly.
            peak = self.peak
            grown = tm.enqueues - self._enqueues
            self._enqueues = tm.enqueues
            if grown == 1 and self.peak_one_port:
                # no other port's backlog has grown since the last check
                p = tm.last_enqueue_port
                waiting = tm.port_backlog.get(p, 0)
                if waiting > peak.get(p, 0):
                    peak[p] = waiting
            elif grown or not self.peak_one_port:
                for p, waiting in tm.port_backlog.items():
                    if waiting > peak.get(p, 0):
                        peak[p] = waiting
            # receive() has already served all that may leave now, so a second pass
            # (dp.poll) would dequeue nothing: only the next deadline is wanted.
            self._schedule(tm.next_deadline() if self.deadline_only else dp.poll())

    def line_free_ns(self) -> int:
        """When every port's line has finished the last packet it started (serialization in
        bit-rate mode, its 1 / rate slot in packet mode)."""
        if self._hop and self._hop.active:
            return self._hop.line_free_ns()
        return max((link.ready_at() for link in self.dp.tm.links.values()), default=0)

    def _wake(self) -> None:
        self._schedule(self.engine.now)

    def _schedule(self, deadline: int | None) -> None:
        if deadline is None:
            return
        if self._fab is not None:  # the deadline is C's (the same rules, in fabric.c)
            self._fab.schedule(self._fab_index, deadline)
            return
        now = self.engine.now
        if deadline < now:
            deadline = now
        if self.poll_at is None or deadline < self.poll_at or self.poll_at < now:
            self.poll_at = deadline
            self.engine.at(deadline, self._poll, deadline)

    def _poll(self, t: int) -> None:
        fab = self._fab
        if fab is not None:  # a deadline set before the C fabric took the switch's over
            if not fab.take_poll(self._fab_index, t):
                return
        elif t != self.poll_at:
            return  # a newer, earlier wake-up replaced this one
        else:
            self.poll_at = None
        self._poll_fired()

    def _poll_fired(self) -> None:
        """A deadline that is still the switch's: serve what may leave, schedule the next."""
        hop = self._hop
        if hop and hop.active:
            self._hop_poll()
        else:
            self._schedule(self.dp.poll())

    def port_samples(self, counter: str) -> tuple[list[int], list[int], list[int]]:
        """(ports with a wire, their ``counter`` packets, their queue depths): the run's
        periodic sample of this switch, in one read of each."""
        ports = list(self.wires)
        return ports, self.dp.counter_packets(counter, ports), self.queue_depths(ports)

    def queue_depths(self, ports: list[int]) -> list[int]:
        """Packets waiting for each of ``ports`` now (all priorities): the C hop's queues
        while it runs, else the traffic manager's."""
        hop = self._hop
        if hop and hop.active:
            return hop.backlogs(ports)
        backlog = self.dp.tm.port_backlog
        return [backlog.get(p, 0) for p in ports]

    def queue_depth(self, port: int) -> int:
        """Packets waiting for ``port`` now (all priorities)."""
        return self.queue_depths([port])[0]


@dataclass
class SimFabric:
    # Run the switch-to-switch part of the fabric (the hops, the wires between switch ports,
    # their events) in C where the run allows it (cellfabric.sim.cfabric; False: the plain
    # path, held equal by tests/sim/test_sim_fabric.py).
    native_fabric: ClassVar[bool] = True
    # Run the hosts there too where the run allows it (cellfabric.sim.chosts; False: the
    # Python hosts, held equal by tests/sim/test_sim_chosts.py).
    native_hosts: ClassVar[bool] = True

    topo: Topology
    engine: Engine
    model: LinkModel
    seed: int = 0  # every switch's random() draws from its own generator, seeded from this
    switches: dict[str, SimSwitch] = field(default_factory=dict)
    hosts: dict[str, SimHost] = field(default_factory=dict)
    # link name -> the wires of both directions (switch Wire or HostWire)
    link_wires: dict[str, list[Any]] = field(default_factory=dict)
    nvlink_wires: list[HostWire] = field(default_factory=list)  # both directions of each
    chosts: Any = None  # cellfabric.sim.chosts.NativeHosts once the hosts run in C

    def build(self) -> None:
        topo, engine = self.topo, self.engine
        for name, sw in topo.switches.items():
            self.switches[name] = SimSwitch(engine, name, sw.device_id, self.switch_rng(name))
        for name, h in topo.hosts.items():
            ports = topo.host_ports(name)
            self.hosts[name] = SimHost(name, [h.nic_mac(i) for i in range(ports)])
            self.hosts[name].wires = [None] * ports  # type: ignore[list-item]
        for lk in topo.links:
            self.link_wires[lk.name] = [self._wire(lk.a, lk.a_port, lk.b, lk.b_port),
                                        self._wire(lk.b, lk.b_port, lk.a, lk.a_port)]
        self._nvlinks()

    def _nvlinks(self) -> None:
        """Each NVLink: a host wire each way, GPU to GPU, at the NIC's rate times
        nvlink_rate / nic_rate (packet mode: instant, as the emulation's direct veth) and one
        hop's delay. No switch is on it, so the fabric's counters never see its frames."""
        m = self.model
        rate = m.rate_bps * self.topo.server_settings.nvlink_ratio if m.rate_bps else 0
        for nv in self.topo.nvlinks:
            for src, sport, dst, dport in ((nv.a, nv.a_port, nv.b, nv.b_port),
                                           (nv.b, nv.b_port, nv.a, nv.a_port)):
                hw = HostWire(self.engine, rate, m.delay_ns, self._deliver_to(dst, dport))
                self.hosts[src].wires[sport - 1] = hw
                self.nvlink_wires.append(hw)

    def switch_rng(self, name: str) -> random.Random:
        """The switch's own generator (fabric.p4's random(): ECN marking), injected like its
        clock, so a run is a function of its seed and the draws of one switch do not depend
        on the order in which the others' packets happen to be processed. It gives
        random.Random's sequence for that seed, from a state in C memory that the native path
        draws from directly when it can (native_select.new_rng)."""
        return native_select.new_rng(f"{self.seed}:{name}")

    def _deliver_to(self, node: str, port: int) -> Any:
        if node in self.switches:
            return partial(self.switches[node].receive, port)
        return partial(self.hosts[node].receive_on, port - 1)

    def _wire(self, src: str, src_port: int, dst: str, dst_port: int) -> Any:
        deliver = self._deliver_to(dst, dst_port)
        m = self.model
        if src in self.switches:
            wire = Wire(self.engine, m.rate_bps, m.delay_ns, deliver)
            self.switches[src].wires[src_port] = wire
            return wire
        # Host NICs run at the link rate (in packet mode instantly, as a veth does).
        hw = HostWire(self.engine, m.rate_bps, m.delay_ns, deliver)
        self.hosts[src].wires[src_port - 1] = hw
        return hw

    def apply_queue(self, switch: str, q: QueuePlan) -> None:
        """The controller's queue plan for a port: the topology's packet rate and depth in
        packet mode; in bit-rate mode the link's rate and byte buffer instead."""
        dp = self.switches[switch].dp
        m = self.model
        if m.rate_bps:
            dp.set_queue_rate(0, q.port)
            dp.set_queue_depth(1 << 30, q.port)
            dp.set_link_rate(m.rate_bps, m.buffer_bytes, q.port)
        else:  # as the emulation's SwitchAdmin sets p4sim: the line shared by both queues
            dp.set_queue_rate(q.line_pps, q.port)
            dp.set_port_rate(q.line_pps, q.port)
            dp.set_queue_depth(q.depth, q.port)

    def set_link(self, lk: LinkSpec, up: bool) -> None:
        """Carrier on both ends goes down (or up): frames on the wire are lost."""
        for wire in self.link_wires[lk.name]:
            wire.up = up
        for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if node in self.switches:
                self.switches[node].dp.set_link_up(port, up)

    def start_native(self, traced: bool,
                     hosts_refusal: Callable[[SimFabric], str | None] | None = None,
                     ) -> tuple[str | None, str | None]:
        """Put the switches and their wires into the C fabric (once, before the workload's
        first event) when it covers this run, and the hosts too when ``hosts_refusal`` (the
        run's cellfabric.sim.chosts.refusal) admits them; (why not the fabric, why not the
        hosts), None for what runs in C."""
        from cellfabric.sim import cfabric

        why = "off" if not self.native_fabric else cfabric.refusal(self, traced)
        if why is not None:
            return why, "the C fabric is off"
        hosts_why = "off" if hosts_refusal is None or not self.native_hosts \
            else hosts_refusal(self)
        nf = cfabric.NativeFabric(self, host_wires=hosts_why is None)
        if hosts_why is None:
            from cellfabric.sim.chosts import NativeHosts

            self.chosts = nf.endpoints = NativeHosts(self, nf)
        nf.start()
        return None, hosts_why
