"""FRR configuration from generated fabrics: RFC 7938 ASNs, one session per fabric link."""

from __future__ import annotations

import ipaddress

import pytest

from cellfabric.nos.frr_config import (
    BfdTimers,
    bfdd_conf,
    bgpd_conf,
    link_addresses,
    routing_plan,
)
from topologies.generators import generate

PRIVATE_4B = range(4200000000, 4294967295)


def test_leaf_spine_asns_leaves_own_spines_share() -> None:
    topo = generate("leaf-spine:leaves=3,spines=2,hosts=2")
    plan = routing_plan(topo)
    leaf_asns = [plan[f"l{i}"].asn for i in (1, 2, 3)]
    assert len(set(leaf_asns)) == 3
    assert plan["s1"].asn == plan["s2"].asn
    assert plan["s1"].asn not in leaf_asns
    assert all(p.asn in PRIVATE_4B for p in plan.values())


def test_clos_asns_per_pod_spines_and_shared_cores() -> None:
    topo = generate("clos:pods=3,leaves=2,aggs=2,cores=4,hosts=1")
    plan = routing_plan(topo)
    cores = {plan[f"c{j}"].asn for j in range(1, 5)}
    assert len(cores) == 1
    pods = [{plan[f"a{p}{i}"].asn for i in (1, 2)} for p in (1, 2, 3)]
    assert all(len(pod) == 1 for pod in pods)        # one ASN per pod's spines
    assert len(set().union(*pods)) == 3              # and a different one per pod
    leaves = [plan[f"e{p}{i}"].asn for p in (1, 2, 3) for i in (1, 2)]
    assert len(set(leaves)) == 6
    assert not (set(leaves) & cores) and not (set(leaves) & set().union(*pods))
    assert all(p.asn in PRIVATE_4B for p in plan.values())


@pytest.mark.parametrize("spec", ["leaf-spine:leaves=4,spines=3,hosts=1",
                                  "fat-tree:k=4",
                                  "clos:pods=2,leaves=3,aggs=2,cores=2,hosts=2"])
def test_sessions_match_fabric_links(spec: str) -> None:
    topo = generate(spec)
    plan = routing_plan(topo)
    fabric_links = [lk for lk in topo.links if lk.b in topo.switches]
    for lk in fabric_links:
        a_side = [s for s in plan[lk.a].sessions if s.link == lk.name]
        b_side = [s for s in plan[lk.b].sessions if s.link == lk.name]
        assert len(a_side) == len(b_side) == 1
        a, b = a_side[0], b_side[0]
        assert (a.port, b.port) == (lk.a_port, lk.b_port)
        assert (a.peer, b.peer) == (lk.b, lk.a)
        assert (a.local_ip, a.peer_ip) == (b.peer_ip, b.local_ip)
        assert (a.peer_asn, b.peer_asn) == (plan[lk.b].asn, plan[lk.a].asn)
        net = ipaddress.IPv4Network(f"{a.local_ip}/31", strict=False)
        assert ipaddress.IPv4Address(b.local_ip) in net and a.local_ip != b.local_ip
    assert sum(len(p.sessions) for p in plan.values()) == 2 * len(fabric_links)
    # every link its own /31: no address used twice across the fabric
    ends = [ip for pair in link_addresses(topo).values() for ip in pair]
    assert len(ends) == len(set(ends)) == 2 * len(fabric_links)


def test_leaves_announce_their_hosts_only() -> None:
    topo = generate("leaf-spine:leaves=2,spines=2,hosts=3")
    plan = routing_plan(topo)
    assert set(plan["l1"].prefixes) == {"10.0.1.1/32", "10.0.1.2/32", "10.0.1.3/32"}
    assert set(plan["l2"].prefixes) == {"10.0.2.1/32", "10.0.2.2/32", "10.0.2.3/32"}
    assert plan["s1"].prefixes == ()


def test_router_ids_unique() -> None:
    plan = routing_plan(generate("fat-tree:k=4"))
    ids = [p.router_id for p in plan.values()]
    assert len(ids) == len(set(ids)) == 20


def test_bgpd_conf_has_bfd_ecmp_and_relax() -> None:
    topo = generate("leaf-spine:leaves=2,spines=2,hosts=1")
    sw = routing_plan(topo)["l1"]
    text = bgpd_conf(sw)
    assert f"router bgp {sw.asn}\n" in text
    assert "bgp bestpath as-path multipath-relax" in text
    assert "bgp log-neighbor-changes" in text  # why a session flapped, in bgpd.log
    assert "maximum-paths 64" in text
    assert "network 10.0.1.1/32" in text
    for s in sw.sessions:
        assert f" neighbor {s.peer_ip} remote-as {s.peer_asn}\n" in text
        assert f" neighbor {s.peer_ip} bfd\n" in text
    assert text.count(" remote-as ") == 2
    bfd = bfdd_conf(sw, BfdTimers(tx_ms=100, rx_ms=200, multiplier=4))
    assert "transmit-interval 100" in bfd and "receive-interval 200" in bfd
    assert "detect-multiplier 4" in bfd


def test_leaf_host_ports_carry_their_hosts_routes() -> None:
    from pathlib import Path

    from cellfabric.nos.fabric_nos import FabricNos

    topo = generate("leaf-spine:leaves=2,spines=2,hosts=2")
    nos = FabricNos(topo, "run", Path("/nonexistent"), addrs={})
    # ports 1-2 of a leaf face the spines (links first), 3-4 its hosts (then hosts, in order)
    l1 = nos._host_ports("l1")
    assert [(hp.port, hp.ifname, hp.prefixes) for hp in l1] == [
        (3, "port3", ("10.0.1.1/32",)), (4, "port4", ("10.0.1.2/32",))]
    assert nos._host_ports("s1") == []
    # a session's interface and a host port's are the same names the agent maps to ports
    sessions = routing_plan(topo)["l1"].sessions
    assert [(s.port, s.interface) for s in sessions] == [(1, "port1"), (2, "port2")]
