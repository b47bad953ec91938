"""Switch ports on Linux interfaces (AF_PACKET raw sockets) and the packet I/O loop.

One thread polls every port socket; frames are processed to completion under the data plane's
lock, then the traffic manager is serviced, and the poll timeout follows the next paced
departure. Copies of frames the switch itself sent (PACKET_OUTGOING) are ignored. Link status
(carrier) is polled so a port whose link goes down is down for action selector ``watch_port``.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
from typing import Any, BinaryIO

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
RECV_BATCH = 64
RECV_SIZE = 65536
LINK_POLL_S = 0.25


class PcapWriter:
    """Classic pcap (microsecond timestamps, Ethernet link type)."""

    def __init__(self, path: str) -> None:
        self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))

    def write(self, frame: bytes) -> None:
        t = time.time()
        sec = int(t)
        self.f.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(frame), len(frame)))
        self.f.write(frame)

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def link_carrier(ifname: str) -> bool:
    """Whether the port's link is up, as BMv2 decides it: the interface's operstate begins
    with 'u' ("up", or "unknown" for devices without carrier reporting such as TUN)."""
    try:
        with open(f"/sys/class/net/{ifname}/operstate") as f:
            return f.read(1) == "u"
    except OSError:
        return False


class PortIO:
    def __init__(self, dp: Any, interfaces: dict[int, str], pcap_dir: str | None = None) -> None:
        self.dp = dp
        self.interfaces = dict(interfaces)
        self.socks: dict[int, socket.socket] = {}
        self.by_fd: dict[int, tuple[int, socket.socket]] = {}
        self.pcap_in: dict[int, PcapWriter] = {}
        self.pcap_out: dict[int, PcapWriter] = {}
        self.tx_errors = 0
        self.loop_errors = 0
        self.resting: dict[int, float] = {}  # fd -> time its socket is polled again
        self.filtered: set[int] = set()  # ports whose socket drops outgoing copies in-kernel
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        for port, ifname in self.interfaces.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            try:
                s.bind((ifname, ETH_P_ALL))
            except OSError as e:
                s.close()
                self.close()
                raise OSError(f"port {port}: cannot open interface '{ifname}': "
                              f"{e.strerror}") from None
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setblocking(False)
            try:
                # Linux >= 4.20: the kernel does not hand us copies of our own transmissions,
                # so the receive loop needs no per-frame address check.
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                self.filtered.add(port)
            except OSError:
                pass
            self.socks[port] = s
            self.by_fd[s.fileno()] = (port, s)
            if pcap_dir:
                os.makedirs(pcap_dir, exist_ok=True)
                self.pcap_in[port] = PcapWriter(os.path.join(pcap_dir, f"{ifname}_in.pcap"))
                self.pcap_out[port] = PcapWriter(os.path.join(pcap_dir, f"{ifname}_out.pcap"))
        dp.tx = self.tx
        dp.wake = self.wake
        self.thread: threading.Thread | None = None

    def tx(self, port: int, frame: bytes) -> None:
        # Sent inline: a separate transmit thread was measured slower (the GIL hand-offs
        # around every send cost more than the overlap gains on these machines).
        s = self.socks.get(port)
        if s is None:
            return  # no such port: dropped, as BMv2 does
        if self.pcap_out:
            self.pcap_out[port].write(frame)
        try:
            s.send(frame)
        except OSError:
            self.tx_errors += 1  # e.g. link down or a full socket buffer

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="p4sim-ports", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        if self.thread is not None:
            self.thread.join(timeout=2)
        self.close()

    def close(self) -> None:
        for s in self.socks.values():
            s.close()
        self.socks.clear()
        for w in [*self.pcap_in.values(), *self.pcap_out.values()]:
            w.close()
        self.pcap_in.clear()
        self.pcap_out.clear()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def _poll_links(self) -> None:
        for port, ifname in self.interfaces.items():
            self.dp.set_link_up(port, link_carrier(ifname))
            s = self.socks.get(port)
            if s is not None:
                try:
                    # struct tpacket_stats {packets, drops}; reading resets the kernel's counts.
                    _, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
                except OSError:
                    continue
                if drops:
                    self.dp.add_socket_drops(port, drops)

    def run(self) -> None:
        poller = select.poll()
        for fd in self.by_fd:
            poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        timers = [0.0, 0.0]  # next link poll, next pcap flush
        while not self._stop.is_set():
            try:
                self._iteration(poller, timers)
            except Exception as e:  # never let one bad iteration stop the switch's ports
                self.loop_errors += 1
                if self.dp.log is not None:
                    self.dp.log(f"port loop error: {type(e).__name__}: {e}")

    def _iteration(self, poller: Any, timers: list[float]) -> None:
        """Wait for frames (or the next paced departure), process them, service the queues."""
        dp = self.dp
        receive_batch = dp.receive_batch
        pcap_in = self.pcap_in
        now = time.monotonic()
        for fd, until in list(self.resting.items()):
            if now >= until:
                del self.resting[fd]
                poller.register(fd, select.POLLIN)
        deadline = dp.next_deadline()
        timeout = LINK_POLL_S if deadline is None else min(max(deadline - now, 0.0), LINK_POLL_S)
        for fd, _ in poller.poll(timeout * 1000.0):
            if fd == self._wake_r:
                with contextlib.suppress(OSError):
                    os.read(fd, 4096)
                continue
            port, s = self.by_fd[fd]
            filtered = port in self.filtered
            recv, recvfrom = s.recv, s.recvfrom
            batch: list[bytes] = []
            for _ in range(RECV_BATCH):
                try:
                    if filtered:
                        frame = recv(RECV_SIZE)
                    else:
                        frame, addr = recvfrom(RECV_SIZE)
                        if addr[2] == PACKET_OUTGOING:
                            continue
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    # E.g. the interface went away: rest this socket a while rather than spin
                    # on its error, and keep serving the others.
                    poller.unregister(fd)
                    self.resting[fd] = now + LINK_POLL_S
                    break
                if pcap_in:
                    pcap_in[port].write(frame)
                batch.append(frame)
            if batch:
                receive_batch(port, batch)
        if dp.tm.backlog:
            dp.service()
        now = time.monotonic()
        if now >= timers[0]:
            self._poll_links()
            dp.check_idle(now)
            timers[0] = now + LINK_POLL_S
        if (self.pcap_in or self.pcap_out) and now >= timers[1]:
            for w in [*self.pcap_in.values(), *self.pcap_out.values()]:
                w.flush()
            timers[1] = now + 0.5
