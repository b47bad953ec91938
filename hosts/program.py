"""The contract of a host program (``hosts.sender.Sender``, ``hosts.receiver.Receiver``) with
whatever drives it: the emulated loop over sockets (``run``) or a simulator on its own clock.

A driver calls ``begin`` once, hands every frame that arrives to ``on_frame`` (with its
``parse_roce`` result when the driver parsed it already, to route it), and calls
``poll`` at the deadline it last returned (or sooner, after a frame): ``poll`` does what is
due and says when it is due next, as an absolute time on the program's clock, or None once
the program is done. A deadline of ``math.inf`` means nothing is due until a frame arrives.
"""

from __future__ import annotations

from typing import Protocol

from hosts.cells import RoceFrame
from hosts.nic import NicPort


class HostProgram(Protocol):
    ports: list[NicPort]

    def begin(self) -> None: ...

    def on_frame(self, buf: bytes | bytearray, n: int, now: float, port: NicPort,
                 parsed: RoceFrame | None = None) -> None: ...

    def poll(self, now: float) -> float | None: ...

    def metrics(self, elapsed: float) -> dict[str, object]: ...
