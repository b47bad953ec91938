"""fabric.p4: the per-switch hash salt of a next-hop group (set_group_mode's ``salt``).

The expected member is computed from the documented hash definition (p4src/README.md, "Next-hop
groups and spraying"), not from the program: h = crc32 (the zlib CRC-32, BMv2's ``crc32``) of
src IPv4, dst IPv4, protocol, UDP source and destination port (and the BTH PSN for sprayed
cells), low 16 bits; key = bits 31..16 of (h * salt) mod 2^32; member = key mod 4, members in
the order they were added (ports 0-3). Two salts choose differently for the same packets."""

from __future__ import annotations

import socket
import struct
import zlib

from fabric_lib import PORTS, FabricTest, neighbour_mac, port_mac, roce_cell, routed
from scapy.layers.l2 import mac2str

from controlplane.fabric_plan import hash_salt

GROUP = 1
SRC, DST, ROCE_PORT, UDP_PROTO = "10.0.0.1", "10.0.2.1", 4791, 17
# two salts as the control plane gives them to two switches of a fabric
SALTS = (hash_salt("e11"), hash_salt("a11"))


def on_port(frame_out_of_0: bytes, port: int) -> bytes:
    return mac2str(neighbour_mac(port)) + mac2str(port_mac(port)) + frame_out_of_0[12:]


def expected_port(salt: int, sport: int, psn: int | None = None) -> int:
    fields = (socket.inet_aton(SRC) + socket.inet_aton(DST) + bytes([UDP_PROTO])
              + struct.pack(">HH", sport, ROCE_PORT))
    if psn is not None:
        fields += psn.to_bytes(3, "big")
    h = zlib.crc32(fields) & 0xFFFF
    key = ((h * salt) & 0xFFFFFFFF) >> 16
    return PORTS[key % len(PORTS)]


class SaltTest(FabricTest):
    MODE = "ecmp"

    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(GROUP, list(PORTS), self.MODE, salt=SALTS[0])
        self.add_route("10.0.2.0/24", GROUP)
        self.set_cell_length()

    def use_salt(self, salt: int) -> None:
        self.table_modify("MyIngress.spray.group_mode", {"meta.group_id": GROUP},
                          "MyIngress.spray.set_group_mode", mode=1 if self.MODE == "spray" else 0,
                          salt=salt)

    def port_of(self, cell) -> int:
        self.send(0, cell)
        (port, frame), = self.collect(1, settle=0.05)
        self.assertEqual(frame, on_port(bytes(routed(cell, 0)), port), "frame not as routed")
        return port


class EcmpSaltPicksTheDefinedMember(SaltTest):
    """`ecmp` with salt A then salt B: 32 flows each land where the definition says, and the
    two salts disagree on a good share of them (a different function, not a permutation)."""

    MODE = "ecmp"

    def runTest(self) -> None:
        sports = [49152 + 37 * i for i in range(32)]
        choices = []
        for salt in SALTS:
            self.use_salt(salt)
            got = [self.port_of(roce_cell(5, sport=s)) for s in sports]
            self.assertEqual(got, [expected_port(salt, s) for s in sports], f"salt {salt:#x}")
            choices.append(got)
        differ = sum(a != b for a, b in zip(*choices, strict=True))
        self.assertGreaterEqual(differ, 8, f"salts agree on {32 - differ}/32 flows")


class SpraySaltPicksTheDefinedMember(SaltTest):
    """`spray`: the cells of one flow (consecutive PSNs) follow the salted definition."""

    MODE = "spray"

    def runTest(self) -> None:
        sport = 50001
        for salt in SALTS:
            self.use_salt(salt)
            got = [self.port_of(roce_cell(psn, sport=sport)) for psn in range(24)]
            self.assertEqual(got, [expected_port(salt, sport, psn) for psn in range(24)],
                             f"salt {salt:#x}")
