"""Wire constants shared by the hosts and fabric.p4: the contract, in one place.

Cells (data)
    Ethernet / IPv4 (DF, ECN = ECT(0)) / UDP (dst 4791, checksum 0) / BTH (12 B) /
    payload (the last cell's begins with a 4-byte ImmDt) / ICRC (4 B).
    * Every cell of a run has the same frame length. The configured cell payload length
      ``CELL_PAYLOAD_DEFAULT`` = 1024 B is the bytes after the BTH and before the ICRC.
    * Opcodes (RC): first ``OP_SEND_FIRST`` 0x00, middle ``OP_SEND_MIDDLE`` 0x01, last
      ``OP_SEND_LAST_IMM`` 0x03, single-cell message ``OP_SEND_ONLY_IMM`` 0x05. The last cell
      starts with a 4-byte immediate (ImmDt) = total message length in bytes, then the rest of
      the data, then zero fill. A message of M bytes takes ceil((M + 4) / payload) cells; the
      message is the concatenation of the cells' payloads (the last one after its ImmDt) cut to
      M bytes (so when M ends within 4 bytes of a cell boundary, the second-to-last cell is the
      short one and the last carries only the ImmDt). BTH pad count (last cell) = fill needed to
      bring its data bytes to a 4-byte multiple, as in InfiniBand.
    * PSN: 24 bits, one sequence per queue pair, wrapping mod 2**24. A connection uses the same
      QPN at both ends (``BTH.dqpn``); replies (ACK, CNP, grants) carry that QPN.
    * ICRC: 4 bytes sent as zero. Transit switches insert INT after UDP, which changes the
      bytes the ICRC covers, so receivers do not check it (documented, not an omission).
    * IPv4 identification = PSN low 16 bits (header checksum patched accordingly).

ACK / SACK / NAK / credit grant (receiver -> sender)
    BTH opcode ``OP_ACK`` 0x11, ``BTH.psn`` = cumulative ACK: the last PSN received in order
    (expected - 1, mod 2**24). AETH: syndrome ``AETH_ACK`` 0x00 or ``AETH_NAK_SEQ`` 0x60 (PSN
    sequence error: a gap older than the receiver's NAK hold-off), MSN = messages delivered.
    Then the SACK block (``hosts.layers.SackBlock``, 12 B + bitmap):
        version u8 (=1), flags u8 (``SACK_F_INT_ECHO`` 0x01: INT echo follows;
        ``SACK_F_GRANT`` 0x02: grant field valid), bitmap length u16 in bytes (multiple of 4),
        reserved u8, base PSN u24 (= cumulative ACK + 1; bit i of the bitmap, MSB first, set
        means PSN base+i was received), reserved u8, grant PSN u24 (credit mode: the sender may
        send PSNs strictly before it), bitmap (``SACK_BITMAP_BYTES`` = 32 B: 256 PSNs).
    With ``SACK_F_INT_ECHO`` the INT shim + INT-MD header + metadata stack of the most recent
    INT data cell follow, byte for byte as received (HPCC reads them). ACKs are not INT packets:
    their DSCP is 0.

CNP (receiver -> sender, DCQCN)
    BTH opcode ``OP_CNP`` 0x81, becn = 1, dqpn = QPN, 16 reserved bytes. At most one per flow
    per ``CNP_INTERVAL_US`` = 50 us, sent when a cell arrives with ECN = CE.

ECN codepoints (IPv4 TOS low two bits)
    ``ECN_NOT_ECT`` 0, ``ECN_ECT1`` 1, ``ECN_ECT0`` 2 (cells are sent with it), ``ECN_CE`` 3.

INT-MD v2.1 over UDP
    INT presence is marked by DSCP = ``INT_DSCP`` 0x17 (TOS = 0x5C | ECN); the INT shim
    (4 B: type 4b = ``INT_TYPE_MD`` 1, NPT 2b = 0, length 8b = INT-MD header + stack in 4-byte
    words, shim excluded; original DSCP in the 6 high bits of the last byte) follows UDP, then
    the 12-byte INT-MD header (ver 2, D/E/M, Hop ML, remaining hop count, instruction bitmap,
    domain id, DS instruction, DS flags), then the stack, newest hop first, then the BTH.
    Instruction bitmap bits (bit 0 = MSB of the 16-bit field):
        ``INT_BIT_NODE_ID`` 0 (4 B), ``INT_BIT_L1_PORTS`` 1 (ingress u16 + egress u16),
        ``INT_BIT_HOP_LATENCY`` 2 (4 B), ``INT_BIT_QUEUE`` 3 (queue id u8 + occupancy u24),
        ``INT_BIT_INGRESS_TS`` 4 (8 B), ``INT_BIT_EGRESS_TS`` 5 (8 B),
        ``INT_BIT_L2_PORTS`` 6 (8 B), ``INT_BIT_TX_UTIL`` 7 (4 B), ``INT_BIT_BUFFER`` 8 (4 B).
    The fabric's instruction set ``INT_INSTRUCTIONS`` = bits 0,1,2,3,4,5,7 = 0xFD00,
    Hop ML = 9 words (36 B per hop); ``INT_MAX_HOPS`` 8.
    The INT source is the first switch (watchlist) or the sending host (``--int-source``); for
    HPCC the receiving host must be the sink (a switch sink would strip the stack first).
    Units (simple_switch's): timestamps and hop latency in microseconds
    (``INT_TIME_UNIT_NS`` = 1000), queue occupancy in packets (cells), "egress tx utilization"
    = the egress port's cumulative transmitted bytes mod 2**32 (HPCC's txBytes; rates come from
    two consecutive records).

Telemetry Report v2.0 (switch or host sink -> collector)
    UDP dst ``TELEMETRY_REPORT_PORT`` 32766. Group header (ver 2, hw_id, seq, node id),
    then individual reports: RepType 1 (INT), InType 3 (Ethernet: truncated packet with its INT
    stack) with the sink's own metadata per RepMdBits (a host sink reports none: RepMdBits 0,
    MD length 0, node id = the host's ``--node-id``).
"""

