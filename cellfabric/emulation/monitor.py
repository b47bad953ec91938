"""Samples the fabric while a run goes: per-port transmit counters (over P4Runtime, either
target) for link utilization, and per-port queue depth from the admin channel (p4sim's traffic
manager; on BMv2, fabric.p4's port_qdepth register read with simple_switch_CLI)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cellfabric.core.counters import drop_counters, switch_ports
from cellfabric.core.sampler import FabricSamples
from cellfabric.emulation.admin import SwitchAdmin
from controlplane.channel import SwitchChannel
from controlplane.entities import CounterEntry
from controlplane.fabric import Fabric
from controlplane.fabric_plan import C_PORT_TX, R_QDEPTH
from topologies.model import Topology

CLI_START_S = 30.0  # how long a new simple_switch_CLI may take to give its first answer


class _CliSession:
    """One long-lived simple_switch_CLI (a fresh one per sample would cost ~0.3 s of CPU)."""

    def __init__(self, thrift_port: int) -> None:
        self.proc = subprocess.Popen(["simple_switch_CLI", "--thrift-port", str(thrift_port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, bufsize=0)
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.answered = False

    def register_read(self, name: str, timeout: float = 3.0) -> list[int] | None:
        """Every cell of register array ``name``, or None if the CLI did not answer. The
        first read also waits for the CLI to start (a Python process: seconds on a loaded
        machine)."""
        assert self.proc.stdin is not None
        if not self.answered:
            timeout = max(timeout, CLI_START_S)
        try:
            self.proc.stdin.write(f"register_read {name}\n".encode())
        except OSError:
            return None
        pattern = re.compile(rb"%s= ?([-0-9, ]*)\n" % re.escape(name.encode()))
        buf, end = b"", time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    return None
                buf += chunk
                m = pattern.search(buf)
                if m:
                    self.answered = True
                    return [int(x) for x in m.group(1).split(b",") if x.strip()]
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class FabricMonitor:
    def __init__(self, topo: Topology, fabric: Fabric, admins: dict[str, SwitchAdmin],
                 interval: float = 0.5) -> None:
        self.topo = topo
        self.fabric = fabric
        self.admins = admins
        self.interval = interval
        self.samples = FabricSamples()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ports = switch_ports(topo)
        self._cli: dict[str, _CliSession] = {}  # BMv2 switches: queue depth via the CLI
        # the queue-depth reads of one sample, all switches at once (threads start on use)
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(32, len(admins))),
                                        thread_name_prefix="monitor-read")

    def start(self) -> None:
        # BMv2's CLI sessions start now, all at once: started by the first sample, one after
        # another, 20 of them took that sample 10.7 s, the whole of a fat-tree's workload.
        for name, admin in self.admins.items():
            if admin.target == "bmv2":
                self._session(name, admin)
        self._thread = threading.Thread(target=self._loop, name="fabric-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True)
        for cli in self._cli.values():
            cli.close()
        self._cli.clear()

    def _session(self, name: str, admin: SwitchAdmin) -> _CliSession:
        if name not in self._cli:
            self._cli[name] = _CliSession(admin.thrift_port)
        return self._cli[name]

    def _depths(self, name: str, admin: SwitchAdmin) -> dict[int, int] | None:
        """Queue depth per port: p4sim's traffic manager, or on BMv2 (no stats command)
        fabric.p4's port_qdepth register, the deq_qdepth of the latest packet per port."""
        if admin.target == "bmv2":
            cells = self._session(name, admin).register_read(R_QDEPTH)
            if cells is None:
                raise RuntimeError(f"{name}: simple_switch_CLI register_read "
                                   f"{R_QDEPTH}: no answer")
            return {p: cells[p] for p in self.ports.get(name, ()) if p < len(cells)}
        stats = admin.stats()
        if stats is None:
            return None
        return {int(p): int(st["queue_depth"]) for p, st in stats.get("ports", {}).items()
                if "queue_depth" in st}

    def _loop(self) -> None:
        while not self._stop.is_set():
            start = time.time()
            try:
                self.sample()
            except Exception as exc:
                if len(self.errors) < 20:
                    self.errors.append(str(exc).splitlines()[0])
            self._stop.wait(max(0.05, self.interval - (time.time() - start)))

    def sample(self) -> None:
        def read_tx(conn: SwitchChannel) -> list[CounterEntry]:
            return conn.read(*(CounterEntry(counter=C_PORT_TX, index=p)
                               for p in self.ports[conn.name]))

        now = time.time()
        self.samples.add_tx(now, {(name, e.index): e.packets
                                  for name, entries in self.fabric.run(read_tx, "counter read").items()
                                  for e in entries})
        # every switch at once: a BMv2 read waits on its CLI process, one after another 20
        # of them took seconds on a loaded machine
        reads = {name: self._pool.submit(self._depths, name, admin)
                 for name, admin in self.admins.items()}
        self.samples.add_depth(now, {(name, port): depth for name, fut in reads.items()
                                     for port, depth in (fut.result() or {}).items()})

    def counters(self) -> dict[str, dict[str, int]]:
        """Final per-switch drop reasons and ECN marks, read over P4Runtime."""
        return drop_counters(self.fabric, self.ports)
