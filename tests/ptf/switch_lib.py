"""Shared pieces of the p4sim switch PTF suite (tests/ptf/test_switch_*.py); no tests here.

The programs live in tests/ptf/p4/. Switch ports 0..N-1 are PTF ports 0..N-1 (device 0), as
``python -m netlab.ptf_runner`` wires them. Expected packets are built from scratch with Scapy
from what the P4 program is specified to do, never from the switch's output.

Test params used besides grpcaddr/target/device_id: ``cpu_port`` (packet I/O needs the switch
started with a CPU port) and ``thrift_port`` (the admin channel for queue settings, read by the
base class; default 9090 on the gRPC host, simple_switch's and p4sim's default).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import ptf
from base import P4RuntimeTest
from ptf import testutils
from scapy.fields import IntField, ShortField
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

P4_DIR = Path(__file__).resolve().parent / "p4"
ETHERTYPE_PROBE = 0x88B5
# How long "nothing (else) arrives" is watched for where a drop is the point of the check:
# longer than PTF's default so a late frame from a slow switch cannot slip past.
DROP_WAIT = 0.5


class Probe(Packet):
    """The 28-byte probe header of tests/ptf/p4/switch_headers.p4 (ethertype 0x88B5)."""

    name = "Probe"
    fields_desc = [
        IntField("seq", 0),
        ShortField("rid", 0),
        ShortField("egress_port", 0),
        IntField("enq_qdepth", 0),
        IntField("deq_qdepth", 0),
        IntField("stamp", 0),
        IntField("enq_timestamp", 0),
        IntField("deq_timedelta", 0),
    ]


bind_layers(Ether, Probe, type=ETHERTYPE_PROBE)
PROBE_LEN = len(Probe())
ETH_LEN = 14


def program(name: str) -> str:
    return str(P4_DIR / name)


def ones_complement_checksum(header: bytes) -> int:
    """RFC 1071 checksum of ``header`` (with its checksum field zeroed by the caller)."""
    if len(header) % 2:
        header += b"\0"
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class SwitchTest(P4RuntimeTest):
    """Base of the switch suite: the program's CPU_PORT follows the ``cpu_port`` test param."""

    def setUp(self) -> None:
        cpu = testutils.test_params_get().get("cpu_port")
        if cpu not in (None, ""):
            self.P4_DEFINES = (*type(self).P4_DEFINES, f"CPU_PORT={int(cpu)}")
        super().setUp()

    def send(self, port: int, pkt: Packet | bytes) -> None:
        testutils.send_packet(self, port, bytes(pkt))

    def receive_all(self, settle: float = 1.0, expect: int | None = None,
                    limit: float = 10.0) -> list[tuple[int, bytes]]:
        """Every frame that arrives on any port, as (port, bytes), until none arrived for
        ``settle`` seconds (and, when ``expect`` is given, at least that many arrived or
        ``limit`` seconds passed). Waiting is bounded; nothing here asserts on time."""
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + limit
        while True:
            want_more = expect is not None and len(got) < expect
            timeout = max(0.05, deadline - time.monotonic()) if want_more else settle
            res = testutils.dp_poll(self, device_number=0, timeout=timeout)
            if not isinstance(res, self.dataplane.PollSuccess):
                if want_more and time.monotonic() < deadline:
                    continue
                return got
            got.append((res.port, bytes(res.packet)))

    def verify_dropped(self) -> None:
        """Nothing arrives anywhere (within DROP_WAIT)."""
        testutils.verify_no_other_packets(self, timeout=DROP_WAIT)

    @staticmethod
    def per_port(frames: list[tuple[int, bytes]]) -> Counter[int]:
        return Counter(port for port, _ in frames)

    def wait_for(self, predicate: Callable[[], bool], what: str, limit: float = 15.0,
                 interval: float = 0.2) -> None:
        """Poll ``predicate`` until it holds; fail naming ``what`` if it never does."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(interval)
        self.assertTrue(predicate(), f"never happened: {what}")

    @staticmethod
    def ptf_ifname(port: int) -> str:
        return str(ptf.config["port_map"][(0, port)])


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected, init 0, no final xor): BMv2's ``crc16`` hash."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc
