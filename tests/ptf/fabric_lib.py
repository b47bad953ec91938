"""Shared setup for the fabric.p4 PTF suite (no tests here: no class has ``runTest``).

Expected packets in the tests are written from the specs (IPv4, RoCEv2 BTH, INT v2.1,
Telemetry Report v2.0) and from the constants in p4src/README.md, never from the program's
output. The switch ports 0-3 are PTF ports 0-3 (``python -m netlab.ptf_runner``).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from base import P4RuntimeTest
from ptf import testutils
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CounterEntry,
    DirectCounterEntry,
    GroupMember,
    RegisterEntry,
    TableEntry,
)

PROGRAM = "p4src/fabric.p4"
PORTS = (0, 1, 2, 3)

# P4Runtime names (p4c's fully-qualified names of the program's objects).
ING = "MyIngress"
EGR = "MyEgress"
T_ACL = f"{ING}.forwarding.acl"
T_ARP = f"{ING}.forwarding.arp_responder"
T_MY_STATION = f"{ING}.forwarding.my_station"
T_L2 = f"{ING}.forwarding.l2_forward"
T_LPM = f"{ING}.forwarding.ipv4_lpm"
T_SRC_TENANT = f"{ING}.isolation.host_tenant_src"
T_DST_TENANT = f"{ING}.isolation.host_tenant_dst"
T_GROUP_MODE = f"{ING}.spray.group_mode"
T_CELL_LENGTH = f"{ING}.spray.cell_length"
T_CANDIDATES = f"{ING}.spray.adaptive_candidates"
T_GROUP_SELECT = f"{ING}.spray.group_select"
P_SELECTOR = f"{ING}.spray.group_selector"
T_WATCHLIST = f"{ING}.int_ingress.int_watchlist"
T_INT_SINK = f"{ING}.int_ingress.int_sink"
T_PRIORITY = f"{ING}.feedback.feedback_priority"
T_REWRITE = f"{EGR}.rewrite.egress_rewrite"
T_ECN = f"{EGR}.ecn.ecn_profile"
T_TRANSIT = f"{EGR}.int_egress.int_transit_config"
T_REPORT = f"{EGR}.report.report_encap"
C_DROPS = "drop_counter"
C_INT = "int_events"
C_CELLS = f"{ING}.spray.cell_counter"
C_PORT_RX = f"{ING}.port_rx"
C_PORT_TX = f"{EGR}.port_tx"
C_ECN = f"{EGR}.ecn.ecn_marks"
R_QDEPTH = "port_qdepth"

# Wire constants (p4src/README.md, hosts/wire.py).
DROP_NO_ROUTE, DROP_ISOLATION, DROP_TTL, DROP_BAD_PACKET, DROP_L2_MISS = 1, 2, 3, 4, 5
CELL_OK, CELL_BAD_LENGTH = 0, 1
INT_SOURCE_INSERT, INT_TRANSIT_PUSH, INT_HOP_EXCEEDED, INT_SKIPPED = 0, 1, 2, 3
INT_SINK_STRIP, INT_REPORT, INT_UNPARSED = 4, 5, 6
MODES = {"ecmp": 0, "spray": 1, "round-robin": 2, "adaptive": 3}
ROCE_PORT = 4791
CELL_PAYLOAD = 1024
INT_DSCP = 0x17

ROUTER_MAC = "02:cf:00:00:00:01"
HOST_MAC = "02:cf:00:00:10:01"


def port_mac(port: int) -> str:
    return f"02:cf:00:00:01:{port:02x}"


def neighbour_mac(port: int) -> str:
    return f"02:cf:00:00:02:{port:02x}"


def roce_cell(psn: int = 0, payload_len: int = CELL_PAYLOAD, src: str = "10.0.0.1",
              dst: str = "10.0.2.1", sport: int = 49152, opcode: int = 0x01, ttl: int = 64,
              tos: int = 0x02, qpn: int = 0x11, dmac: str = ROUTER_MAC) -> Packet:
    """A RoCEv2 cell as hosts/wire.py describes it: UDP checksum 0, ICRC sent as zero; the
    payload is ``payload_len`` bytes between the BTH and the ICRC."""
    body = bytes((psn + i) & 0xFF for i in range(payload_len))
    return (Ether(src=HOST_MAC, dst=dmac)
            / IP(src=src, dst=dst, ttl=ttl, tos=tos, flags="DF", id=psn & 0xFFFF)
            / UDP(sport=sport, dport=ROCE_PORT, chksum=0)
            / BTH(opcode=opcode, psn=psn, dqpn=qpn, icrc=0) / Raw(body))


def routed(pkt: Packet, egress_port: int, hops: int = 1) -> Packet:
    """``pkt`` as a router sends it out of ``egress_port``: MACs rewritten, TTL - hops,
    IPv4 checksum recomputed."""
    out = pkt.copy()
    out[Ether].src = port_mac(egress_port)
    out[Ether].dst = neighbour_mac(egress_port)
    out[IP].ttl -= hops
    out[IP].chksum = None
    return Ether(bytes(out))


class FabricTest(P4RuntimeTest):
    """fabric.p4 pushed, plus helpers that install entries the way the control plane does."""

    P4_PROGRAM = PROGRAM

    def setUp(self) -> None:
        cpu = testutils.test_params_get().get("cpu_port")
        if cpu not in (None, ""):
            # the program's CPU port must be the switch's --cpu-port
            self.P4_DEFINES = (f"CPU_PORT={int(cpu)}",)
        super().setUp()
        try:
            self.install()
        except BaseException:
            # unittest skips tearDown when setUp fails: close here, or the next test's
            # arbitration finds this connection still primary
            self.sw.close()
            raise

    def install(self) -> None:
        """Entries every test of the class needs; subclasses extend it."""

    # ---- entries ----

    def add_router_basics(self, ports: tuple[int, ...] = PORTS) -> None:
        self.table_add(T_MY_STATION, {"hdr.ethernet.dst_addr": ROUTER_MAC}, "NoAction")
        for p in ports:
            self.table_add(T_REWRITE, {"standard_metadata.egress_port": p},
                           f"{EGR}.rewrite.set_port_macs",
                           src_mac=port_mac(p), dst_mac=neighbour_mac(p))

    def add_group(self, group_id: int, ports: list[int], mode: str = "ecmp",
                  watch: bool = True) -> None:
        members = []
        for i, p in enumerate(ports):
            member_id = group_id * 100 + i + 1
            self.sw.insert(ActionProfileMember(P_SELECTOR, member_id,
                                               f"{ING}.spray.set_egress_port", {"port": p}))
            # PI (and p4sim) reject watch_port 0 ("Port must be non-negative"), so a member on
            # port 0 is not watched
            members.append(GroupMember(member_id, 1, p if watch and p != 0 else None))
        self.sw.insert(ActionProfileGroup(P_SELECTOR, group_id, members, max_size=16))
        self.sw.insert(TableEntry(T_GROUP_SELECT, match={"meta.group_id": group_id},
                                  group=group_id))
        self.table_add(T_GROUP_MODE, {"meta.group_id": group_id},
                       f"{ING}.spray.set_group_mode", mode=MODES[mode])

    def add_route(self, prefix: str, group_id: int) -> None:
        self.table_add(T_LPM, {"hdr.ipv4.dst_addr": prefix},
                       f"{ING}.forwarding.set_next_group", group_id=group_id)

    def set_cell_length(self, payload_len: int = CELL_PAYLOAD) -> None:
        self.table_add(T_CELL_LENGTH, {"meta.cell_payload_len": payload_len},
                       f"{ING}.spray.cell_length_ok")

    # ---- counters and registers ----

    def counter(self, name: str, index: int) -> tuple[int, int]:
        (entry,) = self.sw.read(CounterEntry(name, index))
        return entry.packets, entry.bytes

    def direct_counter(self, table: str, match: dict[str, Any], priority: int = 0
                       ) -> tuple[int, int]:
        (entry,) = self.sw.read(DirectCounterEntry(TableEntry(table, match=match,
                                                              priority=priority)))
        return entry.packets, entry.bytes

    def write_register(self, name: str, index: int, value: int) -> None:
        self.sw.modify(RegisterEntry(name, index, value))

    # ---- traffic ----

    def collect(self, count: int, timeout: float = 3.0, settle: float = 0.3
                ) -> list[tuple[int, bytes]]:
        """Every frame received on any port until ``count`` arrived (or ``timeout``), then
        whatever else arrives within ``settle`` seconds: (port, frame) in arrival order."""
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            res = self.dataplane.poll(device_number=0, timeout=left)
            if not isinstance(res, self.dataplane.PollSuccess):
                break
            got.append((res.port, bytes(res.packet)))
        while True:
            res = self.dataplane.poll(device_number=0, timeout=settle)
            if not isinstance(res, self.dataplane.PollSuccess):
                break
            got.append((res.port, bytes(res.packet)))
        return got

    def send(self, port: int, pkt: Packet | bytes) -> None:
        testutils.send_packet(self, port, bytes(pkt))

    def switch_cli(self, line: str) -> None:
        """One runtime command (simple_switch_CLI syntax, e.g. ``set_queue_rate 20 2``) on the
        switch's admin channel (thrift port 9090 in the runner's namespace)."""
        if self.target == "bmv2":
            argv = ["simple_switch_CLI", "--thrift-port", "9090"]
            proc = subprocess.run(argv, input=line + "\n", text=True, capture_output=True)
            if proc.returncode != 0 and "Could not connect" in proc.stdout + proc.stderr:
                self.fail(f"{line}: cannot reach BMv2's Thrift server on port 9090 (a BMv2 "
                          "built without Thrift has no runtime queue commands)")
        else:
            argv = [str(Path(sys.executable).with_name("p4sim")), "ctl", *line.split()]
            proc = subprocess.run(argv, text=True, capture_output=True)
        self.assertEqual(proc.returncode, 0, f"{line}: {proc.stderr or proc.stdout}")


def int_shim(words_after_shim: int, orig_dscp: int = 0) -> bytes:
    """INT v2.1 shim for TCP/UDP, type 1 (INT-MD), NPT 0 (original DSCP in the last byte)."""
    return struct.pack("!BBBB", 1 << 4, words_after_shim, 0, orig_dscp << 2)


def int_md_header(hop_ml: int, remaining: int, instructions: int, e: int = 0) -> bytes:
    """INT-MD metadata header (12 bytes): Ver 2, D 0, E, M 0, Hop ML, RemainingHopCnt, bitmap,
    domain 0, DS instruction 0, DS flags 0."""
    word0 = (2 << 28) | (e << 26) | (hop_ml << 8) | remaining
    return struct.pack("!IHHHH", word0, instructions, 0, 0, 0)


def bitmap(*bits: int) -> int:
    value = 0
    for b in bits:
        value |= 1 << (15 - b)
    return value
