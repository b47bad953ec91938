"""A switch's network namespace: one TAP interface per front-panel port, with its link address.

The namespace is named ``<run id>-<switch>`` so that a run's leftovers can be found (and only
they removed) by name. FRR runs inside it; the relay (cellfabric.nos.relay) holds the TAPs'
other ends and carries their frames over the switch's CPU port.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
import subprocess
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
NETNS_DIR = "/run/netns"


class NamespaceError(RuntimeError):
    """A namespace or interface operation failed (the message names which and why)."""


@dataclass(frozen=True)
class TapPort:
    port: int
    ifname: str
    address: str  # with its prefix length, e.g. 172.16.0.0/31
    mac: str


@dataclass(frozen=True)
class HostPort:
    """A leaf's port to attached hosts: an interface named after the port and a route
    per host through it, so the namespace's kernel table (which the route agent programs from)
    holds the leaf's own hosts as well as what BGP learned."""
    port: int
    ifname: str
    prefixes: tuple[str, ...]


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NamespaceError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


def namespace_name(run_id: str, switch: str) -> str:
    return f"{run_id}-{switch}"


class SwitchNamespace:
    """Creates (``create``) and removes (``remove``) exactly one namespace and its TAPs."""

    def __init__(self, run_id: str, switch: str, ports: list[TapPort],
                 host_ports: list[HostPort] | None = None) -> None:
        self.name = namespace_name(run_id, switch)
        self.switch = switch
        self.ports = ports
        self.host_ports = host_ports or []
        self._created = False

    def create(self) -> None:
        if os.path.exists(os.path.join(NETNS_DIR, self.name)):
            raise NamespaceError(f"namespace {self.name} already exists (a previous run's? "
                                 f"remove it with: ip netns del {self.name})")
        _ip("netns", "add", self.name)
        self._created = True
        try:
            _ip("-n", self.name, "link", "set", "lo", "up")
            # FRR routes IPv4 only here; IPv6 would only add router solicitations to relay
            subprocess.run(["ip", "netns", "exec", self.name, "sysctl", "-q", "-w",
                            "net.ipv6.conf.all.disable_ipv6=1",
                            "net.ipv6.conf.default.disable_ipv6=1"], capture_output=True)
            for tap in self.ports:
                _ip("-n", self.name, "tuntap", "add", "dev", tap.ifname, "mode", "tap")
                _ip("-n", self.name, "link", "set", tap.ifname, "address", tap.mac)
                _ip("-n", self.name, "addr", "add", tap.address, "dev", tap.ifname)
                _ip("-n", self.name, "link", "set", tap.ifname, "up")
            for hp in self.host_ports:
                # a veth pair with both ends here: always up with carrier (not every kernel
                # has the dummy driver), and nothing reads it
                _ip("-n", self.name, "link", "add", hp.ifname, "type", "veth", "peer", "name",
                    f"{hp.ifname}h")
                _ip("-n", self.name, "link", "set", f"{hp.ifname}h", "up")
                _ip("-n", self.name, "link", "set", hp.ifname, "up")
                for prefix in hp.prefixes:
                    _ip("-n", self.name, "route", "add", prefix, "dev", hp.ifname,
                        "proto", "static")
        except NamespaceError:
            self.remove()
            raise

    def remove(self) -> None:
        """Deletes the namespace if this object created it (its TAPs go with it)."""
        if self._created:
            self._created = False
            _ip("netns", "del", self.name)

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Runs a command inside the namespace (e.g. ``ip route``), capturing its output."""
        return subprocess.run(["ip", "netns", "exec", self.name, *argv],
                              capture_output=True, text=True)


def run_namespaces(run_id: str) -> list[str]:
    """Names of the namespaces a run created (``<run id>-...``) that still exist."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(f"{run_id}-"))


def remove_run_namespaces(run_id: str) -> list[str]:
    """Removes every namespace of a run (cleanup after a crash); returns their names."""
    names = run_namespaces(run_id)
    for name in names:
        _ip("netns", "del", name)
    return names


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NamespaceError(f"setns: {os.strerror(err)}")


def open_taps(netns: str, ifnames: list[str]) -> dict[str, int]:
    """File descriptors of the TAPs ``ifnames`` of namespace ``netns``, opened from this
    process without moving it: the calling thread enters the namespace (setns is per thread),
    attaches to each TAP, and returns to its own namespace. A TAP keeps its namespace."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY)
    except OSError as exc:
        os.close(own)
        raise NamespaceError(f"namespace {netns}: {exc.strerror}") from exc
    fds: dict[str, int] = {}
    try:
        _setns(target)
        try:
            for name in ifnames:
                fd = os.open("/dev/net/tun", os.O_RDWR)
                try:
                    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(),
                                                           IFF_TAP | IFF_NO_PI))
                except OSError as exc:
                    os.close(fd)
                    raise NamespaceError(f"{netns}: TAP {name}: {exc.strerror}") from exc
                fds[name] = fd
        finally:
            _setns(own)
    except NamespaceError:
        for fd in fds.values():
            os.close(fd)
        raise
    finally:
        os.close(target)
        os.close(own)
    return fds
