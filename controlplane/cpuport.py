"""The controller headers as bytes on a CPU port that is an interface (no ``--cpu-port``).

A switch started without ``--cpu-port`` treats its CPU port as any other port: what the
program sends there leaves on the interface mapped to it (``-i 510@IFACE``) as the deparser
wrote it, ``packet_in`` header first, and what arrives on that interface enters the parser
with the ``packet_out`` header in front. A reader of that interface does by itself what a
P4Runtime server does with ``--cpu-port``: split the ``packet_in`` header off and prepend a
``packet_out`` one, both bit-packed in P4Info order (most significant bit first, the last
byte padded with zeros), as PI does. The layout comes from the P4Info
(``controller_packet_metadata``), never from a copy of the P4 header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the standard library alone at run time: a relay process imports this
    from controlplane.p4info import P4InfoIndex


class CpuHeaderError(ValueError):
    """A program without the controller header asked for, or a value that does not fit."""


@dataclass(frozen=True)
class HeaderField:
    name: str
    bitwidth: int


@dataclass(frozen=True)
class ControllerHeader:
    """One controller header (``packet_in`` or ``packet_out``): its fields in P4Info order."""

    name: str
    fields: tuple[HeaderField, ...]

    @property
    def bits(self) -> int:
        return sum(f.bitwidth for f in self.fields)

    @property
    def size(self) -> int:
        """Bytes on the wire: the fields rounded up to whole bytes."""
        return (self.bits + 7) // 8

    def pack(self, values: dict[str, int]) -> bytes:
        """The header's bytes; a field not in ``values`` is 0, a name it lacks is an error."""
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise CpuHeaderError(f"{self.name}: no field {sorted(unknown)[0]!r} (fields: "
                                 f"{', '.join(f.name for f in self.fields)})")
        word = 0
        for f in self.fields:
            value = int(values.get(f.name, 0))
            if not 0 <= value < 1 << f.bitwidth:
                raise CpuHeaderError(f"{self.name}.{f.name}: {value} does not fit in "
                                     f"{f.bitwidth} bits")
            word = (word << f.bitwidth) | value
        return (word << (8 * self.size - self.bits)).to_bytes(self.size, "big")

    def unpack(self, frame: bytes) -> tuple[dict[str, int], bytes] | None:
        """(fields, what follows the header); None for a frame shorter than the header."""
        if len(frame) < self.size:
            return None
        word = int.from_bytes(frame[:self.size], "big") >> (8 * self.size - self.bits)
        out: dict[str, int] = {}
        for f in reversed(self.fields):
            out[f.name] = word & ((1 << f.bitwidth) - 1)
            word >>= f.bitwidth
        return out, frame[self.size:]


    def layout(self) -> list[tuple[str, int]]:
        """(name, bitwidth) per field: what ``from_layout`` takes back (e.g. as JSON)."""
        return [(f.name, f.bitwidth) for f in self.fields]

    @classmethod
    def from_layout(cls, name: str, layout: list[tuple[str, int]]) -> ControllerHeader:
        return cls(name, tuple(HeaderField(str(n), int(w)) for n, w in layout))


def controller_header(index: P4InfoIndex, name: str) -> ControllerHeader:
    fields = index.packet_metadata(name)
    if not fields:
        raise CpuHeaderError(f"the pipeline has no controller header {name!r} "
                             "(a @controller_header(\"" + name + "\") header in the P4 program)")
    return ControllerHeader(name, tuple(HeaderField(f.name, f.bitwidth) for f in fields))


@dataclass(frozen=True)
class CpuPortCodec:
    """Frames read from and written to a CPU-port interface, for one pipeline."""

    packet_in: ControllerHeader
    packet_out: ControllerHeader

    @classmethod
    def of(cls, index: P4InfoIndex) -> CpuPortCodec:
        return cls(controller_header(index, "packet_in"), controller_header(index, "packet_out"))

    def split(self, frame: bytes) -> tuple[dict[str, int], bytes] | None:
        """A frame the switch sent to its CPU port: (packet_in's fields, the packet)."""
        return self.packet_in.unpack(frame)

    def frame(self, payload: bytes, **values: Any) -> bytes:
        """The frame that makes the switch send ``payload`` as a PacketOut with ``values``."""
        return self.packet_out.pack(values) + payload
