"""--routing bgp waits for what the workload needs: every switch's P4 table (aggregation and
core switches too, not only the leaves) forwards every host prefix, read back from the switch,
with every session up and every route agent still following its table. Fakes stand in for
FRR and the agents; the switch read-back is controlplane.route_entries.forwarded_prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellfabric.nos import fabric_nos
from cellfabric.nos.fabric_nos import FabricNos, SwitchNos
from cellfabric.nos.frr import FrrError
from cellfabric.nos.frr_config import routing_plan
from cellfabric.nos.route_agent import WriteBatch
from controlplane.route_entries import RouteEntries, forwarded_prefixes
from topologies.catalog import resolve_topology


class FakeFrr:
    def __init__(self, peers: set[str]) -> None:
        self.peers = peers

    def established_peers(self) -> set[str]:
        return set(self.peers)

    def bgp_routes(self) -> dict[str, int]:
        raise AssertionError("readiness reads the switches, not BGP")


class FakeAgent:
    def __init__(self, prefixes: set[str]) -> None:
        self.prefixes = set(prefixes)  # what the switch forwards (its read-back)
        self.entries = RouteEntries(routes={p: 1 for p in prefixes})  # what it wrote
        self.failed: str | None = None
        self.writes: list[WriteBatch] = []
        self.errors: list[str] = []
        self.watch_restarts = 0

    def forwarded_prefixes(self) -> set[str]:
        return set(self.prefixes)


def fabric(tmp_path: Path, spec: str = "fat-tree") -> FabricNos:
    """Every switch converged: sessions up, every host prefix forwarded."""
    topo = resolve_topology(spec)
    nos = FabricNos(topo, "t", tmp_path, {})
    plan = routing_plan(topo)
    every = {p for r in plan.values() for p in r.prefixes}
    for name, routing in plan.items():
        nos.switches[name] = SwitchNos(
            name, routing, None, None,  # type: ignore[arg-type]
            frr=FakeFrr({s.peer_ip for s in routing.sessions}), agent=FakeAgent(every))
    return nos


def test_a_converged_fabric_misses_nothing(tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    assert len(nos.host_prefixes()) == 16
    assert nos._missing_routes() == {}


def test_a_core_or_aggregation_hole_is_missing_though_every_leaf_is_complete(
        tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    nos.switches["c3"].agent.prefixes -= {"10.4.2.1/32", "10.4.2.2/32"}
    nos.switches["a21"].agent.prefixes -= {"10.1.1.1/32"}
    assert nos._missing_routes() == {"c3 prefixes": 2, "a21 prefixes": 1}


def test_a_leaf_needs_its_own_hosts_and_every_session(tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    nos.switches["e42"].agent.prefixes -= {"10.4.2.1/32"}
    assert nos._missing_routes() == {"e42 prefixes": 1}
    nos.switches["a11"].frr.peers.pop()
    assert nos._missing_routes() == {"a11 sessions": 1}  # the switches are not read yet


class Reads:
    """Counts an agent's read-backs of its switch."""

    def __init__(self, agent: FakeAgent) -> None:
        self.agent, self.calls = agent, 0

    def __call__(self) -> set[str]:
        self.calls += 1
        return set(self.agent.prefixes)


def test_switches_are_read_back_only_once_nothing_cheaper_is_missing(tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    reads = {}
    for name, sw in nos.switches.items():
        reads[name] = Reads(sw.agent)
        sw.agent.forwarded_prefixes = reads[name]  # type: ignore[method-assign]
    # a session down anywhere: no switch is read (the reads would take the relays' CPU)
    nos.switches["c1"].frr.peers.pop()
    assert nos._missing_routes() == {"c1 sessions": 1}
    assert sum(r.calls for r in reads.values()) == 0
    # an agent whose own record lacks a prefix: the same
    nos = fabric(tmp_path)
    for name, sw in nos.switches.items():
        reads[name] = Reads(sw.agent)
        sw.agent.forwarded_prefixes = reads[name]  # type: ignore[method-assign]
    nos.switches["a21"].agent.entries = RouteEntries(routes={"10.1.1.1/32": 1})
    assert nos._missing_routes() == {"a21 prefixes": 15}
    assert sum(r.calls for r in reads.values()) == 0
    # all complete by the cheap checks: every switch is read back, and a hole there counts
    nos.switches["a21"].agent.entries = RouteEntries(
        routes={p: 1 for p in nos.host_prefixes()})
    nos.switches["c3"].agent.prefixes -= {"10.4.2.1/32"}
    assert nos._missing_routes() == {"c3 prefixes": 1}
    assert all(r.calls == 1 for r in reads.values())


def test_a_stopped_agent_is_missing(tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    nos.switches["c1"].agent.failed = "OSError: [Errno 105] No buffer space available"
    assert nos._missing_routes() == {"c1 route agent": nos.switches["c1"].agent.failed}


def test_wait_converged_waits_for_the_last_switch(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fabric_nos, "READY_QUIET_S", 0.0)
    nos = fabric(tmp_path)
    core = nos.switches["c2"].agent
    full = set(core.prefixes)
    core.prefixes = set()
    polls = []

    def fill() -> set[str]:  # the core's agent catches up on the third poll
        polls.append(1)
        return full if len(polls) >= 3 else set()

    core.forwarded_prefixes = fill  # type: ignore[method-assign]
    nos.frr_started_at = 0.0
    nos.wait_converged(timeout_s=1e12)
    assert len(polls) == 3
    nos.switches["c2"].agent.forwarded_prefixes = lambda: set()  # type: ignore[method-assign]
    nos.frr_started_at = None
    with pytest.raises(FrrError, match="'c2 prefixes': 16"):
        nos.wait_converged(timeout_s=0.0)


def test_route_health_names_the_switch_with_a_hole(tmp_path: Path) -> None:
    nos = fabric(tmp_path)
    nos.switches["e42"].agent.prefixes -= {"10.1.1.1/32"}
    nos.switches["e42"].agent.writes.append(WriteBatch(10.0, 1.0, 0, 0, 3, ("10.1.1.1/32",)))
    health = nos.route_health(since=5.0)
    assert health["e42"]["missing_prefixes"] == ["10.1.1.1/32"]
    assert (health["e42"]["write_batches"], health["e42"]["deletes"]) == (1, 3)
    assert health["c1"]["missing_prefixes"] == [] and health["c1"]["write_batches"] == 0


def test_forwarded_prefixes_needs_a_group_select_entry_and_members() -> None:
    lpm = {"10.0.0.1/32": 1, "10.0.0.2/32": 2, "10.0.0.3/32": 3, "10.0.0.4/32": 4}
    selects = {1: 1, 2: 2, 4: 4}  # group 3 has no group_select entry: NO_ROUTE
    members = {1: 2, 2: 0, 3: 1}  # group 2 is empty, group 4 does not exist
    assert forwarded_prefixes(lpm, selects, members) == {"10.0.0.1/32"}
