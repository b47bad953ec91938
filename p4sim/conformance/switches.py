"""The switches the runner drives: p4sim's data plane in this process, or real BMv2.

Both serve P4Runtime and expose ``send(port, frame)`` and ``outputs()`` (frames per port, in
the order the switch transmitted them). STF frames may be shorter than an Ethernet header, so
real BMv2 gets TUN devices (with the 4-byte packet-information header, which carries a frame of
any length; a veth or TAP refuses frames under 14 bytes). Each TUN device exists only while this
process holds its file descriptor, so nothing outlives a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PI_HEADER = struct.pack("!HH", 0, 0x88B5)  # flags, protocol (IEEE local experimental)
SETTLE_S = 0.15  # real BMv2: no new frame for this long means the switch is idle
# Measured: frames written back to back into a TUN port (30 within ~0.1 ms) reach BMv2's
# egress only partly (8 of 30); spaced 0.5 ms apart all arrive. STF sends are paced so.
# Why: BMv2 reads each port with libpcap in immediate mode (a TPACKET_V2 ring in 2 MiB), and
# on a TUN device (link type raw IP, not Ethernet) libpcap sizes every ring slot for its full
# snapshot length, 262,144 bytes: `ss -0 -e` shows frm_nr:8, so BMv2 holds 8 unread frames.
# Veth ports get MTU-sized slots once their offloads are off (netlab/capture.py); a TUN has no
# such setting and BMv2 no option for libpcap's buffer or snapshot length, so pacing stays.
SEND_GAP_S = 0.001


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedSwitch:
    """p4sim's data plane and P4Runtime server in this process; no interfaces, no clocks."""

    settles_itself = True

    def __init__(self, ports: list[int]) -> None:
        from p4sim.switch.dataplane import DataPlane
        from p4sim.switch.p4runtime.server import serve

        self.ports = set(ports)
        self.device_id = 0
        self.dp = DataPlane(self.device_id)
        self._out: dict[int, list[bytes]] = {}
        self.dp.tx = self._tx
        self.server = serve(self.dp, "127.0.0.1:0", max_workers=4)
        self.addr = f"127.0.0.1:{self.server.port}"

    def _tx(self, port: int, frame: bytes) -> None:
        if port in self.ports:  # as with BMv2, a port without an interface loses the frame
            self._out.setdefault(port, []).append(bytes(frame))

    def send(self, port: int, frame: bytes) -> None:
        self.dp.receive(port, frame)
        self.dp.drain(timeout=2.0)

    def settle(self, expected: int | None = None) -> None:
        self.dp.drain(timeout=2.0)

    def outputs(self) -> dict[int, list[bytes]]:
        return self._out

    def died(self) -> str | None:
        return None  # in this process: a crash would be this process's exception

    def close(self) -> None:
        self.server.stop()


def _tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN))
        # No IPv6 autoconfiguration traffic of the kernel's own on the switch's ports.
        with contextlib.suppress(OSError), \
                open(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "w") as f:
            f.write("1")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifr = struct.pack("16sH", name.encode(), 0)
            flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, ifr + b"\0" * 22)[:18])[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", name.encode(), flags | IFF_UP)
                        + b"\0" * 22)
    except OSError:
        os.close(fd)
        raise
    os.set_blocking(fd, False)
    return fd


class Bmv2Switch:
    """Real simple_switch_grpc (started with --no-p4) on one TUN device per STF port."""

    settles_itself = False

    def __init__(self, ports: list[int], log_dir: str | None = None) -> None:
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise RuntimeError("simple_switch_grpc is not on PATH")
        tag = secrets.token_hex(3)
        self.fds: dict[int, int] = {}
        self._out: dict[int, list[bytes]] = {}
        self._lock = threading.Lock()
        self._last_rx = time.monotonic()
        self._next_send = 0.0
        self.tmp = tempfile.mkdtemp(prefix="p4sim-conf-")
        self.proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        try:
            for port in ports:
                self.fds[port] = _tun(f"cf{tag}p{port}")
            self.device_id = 1
            grpc_port = free_port()
            self.addr = f"127.0.0.1:{grpc_port}"
            argv = [exe, "--device-id", str(self.device_id),
                    "--thrift-port", str(free_port()),
                    "--notifications-addr", f"ipc://{self.tmp}/notifications.ipc"]
            for port in ports:
                argv += ["-i", f"{port}@cf{tag}p{port}"]
            if log_dir:
                argv += ["--log-file", os.path.join(log_dir, "switch"), "--log-level", "debug"]
            argv += ["--no-p4", "--", "--grpc-server-addr", self.addr]
            self.log_path = os.path.join(self.tmp, "stderr.txt")
            with open(self.log_path, "wb") as err:
                self.proc = subprocess.Popen(argv, stdout=err, stderr=err,
                                             start_new_session=True)
        except Exception:
            self.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_listening(grpc_port)

    def _wait_listening(self, port: int, limit: float = 30.0) -> None:
        """Poll the gRPC port (a gRPC channel would back off a whole second after one refusal)."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc exited ({self.proc.returncode}): "
                                   f"{self.stderr_tail()}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.01)
        raise RuntimeError(f"simple_switch_grpc did not listen on {self.addr} in {limit:.0f} s")

    def _read(self) -> None:
        by_fd = {fd: port for port, fd in self.fds.items()}
        while not self._stop.is_set():
            ready, _, _ = select.select(list(by_fd), [], [], 0.05)
            for fd in ready:
                with contextlib.suppress(BlockingIOError, OSError):
                    frame = os.read(fd, 65536)[4:]
                    with self._lock:
                        self._out.setdefault(by_fd[fd], []).append(frame)
                        self._last_rx = time.monotonic()

    def send(self, port: int, frame: bytes) -> None:
        wait = self._next_send - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        os.write(self.fds[port], PI_HEADER + frame)
        now = time.monotonic()
        self._next_send = now + SEND_GAP_S
        with self._lock:
            self._last_rx = now

    def settle(self, expected: int | None = None, limit: float = 3.0) -> None:
        """Wait until ``expected`` frames came out (if given) and then none for SETTLE_S."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            with self._lock:
                have = sum(len(v) for v in self._out.values())
                quiet = time.monotonic() - self._last_rx
            if (expected is None or have >= expected) and quiet >= SETTLE_S:
                return
            time.sleep(0.01)

    def outputs(self) -> dict[int, list[bytes]]:
        with self._lock:
            return {p: list(v) for p, v in self._out.items()}

    def died(self) -> str | None:
        """Why the switch process is gone, if it is (BMv2 does not validate its JSON: some
        inputs crash it)."""
        rc = self.proc.poll() if self.proc is not None else None
        if rc is None:
            return None
        how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return f"simple_switch_grpc died ({how})"

    def stderr_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-400:].decode(errors="replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        self._stop.set()
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(timeout=2)
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)
