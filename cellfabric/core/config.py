"""What a run is configured with, whichever driver runs it: the P4 program, and the failures
injected into the fabric."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FABRIC_P4 = ROOT / "p4src" / "fabric.p4"


@dataclass
class LinkEvent:
    link: str  # what was named: a link "a-b" or a switch
    at_s: float
    up: bool
    links: tuple[str, ...] = ()  # the links it takes down or up (default: ``link`` itself)

    def __post_init__(self) -> None:
        if not self.links:
            self.links = (self.link,)
