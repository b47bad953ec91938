"""Scapy layers for the formats Scapy does not have: ImmDt, the SACK block, INT-MD v2.1 over UDP,
Telemetry Report v2.0; plus plain decoders for INT metadata stacks.

BTH, AETH and CNP come from ``scapy.contrib.roce``. Scapy binds UDP port 4791 to BTH, which is
wrong for INT packets (the shim sits between UDP and BTH), so ``dissect`` re-parses the UDP
payload as an INT shim when the DSCP says INT is present.
"""

from __future__ import annotations

from scapy.contrib.roce import AETH, BTH
from scapy.fields import (
    BitField,
    ByteField,
    FieldLenField,
    IntField,
    ShortField,
    StrLenField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Padding, Raw, bind_layers

from hosts import wire
from hosts.headers import SACK
from hosts.intstack import (  # noqa: F401  (the plain decoders, here as before)
    HopRecord,
    decode_hop,
    decode_stack,
    encode_hop,
    parse_int_block,
)


class ImmDt(Packet):
    """Immediate data of the last cell: total message length in bytes."""

    name = "ImmDt"
    fields_desc = [IntField("msg_len", 0)]


class SackBlock(Packet):
    """Selective ACK + credit grant after the AETH (layout in hosts.wire)."""

    name = "SackBlock"
    # From hosts.headers.SACK; the bitmap length is Scapy's length field of the bitmap.
    fields_desc = [
        FieldLenField(name, None, length_of="bitmap", fmt="!H") if name == "bitmap_len"
        else BitField(name, wire.SACK_VERSION if name == "version" else 0, width)
        for name, width in SACK.fields
    ] + [StrLenField("bitmap", b"", length_from=lambda p: p.bitmap_len)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.flags & wire.SACK_F_INT_ECHO:
            return INTShim
        return Padding


class INTShim(Packet):
    """INT shim for TCP/UDP (INT v2.1 section 'INT over TCP/UDP')."""

    name = "INTShim"
    fields_desc = [
        BitField("int_type", wire.INT_TYPE_MD, 4),
        BitField("npt", 0, 2),
        BitField("rsv1", 0, 2),
        ByteField("length", 3),  # INT-MD header + stack in 4-byte words (shim excluded)
        ByteField("rsv2", 0),
        BitField("orig_dscp", 0, 6),
        BitField("rsv3", 0, 2),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return INTMD if self.int_type == wire.INT_TYPE_MD else Raw


class INTMD(Packet):
    """INT-MD metadata header (12 B) and the metadata stack it heads."""

    name = "INTMD"
    fields_desc = [
        BitField("version", wire.INT_VERSION, 4),
        BitField("d", 0, 1),
        BitField("e", 0, 1),
        BitField("m", 0, 1),
        BitField("rsv", 0, 12),
        BitField("hop_ml", wire.INT_HOP_ML, 5),
        ByteField("remaining_hops", wire.INT_MAX_HOPS),
        XShortField("instructions", wire.INT_INSTRUCTIONS),
        ShortField("domain_id", 0),
        XShortField("ds_instruction", 0),
        XShortField("ds_flags", 0),
        StrLenField("stack", b"", length_from=lambda p: _stack_len(p)),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        # A data cell continues with the BTH; an INT echo inside an ACK ends here.
        if len(payload) >= wire.BTH_LEN + wire.ICRC_LEN:
            return BTH
        return Padding

    def hops(self) -> list[HopRecord]:
        return decode_stack(self.instructions, self.hop_ml, bytes(self.stack))


def _stack_len(md: Packet) -> int:
    shim = md.underlayer
    if shim is None:
        return 0
    return max(0, shim.length * 4 - wire.INT_MD_HEADER_LEN)


class TelemetryReportGroup(Packet):
    """Telemetry Report v2.0 group header (8 B)."""

    name = "TelemetryReportGroup"
    fields_desc = [
        BitField("version", 2, 4),
        BitField("hw_id", 0, 6),
        BitField("seq", 0, 22),
        IntField("node_id", 0),
    ]


class TelemetryReportINT(Packet):
    """Individual report header + INT main contents (RepType 1)."""

    name = "TelemetryReportINT"
    fields_desc = [
        BitField("rep_type", 1, 4),
        BitField("in_type", 3, 4),
        ByteField("report_len", 0xFF),
        ByteField("md_len", 0),
        BitField("dropped", 0, 1),
        BitField("congested", 0, 1),
        BitField("tracked", 1, 1),
        BitField("intermediate", 0, 1),
        BitField("rsv", 0, 4),
        XShortField("rep_md_bits", 0),
        ShortField("domain_id", 0),
        XShortField("ds_md_bits", 0),
        XShortField("ds_md_status", 0),
        StrLenField("metadata", b"", length_from=lambda p: p.md_len * 4),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Ether if self.in_type == 3 else Raw


bind_layers(BTH, ImmDt, opcode=wire.OP_SEND_LAST_IMM)
bind_layers(BTH, ImmDt, opcode=wire.OP_SEND_ONLY_IMM)
bind_layers(AETH, SackBlock)
bind_layers(UDP, TelemetryReportGroup, dport=wire.TELEMETRY_REPORT_PORT)
bind_layers(TelemetryReportGroup, TelemetryReportINT)


def int_source_block(orig_dscp: int = 0, bitmap: int = wire.INT_INSTRUCTIONS,
                     max_hops: int = wire.INT_MAX_HOPS) -> bytes:
    """Shim + INT-MD header with an empty stack, as an INT source (host or switch) writes it."""
    md = INTMD(hop_ml=wire.hop_words(bitmap), remaining_hops=max_hops, instructions=bitmap)
    return bytes(INTShim(length=wire.INT_MD_HEADER_LEN // 4, orig_dscp=orig_dscp) / md)


def dissect(frame: bytes) -> Packet:
    """Scapy view of a cell/ACK/CNP frame, INT shim included (never on a hot path)."""
    pkt = Ether(frame)
    if IP in pkt and UDP in pkt and (pkt[IP].tos >> 2) == wire.INT_DSCP:
        udp = pkt[UDP]
        raw_payload = bytes(udp.payload)
        udp.remove_payload()
        udp.add_payload(INTShim(raw_payload))
    return pkt
