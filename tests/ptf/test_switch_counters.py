"""Counters and registers of the p4sim switch (tests/ptf/p4/switch_counters.p4).

Counters are read back over P4Runtime with exact packet and byte counts (bytes: the frame as
received, without FCS, as BMv2 counts ``packet_length``). Registers are observed in packets
only: BMv2's P4Runtime server (PI) answers register reads and writes with UNIMPLEMENTED.

    python -m netlab.ptf_runner --ports 4 test_switch_counters
"""

from __future__ import annotations

from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import ETH_LEN, PROBE_LEN, Probe, SwitchTest, program

from controlplane.entities import CounterEntry, DirectCounterEntry, TableEntry

ING, EGR = "SwIngress", "SwEgress"
T_FWD = f"{ING}.fwd"
C_RX = f"{ING}.port_rx"
C_TX = f"{EGR}.port_tx"
C_ERRORS = f"{ING}.parse_errors"
HOST_MAC = "02:00:00:00:0a:01"
MAC_TO = {1: "02:00:00:00:0c:01", 2: "02:00:00:00:0c:02", 3: "02:00:00:00:0c:03"}


def probe_frame(dst: str, payload_len: int, seq: int = 0, stamp: int = 0) -> Packet:
    return (Ether(src=HOST_MAC, dst=dst) / Probe(seq=seq, stamp=stamp)
            / Raw(bytes(i & 0xFF for i in range(payload_len))))


class CountersTest(SwitchTest):
    P4_PROGRAM = program("switch_counters.p4")

    def setUp(self) -> None:
        super().setUp()
        for port, mac in MAC_TO.items():
            self.table_add(T_FWD, {"hdr.ethernet.dst_addr": mac}, f"{ING}.forward", port=port)

    def counter(self, name: str, index: int) -> tuple[int, int]:
        (entry,) = self.sw.read(CounterEntry(name, index))
        return entry.packets, entry.bytes

    def direct(self, mac: str) -> tuple[int, int]:
        (entry,) = self.sw.read(DirectCounterEntry(
            TableEntry(T_FWD, match={"hdr.ethernet.dst_addr": mac})))
        return entry.packets, entry.bytes


class IndirectCounters(CountersTest):
    """port_rx counts every frame by ingress port (packets and bytes), port_tx every frame
    leaving by egress port (packets); dropped frames count in port_rx only."""

    def runTest(self) -> None:
        sizes_from_0 = [60, 100, 333, 1500]
        sizes_from_2 = [64, 128]
        for n, size in enumerate(sizes_from_0):
            body = size - ETH_LEN - PROBE_LEN
            frame = probe_frame(MAC_TO[1], body)
            self.assertEqual(len(frame), size)
            self.send(0, frame)
            testutils.verify_packet(self, probe_frame(MAC_TO[1], body, seq=n + 1), 1)
        for size in sizes_from_2:
            frame = Ether(src=HOST_MAC, dst=MAC_TO[3], type=0x9000) / Raw(bytes(size - 14))
            self.send(2, frame)
            testutils.verify_packet(self, frame, 3)
        # an unknown destination: counted on ingress, dropped, never counted on egress
        self.send(2, Ether(src=HOST_MAC, dst="02:00:00:00:0c:09", type=0x9000)
                  / Raw(bytes(86)))
        self.verify_dropped()

        self.assertEqual(self.counter(C_RX, 0), (4, sum(sizes_from_0)))
        self.assertEqual(self.counter(C_RX, 2), (3, sum(sizes_from_2) + 100))
        self.assertEqual(self.counter(C_RX, 1), (0, 0))
        self.assertEqual(self.counter(C_TX, 1)[0], 4)
        self.assertEqual(self.counter(C_TX, 3)[0], 2)
        self.assertEqual(self.counter(C_TX, 0)[0], 0)

        # wildcard read: every index of port_rx, only ports 0 and 2 non-zero
        entries = self.sw.read(CounterEntry(C_RX))
        self.assertEqual(len(entries), 512)
        nonzero = {e.index: (e.packets, e.bytes) for e in entries if e.packets or e.bytes}
        self.assertEqual(nonzero, {0: (4, sum(sizes_from_0)), 2: (3, sum(sizes_from_2) + 100)})

        # reset one index over P4Runtime; it counts again from zero
        self.sw.modify(CounterEntry(C_RX, 0, packets=0, bytes=0))
        self.assertEqual(self.counter(C_RX, 0), (0, 0))
        self.send(0, probe_frame(MAC_TO[2], 66))
        testutils.verify_packet(self, probe_frame(MAC_TO[2], 66, seq=5), 2)
        self.assertEqual(self.counter(C_RX, 0), (1, ETH_LEN + PROBE_LEN + 66))
        self.assertEqual(self.counter(C_RX, 2), (3, sum(sizes_from_2) + 100))


