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

    def set_queue(self, port: int, rate_pps: int, depth: int) -> None:
        self.run([f"set_queue_rate {rate_pps} {port}", f"set_queue_depth {depth} {port}"])

    def stats(self) -> dict[str, Any] | None:
        """Per-port data-plane statistics (p4sim only; BMv2 has no equivalent command)."""
        if self.target == "bmv2":
            return None
        from p4sim.switch.ctl import send

        reply = send(("127.0.0.1", self.thrift_port), "stats", [])
        if not reply.get("ok"):
            raise AdminError(f"{self.name}: stats: {reply.get('error')}")
        return reply.get("result")
