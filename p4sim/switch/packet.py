"""Per-packet state carried through the v1model pipeline."""

from __future__ import annotations

# simple_switch's instance_type values.
NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)


TOO_SHORT = -1  # stands for the program's PacketTooShort value where it is not at hand


class ParserError(Exception):
    """Raised by generated parser code; ``code`` is the P4 error's value in the JSON."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class PacketAbort(Exception):
    """A packet that cannot continue (failed assert, bad index); it is dropped and counted."""


class Packet:
    __slots__ = (
        "F", "clone_fl", "clone_session", "data", "digests", "end", "exit", "ingress_port",
        "instance_type", "length", "original", "passes", "payload", "pos", "recirc_fl",
        "resubmit_fl", "trace_id", "truncate",
    )  # trace_id: set only by the packet trace (p4sim.switch.trace), never read otherwise

    def __init__(self, F: list[int], data: bytes, ingress_port: int) -> None:
        self.F = F
        self.data = data
        self.original = data  # contents as this pass through ingress began (for I2E clones)
        self.pos = 0
        self.end = self.length = len(data)
        self.payload = b""
        self.ingress_port = ingress_port
        self.instance_type = NORMAL
        self.exit = False
        self.clone_session: int | None = None
        self.clone_fl = 0
        self.resubmit_fl: int | None = None
        self.recirc_fl: int | None = None
        self.digests: list[int] | None = None
        self.truncate = 0
        self.passes = 0

    def lookahead(self, offset_bits: int, width: int) -> int:
        start = self.pos * 8 + offset_bits
        stop = start + width
        if stop > self.end * 8:
            raise ParserError(TOO_SHORT)
        first, last = start // 8, (stop + 7) // 8
        chunk = int.from_bytes(self.data[first:last], "big")
        return (chunk >> (last * 8 - stop)) & ((1 << width) - 1)

