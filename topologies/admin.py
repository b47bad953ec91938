"""Runtime settings a P4Runtime controller cannot make: queue rates and depths, port state.

Both targets take simple_switch_CLI's command lines (``set_queue_rate PPS PORT``,
``set_queue_depth PKTS PORT``): real BMv2 through ``simple_switch_CLI --thrift-port N`` on its
standard input, p4sim through its admin channel. Both go through the one admin channel client,
``controlplane.admin`` (in-process for p4sim, because the runner sends hundreds of them at
bring-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlplane.admin import AdminChannel, send
from controlplane.admin import AdminError as ChannelError


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

    def set_queue(self, port: int, rate_pps: int, depth: int) -> None:
        self.run([f"set_queue_rate {rate_pps} {port}", f"set_queue_depth {depth} {port}"])

    def stats(self) -> dict[str, Any] | None:
        """Per-port data-plane statistics (p4sim only; BMv2 has no equivalent command)."""
        if self.target == "bmv2":
            return None
        reply = send(("127.0.0.1", self.thrift_port), "stats", [])
        if not reply.get("ok"):
            raise AdminError(f"{self.name}: stats: {reply.get('error')}")
        return reply.get("result")
