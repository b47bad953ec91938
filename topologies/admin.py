"""Runtime settings a P4Runtime controller cannot make: queue rates and depths, port state.

Both targets take simple_switch_CLI's command lines (``set_queue_rate PPS PORT``,
``set_queue_depth PKTS PORT``): real BMv2 through ``simple_switch_CLI --thrift-port N`` on its
standard input, p4sim through its admin channel. Both go through the one admin channel client,
``controlplane.admin`` (in-process for p4sim, because the runner sends hundreds of them at
bring-up).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from controlplane.admin import AdminChannel, send
from controlplane.admin import AdminError as ChannelError
from controlplane.fabric_plan import queue_shares

# fabric.p4's per-port register of the egress queue depth (deq_qdepth of the latest packet
# dequeued): BMv2's only queue-occupancy figure. PI answers register reads over P4Runtime with
# UNIMPLEMENTED, so it is read with simple_switch_CLI.
QDEPTH_REGISTER = "port_qdepth"


class _CliSession:
    """One long-lived simple_switch_CLI (a fresh one per sample would cost ~0.3 s of CPU)."""

    def __init__(self, thrift_port: int) -> None:
        self.proc = subprocess.Popen(["simple_switch_CLI", "--thrift-port", str(thrift_port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, bufsize=0)
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)

    def register_read(self, name: str, timeout: float = 3.0) -> list[int] | None:
        """Every cell of register array ``name``, or None if the CLI did not answer."""
        assert self.proc.stdin is not None
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



class AdminError(RuntimeError):
    pass


@dataclass
class SwitchAdmin:
    name: str
    target: str
    thrift_port: int
    _cli: _CliSession | None = field(default=None, repr=False)

    def run(self, lines: list[str]) -> None:
        if not lines:
            return
        if self.target == "bmv2":
            try:
                AdminChannel(f"127.0.0.1:{self.thrift_port}", "bmv2", timeout=120).run_lines(lines)
            except ChannelError as e:
                raise AdminError(f"{self.name}: simple_switch_CLI: {e}") from None
            return
        for line in lines:
            words = line.split()
            reply = send(("127.0.0.1", self.thrift_port), words[0], words[1:])
            if not reply.get("ok"):
                raise AdminError(f"{self.name}: {line}: {reply.get('error')}")

    def close(self) -> None:
        if self._cli is not None:
            self._cli.close()
            self._cli = None

    def set_queue(self, port: int, rate_pps: int, depth: int, priorities: int = 1) -> None:
        """The port's queue depth, and its line rate shared by its ``priorities`` queues.

        p4sim: every queue may send ``rate_pps`` and the port's line (``set_port_rate``) caps
        them together, so the feedback queue takes its share only while it has packets. Real
        BMv2 paces each priority queue on its own and has no shared rate, so there the rate is
        split: fabric_plan.queue_shares gives each priority a fixed share."""
        lines = [f"set_queue_rate {rate_pps} {port}"]
        if priorities >= 2 and rate_pps > 0:
            if self.target == "bmv2":
                lines = [f"set_queue_rate {pps} {port} {self.queue_index(prio, priorities)}"
                         for prio, pps in sorted(queue_shares(rate_pps).items())]
            else:
                lines.append(f"set_port_rate {rate_pps} {port}")
        self.run([*lines, f"set_queue_depth {depth} {port}"])

    def queue_index(self, priority: int, priorities: int) -> int:
        """The CLI's priority argument for P4 ``priority``: simple_switch stores P4 priority p
        in queue ``priorities - 1 - p`` and its CLI addresses queues by that index; p4sim's
        admin channel takes the P4 priority itself."""
        return priorities - 1 - priority if self.target == "bmv2" else priority

    def stats(self) -> dict[str, Any] | None:
        """Per-port data-plane statistics. p4sim reports its traffic manager's counters; BMv2
        has none, so for it only ``queue_depth`` (fabric.p4's port_qdepth register) is given,
        and no ``queue_drops``: BMv2 exposes no queue-drop counter."""
        if self.target == "bmv2":
            if self._cli is None:
                self._cli = _CliSession(self.thrift_port)
            depths = self._cli.register_read(QDEPTH_REGISTER)
            if depths is None:
                raise AdminError(f"{self.name}: simple_switch_CLI register_read "
                                 f"{QDEPTH_REGISTER}: no answer")
            return {"ports": {str(p): {"queue_depth": d} for p, d in enumerate(depths)}}
        reply = send(("127.0.0.1", self.thrift_port), "stats", [])
        if not reply.get("ok"):
            raise AdminError(f"{self.name}: stats: {reply.get('error')}")
        return reply.get("result")