from __future__ import annotations

ROCE_UDP_PORT = 4791
TELEMETRY_REPORT_PORT = 32766
CELL_PAYLOAD_DEFAULT = 1024
BTH_LEN = 12
IMMDT_LEN = 4
ICRC_LEN = 4
PSN_BITS = 24
PSN_MOD = 1 << PSN_BITS

OP_SEND_FIRST = 0x00
OP_SEND_MIDDLE = 0x01
OP_SEND_LAST = 0x02
OP_SEND_LAST_IMM = 0x03
OP_SEND_ONLY = 0x04
OP_SEND_ONLY_IMM = 0x05
OP_ACK = 0x11
OP_CNP = 0x81
DATA_OPCODES = frozenset({OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_LAST_IMM, OP_SEND_ONLY_IMM})
LAST_OPCODES = frozenset({OP_SEND_LAST_IMM, OP_SEND_ONLY_IMM})

AETH_ACK = 0x00
AETH_NAK_SEQ = 0x60

SACK_VERSION = 1
SACK_F_INT_ECHO = 0x01
SACK_F_GRANT = 0x02
SACK_BITMAP_BYTES = 32  # 256 PSNs after the cumulative ACK

CNP_INTERVAL_US = 50.0
# Receivers ACK every this many cells (and after as many cell times): feedback shares each
# link with the data of the other direction, and where a link's rate counts packets an ACK
# costs a cell's slot, so feedback must stay well inside the line left beside data.
ACK_EVERY = 8

ECN_NOT_ECT = 0
ECN_ECT1 = 1
ECN_ECT0 = 2
ECN_CE = 3

INT_DSCP = 0x17
INT_TYPE_MD = 1
INT_VERSION = 2
INT_BIT_NODE_ID = 0
INT_BIT_L1_PORTS = 1
INT_BIT_HOP_LATENCY = 2
INT_BIT_QUEUE = 3
INT_BIT_INGRESS_TS = 4
INT_BIT_EGRESS_TS = 5
INT_BIT_L2_PORTS = 6
INT_BIT_TX_UTIL = 7
INT_BIT_BUFFER = 8
INT_MAX_HOPS = 8
INT_TIME_UNIT_NS = 1000


def int_bitmap(*bits: int) -> int:
    """Instruction bitmap with the given bit numbers set (bit 0 is the MSB)."""
    value = 0
    for bit in bits:
        value |= 1 << (15 - bit)
    return value


def hop_words(bitmap: int) -> int:
    """Per-hop metadata length in 4-byte words for an instruction bitmap (bits 0-14); the
    per-bit sizes are hosts.headers.INT_HOP's."""
    from hosts.headers import hop_bytes

    return hop_bytes(bitmap) // 4


INT_INSTRUCTIONS = int_bitmap(
    INT_BIT_NODE_ID, INT_BIT_L1_PORTS, INT_BIT_HOP_LATENCY, INT_BIT_QUEUE,
    INT_BIT_INGRESS_TS, INT_BIT_EGRESS_TS, INT_BIT_TX_UTIL,
)
INT_HOP_ML = hop_words(INT_INSTRUCTIONS)
INT_MD_HEADER_LEN = 12
INT_SHIM_LEN = 4

# Frame sizes, from the formats above (Ethernet II, IPv4 without options, UDP).
ETH_LEN, IPV4_LEN, UDP_LEN, AETH_LEN, SACK_HEADER_LEN = 14, 20, 8, 4, 12


def cell_frame_bytes(payload_len: int, int_source: bool) -> int:
    """A data cell's frame: Ethernet, IPv4, UDP, the INT shim and INT-MD header if the host
    is the INT source, BTH, payload, ICRC."""
    int_len = INT_SHIM_LEN + INT_MD_HEADER_LEN if int_source else 0
    return ETH_LEN + IPV4_LEN + UDP_LEN + int_len + BTH_LEN + payload_len + ICRC_LEN


# An ACK with its SACK block (no INT echo): the feedback a receiver sends every ACK_EVERY cells.
ACK_FRAME_BYTES = (ETH_LEN + IPV4_LEN + UDP_LEN + BTH_LEN + AETH_LEN + SACK_HEADER_LEN
                   + SACK_BITMAP_BYTES + ICRC_LEN)


def psn_unwrap(psn: int, reference: int) -> int:
    """The unbounded sequence number nearest ``reference`` whose low 24 bits are ``psn``."""
    delta = (psn - reference) % PSN_MOD
    if delta >= PSN_MOD // 2:
        delta -= PSN_MOD
    return reference + delta


def tos(ecn: int, dscp: int = 0) -> int:
    return (dscp << 2) | ecn
