"""Runtime settings a P4Runtime controller cannot make: queue rates and depths, port state.

Both targets take simple_switch_CLI's command lines (``set_queue_rate PPS PORT``,
``set_queue_depth PKTS PORT``): real BMv2 through ``simple_switch_CLI --thrift-port N`` on its
standard input, p4sim through its admin channel (``p4sim ctl``), here called in-process because
the runner sends hundreds of them at bring-up.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any


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
            proc = subprocess.run(["simple_switch_CLI", "--thrift-port", str(self.thrift_port)],
                                  input="\n".join(lines) + "\n", capture_output=True, text=True)
            if proc.returncode != 0 or "Error" in proc.stdout:
                raise AdminError(f"{self.name}: simple_switch_CLI: "
                                 f"{(proc.stderr or proc.stdout).strip()[-300:]}")
            return
        from p4sim.switch.ctl import send

        for line in lines:
            words = line.split()
            reply = send(("127.0.0.1", self.thrift_port), words[0], words[1:])
            if not reply.get("ok"):
                raise AdminError(f"{self.name}: {line}: {reply.get('error')}")

    def set_queue(self, port: int, rate_pps: int, depth: int,
                  shares: dict[int, int] | None = None, priorities: int = 1) -> None:
        """Depth for the port; rate for all its queues, or per priority when ``shares``
        ({P4 priority: pps}) is given."""
        if not shares or priorities < 2:
            self.run([f"set_queue_rate {rate_pps} {port}", f"set_queue_depth {depth} {port}"])
            return
        lines = [f"set_queue_rate {pps} {port} {self.queue_index(prio, priorities)}"
                 for prio, pps in sorted(shares.items())]
        self.run([*lines, f"set_queue_depth {depth} {port}"])

    def queue_index(self, priority: int, priorities: int) -> int:
        """The CLI's priority argument for P4 ``priority``: simple_switch stores P4 priority p
        in queue ``priorities - 1 - p`` and its CLI addresses queues by that index; p4sim's
        admin channel takes the P4 priority itself."""
        return priorities - 1 - priority if self.target == "bmv2" else priority

    def stats(self) -> dict[str, Any] | None:
        """Per-port data-plane statistics (p4sim only; BMv2 has no equivalent command)."""
        if self.target == "bmv2":
            return None
        from p4sim.switch.ctl import send

        reply = send(("127.0.0.1", self.thrift_port), "stats", [])
        if not reply.get("ok"):
            raise AdminError(f"{self.name}: stats: {reply.get('error')}")
        return reply.get("result")
