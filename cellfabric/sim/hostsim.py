"""Simulated end hosts: the unchanged ``hosts.sender.Sender`` / ``hosts.receiver.Receiver``
on the engine's clock, with NIC ports that serialize frames onto simulated links.

A host has one ``HostWire`` per NIC port (the transmit side of its link: a FIFO drained at the
link's bit rate, then the propagation delay). Every sender and the receiver of a host get
their own ``SimNic`` objects over those wires (their per-port state is theirs, as the
emulation's separate processes have their own sockets), and the host hands each arriving frame
to the program it is for: data cells to the receiver, ACKs and CNPs to the sender of their QPN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cellfabric.sim.engine import NS, Engine, to_ns
from hosts import wire
from hosts.cells import RoceFrame, parse_roce
from hosts.nic import NicPort, PortState
from hosts.program import HostProgram

SEND_BUFFER_BYTES = 4 << 20  # like the emulated NIC socket's send buffer: beyond, send fails


class HostWire:
    """One NIC port's transmit side: serialization at ``rate_bps`` (0: instant, like a veth),
    then ``delay_ns`` to the far end, where ``deliver(frame)`` runs."""

    def __init__(self, engine: Engine, rate_bps: float, delay_ns: int,
                 deliver: Callable[[bytes], None]) -> None:
        self.engine = engine
        self.ns_per_byte = 8 * NS / rate_bps if rate_bps > 0 else 0.0
        self.delay_ns = delay_ns
        self.deliver = deliver
        self.free_at = 0.0  # ns (fractional): when the last queued frame's last bit leaves
        self.up = True
        self.frames = 0
        self.dropped = 0

    def send(self, frame: bytes | bytearray) -> bool:
        if not self.up:
            self.dropped += 1
            return False
        now = self.engine.now
        start = self.free_at if self.free_at > now else now
        if (start - now) / max(self.ns_per_byte, 1e-12) > SEND_BUFFER_BYTES:
            return False
        self.free_at = start + len(frame) * self.ns_per_byte
        self.frames += 1
        self.engine.at(to_ns((self.free_at + self.delay_ns) / NS), self._arrive, bytes(frame))
        return True

    def _arrive(self, frame: bytes) -> None:
        if self.up:
            self.deliver(frame)
        else:
            self.dropped += 1


@dataclass
class SimNic(PortState):
    """A host program's view of one NIC port (a ``hosts.nic.NicPort``): frames go onto its
    host's wire and arrive through ``SimHost.receive``."""

    wire: HostWire | None = None
    sock: None = None  # no socket to wait on
    host_port: int = 0  # which of the host's ports (0-based) this is; ``index`` is the
    # program's own numbering (a sender on one NVLink has it as its port 0)

    def open(self) -> SimNic:
        return self

    def send(self, frame: bytes | bytearray) -> bool:
        assert self.wire is not None
        if self.wire.send(frame):
            self.sent += 1
            return True
        self.send_errors += 1
        return False

    def recv_into(self, buf: bytearray) -> int:
        return 0  # frames are handed over by the host (SimHost.receive), never polled

    def oper_up(self) -> bool:
        return self.wire is not None and self.wire.up

    def close(self) -> None:
        pass


class Program:
    """Drives one host program on the engine: runs it at its next deadline, and at once after
    each frame it receives. A wake-up made stale by a newer one is skipped when it fires."""

    def __init__(self, engine: Engine, node: HostProgram,
                 on_done: Callable[[Program], None] | None = None) -> None:
        self.engine = engine
        self.node = node
        self.on_done = on_done
        self.wake_at: int | None = None
        self.done = False
        self.polls = 0
        self.plan: Any = None  # the runner's HostPlan this program was made from
        self.metrics: dict[str, Any] | None = None  # its metrics, once its step is over
        # the program's ports by the host port each is (a sender on an NVLink has one port)
        self._by_host_port = {getattr(p, "host_port", p.index): p for p in node.ports}

    def nic(self, index: int) -> NicPort:
        return self.node.ports[index]

    def start(self) -> None:
        self.node.begin()
        self._run()

    def receive(self, frame: bytes, nic: int, parsed: RoceFrame | None = None) -> None:
        """A frame that arrived on the host's port ``nic`` (0-based), with what
        ``parse_roce`` made of it when the host parsed it already (to route it)."""
        if self.done:
            return
        port = self._by_host_port.get(nic)
        if port is None:
            return  # not a port of this program (a stray frame on another link)
        self.node.on_frame(frame, len(frame), self.engine.clock(), port, parsed)
        self._run()

    def _wake(self, t_ns: int) -> None:
        if t_ns == self.wake_at and not self.done:
            self.wake_at = None
            self._run()

    def _run(self) -> None:
        self.polls += 1
        now = self.engine.clock()
        deadline = self.node.poll(now)
        if deadline is None:
            self.done = True
            if self.on_done is not None:
                self.on_done(self)
            return
        if deadline == math.inf:
            return  # nothing due until a frame arrives
        # A deadline after now is at least a nanosecond later: the clock must move on.
        at = max(self.engine.now + 1, to_ns(deadline)) if deadline > now else self.engine.now
        if self.wake_at is None or at < self.wake_at or self.wake_at < self.engine.now:
            self.wake_at = at
            self.engine.at(at, self._wake, at)


class SimHost:
    """A host's NIC wires and the programs running on it (per workload step)."""

    def __init__(self, name: str, macs: list[str]) -> None:
        self.name = name
        self.macs = macs
        self.wires: list[HostWire] = []
        self.receiver: Program | None = None
        self.senders: dict[int, Program] = {}  # by QPN
        self.unclaimed = 0  # frames for no running program (e.g. late ACKs of a past step)
        # the INT collector, when this host is the fabric's: takes Telemetry Reports' UDP
        # payloads (hosts.collector.Collector.ingest)
        self.collector: Callable[[bytes], None] | None = None

    def nics(self, ifaces: list[str]) -> list[NicPort]:
        """A program's ports, by the names the simulator's plan gives them (``HOST-ethI``:
        the host's port I, 0-based; run.py names them so)."""
        out: list[NicPort] = []
        for i, name in enumerate(ifaces):
            port = int(name.rpartition("-eth")[2])
            out.append(SimNic(i, name, self.macs[port], wire=self.wires[port], host_port=port))
        return out

    def receive_on(self, nic: int, frame: bytes) -> None:
        """``receive`` with the NIC first (a link's delivery function binds it)."""
        self.receive(frame, nic)

    def receive(self, frame: bytes, nic: int) -> None:
        f = parse_roce(frame)
        if f is None:
            report = telemetry_payload(frame) if self.collector is not None else None
            if report is not None:
                self.collector(report)
            else:
                self.unclaimed += 1
            return
        if f.opcode in wire.DATA_OPCODES:
            prog = self.receiver
        else:
            prog = self.senders.get(f.qpn)
        if prog is None:
            self.unclaimed += 1
            return
        prog.receive(frame, nic, f)


def telemetry_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an IPv4 frame to the Telemetry Report port, else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    udp = 14 + (frame[14] & 0x0F) * 4
    if len(frame) < udp + 8 or int.from_bytes(frame[udp + 2:udp + 4], "big") != \
            wire.TELEMETRY_REPORT_PORT:
        return None
    return frame[udp + 8:udp + int.from_bytes(frame[udp + 4:udp + 6], "big")]
