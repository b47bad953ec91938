"""The switch's admin channel (queue rates/depths, port up/down, stats): what simple_switch
exposes over Thrift (simple_switch_CLI) and p4sim over its admin port (`p4sim ctl`). P4Runtime
has no such settings. For BMv2 the controller runs simple_switch_CLI; for p4sim it speaks the
admin port's wire format itself (one JSON request line ``{"cmd", "args"}``, one JSON reply
line ``{"ok", "result"|"error"}``), which saves a process start per command and keeps
controlplane free of p4sim imports.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from controlplane.errors import ControlPlaneError

DEFAULT_ADMIN_PORT = 9090  # simple_switch's --thrift-port default, also p4sim's


class AdminError(ControlPlaneError):
    pass


def _local(name: str) -> str | None:
    # Prefer the console script beside this interpreter (the project venv).
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else shutil.which(name)


class AdminChannel:
    """``tool``: "p4sim" (p4sim ctl), "bmv2" (simple_switch_CLI) or "auto" (p4sim if found)."""

    def __init__(self, addr: str, tool: str = "auto", timeout: float = 10.0) -> None:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise AdminError(f"admin channel: '{addr}' is not HOST:PORT")
        self.host, self.port, self.timeout = host, int(port), timeout
        if tool == "auto":  # simple_switch_CLI only where BMv2 is what is installed
            tool = "bmv2" if _local("simple_switch_CLI") and not _local("p4sim") else "p4sim"
        if tool not in ("p4sim", "bmv2"):
            raise AdminError(f"admin channel: unknown tool '{tool}' (p4sim, bmv2 or auto)")
        self.tool = tool

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def run(self, command: str, *args: int | str) -> Any:
        """Run one command; returns its result (p4sim: the decoded JSON, bmv2: CLI text)."""
        words = [command, *(str(a) for a in args)]
        if self.tool == "p4sim":
            return self._p4sim(words)
        return self._bmv2(words)

    def _bmv2(self, words: list[str]) -> str:
        what = f"admin channel {self.addr}: {' '.join(words)}"
        exe = _local("simple_switch_CLI")
        if exe is None:
            raise AdminError(f"{what}: `simple_switch_CLI` not found on PATH")
        argv = [exe, "--thrift-ip", self.host, "--thrift-port", str(self.port)]
        try:
            proc = subprocess.run(argv, input=" ".join(words) + "\n", capture_output=True,
                                  text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise AdminError(f"{what}: timed out") from None
        # simple_switch_CLI reports bad commands on stdout ("Error: ...") and still exits 0.
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        if proc.returncode != 0 and ("Could not connect" in proc.stdout + proc.stderr
                                     or "Traceback" in proc.stderr):
            # One line, not the CLI's traceback: BMv2 serves Thrift only when built with it, and
            # only on the loopback of the network namespace it runs in.
            raise AdminError(f"{what}: cannot reach BMv2's Thrift server (built without Thrift, "
                             f"not running, or in another network namespace): "
                             f"{lines[-1].strip() if lines else 'no output'}")
        if proc.returncode != 0 or "Error" in proc.stdout:
            bad = [ln for ln in lines if "Error" in ln] or lines[-1:] or ["failed"]
            raise AdminError(f"{what}: {bad[0].strip()}")
        return proc.stdout.strip()

    def _p4sim(self, words: list[str]) -> Any:
        what = f"admin channel {self.addr}: {' '.join(words)}"
        request = json.dumps({"cmd": words[0], "args": words[1:]}) + "\n"
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout) as s:
                s.sendall(request.encode())
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as err:
            raise AdminError(f"{what}: cannot reach the switch: {err.strerror or err}") from None
        try:
            reply = json.loads(buf)
        except ValueError:
            raise AdminError(f"{what}: bad reply {buf[:80]!r}") from None
        if not reply.get("ok"):
            raise AdminError(f"{what}: {reply.get('error') or 'failed'}")
        return reply.get("result")

    # -- simple_switch_CLI commands, same names and argument order --

    def set_queue_rate(self, pps: int, port: int | None = None) -> None:
        self.run("set_queue_rate", pps, *(() if port is None else (port,)))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        self.run("set_queue_depth", packets, *(() if port is None else (port,)))

    def port_down(self, port: int) -> None:
        self.run("port_down", port)

    def port_up(self, port: int) -> None:
        self.run("port_up", port)

    def stats(self) -> Any:
        return self.run("stats")
