"""fabric.p4: tenant isolation at the ingress leaf (host -> tenant tables)."""

from __future__ import annotations

from fabric_lib import (
    C_DROPS,
    DROP_ISOLATION,
    HOST_MAC,
    ING,
    ROUTER_MAC,
    T_DST_TENANT,
    T_SRC_TENANT,
    FabricTest,
    routed,
)
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

TENANT_OF = {"10.0.0.1": 100, "10.0.2.1": 100, "10.0.2.2": 200, "10.0.0.2": 200}


def packet(src: str, dst: str) -> Ether:
    return (Ether(src=HOST_MAC, dst=ROUTER_MAC) / IP(src=src, dst=dst)
            / UDP(sport=7, dport=8) / bytes(80))


class CrossTenantDropped(FabricTest):
    """Same tenant: routed. Different tenants: dropped and counted (drop counter and the
    destination entry's direct counter). A host without a tenant is not isolated."""

    def install(self) -> None:
        super().install()
        self.add_router_basics()
        self.add_group(1, [2])
        self.add_route("10.0.2.0/24", 1)
        for host, tenant in TENANT_OF.items():
            self.table_add(T_SRC_TENANT, {"hdr.ipv4.src_addr": host},
                           f"{ING}.isolation.set_src_tenant", tenant=tenant)
            self.table_add(T_DST_TENANT, {"hdr.ipv4.dst_addr": host},
                           f"{ING}.isolation.set_dst_tenant", tenant=tenant)

    def runTest(self) -> None:
        same = packet("10.0.0.1", "10.0.2.1")
        self.send(0, same)
        testutils.verify_packet(self, routed(same, 2), 2)
        other_same = packet("10.0.0.2", "10.0.2.2")
        self.send(1, other_same)
        testutils.verify_packet(self, routed(other_same, 2), 2)
        self.send(0, packet("10.0.0.1", "10.0.2.2"))
        self.send(1, packet("10.0.0.2", "10.0.2.1"))
        testutils.verify_no_other_packets(self, timeout=1)
        self.assertEqual(self.counter(C_DROPS, DROP_ISOLATION)[0], 2)
        hits, _ = self.direct_counter(T_DST_TENANT, {"hdr.ipv4.dst_addr": "10.0.2.2"})
        self.assertEqual(hits, 2)  # one allowed (tenant 200 -> 200), one dropped
        untenanted = packet("10.0.0.1", "10.0.2.77")
        self.send(0, untenanted)
        testutils.verify_packet(self, routed(untenanted, 2), 2)
        testutils.verify_no_other_packets(self)
