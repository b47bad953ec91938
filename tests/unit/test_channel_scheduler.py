"""The channel scheduler's policies, checked against the fabric, not its own bookkeeping.

Paths here come from a model of fabric.p4's ECMP choice written in this file from the hash
definition in p4src/include/routing.p4 (CRC-32 of the 5-tuple, low 16 bits, times the
switch's salt, bits 31..16, modulo the group's ports in order) over the controller's next
hops, walking from every NIC port of the sender (a dual-port NIC sends over both)."""

from __future__ import annotations

import re
import socket
import struct
import zlib
from collections import Counter

import pytest

from cellfabric.collectives import CollectiveSpec, build, verify
from cellfabric.collectives.scheduler import POLICIES, ChannelScheduler
from cellfabric.core.workloads import Workload, WorkloadError, make_workload
from controlplane.fabric_plan import hash_salt, next_hops
from topologies.catalog import resolve_topology
from topologies.model import Topology


def _hosts(topo: Topology) -> list[str]:
    return sorted(topo.hosts, key=lambda h: int(re.sub(r"\D", "", h)))


def _uplinks_of(topo: Topology, hops: dict, src: str, dst: str, sport: int) -> set:
    a, b = topo.hosts[src], topo.hosts[dst]
    fields = (socket.inet_aton(a.ip) + socket.inet_aton(b.ip) + bytes([17])
              + struct.pack(">HH", sport, 4791))
    h = zlib.crc32(fields) & 0xFFFF
    ups = set()
    for leaf in a.leaves:
        node = leaf
        while node in topo.switches:
            ports = hops[node][dst]
            key = ((h * hash_salt(node)) & 0xFFFFFFFF) >> 16
            port = ports[key % len(ports)]
            peer, _ = topo.peer(node, port)
            if peer in topo.switches and topo.switches[peer].tier > topo.switches[node].tier:
                ups.add((node, peer))
            node = peer
    return ups


def _scheduled(topology: str, workload: str, channels: int, policy: str
               ) -> tuple[Topology, Workload, ChannelScheduler]:
    topo = resolve_topology(topology)
    hosts = _hosts(topo)
    sched = ChannelScheduler(policy, topo, hosts)
    servers = {h: topo.hosts[h].server or topo.hosts[h].leaves[0] for h in hosts}
    w = make_workload(workload, hosts, 1 << 20, 1, channels=channels, order=sched.order,
                      server_of=servers)
    steps = [sched.place(i, step) for i, step in enumerate(w.steps)]
    return topo, Workload(w.name, tuple(steps)), sched


@pytest.mark.parametrize(("topology", "workload", "channels"), [
    ("fat-tree:k=4", "allreduce-ring", 2),
    ("fat-tree:k=4", "allreduce-tree", 2),
    ("rail:servers=4,gpus=4,tiers=3", "allreduce-ring", 4),
])
def test_topology_policy_puts_no_two_concurrent_sends_on_one_uplink(
        topology: str, workload: str, channels: int) -> None:
    topo, w, _ = _scheduled(topology, workload, channels, "topology")
    hops = next_hops(topo, set())
    crossing = 0
    for step in w.steps:
        users: Counter = Counter()
        for t in step.transfers:
            if topo.same_server(t.src, t.dst):
                continue  # NVLink: no switch link
            assert t.sport is not None
            ups = _uplinks_of(topo, hops, t.src, t.dst, t.sport)
            crossing += bool(ups)
            users.update(ups)
        assert not [link for link, n in users.items() if n > 1]
    assert crossing > 0  # the check saw sends that do cross the fabric


