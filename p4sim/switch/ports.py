"""Switch ports on Linux interfaces (AF_PACKET raw sockets) and the packet I/O loop.

One thread polls every port socket; frames are handed to the data plane (``receive_batch``),
then ``poll()`` runs whatever egress is due and gives the next paced departure, which sets the
poll timeout. The ports drive the data plane only through its public calls: the data plane gets
``tx`` and ``wake`` as its transmit and wake-up functions (``DataPlane.set_transmit_fn``). Copies of frames the switch itself sent (PACKET_OUTGOING) are ignored. Link status
(carrier) is polled so a port whose link goes down is down for action selector ``watch_port``.

Transmit waits when the kernel cannot take more, as BMv2's blocking send does: a send that
finds the socket's buffer full (a ``tc`` rate limit or a full veth holds the frames) keeps the
frame, blocks the port in the traffic manager and asks for POLLOUT; until the kernel takes the
frame, the port's packets wait in the switch's queue, where P4 sees ``enq_qdepth``, ECN marks
them and the queue tail-drops, and the queue drains at the link's rate.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
from collections import deque
from typing import Any, BinaryIO

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
# Linux takes a received frame's outer VLAN tag off (the NIC's or veth's VLAN offload) and
# hands it to a packet socket only as ancillary data (struct tpacket_auxdata); libpcap puts
# it back into the frame, so BMv2's program sees the tag, and so do these ports.
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
AUXDATA = struct.Struct("=IIIHHHH")  # status, len, snaplen, mac, net, vlan_tci, vlan_tpid
AUX_SPACE = socket.CMSG_SPACE(AUXDATA.size)
ETH_P_8021Q = 0x8100
RECV_BATCH = 64
# BMv2 opens its ports with pcap's default snap length and drops what pcap had to truncate:
# frames up to this size are processed whatever the MTU (jumbo or not), longer ones dropped.
SNAPLEN = 262144
LINK_POLL_S = 0.25
# Frames a blocked port may still be handed (a packet-out, a frame egress had already decided)
# beyond the one its send refused; more are transmit errors.
PENDING_LIMIT = 64


class PcapWriter:
    """Classic pcap (microsecond timestamps, Ethernet link type)."""

    def __init__(self, path: str) -> None:
        self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))

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
    def __init__(self, interfaces: dict[int, str], pcap_dir: str | None = None) -> None:
        self.dp: Any = None  # the data plane, given to start()
        self.interfaces = dict(interfaces)
        self.socks: dict[int, socket.socket] = {}
        self.by_fd: dict[int, tuple[int, socket.socket]] = {}
        self.pcap_in: dict[int, PcapWriter] = {}
        self.pcap_out: dict[int, PcapWriter] = {}
        self.tx_errors = 0
        self._buf = bytearray(SNAPLEN)  # every frame is read into this, then copied out
        self._view = memoryview(self._buf)
        self.loop_errors = 0
        self.resting: dict[int, float] = {}  # fd -> time its socket is polled again
        self.filtered: set[int] = set()  # ports whose socket drops outgoing copies in-kernel
        self.pending: dict[int, deque[bytes]] = {}  # port -> frames its full socket refused
        self._poller: Any = None
        self._want_out: set[int] = set()  # blocked ports whose fd needs POLLOUT set
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
            # The send buffer stays the kernel's default, as libpcap leaves BMv2's: it bounds
            # what a rate-limited link holds in the kernel (a few dozen frames), so a slow
            # port's backlog waits in the switch's queue instead (see the module docstring).
            # A veth without a qdisc frees each frame at send, so it never fills there.
            s.setblocking(False)
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
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
        self.thread: threading.Thread | None = None

    def tx(self, port: int, frame: bytes) -> None:
        # Sent inline: a separate transmit thread was measured slower (the GIL hand-offs
        # around every send cost more than the overlap gains on these machines).
        s = self.socks.get(port)
        if s is None:
            return  # no such port: dropped, as BMv2 does
        if self.pcap_out:
            self.pcap_out[port].write(frame)
        waiting = self.pending.get(port)
        if waiting:
            if len(waiting) >= PENDING_LIMIT:
                self.tx_errors += 1
            else:
                waiting.append(frame)
            return
        try:
            s.send(frame)
        except BlockingIOError:
            self._block(port, frame)
        except OSError:
            self.tx_errors += 1  # e.g. link down, or the qdisc dropped it (ENOBUFS)

    def _block(self, port: int, frame: bytes) -> None:
        """The kernel refused ``frame`` for now: keep it and stop the port's egress."""
        self.pending[port] = deque((frame,))
        self.dp.tm.block(port)
        self._want_out.add(port)
        if threading.current_thread() is not self.thread:
            self.wake()  # the I/O loop sets POLLOUT (a poll object is not shared)

    def _flush(self, port: int, fd: int, s: socket.socket) -> None:
        """POLLOUT on a blocked port: send what waits; when all is sent, egress resumes."""
        waiting = self.pending.get(port)
        while waiting:
            try:
                s.send(waiting[0])
            except BlockingIOError:
                return
            except OSError:
                self.tx_errors += 1
            waiting.popleft()
        self.pending.pop(port, None)
        with contextlib.suppress(OSError):  # a resting socket is not registered
            self._poller.modify(fd, select.POLLIN)
        with self.dp.lock:
            self.dp.tm.unblock(port)

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def start(self, dp: Any) -> None:
        """Run the I/O loop for ``dp`` (whose transmit/wake functions should be ours)."""
        self.dp = dp
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
        poller = self._poller = select.poll()
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

    def _read(self, fd: int, port: int, s: socket.socket, poller: Any,
              now: float) -> list[bytes]:
        """Up to RECV_BATCH frames waiting on port ``port``'s socket."""
        filtered = port in self.filtered
        recvmsg = s.recvmsg_into
        buf, view, pcap = self._buf, self._view, self.pcap_in.get(port)
        buffers = [buf]
        batch: list[bytes] = []
        truncated = 0
        for _ in range(RECV_BATCH):
            try:
                # MSG_TRUNC: the frame's real length even when it did not fit the buffer.
                n, anc, _, addr = recvmsg(buffers, AUX_SPACE, socket.MSG_TRUNC)
                if not filtered and addr[2] == PACKET_OUTGOING:
                    continue
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # E.g. the interface went away: rest this socket a while rather than spin on
                # its error, and keep serving the others.
                poller.unregister(fd)
                self.resting[fd] = now + LINK_POLL_S
                break
            if n > SNAPLEN:
                truncated += 1  # as pcap's caplen != len: BMv2 drops it
                continue
            frame = view[:n].tobytes()
            if anc:
                frame = with_vlan_tag(frame, anc)
            if pcap is not None:
                pcap.write(frame)
            batch.append(frame)
        if truncated:
            self.dp.add_rx_dropped(port, truncated)
        return batch

    def _iteration(self, poller: Any, timers: list[float]) -> None:
        """Wait for frames (or the next paced departure), process them, service the queues."""
        dp = self.dp
        receive_batch = dp.receive_batch
        now = time.monotonic()
        for fd, until in list(self.resting.items()):
            if now >= until:
                del self.resting[fd]
                poller.register(fd, select.POLLIN)
        deadline = dp.poll()
        while self._want_out:
            s = self.socks.get(self._want_out.pop())
            if s is not None:
                with contextlib.suppress(OSError):
                    poller.modify(s.fileno(), select.POLLIN | select.POLLOUT)
        timeout = LINK_POLL_S if deadline is None else \
            min(max((deadline - dp.clock()) / 1e9, 0.0), LINK_POLL_S)
        for fd, event in poller.poll(timeout * 1000.0):
            if fd == self._wake_r:
                with contextlib.suppress(OSError):
                    os.read(fd, 4096)
                continue
            port, s = self.by_fd[fd]
            if event & select.POLLOUT:
                self._flush(port, fd, s)
            if not event & (select.POLLIN | select.POLLERR):
                continue
            batch = self._read(fd, port, s, poller, now)
            if batch:
                receive_batch(port, batch)
        now = time.monotonic()
        if now >= timers[0]:
            self._poll_links()
            dp.check_idle()
            timers[0] = now + LINK_POLL_S
        if (self.pcap_in or self.pcap_out) and now >= timers[1]:
            for w in [*self.pcap_in.values(), *self.pcap_out.values()]:
                w.flush()
            timers[1] = now + 0.5


def with_vlan_tag(frame: bytes, ancillary: list[tuple[int, int, bytes]]) -> bytes:
    """``frame`` with the outer VLAN tag the kernel took off put back after the MAC addresses
    (as libpcap does), when the packet socket's auxiliary data says there was one."""
    for level, kind, data in ancillary:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < AUXDATA.size:
            continue
        status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(data)
        if not status & TP_STATUS_VLAN_VALID:
            return frame
        if not status & TP_STATUS_VLAN_TPID_VALID:
            tpid = ETH_P_8021Q
        return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame
