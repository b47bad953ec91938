"""fabric.p4: tenant isolation under attack. A leaf with two hosts of tenant A (ports 0, 1) and
two of tenant B (ports 2, 3), every port bound to its host (host_port_binding) as the control
plane binds it. Host a1 sends frames that imitate tenant B in every way a host can: B's MAC or
IP address, a tenant tag (VLAN, 802.1ad, VXLAN VNI, BTH P_Key), a forged INT shim and metadata,
cells into B's queue pairs, ACKs, NAKs, credit grants and CNPs aimed at B's senders.

Checked: not one of them comes out of any port, and each adds exactly one to its own reason's
slot of drop_counter (p4src/README.md: 9 spoofed MAC, 10 spoofed IP, 11 tenant tag, 12 forged
INT, 13 another tenant's queue pair, 14 feedback to another tenant, 2 other cross-tenant
traffic) and nothing to any other slot. The same leaf forwards each tenant's own traffic,
a host INT source's (empty-stack) header included, before and after the battery.
"""

from __future__ import annotations

import struct
import time

from fabric_lib import (
    C_DROPS,
    ING,
    INT_DSCP,
    ROUTER_MAC,
    T_DST_TENANT,
    T_SRC_TENANT,
    FabricTest,
    bitmap,
    int_md_header,
    int_shim,
    roce_cell,
    routed,
)
from ptf import testutils
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Packet, Raw

from controlplane.entities import CounterEntry

T_HOST_PORT = f"{ING}.guard.host_port_binding"

# drop_counter slots (p4src/include/defines.p4, p4src/README.md)
DROP_ISOLATION = 2
DROP_SPOOF_MAC, DROP_SPOOF_IP, DROP_TENANT_TAG, DROP_FORGED_INT = 9, 10, 11, 12
DROP_FOREIGN_QP, DROP_FOREIGN_FEEDBACK = 13, 14
DROP_SLOTS = 16

TENANT_A, TENANT_B = 1, 2
# name -> (port, MAC, IPv4, tenant)
HOSTS = {
    "a1": (0, "02:00:00:00:0a:01", "10.0.1.1", TENANT_A),
    "a2": (1, "02:00:00:00:0a:02", "10.0.1.2", TENANT_A),
    "b1": (2, "02:00:00:00:0b:01", "10.0.2.1", TENANT_B),
    "b2": (3, "06:00:00:00:0b:02", "10.0.2.2", TENANT_B),  # a second NIC port's MAC
}
OP_ACK, OP_CNP, OP_SEND_ONLY = 0x11, 0x81, 0x04
AETH_ACK, AETH_NAK_SEQ = 0x00, 0x60
B_QPN = 0x0B0B  # a queue pair of B's connection b1 -> b2
B_PKEY = 0x8002  # a partition key a host of B might be given (full member, partition 2)


def mac(host: str) -> str:
    return HOSTS[host][1]


def ip(host: str) -> str:
    return HOSTS[host][2]


def cell_from(src: str, dst: str, **kw) -> Packet:
    """A RoCEv2 data cell as host ``src`` sends it to host ``dst`` (hosts/wire.py)."""
    pkt = roce_cell(src=ip(src), dst=ip(dst), opcode=OP_SEND_ONLY, qpn=kw.pop("qpn", 0x11), **kw)
    pkt[Ether].src = mac(src)
    return pkt


def feedback(src: str, dst: str, opcode: int = OP_ACK, syndrome: int = AETH_ACK,
             grant: bool = False, src_mac: str | None = None, src_ip: str | None = None
             ) -> Packet:
    """An ACK/NAK (BTH + AETH + SACK block, hosts/wire.py) or a CNP from ``src`` to ``dst``,
    on B's queue pair: what a receiver sends its sender."""
    eth = Ether(src=src_mac or mac(src), dst=ROUTER_MAC)
    l3 = IP(src=src_ip or ip(src), dst=ip(dst), flags="DF") / UDP(sport=49152, dport=4791,
                                                                  chksum=0)
    if opcode == OP_CNP:
        return eth / l3 / BTH(opcode=OP_CNP, becn=1, dqpn=B_QPN, icrc=0) / Raw(bytes(16))
    # SACK block: version 1, flags (0x02 = grant valid), bitmap length 32, reserved, base PSN,
    # reserved, grant PSN, 32-byte bitmap
    sack = struct.pack("!BBHII", 1, 0x02 if grant else 0, 32, 101, 200 if grant else 0)
    return (eth / l3 / BTH(opcode=OP_ACK, psn=100, dqpn=B_QPN, icrc=0)
            / AETH(syndrome=syndrome, msn=3) / Raw(sack + bytes(32)))


