"""In-band control traffic for one switch: its CPU port <-> the TAPs of its namespace.

fabric.p4's ``local_punt`` table sends every packet addressed to one of the switch's own link
addresses (BGP, BFD, ICMP, ARP) to the CPU port; the P4Runtime server hands it over as a
PacketIn carrying the ingress port, and the relay writes it to that port's TAP, where FRR and
the kernel of the switch's namespace read it. What they write on a TAP comes back as a
PacketOut to the same port. The relay is its own P4Runtime client, in its own role
(RELAY_ROLE), which may write ``local_punt`` and do packet I/O and nothing else: the
controller's role (and so central routing) never sees its entries.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from google.protobuf import any_pb2

from cellfabric.nos.namespace import open_taps
from controlplane.connection import SwitchConnection
from controlplane.cpuport import CpuPortCodec
from controlplane.entities import PacketIn, TableEntry
from controlplane.errors import ControlPlaneError
from controlplane.roles import role_config
from netlab.hosts import stop_process

log = logging.getLogger("cellfabric.nos")

RELAY_ROLE = "nos-relay"
T_LOCAL_PUNT = "MyIngress.forwarding.local_punt"
A_PUNT = "MyIngress.forwarding.punt_to_cpu"
MAX_FRAME = 65536
RELAY_READY_S = 20.0  # a relay process's start (an interpreter, two small imports, the TAPs)
RELAY_STOP_S = 5.0


def relay_role_config() -> any_pb2.Any:
    """p4sim's role config for a relay: writes local_punt, receives PacketIns, sends
    PacketOuts (BMv2's PI ignores role configs)."""
    return role_config([T_LOCAL_PUNT], receives_packet_ins=True, can_send_packet_outs=True)


@dataclass(frozen=True)
class RelayPort:
    port: int
    ifname: str
    address: str  # the switch's own address on this port (no prefix length)


def punt_entries(ports: list[RelayPort]) -> list[TableEntry]:
    """local_punt's entries: every frame to one of the switch's own link addresses."""
    return [TableEntry(T_LOCAL_PUNT, match={"meta.local_addr": p.address}, action=A_PUNT)
            for p in ports]


class PacketRelay:
    """Relays one switch's control traffic. ``conn`` is a connected SwitchConnection in
    RELAY_ROLE (see relay_role_config); ``start`` installs the punt entries, attaches to the
    TAPs and starts relaying; ``stop`` ends it and detaches (the entries stay: they go with
    the switch, or are replaced by the next relay's identical ones)."""

    def __init__(self, conn: SwitchConnection, netns: str, ports: list[RelayPort]) -> None:
        self.conn = conn
        self.netns = netns
        self.ports = ports
        self.fd_of: dict[int, int] = {}
        self.port_of: dict[int, int] = {}
        self.to_tap: Counter[int] = Counter()    # frames per port, switch -> namespace
        self.from_tap: Counter[int] = Counter()  # frames per port, namespace -> switch
        self.unknown_port = 0  # frames punted from a port without a TAP
        self.malformed = 0  # stays 0: the P4Runtime server drops what it cannot split
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def punt_entries(self) -> list[TableEntry]:
        return punt_entries(self.ports)

    def start(self) -> None:
        fds = open_taps(self.netns, [p.ifname for p in self.ports])
        for p in self.ports:
            self.fd_of[p.port] = fds[p.ifname]
            self.port_of[fds[p.ifname]] = p.port
            os.set_blocking(fds[p.ifname], False)
        self.conn.packet_in_handler = self._on_packet_in
        try:
            for entry in self.punt_entries():
                self.conn.insert(entry)
        except ControlPlaneError:
            self._close_fds()
            raise
        self._thread = threading.Thread(target=self._from_taps, name=f"relay-{self.netns}",
                                        daemon=True)
        self._thread.start()

    def _on_packet_in(self, pkt: PacketIn) -> None:
        # on the P4Runtime stream thread: one non-blocking write, never a wait
        port = int(pkt.metadata.get("ingress_port", -1))
        fd = self.fd_of.get(port)
        if fd is None:
            self.unknown_port += 1
            return
        try:
            os.write(fd, pkt.payload)
            self.to_tap[port] += 1
        except OSError as exc:  # TAP full or gone: the frame is lost, as on a busy wire
            log.debug("%s: port %d: %s", self.netns, port, exc)

    def _from_taps(self) -> None:
        fds = list(self.port_of)
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select(fds, [], [], 0.2)
            except (OSError, ValueError):
                return  # fds closed by stop()
            for fd in ready:
                try:
                    frame = os.read(fd, MAX_FRAME)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                port = self.port_of[fd]
                try:
                    self.conn.packet_out(frame, egress_port=port, _pad=0)
                    self.from_tap[port] += 1
                except ControlPlaneError as exc:
                    log.debug("%s: packet-out on port %d: %s", self.netns, port, exc)

    def _close_fds(self) -> None:
        for fd in self.port_of:
            os.close(fd)
        self.port_of.clear()
        self.fd_of.clear()

    def stop(self) -> None:
        self._stop.set()
        self.conn.packet_in_handler = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._close_fds()


class PortRelay:
    """A relay over the switch's CPU-port interface (``cpu_ifname``, the far end of the veth
    whose other end the switch maps to its CPU port), in a process of its own
    (cellfabric.nos.relayd): no PacketIn or PacketOut message, the same punt entries, TAPs
    and counters as PacketRelay. ``conn`` installs the entries and gives the pipeline's
    controller headers; ``folder`` holds the process's spec, stats and log."""

    def __init__(self, conn: SwitchConnection, netns: str, ports: list[RelayPort],
                 cpu_ifname: str, folder: Path) -> None:
        self.conn = conn
        self.netns = netns
        self.ports = ports
        self.cpu_ifname = cpu_ifname
        self.folder = folder
        self.proc: subprocess.Popen[str] | None = None
        self._final: dict[str, Any] | None = None

    def punt_entries(self) -> list[TableEntry]:
        return punt_entries(self.ports)

    def start(self) -> None:
        codec = CpuPortCodec.of(self.conn.index)
        self.folder.mkdir(parents=True, exist_ok=True)
        spec = self.folder / "relay.json"
        spec.write_text(json.dumps({
            "netns": self.netns, "cpu_ifname": self.cpu_ifname,
            "ports": {str(p.port): p.ifname for p in self.ports},
            "packet_in": codec.packet_in.layout(), "packet_out": codec.packet_out.layout(),
            "stats": str(self.folder / "relay-stats.json")}))
        for entry in self.punt_entries():
            self.conn.insert(entry)
        errors = (self.folder / "relay.log").open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "cellfabric.nos.relayd", str(spec)],
                                     stdout=subprocess.PIPE, stderr=errors, text=True,
                                     start_new_session=True)
        errors.close()
        assert self.proc.stdout is not None
        ready = wait([self.proc.stdout], timeout=RELAY_READY_S)
        if not ready or self.proc.stdout.readline().strip() != "ready":
            self.stop()
            why = (self.folder / "relay.log").read_text().strip().splitlines()
            raise ControlPlaneError(why[-1] if why else
                                    f"{self.netns}: relay not ready within {RELAY_READY_S} s")

    def _stats(self) -> dict[str, Any]:
        if self._final is not None:
            return self._final
        try:
            return json.loads((self.folder / "relay-stats.json").read_text())
        except (OSError, ValueError):
            return {}

    @property
    def to_tap(self) -> Counter[int]:
        return Counter({int(p): n for p, n in self._stats().get("to_tap", {}).items()})

    @property
    def from_tap(self) -> Counter[int]:
        return Counter({int(p): n for p, n in self._stats().get("from_tap", {}).items()})

    @property
    def unknown_port(self) -> int:
        return int(self._stats().get("unknown_port", 0))

    @property
    def malformed(self) -> int:
        return int(self._stats().get("malformed", 0))

    def stop(self) -> None:
        """SIGTERM: the process writes its last counters and exits (killed if it does not)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stop_process(proc, grace_s=RELAY_STOP_S)
        if proc.stdout is not None:
            proc.stdout.close()
        self._final = self._stats()


# --punt: how FRR's frames reach a switch's CPU port, the default first (lists and the CLI's
# choices derive from this)
RELAYS: dict[str, type] = {"veth": PortRelay, "p4runtime": PacketRelay}
PUNT_PATHS = tuple(RELAYS)
