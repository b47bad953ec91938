"""Mininet node classes for cellfabric's switches (no Open vSwitch anywhere).

A ``ProcessSwitch`` is a Mininet switch whose data plane is one process in the root namespace
bound to the switch's interfaces, the way BMv2's simple_switch runs under Mininet. Subclasses
say which command: the harness's pair forwarder, ``p4sim switch`` or real
``simple_switch_grpc`` (the last two share flags, see ``netlab.targets.switch_argv``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from mininet.node import Switch


class ProcessSwitch(Switch):
    """A switch that is a single process started on ``start`` and ended on ``stop``."""

    def __init__(self, name: str, log_dir: str | None = None, **params) -> None:
        # Switch derives a dpid from digits in the name; our switches have no OpenFlow dpid.
        params.setdefault("dpid", "1")
        super().__init__(name, **params)
        self.log_dir = Path(log_dir) if log_dir else None
        self.proc: subprocess.Popen | None = None

    def port_map(self) -> dict[int, str]:
        """Data-plane port number -> interface name (Mininet's port numbers)."""
        return {
            port: intf.name for intf, port in self.ports.items() if intf.name != "lo"
        }

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers) -> None:
        out = subprocess.DEVNULL
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{self.name}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        if out is not subprocess.DEVNULL:
            out.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        super().stop(deleteIntfs)


class ForwarderSwitch(ProcessSwitch):
    """Port 2k <-> 2k+1 forwarding (the harness's trivial DUT), numbering ports from 0."""

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "netlab.forwarder"]
        for port, ifname in sorted(self.port_map().items()):
            argv += ["-i", f"{port - 1}@{ifname}"]
        return argv