def test_static_policy_would_share_uplinks_where_topology_does_not() -> None:
    """The placement matters: the fabric's hash alone (the harness's per-queue-pair ports)
    puts two of a tree's concurrent sends on one uplink in some step."""
    topo = resolve_topology("fat-tree:k=4")
    hosts = _hosts(topo)
    w = make_workload("allreduce-tree", hosts, 1 << 20, 1, channels=2)
    from cellfabric.core.hostplan import flow_sport
    hops, qp, shared = next_hops(topo, set()), 1, 0
    for step in w.steps:
        users: Counter = Counter()
        for n, t in enumerate(step.transfers):
            users.update(_uplinks_of(topo, hops, t.src, t.dst, flow_sport(t.src, t.dst, qp + n)))
        qp += len(step.transfers)
        shared += sum(1 for c in users.values() if c > 1)
    assert shared > 0


def test_rail_rings_keep_inter_server_hops_on_one_rail_and_stay_correct() -> None:
    topo = resolve_topology("rail:servers=4,gpus=4,tiers=3")
    hosts = _hosts(topo)
    sched = ChannelScheduler("topology", topo, hosts)
    for channel in range(4):
        ring = [hosts[r] for r in sched.order(channel, list(range(len(hosts))))]
        assert sorted(ring) == sorted(hosts)
        hops = list(zip(ring, ring[1:] + ring[:1], strict=True))
        between = [(a, b) for a, b in hops if topo.hosts[a].server != topo.hosts[b].server]
        assert len(between) == 4  # one hop from each server to the next
        assert all(topo.hosts[a].gpu == topo.hosts[b].gpu for a, b in between)
    # the orders build schedules whose every rank ends with the right chunks
    for algorithm in ("allreduce-ring", "reduce-scatter-ring", "all-gather-ring"):
        spec = CollectiveSpec(len(hosts), 100_003, 4, 4096, order=sched.order)
        assert verify(build(algorithm, spec)) == []


def test_static_leaves_the_lowering_alone_and_bad_policies_are_one_line_errors() -> None:
    topo = resolve_topology("fat-tree:k=4")
    hosts = _hosts(topo)
    sched = ChannelScheduler("static", topo, hosts)
    plain = make_workload("allreduce-ring", hosts, 65536, 1, channels=2)
    ordered = make_workload("allreduce-ring", hosts, 65536, 1, channels=2, order=sched.order)
    assert ordered == plain
    assert all(sched.place(i, s) == s for i, s in enumerate(plain.steps))
    with pytest.raises(WorkloadError, match="--channel-policy fastest: expected one of"):
        ChannelScheduler("fastest", topo, hosts)
    assert set(POLICIES) == {"static", "topology", "dynamic"}


def _train(policy: str | None) -> tuple[Topology, Workload]:
    """A data-parallel model on 16 GPUs (4 servers x 4): tp=2, so each DP group holds two
    GPUs of every server, GPUs 0 and 2 or 1 and 3; 2 channels."""
    from cellfabric.run_cli import prepare_scheduled_workload
    from cellfabric.sim.cli import _parser

    argv = ["rail:servers=4,gpus=4,tiers=3", "--workload",
            "train:layers=2,hidden=64,seq=16,tp=2,dp=8,bucket=20000", "--channels", "2"]
    if policy:
        argv += ["--channel-policy", policy]
    topo, w, _, _ = prepare_scheduled_workload(_parser().parse_args(argv))
    return topo, w


def test_a_training_iterations_data_parallel_rings_stay_on_rails() -> None:
    def cross_rail(topo: Topology, w: Workload) -> int:
        hosts = topo.hosts
        return sum(1 for st in w.steps for t in st.transfers
                   if hosts[t.src].server != hosts[t.dst].server
                   and hosts[t.src].gpu != hosts[t.dst].gpu)

    topo, static = _train(None)
    assert cross_rail(topo, static) > 0  # rank order: GPU 2 of a server on to GPU 0 of the next
    topo, placed = _train("topology")
    assert cross_rail(topo, placed) == 0
    assert {t.channel for st in placed.steps for t in st.transfers} == {0, 1}
    dp = [pc for pc in placed.calls if pc.call.label.startswith("dp ")]
    assert dp and all(len(pc.call.group) == 8 for pc in dp)
    assert all(verify(s) == [] for s in placed.schedules)  # every call on every rank
