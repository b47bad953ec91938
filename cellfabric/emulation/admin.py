"""Runtime settings a P4Runtime controller cannot make: queue rates and depths, port state.

Both targets take simple_switch_CLI's command lines (``set_queue_rate PPS PORT``,
``set_queue_depth PKTS PORT``): real BMv2 through ``simple_switch_CLI --thrift-port N`` on its
standard input, p4sim through its admin channel. Both go through the one admin channel client,
``controlplane.admin`` (in-process for p4sim, because the runner sends hundreds of them at
bring-up).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from controlplane.admin import AdminChannel, send
from controlplane.admin import AdminError as ChannelError
from controlplane.fabric_plan import (
    CONTROL_PRIORITY,
    CONTROL_QUEUES,
    FEEDBACK_PRIORITY,
    QueuePlan,
    queue_plan,
)


class AdminError(RuntimeError):
    pass


@dataclass
class SwitchAdmin:
    name: str
    target: str
    thrift_port: int

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

    def set_queue(self, port: int, rate_pps: int, depth: int, priorities: int = 1) -> None:
        """A port's queues at line ``rate_pps`` and ``depth`` (see ``apply_queue``)."""
        self.apply_queue(queue_plan(port, rate_pps, depth), priorities)

    def apply_queue(self, q: QueuePlan, priorities: int = 1) -> None:
        """The port's queue depth, and its line rate shared by its ``priorities`` queues.

        p4sim: every queue may send the line rate and the port's line (``set_port_rate``)
        caps them together, so the feedback queue takes its share only while it has packets.
        Real BMv2 paces each priority queue on its own and has no shared rate: there data gets
        its share and feedback the line (the plan's data_pps and feedback_pps).

        With a control queue (``priorities`` >= CONTROL_QUEUES: a NOS's run), the switch's own
        frames are off the line (fabric_plan.CONTROL_PRIORITY): on p4sim the line covers the
        queues below it and the control queue has no rate; on BMv2 it is paced at the line on
        its own, as its other queues are."""
        line, port = q.line_pps, q.port
        lines = [f"set_queue_rate {line} {port}"]
        if priorities >= 2 and line > 0:
            control = priorities >= CONTROL_QUEUES
            if self.target == "bmv2":
                paced = [(0, q.data_pps), (FEEDBACK_PRIORITY, q.feedback_pps)]
                paced += [(CONTROL_PRIORITY, line)] if control else []
                lines = [f"set_queue_rate {pps} {port} {self.queue_index(prio, priorities)}"
                         for prio, pps in paced]
            elif control:
                lines += [f"set_queue_rate 0 {port} {CONTROL_PRIORITY}",
                          f"set_port_rate {line} {port} {CONTROL_PRIORITY}"]
            else:
                lines.append(f"set_port_rate {line} {port}")
        self.run([*lines, f"set_queue_depth {q.depth} {port}"])

    def queue_index(self, priority: int, priorities: int) -> int:
        """The CLI's priority argument for P4 ``priority``. p4sim's admin channel and
        simple_switch_CLI from BMv2 1.15.1 on take the P4 priority itself (BMv2 #1276 made the
        CLI's queue id the P4 program's qid). Before 1.15.1 simple_switch kept priority p in
        queue ``priorities - 1 - p`` and its CLI addressed queues by that index; sending the
        old index to a newer BMv2 paces data at the feedback share (measured on 1.15.5: the
        default leaf-spine run at 6.5x ideal, 30% of cells retransmitted)."""
        if self.target == "bmv2" and bmv2_cli_inverts_priorities(bmv2_version()):
            return priorities - 1 - priority
        return priority


    def stats(self) -> dict[str, Any] | None:
        """Per-port data-plane statistics (p4sim only; BMv2 has no equivalent command: its
        queue depths are read by the monitor through simple_switch_CLI)."""
        if self.target == "bmv2":
            return None
        reply = send(("127.0.0.1", self.thrift_port), "stats", [])
        if not reply.get("ok"):
            raise AdminError(f"{self.name}: stats: {reply.get('error')}")
        return reply.get("result")


def bmv2_cli_inverts_priorities(version: tuple[int, ...] | None) -> bool:
    """Whether simple_switch_CLI of BMv2 ``version`` numbers priority queues inverted (before
    1.15.1); an unknown version is taken to be a current one."""
    return version is not None and version < (1, 15, 1)


@functools.cache
def bmv2_version() -> tuple[int, ...] | None:
    """The version of the simple_switch_grpc on PATH (``--version`` prints e.g.
    ``1.15.5-unknown``); None if it cannot be run or read."""
    exe = shutil.which("simple_switch_grpc")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(g) for g in match.groups()) if match else None
