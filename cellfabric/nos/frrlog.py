"""What FRR's own logs say happened, and when, to the millisecond (frr.py configures
``log timestamp precision 3``, bfdd's ``debug bfd peer`` and bgpd's ``debug bgp zebra``).

The failure report times BFD's detection and BGP's convergence from these records instead of
asking every daemon through vtysh: a vtysh process per switch every quarter second took about a
core on the machine whose BFD it was measuring, and a poll only bounds when a change happened.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

# "2026/12/07 02:35:22.572 BFD: [SEY1D-NT8EQ] state-change: [mhop:no peer:172.16.0.1
#  local:172.16.0.0 vrf:default ifname:port1] up -> down reason:control-expired"
_STAMP = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)(\.\d+)? ")
_BFD_CHANGE = re.compile(r"state-change: \[[^\]]*\bpeer:(\S+)[^\]]*\] (\S+) -> (\S+)")
# bgpd -> zebra: a best path installed or withdrawn ("Tx route add VRF 0 10.0.1.1/32 ...")
_ROUTE_TX = re.compile(r"\bTx route (add|delete) VRF \S+ (\S+)")


def stamp_of(line: str) -> float | None:
    """The line's time as seconds since the epoch (FRR logs local time), or None."""
    m = _STAMP.match(line)
    if m is None:
        return None
    whole = time.mktime(time.strptime(m.group(1), "%Y/%m/%d %H:%M:%S"))
    return whole + (float(m.group(2)) if m.group(2) else 0.0)


@dataclass(frozen=True)
class BfdChange:
    t: float
    peer: str
    old: str
    new: str


def bfd_changes(lines: list[str]) -> list[BfdChange]:
    out = []
    for line in lines:
        m = _BFD_CHANGE.search(line)
        t = stamp_of(line) if m else None
        if m and t is not None:
            out.append(BfdChange(t, m.group(1), m.group(2), m.group(3)))
    return out


def route_updates(lines: list[str]) -> list[tuple[float, str, str]]:
    """(time, "add" or "delete", prefix) per route bgpd handed zebra."""
    out = []
    for line in lines:
        m = _ROUTE_TX.search(line)
        t = stamp_of(line) if m else None
        if m and t is not None:
            out.append((t, m.group(1), m.group(2)))
    return out


class LogTail:
    """The lines a log gained since the last call (whole lines only; the first call returns
    the log from its start)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()  # "" when the text ended with a newline
        return lines
