"""Action selector of the p4sim switch (tests/ptf/p4/switch_selector.p4): flows spread over a
4-member group, one flow always on one member, and watch_port failover when a port goes down.

Spreading tolerance: 128 flows (source address and UDP source port both vary: with the UDP
port alone, crc16's linearity puts consecutive ports in only 2 of 4 buckets) over 4 members;
every member must get at least 12 of them (3/8 of the fair share of 32). The hash is
deterministic, so this holds or fails the same way on every run.

Beyond the tolerance, the member of every flow is checked against a model of simple_switch's
selection written from BMv2's documented behaviour: CRC-16/ARC over the selector fields packed
in key order (here 9 bytes: IPv4 src, protocol, UDP ports), modulo the number of active members,
members ordered by handle (= insertion order here).

Failover pulls port 2's cable at the far end (netlab.ptf_runner's link interface, see
``P4RuntimeTest.set_link``): the switch's port loses carrier and its operstate becomes
lowerlayerdown, which BMv2 polls (every 200 ms) and reports to PI, whose watch-port enforcer
deactivates the member; p4sim polls the same operstate. Downing the switch's own end instead
stops real BMv2 receiving on every port (its single pcap thread blocks on the downed handle).

    python -m netlab.ptf_runner --ports 4 test_switch_selector
"""

from __future__ import annotations

from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import SwitchTest, crc16_arc, program

from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    GroupMember,
    TableEntry,
)

ING = "SwIngress"
T_ECMP = f"{ING}.ecmp"
P_SEL = f"{ING}.ecmp_selector"
HOST_MAC = "02:00:00:00:0a:01"
ROUTER_MAC = "02:00:00:00:00:fe"
MEMBER_PORTS = (0, 1, 2, 3)
FLOWS = 128
MIN_PER_MEMBER = 12
WATCHED = 2  # the port taken down in the failover test (SDN port 0 cannot be watched)


def member_mac(port: int) -> str:
    return f"02:00:00:00:0d:{port:02x}"


def flow_src(sport: int) -> str:
    i = sport % 1024
    return f"10.10.{i // 8}.{i % 8 + 1}"


def flow(sport: int, dst: str = "10.20.0.7") -> Packet:
    """Flow ``sport``: its source address is derived from the port, so both vary."""
    return (Ether(src=HOST_MAC, dst=ROUTER_MAC)
            / IP(src=flow_src(sport), dst=dst, id=sport & 0xFFFF)
            / UDP(sport=sport, dport=4791) / Raw(bytes(40)))


def model_port(sport: int, active_ports: tuple[int, ...]) -> int:
    key = (bytes(IP(src=flow_src(sport)))[12:16] + bytes([17]) + sport.to_bytes(2, "big")
           + (4791).to_bytes(2, "big"))
    return active_ports[crc16_arc(key) % len(active_ports)]


def via_member(pkt: Packet, port: int) -> bytes:
    out = pkt.copy()
    out[Ether].src = member_mac(port)
    return bytes(out)


class SelectorTest(SwitchTest):
    P4_PROGRAM = program("switch_selector.p4")

    def add_group(self, watch: bool) -> None:
        members = []
        for port in MEMBER_PORTS:
            member_id = 10 + port
            self.sw.insert(ActionProfileMember(P_SEL, member_id, f"{ING}.set_next_hop",
                                               {"port": port, "src_mac": member_mac(port)}))
            members.append(GroupMember(member_id, 1, port if watch and port != 0 else None))
        self.sw.insert(ActionProfileGroup(P_SEL, 1, members, max_size=8))
        self.sw.insert(TableEntry(T_ECMP, match={"hdr.ipv4.dst_addr": "10.20.0.0/16"},
                                  group=1))

    def send_flows(self, sports: range, ingress: int = 0) -> dict[int, int]:
        """Send one packet per flow; {sport: egress port}, every frame checked byte for byte."""
        for sport in sports:
            self.send(ingress, flow(sport))
        frames = self.receive_all(expect=len(sports), settle=0.5)
        where: dict[int, int] = {}
        for port, raw in frames:
            sport = Ether(raw)[UDP].sport
            self.assertNotIn(sport, where, f"flow {sport} arrived twice")
            self.assertEqual(raw, via_member(flow(sport), port), f"flow {sport} on port {port}")
            where[sport] = port
        return where

    def locate(self, sport: int) -> int | None:
        """The port one packet of flow ``sport`` leaves on (None if it is lost)."""
        self.send(0, flow(sport))
        frames = self.receive_all(expect=1, settle=0.3, limit=2.0)
        return frames[0][0] if len(frames) == 1 else None


class Spreading(SelectorTest):
    """Every member gets a share of 128 flows; each flow sticks to one member."""

    def runTest(self) -> None:
        self.add_group(watch=False)
        where = self.send_flows(range(20000, 20000 + FLOWS))
        self.assertEqual(len(where), FLOWS, "every flow is forwarded once")
        self.assertEqual(where, {s: model_port(s, MEMBER_PORTS) for s in where})
        shares = {p: sum(1 for w in where.values() if w == p) for p in MEMBER_PORTS}
        for port, n in shares.items():
            self.assertGreaterEqual(n, MIN_PER_MEMBER, f"member on port {port}: {shares}")
        # the same flow, again and again, from another ingress port too: the same member
        sticky = 20000 + 17
        ingresses = (0, 1, 3, 0, 2, 0, 1, 3)
        for ingress in ingresses:
            self.send(ingress, flow(sticky))
        exp = via_member(flow(sticky), where[sticky])
        self.assertEqual(testutils.count_matched_packets(self, exp, where[sticky], timeout=1),
                         len(ingresses))
        testutils.verify_no_other_packets(self)
        # and a second round of all flows lands exactly where the first did
        self.assertEqual(self.send_flows(range(20000, 20000 + FLOWS)), where)


class WatchPortFailover(SelectorTest):
    """Port 2 down: its member is skipped, no flow is lost; port 2 up: the original mapping
    comes back exactly."""

    def setUp(self) -> None:
        super().setUp()
        self.link_down = False

    def tearDown(self) -> None:
        if self.link_down:
            self.set_link(WATCHED, True)
        super().tearDown()

    def runTest(self) -> None:
        self.add_group(watch=True)
        sports = range(30000, 30000 + FLOWS)
        before = self.send_flows(sports)
        self.assertEqual(len(before), FLOWS)
        self.assertEqual(before, {s: model_port(s, MEMBER_PORTS) for s in before})
        on_watched = [s for s, p in before.items() if p == WATCHED]
        self.assertTrue(on_watched, "some flow uses the watched member")
        probe = on_watched[0]

        self.set_link(WATCHED, False)
        self.link_down = True
        self.wait_for(lambda: self.locate(probe) not in (None, WATCHED),
                      f"flow {probe} moves off port {WATCHED} after the link went down")
        during = self.send_flows(sports)
        self.assertEqual(len(during), FLOWS, "no flow is lost while a member is down")
        self.assertNotIn(WATCHED, set(during.values()))
        alive = tuple(p for p in MEMBER_PORTS if p != WATCHED)
        self.assertEqual(during, {s: model_port(s, alive) for s in during})
        for port in MEMBER_PORTS:
            if port != WATCHED:
                self.assertIn(port, set(during.values()), f"port {port} still used")

        self.set_link(WATCHED, True)
        self.link_down = False
        self.wait_for(lambda: self.locate(probe) == WATCHED,
                      f"flow {probe} returns to port {WATCHED} after the link came up")
        self.assertEqual(self.send_flows(sports), before)