def int_cell(src: str, dst: str, stack_words: int, int_type: int = 1) -> Packet:
    """A cell with INT-MD v2.1 after UDP: shim, MD header, ``stack_words`` words of hop
    metadata. A host INT source sends the shim and MD header alone (``stack_words`` 0); hop
    metadata is only ever pushed by switches."""
    ins = bitmap(0, 1)  # node id + L1 ports: 2 words a hop
    shim = bytearray(int_shim(3 + stack_words))
    shim[0] = (int_type << 4) | (shim[0] & 0x0F)
    stack = b"".join(struct.pack("!I", 0xB0000000 | w) for w in range(stack_words))
    body = bytes(shim) + int_md_header(2, 8 - stack_words // 2, ins) + stack
    base = cell_from(src, dst)
    udp = base[UDP]
    return (Ether(src=mac(src), dst=ROUTER_MAC)
            / IP(src=ip(src), dst=ip(dst), tos=(INT_DSCP << 2) | 2, flags="DF")
            / UDP(sport=udp.sport, dport=4791, chksum=0) / Raw(body) / udp.payload)


def battery() -> list[tuple[str, Packet, int]]:
    """(what it imitates, the frame host a1 sends on port 0, its drop reason). The VLAN-tagged
    frame reaches the program with its tag on both targets: Linux takes a received frame's
    outer tag off, and libpcap (BMv2) and p4sim's ports put it back from the packet socket's
    auxiliary data."""
    own = {"src_mac": mac("a1"), "src_ip": ip("a1")}
    b_source = {"src_mac": mac("a1"), "src_ip": ip("b2")}
    spoofed_mac = cell_from("a1", "b2", qpn=B_QPN)
    spoofed_mac[Ether].src = mac("b1")
    spoofed_both = cell_from("a1", "b2", qpn=B_QPN)
    spoofed_both[Ether].src, spoofed_both[IP].src = mac("b1"), ip("b1")
    spoofed_ip = cell_from("a1", "b2", qpn=B_QPN)
    spoofed_ip[IP].src = ip("b1")
    as_b_to_a = cell_from("a1", "a2")
    as_b_to_a[IP].src = ip("b1")  # B's address towards A: A must not believe it came from B
    inner = (Ether(src=mac("b1"), dst=mac("b2")) / IP(src=ip("b1"), dst=ip("b2"))
             / UDP(sport=1, dport=2) / Raw(bytes(32)))
    vxlan = (Ether(src=mac("a1"), dst=ROUTER_MAC) / IP(src=ip("a1"), dst=ip("b2"))
             / UDP(sport=40000, dport=4789, chksum=0) / VXLAN(vni=TENANT_B) / inner)
    vlan = (Ether(src=mac("a1"), dst=ROUTER_MAC) / Dot1Q(vlan=TENANT_B)
            / IP(src=ip("a1"), dst=ip("b2")) / UDP(sport=7, dport=8) / Raw(bytes(40)))
    qinq = (Ether(src=mac("a1"), dst=ROUTER_MAC) / Dot1AD(vlan=TENANT_B) / Dot1Q(vlan=1)
            / IP(src=ip("a1"), dst=ip("b2")) / UDP(sport=7, dport=8) / Raw(bytes(40)))
    pkey = cell_from("a1", "a2")
    pkey[BTH].pkey = B_PKEY
    plain = (Ether(src=mac("a1"), dst=ROUTER_MAC) / IP(src=ip("a1"), dst=ip("b2"))
             / UDP(sport=7, dport=8) / Raw(bytes(40)))
    return [
        ("B's MAC", spoofed_mac, DROP_SPOOF_MAC),
        ("B's MAC and IP", spoofed_both, DROP_SPOOF_MAC),
        ("B's IP to B", spoofed_ip, DROP_SPOOF_IP),
        ("B's IP to A", as_b_to_a, DROP_SPOOF_IP),
        ("ACK from B's receiver's IP", feedback("a1", "b1", **b_source), DROP_SPOOF_IP),
        ("VLAN tag of B", vlan, DROP_TENANT_TAG),
        ("802.1ad tag of B", qinq, DROP_TENANT_TAG),
        ("VXLAN VNI of B", vxlan, DROP_TENANT_TAG),
        ("BTH P_Key of B", pkey, DROP_TENANT_TAG),
        ("INT metadata of two hops", int_cell("a1", "b2", 4), DROP_FORGED_INT),
        ("INT metadata, to A", int_cell("a1", "a2", 2), DROP_FORGED_INT),
        ("INT shim of another type", int_cell("a1", "a2", 0, int_type=2), DROP_FORGED_INT),
        ("cell into B's queue pair", cell_from("a1", "b2", qpn=B_QPN), DROP_FOREIGN_QP),
        ("ACK to B's sender", feedback("a1", "b1", **own), DROP_FOREIGN_FEEDBACK),
        ("NAK to B's sender", feedback("a1", "b1", syndrome=AETH_NAK_SEQ, **own),
         DROP_FOREIGN_FEEDBACK),
        ("credit grant to B's sender", feedback("a1", "b1", grant=True, **own),
         DROP_FOREIGN_FEEDBACK),
        ("CNP to B's sender", feedback("a1", "b1", opcode=OP_CNP, **own),
         DROP_FOREIGN_FEEDBACK),
        ("UDP to B", plain, DROP_ISOLATION),
    ]


class SpoofingBattery(FabricTest):
    """Every forged frame refused at the ingress leaf, counted once under its own reason."""

    def install(self) -> None:
        super().install()
        self.add_router_basics()
        for port, host_mac, host_ip, tenant in HOSTS.values():
            gid = port + 1
            self.add_group(gid, [port])
            self.add_route(f"{host_ip}/32", gid)
            self.table_add(T_HOST_PORT, {"standard_metadata.ingress_port": port},
                           f"{ING}.guard.bind_host_port", tenant=tenant, mac=host_mac,
                           ip=host_ip)
            self.table_add(T_SRC_TENANT, {"hdr.ipv4.src_addr": host_ip},
                           f"{ING}.isolation.set_src_tenant", tenant=tenant)
            self.table_add(T_DST_TENANT, {"hdr.ipv4.dst_addr": host_ip},
                           f"{ING}.isolation.set_dst_tenant", tenant=tenant)

    def drops(self) -> list[int]:
        by_index = {e.index: e.packets for e in self.sw.read(CounterEntry(C_DROPS))}
        return [by_index.get(i, 0) for i in range(DROP_SLOTS)]

    def drops_after(self, before: list[int], timeout: float = 3.0) -> list[int]:
        """drop_counter once it differs from ``before`` (the switch counts asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.drops()
            if now != before or time.monotonic() > deadline:
                return now
            time.sleep(0.05)

    def legal_traffic_forwarded(self) -> None:
        for src, dst in (("a1", "a2"), ("b1", "b2"), ("a2", "a1")):
            pkt = cell_from(src, dst)
            self.send(HOSTS[src][0], pkt)
            testutils.verify_packet(self, routed(pkt, HOSTS[dst][0]), HOSTS[dst][0])
        ack = feedback("a2", "a1")
        ack[BTH].dqpn = 0x11
        self.send(HOSTS["a2"][0], ack)
        testutils.verify_packet(self, routed(ack, HOSTS["a1"][0]), HOSTS["a1"][0])
        # a host INT source (shim + MD header, empty stack) is legal
        source = int_cell("a1", "a2", 0)
        self.send(HOSTS["a1"][0], source)
        testutils.verify_packet(self, routed(source, HOSTS["a2"][0]), HOSTS["a2"][0])
        testutils.verify_no_other_packets(self, timeout=0.5)

    def runTest(self) -> None:
        self.legal_traffic_forwarded()
        before = self.drops()
        self.assertEqual(sum(before), 0, f"legal traffic dropped: {before}")
        for what, pkt, reason in battery():
            self.send(HOSTS["a1"][0], pkt)
            after = self.drops_after(before)
            expected = list(before)
            expected[reason] += 1
            self.assertEqual(after, expected, f"{what}: drop_counter {before} -> {after}, "
                                              f"expected +1 in slot {reason}")
            before = after
        testutils.verify_no_other_packets(self, timeout=1)
        self.legal_traffic_forwarded()
        self.assertEqual(self.drops(), before, "legal traffic dropped after the battery")
