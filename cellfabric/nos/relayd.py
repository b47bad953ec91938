"""The in-band relay of one switch as a process of its own: CPU-port veth <-> the TAPs.

``python -m cellfabric.nos.relayd SPEC.json`` (started by ``relay.PortRelay``). SPEC names
the switch's namespace, its TAPs by port, the veth end the switch's CPU port is wired to, the
controller headers' layouts (from the P4Info, ``controlplane.cpuport``) and the stats file.
The process holds nothing else: BFD's frames never wait for the harness's threads (route
agents, the monitor, the workload's bookkeeping) to let go of its interpreter lock, which
behind a burst of route writes took longer than BFD's detection time. It imports the standard
library and two modules built on it only, so that it starts in a few tens of milliseconds.

It prints ``ready`` once the TAPs and the veth are open, or one line on stderr and exits 1.
It writes its counters to the stats file (replaced whole, so a reader never sees half of it)
at most every STATS_EVERY_S while frames flow, and once more at SIGTERM, then exits 0; it
also ends when its parent does (a harness killed outright leaves no relay behind).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cellfabric.nos.namespace import NamespaceError, open_taps
from controlplane.cpuport import ControllerHeader

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # a packet socket's pkttype for a frame sent from this host
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # Linux 4.20 on: the socket is not handed what it sent itself
MAX_FRAME = 65536
STATS_EVERY_S = 1.0
POLL_S = 0.2


class Relay:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.netns: str = spec["netns"]
        self.cpu_ifname: str = spec["cpu_ifname"]
        self.stats_path = Path(spec["stats"])
        self.packet_in = ControllerHeader.from_layout("packet_in", spec["packet_in"])
        self.packet_out = ControllerHeader.from_layout("packet_out", spec["packet_out"])
        self.tap_of = {int(port): ifname for port, ifname in spec["ports"].items()}
        self.fd_of: dict[int, int] = {}
        self.port_of: dict[int, int] = {}
        self.to_tap: Counter[int] = Counter()
        self.from_tap: Counter[int] = Counter()
        self.unknown_port = 0
        self.malformed = 0
        self.stopping = False
        self.sock: socket.socket | None = None

    def open(self) -> None:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            sock.bind((self.cpu_ifname, 0))
        except OSError as exc:
            sock.close()
            raise NamespaceError(f"{self.netns}: CPU port interface {self.cpu_ifname}: "
                                 f"{exc.strerror}") from None
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            # every PacketOut this relay writes would otherwise wake it once more, to be
            # recognised as its own and skipped (from_switch still checks, for older kernels)
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        self.sock = sock
        fds = open_taps(self.netns, list(self.tap_of.values()))
        for port, ifname in self.tap_of.items():
            self.fd_of[port] = fds[ifname]
            self.port_of[fds[ifname]] = port
            os.set_blocking(fds[ifname], False)

    def run(self) -> None:
        assert self.sock is not None
        sock, cpu = self.sock, self.sock.fileno()
        poller = select.epoll()
        for fd in (cpu, *self.port_of):
            poller.register(fd, select.EPOLLIN)
        last_stats, dirty = 0.0, False
        parent = os.getppid()
        while not self.stopping:
            if os.getppid() != parent:  # the harness died without stopping us: so do we
                break
            try:
                ready = poller.poll(POLL_S)
            except InterruptedError:
                continue
            for fd, _ in ready:
                try:
                    if fd == cpu:
                        self.from_switch(sock)
                    else:
                        self.to_switch(fd, sock)
                    dirty = True
                except BlockingIOError:
                    continue
                except OSError:  # the veth or a TAP went away: the run is ending
                    self.stopping = True
                    break
            now = time.monotonic()
            if dirty and now - last_stats >= STATS_EVERY_S:
                self.write_stats()
                last_stats, dirty = now, False
        poller.close()
        self.write_stats()

    def from_switch(self, sock: socket.socket) -> None:
        frame, addr = sock.recvfrom(MAX_FRAME)
        if addr[2] == PACKET_OUTGOING:
            return
        split = self.packet_in.unpack(frame)
        if split is None:
            self.malformed += 1
            return
        meta, packet = split
        port = meta.get("ingress_port", -1)
        fd = self.fd_of.get(port)
        if fd is None:
            self.unknown_port += 1
            return
        try:
            os.write(fd, packet)
            self.to_tap[port] += 1
        except OSError:  # TAP full or gone: the frame is lost, as on a busy wire
            pass

    def to_switch(self, fd: int, sock: socket.socket) -> None:
        packet = os.read(fd, MAX_FRAME)
        port = self.port_of[fd]
        try:
            sock.send(self.packet_out.pack({"egress_port": port}) + packet)
        except BlockingIOError:  # the veth's queue is full: lost, as on a busy wire
            return
        self.from_tap[port] += 1

    def write_stats(self) -> None:
        data = {"to_tap": {str(p): n for p, n in self.to_tap.items()},
                "from_tap": {str(p): n for p, n in self.from_tap.items()},
                "unknown_port": self.unknown_port, "malformed": self.malformed}
        tmp = self.stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.stats_path)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m cellfabric.nos.relayd SPEC.json", file=sys.stderr)
        return 2
    try:
        relay = Relay(json.loads(Path(argv[0]).read_text()))
        relay.open()
    except (OSError, ValueError, KeyError, NamespaceError) as exc:
        print(f"relayd: {argv[0]}: {exc}", file=sys.stderr)
        return 1

    def stop(_sig: int, _frame: object) -> None:
        relay.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness's Ctrl-C: it stops us
    relay.write_stats()
    print("ready", flush=True)
    relay.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