class DirectCounters(CountersTest):
    """fwd_counter counts hits per entry; a miss counts on no entry."""

    def runTest(self) -> None:
        frames = {1: [80, 90, 1000], 2: [200], 3: []}
        for port, sizes in frames.items():
            for size in sizes:
                frame = Ether(src=HOST_MAC, dst=MAC_TO[port], type=0x9000) / Raw(bytes(size - 14))
                self.send(0, frame)
                testutils.verify_packet(self, frame, port)
        self.send(0, Ether(src=HOST_MAC, dst="02:00:00:00:0c:07", type=0x9000) / Raw(bytes(50)))
        self.verify_dropped()
        for port, sizes in frames.items():
            self.assertEqual(self.direct(MAC_TO[port]), (len(sizes), sum(sizes)), f"port {port}")

        # writing the direct counter over P4Runtime resets it for that entry only
        self.sw.modify(DirectCounterEntry(
            TableEntry(T_FWD, match={"hdr.ethernet.dst_addr": MAC_TO[1]}), packets=0, bytes=0))
        self.assertEqual(self.direct(MAC_TO[1]), (0, 0))
        self.assertEqual(self.direct(MAC_TO[2]), (1, 200))
        frame = Ether(src=HOST_MAC, dst=MAC_TO[1], type=0x9000) / Raw(bytes(50))
        self.send(3, frame)
        testutils.verify_packet(self, frame, 1)
        self.assertEqual(self.direct(MAC_TO[1]), (1, 64))
        # re-inserting an entry after deleting it starts a fresh counter
        self.table_delete(T_FWD, {"hdr.ethernet.dst_addr": MAC_TO[2]})
        self.table_add(T_FWD, {"hdr.ethernet.dst_addr": MAC_TO[2]}, f"{ING}.forward", port=2)
        self.assertEqual(self.direct(MAC_TO[2]), (0, 0))


class RegistersInPackets(CountersTest):
    """rx_seq counts probe frames per ingress port and the count is written into each probe;
    last_ipv4_id keeps the identification of the last IPv4 frame for later probes."""

    def runTest(self) -> None:
        order = [1, 1, 2, 1, 2, 1, 1, 3]
        seen: dict[int, int] = {}
        for n, ingress in enumerate(order):
            seen[ingress] = seen.get(ingress, 0) + 1
            self.send(ingress, probe_frame(MAC_TO[1 if ingress != 1 else 2], 40 + n))
            exp = probe_frame(MAC_TO[1 if ingress != 1 else 2], 40 + n, seq=seen[ingress])
            testutils.verify_packet(self, exp, 1 if ingress != 1 else 2)
        testutils.verify_no_other_packets(self)
        self.assertEqual(seen, {1: 5, 2: 2, 3: 1})

        # IPv4 frames write the register; a probe afterwards reads what the last one wrote
        for ident in (0xBEEF, 0x0102):
            ip = (Ether(src=HOST_MAC, dst=MAC_TO[3]) / IP(src="10.0.0.1", dst="10.0.0.2",
                                                          id=ident)
                  / UDP(sport=1, dport=2) / Raw(bytes(30)))
            self.send(0, ip)
            testutils.verify_packet(self, ip, 3)
        self.send(0, probe_frame(MAC_TO[3], 40))
        testutils.verify_packet(self, probe_frame(MAC_TO[3], 40, seq=1, stamp=0x0102), 3)
        testutils.verify_no_other_packets(self)


class ParserErrorsCounted(CountersTest):
    """Truncated frames reach ingress with parser_error PacketTooShort (v1model does not drop
    them by itself): the program counts and drops them, and the frames after them flow."""

    def runTest(self) -> None:
        truncated = [
            bytes(Ether(src=HOST_MAC, dst=MAC_TO[1], type=0x0800)) + bytes(10),  # IPv4: 10 of 20
            # probe: one byte short
            bytes(Ether(src=HOST_MAC, dst=MAC_TO[1], type=0x88B5)) + bytes(PROBE_LEN - 1),
        ]
        for raw in truncated:
            self.send(0, raw)
        good = probe_frame(MAC_TO[2], 40)
        self.send(0, good)
        testutils.verify_packet(self, probe_frame(MAC_TO[2], 40, seq=1), 2)
        self.verify_dropped()
        self.assertEqual(self.counter(C_ERRORS, 0)[0], 2)
        self.assertEqual(self.counter(C_ERRORS, 1)[0], 0)
        self.assertEqual(self.counter(C_RX, 0),
                         (3, sum(len(t) for t in truncated) + len(good)))
        self.assertEqual(self.direct(MAC_TO[1]), (0, 0), "no truncated frame reached fwd")
