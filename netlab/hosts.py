"""Test hosts from network namespaces and veth pairs, removed exactly when done.

A ``NetLab`` names everything it creates with a suffix unique to the run, remembers each thing,
and removes exactly those things when it closes: on normal exit, on an exception, on SIGINT or
SIGTERM. Nothing else on the machine is touched (no ``mn -c``, no kill by pattern). It also
writes a small ledger under ``/run/netlab`` so that resources of a run that was SIGKILLed can
be found and removed later by ``reap_stale()``, again by exact name and PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType

# One of each: the controller's poll loop, p4sim's free-port probe (re-exported for the tests
# and benches that start switches).
from controlplane.connection import wait_until  # noqa: F401
from p4sim.conformance.switches import free_port  # noqa: F401

LEDGER_DIR = Path(os.environ.get("NETLAB_LEDGER_DIR", "/run/netlab"))
MAX_IFNAME = 15  # IFNAMSIZ - 1


class NetLabError(RuntimeError):
    """A namespace, link or process could not be set up; the message says which and why."""


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip", *args] if ns is None else ["ip", "-n", ns, *args]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetLabError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()}")
    return proc


def require_root() -> None:
    if os.geteuid() != 0:
        raise NetLabError("network namespaces and veth pairs need root (run as root or with sudo)")


def stop_process(proc: subprocess.Popen, grace_s: float = 5.0,
                 sig: int | None = signal.SIGTERM) -> None:
    """End one process: ``sig`` (None: it was signalled already), then SIGKILL if it has not
    exited after ``grace_s`` seconds."""
    if proc.poll() is not None:
        return
    if sig is not None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Proc:
    """A process started in a namespace; ``stop()`` ends its whole process group."""

    name: str
    popen: subprocess.Popen
    ns: str | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=timeout)
        return self.popen.returncode


@dataclass
class NetLab:
    """Namespaces, veth pairs and processes of one run. Use as a context manager."""

    prefix: str = "cf"
    suffix: str = field(default_factory=lambda: secrets.token_hex(2))
    namespaces: list[str] = field(default_factory=list)
    links: list[tuple[str, str | None]] = field(default_factory=list)  # (ifname, ns)
    procs: list[Proc] = field(default_factory=list)
    _old_handlers: dict[int, object] = field(default_factory=dict)
    _closed: bool = False

    # -- naming ---------------------------------------------------------------------------
    def name(self, base: str) -> str:
        """``base`` made unique to this run (and short enough for an interface name)."""
        tail = self.suffix
        room = MAX_IFNAME - len(self.prefix) - len(tail)
        if room < 1:
            raise NetLabError(f"prefix '{self.prefix}' too long for interface names")
        return f"{self.prefix}{base[:room]}{tail}"

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> NetLab:
        require_root()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: the caller must close() us itself
                break
        self._write_ledger()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.close()
        old = self._old_handlers.get(signum)
        if callable(old):
            old(signum, frame)
        raise SystemExit(128 + signum)

    def close(self) -> None:
        """Stop every process, delete every link and namespace this lab made. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in reversed(self.procs):
            proc.stop()
        for ifname, ns in reversed(self.links):
            # Deleting one end of a veth deletes its peer; the link may already be gone with
            # its namespace, so absence is not an error here.
            _ip("link", "del", ifname, ns=ns, check=False)
        for ns in reversed(self.namespaces):
            _ip("netns", "del", ns, check=False)
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        self._ledger_path().unlink(missing_ok=True)

    # -- ledger for SIGKILLed runs ------------------------------------------------------------
    def _ledger_path(self) -> Path:
        return LEDGER_DIR / f"{self.prefix}{self.suffix}.json"

    def _write_ledger(self) -> None:
        LEDGER_DIR.mkdir(parents=True, exist_ok=True)
        record = {
            "owner_pid": os.getpid(),
            "namespaces": self.namespaces,
            "links": self.links,
            "pids": [[p.pid, _start_time(p.pid)] for p in self.procs],
        }
        self._ledger_path().write_text(json.dumps(record))

    # -- resources ----------------------------------------------------------------------------
    def netns(self, base: str) -> str:
        """Create a namespace with loopback up; returns its (unique) name."""
        ns = self.name(base)
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        self._write_ledger()
        _ip("link", "set", "lo", "up", ns=ns)
        return ns

    def veth(
        self,
        a: str,
        b: str,
        ns_a: str | None = None,
        ns_b: str | None = None,
        mtu: int | None = None,
        ipv6: bool = False,
    ) -> tuple[str, str]:
        """Create a veth pair (unique names from ``a`` and ``b``), move each end into its
        namespace (None = this one), bring both up. IPv6 is off by default so the kernel does not
        send router solicitations that tests would see as stray frames."""
        name_a, name_b = self.name(a), self.name(b)
        _ip("link", "add", name_a, "type", "veth", "peer", "name", name_b)
        self.links.append((name_a, None))
        self._write_ledger()
        for ifname, ns in ((name_a, ns_a), (name_b, ns_b)):
            if not ipv6:
                self.sysctl(f"net.ipv6.conf.{ifname}.disable_ipv6", "1", ns=None)
            if ns is not None:
                _ip("link", "set", ifname, "netns", ns)
            if not ipv6 and ns is not None:
                self.sysctl(f"net.ipv6.conf.{ifname}.disable_ipv6", "1", ns=ns)
            if mtu:
                _ip("link", "set", ifname, "mtu", str(mtu), ns=ns)
            _ip("link", "set", ifname, "up", ns=ns)
        # Remember where end A lives so close() deletes it in the right namespace.
        self.links[-1] = (name_a, ns_a)
        self._write_ledger()
        return name_a, name_b

    def sysctl(self, key: str, value: str, ns: str | None = None) -> None:
        argv = ["sysctl", "-q", "-w", f"{key}={value}"]
        if ns is not None:
            argv = ["ip", "netns", "exec", ns, *argv]
        subprocess.run(argv, capture_output=True, text=True, check=False)

    def addr(self, ifname: str, cidr: str, ns: str | None = None) -> None:
        _ip("addr", "add", cidr, "dev", ifname, ns=ns)

    def set_link(self, ifname: str, up: bool, ns: str | None = None) -> None:
        _ip("link", "set", ifname, "up" if up else "down", ns=ns)

    @staticmethod
    def _in_ns(ns: str | None, argv: Sequence[str]) -> list[str]:
        return list(argv) if ns is None else ["ip", "netns", "exec", ns, *argv]

    def run(
        self, ns: str | None, argv: Sequence[str], check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            self._in_ns(ns, argv), capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise NetLabError(
                f"`{' '.join(argv)}` in {ns or 'root ns'} exited {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-500:]}"
            )
        return proc

    def popen(
        self,
        ns: str | None,
        argv: Sequence[str],
        name: str | None = None,
        log: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Proc:
        """Start a long-running process in ``ns`` in its own process group."""
        out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - owned by child
        popen = subprocess.Popen(
            self._in_ns(ns, argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        if log:
            out.close()  # type: ignore[union-attr]
        proc = Proc(name or argv[0], popen, ns)
        self.procs.append(proc)
        self._write_ledger()
        return proc


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``port`` can be bound now (no server, no other run, holds it)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def tcp_accepts(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on ``host:port`` (a server is up)."""
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale() -> list[str]:
    """Remove resources recorded by NetLab runs whose owner process no longer exists.

    Only names and PIDs written in a ledger are touched. Returns what was removed."""
    removed: list[str] = []
    if not LEDGER_DIR.is_dir():
        return removed
    for path in LEDGER_DIR.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(record.get("owner_pid", 0))):
            continue
        for pid, started in record.get("pids", []):
            # The start time guards against a recycled PID belonging to someone else.
            if _pid_alive(pid) and _start_time(pid) == started:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    removed.append(f"pid {pid}")
                except (ProcessLookupError, PermissionError):
                    pass
        for ifname, ns in record.get("links", []):
            if _ip("link", "del", ifname, ns=ns, check=False).returncode == 0:
                removed.append(f"link {ifname}")
        for ns in record.get("namespaces", []):
            if _ip("netns", "del", ns, check=False).returncode == 0:
                removed.append(f"netns {ns}")
        path.unlink(missing_ok=True)
    return removed


def existing_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def existing_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split(": ")
        if len(parts) > 1:
            names.add(parts[1].split("@")[0])
    return names
