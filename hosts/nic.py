"""A NIC port: what a host program needs of one (``NicPort``), and the emulation's, one
AF_PACKET socket opened once plus the link's state from sysfs (``PacketSocketPort``).

The socket is bound to ETH_P_IP, not ETH_P_ALL, so the kernel does not hand our own
transmissions back to us (outgoing frames only reach ETH_P_ALL taps).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

ETH_P_IP = 0x0800
RECV_BUF = 4 * 1024 * 1024
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33


def iface_mac(ifname: str) -> str:
    try:
        return Path(f"/sys/class/net/{ifname}/address").read_text().strip()
    except OSError as exc:
        raise ValueError(f"interface '{ifname}': no such interface ({exc.strerror})") from None


class OperState:
    """An interface's operstate, read from one sysfs file descriptor kept open.

    A sender checks its ports' link state every health interval (10 ms): opening the file
    each time cost ~50 us a read against ~2 us for a pread of the open file (sysfs renders
    the attribute anew on every read from offset 0), a few percent of a core over a fabric's
    senders. A read that fails (the interface went away, or was moved and came back) opens
    the file again once; an interface that cannot be read is down."""

    def __init__(self, ifname: str) -> None:
        self.path = f"/sys/class/net/{ifname}/operstate"
        self.fd: int | None = None

    def up(self) -> bool:
        for _ in range(2):
            try:
                if self.fd is None:
                    self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                state = os.pread(self.fd, 32, 0).strip()
            except OSError:
                self.close()
                continue
            return state in (b"up", b"unknown")
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class RocePortClaim:
    """A UDP socket bound to the RoCEv2 port on every address of this host and never read.

    Our cells and ACKs are UDP datagrams to port 4791 addressed to this host, so besides the
    AF_PACKET tap the host's own IP stack receives them too. With no socket on that port the
    kernel answers each one with an ICMP port unreachable, which then crosses the fabric as
    traffic nobody sent on purpose (a RoCE NIC consumes these packets before the kernel sees
    them). Bound, the datagrams land in a tiny receive buffer and, once it is full, are dropped
    silently. SO_REUSEPORT lets a host's sender and receiver processes both hold one."""

    sock: socket.socket | None = None
    error: str = ""

    def open(self, port: int) -> RocePortClaim:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the kernel's minimum
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            sock.close()
            self.error = f"UDP port {port}: {exc.strerror}"
            return self
        self.sock = sock
        return self

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class NicPort(Protocol):
    """One NIC port as the sender and the receiver use it: its identity, the state they keep
    on it (``PortState``), and frames in and out. The emulation's ``PacketSocketPort`` and the
    simulator's ports both are one."""

    index: int
    ifname: str
    mac: str
    # the socket the emulated loops wait on (None: frames are handed over, never polled)
    sock: socket.socket | None
    up: bool
    down_reason: str
    down_since: float
    sent: int
    send_errors: int
    last_progress: float
    inflight_hint: int
    events: list[dict[str, object]]

    def open(self) -> NicPort: ...

    def send(self, frame: bytes | bytearray) -> bool: ...

    def recv_into(self, buf: bytearray) -> int: ...

    def oper_up(self) -> bool: ...

    def close(self) -> None: ...


@dataclass
class PortState:
    """What a host program keeps per port, whatever carries its frames."""

    index: int
    ifname: str
    mac: str = ""
    up: bool = True
    down_reason: str = ""
    down_since: float = 0.0
    sent: int = 0
    send_errors: int = 0
    last_progress: float = 0.0  # last ACK for a cell sent on this port (or first send)
    inflight_hint: int = 0
    events: list[dict[str, object]] = field(default_factory=list)


@dataclass
class PacketSocketPort(PortState):
    """The emulation's port: an AF_PACKET socket on the interface, link state from sysfs."""

    sock: socket.socket | None = None
    oper: OperState | None = None  # the link state, read from sysfs

    def open(self) -> PacketSocketPort:
        if not self.mac:
            self.mac = iface_mac(self.ifname)
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        # The FORCE variants pass net.core.rmem_max (root only): a receiver that falls behind
        # for a moment should find the burst buffered, not dropped.
        for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, RECV_BUF)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, plain, RECV_BUF)
        sock.bind((self.ifname, ETH_P_IP))
        sock.setblocking(False)
        self.sock = sock
        return self

    def send(self, frame: bytes | bytearray) -> bool:
        try:
            self.sock.send(frame)
        except BlockingIOError:
            self.send_errors += 1  # queue full: the cell stays in flight; RTO resends it
            return False
        except OSError:
            self.send_errors += 1  # link down (ENETDOWN/ENXIO): health check moves traffic
            return False
        self.sent += 1
        return True

    def recv_into(self, buf: bytearray) -> int:
        try:
            return self.sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            return 0

    def oper_up(self) -> bool:
        if self.oper is None:
            self.oper = OperState(self.ifname)
        return self.oper.up()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.oper is not None:
            self.oper.close()
