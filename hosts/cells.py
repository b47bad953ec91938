"""Messages into fixed-length cells, frame templates patched per cell, and fast frame parsing.

Each template is built once (the bytes Scapy built, without importing it: 0.5 CPU s of a
simulation's start); the per-cell path only copies the template and patches bytes (opcode, pad
count, PSN, IP id and checksum, payload), and the receive path reads fields with ``struct`` at
known offsets (see hosts.wire for the layouts).
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

from hosts import wire
from hosts.headers import BTH as BTH_LAYOUT

ETH_LEN = 14
ETHERTYPE_IPV4 = 0x0800
IP_PROTO_UDP = 17
IP_TTL = 64  # Scapy's default, which the templates always had
IP_DF = 0x4000
BTH_PKEY = 0xFFFF  # the default partition key (Scapy's BTH default)
ICRC_LEN = 4


@dataclass(frozen=True)
class CellPlan:
    """Where one cell's data comes from in its message."""

    index: int
    opcode: int
    offset: int
    length: int  # data bytes carried (the rest of the cell payload is ImmDt and/or fill)


def cell_count(msg_len: int, payload_len: int) -> int:
    """Cells for a message: the last one gives 4 bytes to the ImmDt (message length)."""
    if payload_len <= wire.IMMDT_LEN or payload_len % 4:
        raise ValueError(f"cell payload length {payload_len}: must be a multiple of 4 above 4")
    return max(1, -(-(msg_len + wire.IMMDT_LEN) // payload_len))


def plan_cell(msg_len: int, payload_len: int, index: int, count: int) -> CellPlan:
    """Cell ``index`` of the ``count`` cells of a message of ``msg_len`` bytes.

    Cells before the last carry ``payload_len`` data bytes, except that when the message ends
    within 4 bytes of a cell boundary the second-to-last cell is short (zero fill) and the
    last cell carries only the ImmDt."""
    if count == 1:
        return CellPlan(0, wire.OP_SEND_ONLY_IMM, 0, msg_len)
    offset = index * payload_len
    if index == count - 1:
        return CellPlan(index, wire.OP_SEND_LAST_IMM, min(offset, msg_len),
                        max(0, msg_len - offset))
    return CellPlan(index, wire.OP_SEND_FIRST if index == 0 else wire.OP_SEND_MIDDLE, offset,
                    min(payload_len, msg_len - offset))


def segment(msg_len: int, payload_len: int) -> list[CellPlan]:
    """Plan all the cells of a message of ``msg_len`` bytes (see ``plan_cell``)."""
    n = cell_count(msg_len, payload_len)
    return [plan_cell(msg_len, payload_len, i, n) for i in range(n)]


def cell_payload(message: bytes | memoryview, plan: CellPlan,
                 payload_len: int) -> bytes | memoryview:
    """The payload bytes of one cell, always ``payload_len`` long: data and zero fill; the last
    cell starts with the ImmDt (message length). A full middle cell is a zero-copy view."""
    if plan.length == payload_len and plan.opcode not in wire.LAST_OPCODES:
        return memoryview(message)[plan.offset:plan.offset + payload_len]
    data = bytes(message[plan.offset:plan.offset + plan.length])
    if plan.opcode in wire.LAST_OPCODES:
        data = struct.pack("!I", len(message)) + data
    return data + bytes(payload_len - len(data))


def pad_count(plan: CellPlan) -> int:
    return (-plan.length) % 4 if plan.opcode in wire.LAST_OPCODES else 0


def message_bytes(index: int, size: int, seed: int = 0) -> bytes:
    """Deterministic message content, so a receiver's CRC can be checked by anyone."""
    unit = struct.pack("!II", seed, index) + bytes(range(256))
    reps = -(-size // len(unit))
    return (unit * reps)[:size]


def message_crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


# units per block in message_crc_of: a block of ~66 KB, CRC'd again and again
_CRC_BLOCK_UNITS = 256


def message_crc_of(index: int, size: int, seed: int = 0) -> int:
    """``message_crc(message_bytes(index, size, seed))`` without the message: the CRC runs
    over one block of whole units as many times as it fits, then the rest (a simulated
    sender that never held its bytes reports their CRC: 1 MiB built per message was most of
    the cost)."""
    unit = struct.pack("!II", seed, index) + bytes(range(256))
    block = unit * _CRC_BLOCK_UNITS
    crc = 0
    whole, rest = divmod(size, len(block))
    for _ in range(whole):
        crc = zlib.crc32(block, crc)
    return zlib.crc32(memoryview(block)[:rest], crc) & 0xFFFFFFFF


def ip_checksum(header: bytes | bytearray) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def l2l4_header(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, tos_byte: int,
                sport: int, dport: int, payload_len: int) -> bytes:
    """Ethernet + IPv4 (no options, DF, id 0, TTL 64, its checksum) + UDP (checksum 0) headers
    of a datagram of ``payload_len`` bytes, as ``Ether()/IP(flags="DF", id=0)/UDP(chksum=0)``
    builds them."""
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos_byte, 28 + payload_len, 0, IP_DF,
                               IP_TTL, IP_PROTO_UDP, 0, socket.inet_aton(src_ip),
                               socket.inet_aton(dst_ip)))
    struct.pack_into("!H", ip, 10, ip_checksum(ip))
    return (_mac(dst_mac) + _mac(src_mac) + struct.pack("!H", ETHERTYPE_IPV4) + bytes(ip)
            + struct.pack("!HHHH", sport, dport, 8 + payload_len, 0))


def _mac(text: str) -> bytes:
    raw = bytes.fromhex(text.replace(":", "").replace("-", ""))
    if len(raw) != 6:
        raise ValueError(f"not a MAC address: {text!r}")
    return raw


class CellTemplate:
    """One prebuilt data-cell frame for a queue pair and a path; ``frame`` patches a copy."""

    def __init__(self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, qpn: int,
                 payload_len: int = wire.CELL_PAYLOAD_DEFAULT, sport: int = 49152,
                 int_source: bool = False) -> None:
        self.payload_len = payload_len
        dscp = wire.INT_DSCP if int_source else 0
        int_block = b""
        if int_source:
            from hosts.layers import int_source_block  # Scapy: only for an INT source

            int_block = int_source_block()
        # BTH: opcode 0, flags 0, the default P_Key, the QP, PSN 0; the ICRC (0) trails
        bth = struct.pack("!BBHII", 0, 0, BTH_PKEY, qpn & 0xFFFFFF, 0)
        body = int_block + bth + bytes(payload_len) + bytes(ICRC_LEN)
        self.template = l2l4_header(src_mac, dst_mac, src_ip, dst_ip,
                                    wire.tos(wire.ECN_ECT0, dscp), sport, wire.ROCE_UDP_PORT,
                                    len(body)) + body
        self.bth_off = ETH_LEN + 20 + 8 + len(int_block)
        self.payload_off = self.bth_off + wire.BTH_LEN
        self.frame_len = len(self.template)
        header = bytearray(self.template[ETH_LEN:ETH_LEN + 20])
        header[10:12] = b"\0\0"
        header[4:6] = b"\0\0"
        # One's-complement sum of the header without id and checksum: each frame adds its id.
        total = sum(struct.unpack("!10H", header))
        self._ip_sum = total

    def frame(self, psn: int, opcode: int, payload: bytes | memoryview, pad: int = 0,
              ackreq: bool = False) -> bytearray:
        buf = bytearray(self.template)
        self.patch(buf, psn, opcode, payload, pad, ackreq)
        return buf

    def patch(self, buf: bytearray, psn: int, opcode: int, payload: bytes | memoryview,
              pad: int = 0, ackreq: bool = False) -> None:
        ip_id = psn & 0xFFFF
        total = self._ip_sum + ip_id
        total = (total & 0xFFFF) + (total >> 16)
        total = (total & 0xFFFF) + (total >> 16)
        struct.pack_into("!H", buf, ETH_LEN + 4, ip_id)
        struct.pack_into("!H", buf, ETH_LEN + 10, ~total & 0xFFFF)
        b = self.bth_off
        buf[b + _OPCODE] = opcode
        buf[b + _PAD_BYTE] = (pad & 3) << _PAD_SHIFT
        struct.pack_into("!I", buf, b + _PSN_WORD, (_ACKREQ if ackreq else 0)
                         | (psn & 0xFFFFFF))
        end = self.payload_off + len(payload)
        buf[self.payload_off:end] = payload
        if len(payload) < self.payload_len:
            buf[end:self.payload_off + self.payload_len] = bytes(self.payload_len - len(payload))


class UdpFramer:
    """Ethernet/IPv4/UDP header template for variable-length control frames (ACK, CNP, reports)."""

    def __init__(self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int,
                 dport: int, tos_byte: int = 0) -> None:
        self.header = bytearray(l2l4_header(src_mac, dst_mac, src_ip, dst_ip, tos_byte, sport,
                                            dport, 0))
        self._ip_id = 0

    def frame(self, payload: bytes) -> bytes:
        buf = bytearray(self.header)
        self._ip_id = (self._ip_id + 1) & 0xFFFF
        struct.pack_into("!HH", buf, ETH_LEN + 2, 28 + len(payload), self._ip_id)
        struct.pack_into("!H", buf, ETH_LEN + 10, 0)
        struct.pack_into("!H", buf, ETH_LEN + 10, ip_checksum(buf[ETH_LEN:ETH_LEN + 20]))
        struct.pack_into("!H", buf, ETH_LEN + 24, 8 + len(payload))
        return bytes(buf) + payload


@dataclass(slots=True)
class RoceFrame:
    """The fields hosts act on, read at fixed offsets from a received frame."""

    src_mac: bytes
    dst_mac: bytes
    src_ip: bytes
    dst_ip: bytes
    ecn: int
    dscp: int
    sport: int
    int_block: bytes | None
    opcode: int
    pad: int
    becn: bool
    qpn: int
    psn: int
    body_off: int  # first byte after the BTH
    body_end: int  # first byte of the ICRC


# Ethernet + IPv4 without options + UDP, in one unpack (the per-frame receive path).
_L2L4 = struct.Struct("!6s6sHBBHHHBBH4s4sHHHH")
_BTH = BTH_LAYOUT.struct  # opcode, se|migreq|pad|tver, pkey, fecn|becn|rsv|dqpn, ackreq|rsv|psn
_PAD_BYTE, _PAD_SHIFT = BTH_LAYOUT.byte_offset("pad"), BTH_LAYOUT.shift("pad")
_PSN_WORD = BTH_LAYOUT.byte_offset("ackreq")
_BECN = 1 << BTH_LAYOUT.shift("becn")
_OPCODE = BTH_LAYOUT.byte_offset("opcode")
_ACKREQ = 1 << BTH_LAYOUT.shift("ackreq")
_MIN_FRAME = ETH_LEN + 20 + 8 + wire.BTH_LEN + wire.ICRC_LEN


def parse_roce(buf: bytes | bytearray | memoryview, n: int | None = None) -> RoceFrame | None:
    """Parse Ether/IPv4/UDP:4791[/INT]/BTH; None if the frame is not one (or is malformed)."""
    n = len(buf) if n is None else n
    if n < _MIN_FRAME:
        return None
    (dst, src, etype, ver_ihl, tos_byte, _tl, _id, _frag, _ttl, proto, _ck, sip, dip,
     sport, dport, _ulen, _uck) = _L2L4.unpack_from(buf, 0)
    if etype != ETHERTYPE_IPV4 or proto != IP_PROTO_UDP or ver_ihl >> 4 != 4:
        return None
    ihl = (ver_ihl & 0x0F) * 4
    if ihl != 20:  # IP options: the UDP header sits further on
        if ihl < 20 or ETH_LEN + ihl + 8 + wire.BTH_LEN + wire.ICRC_LEN > n:
            return None
        sport, dport = struct.unpack_from("!HH", buf, ETH_LEN + ihl)
    if dport != wire.ROCE_UDP_PORT:
        return None
    dscp = tos_byte >> 2
    bth = ETH_LEN + ihl + 8
    int_block = None
    if dscp == wire.INT_DSCP:
        int_len = wire.INT_SHIM_LEN + buf[bth + 1] * 4
        int_block = bytes(buf[bth:bth + int_len])
        bth += int_len
    if bth + wire.BTH_LEN + wire.ICRC_LEN > n:
        return None
    opcode, flags, _pkey, qword, pword = _BTH.unpack_from(buf, bth)
    return RoceFrame(src, dst, sip, dip, tos_byte & 3, dscp, sport, int_block, opcode,
                     (flags >> _PAD_SHIFT) & 3, bool(qword & _BECN), qword & 0xFFFFFF,
                     pword & 0xFFFFFF, bth + wire.BTH_LEN, n - wire.ICRC_LEN)


def bth_bytes(opcode: int, qpn: int, psn: int, becn: bool = False) -> bytes:
    return BTH_LAYOUT.pack(opcode=opcode, pkey=0xFFFF, becn=int(becn), dqpn=qpn, psn=psn)
