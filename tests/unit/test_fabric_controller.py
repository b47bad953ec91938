"""FabricController: plans from topologies, and minimal diffs against real p4sim switches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.rpc import code_pb2

from controlplane.entities import ActionProfileGroup, TableEntry
from controlplane.fabric import Fabric
from controlplane.fabric_controller import FabricController
from controlplane.fabric_plan import T_GROUP_MODE, T_LPM, next_hops, plan_fabric
from netlab.hosts import free_port, tcp_accepts, wait_until
from netlab.targets import compile_p4
from topologies.model import load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[2]
LEAF_SPINE = ROOT / "topologies" / "leaf-spine.yaml"


def test_shortest_paths_use_every_spine() -> None:
    topo = load_topology(LEAF_SPINE)
    hops = next_hops(topo, set())
    # l1 reaches hosts of l2 over both spines, its own hosts directly.
    assert hops["l1"]["h3"] == sorted(topo.port_of("l1", "s1") + topo.port_of("l1", "s2"))
    assert hops["l1"]["h1"] == topo.port_of("l1", "h1")
    assert hops["s1"]["h3"] == topo.port_of("s1", "l2")


def test_failed_link_removed_from_paths() -> None:
    topo = load_topology(LEAF_SPINE)
    hops = next_hops(topo, {frozenset(("l1", "s1"))})
    assert hops["l1"]["h3"] == topo.port_of("l1", "s2")
    # s1 now reaches l1's hosts only through l2 and s2: four hops instead of one.
    assert hops["s1"]["h1"] == topo.port_of("s1", "l2")


def test_spines_get_prefix_routes_leaves_get_groups_per_port_set() -> None:
    plans = plan_fabric(load_topology(LEAF_SPINE))
    spine_routes = plans["s1"].routes
    assert set(spine_routes) == {"10.0.1.0/24", "10.0.2.0/24"}
    l1 = plans["l1"]
    uplinks = tuple(sorted(load_topology(LEAF_SPINE).port_of("l1", "s1")
                           + load_topology(LEAF_SPINE).port_of("l1", "s2")))
    assert l1.routes["10.0.2.0/24"] == l1.groups[uplinks]
    assert l1.routes["10.0.1.1/32"] != l1.routes["10.0.1.2/32"]  # one host port each
    modes = [e.params["mode"] for e in l1.entities
             if isinstance(e, TableEntry) and e.table == T_GROUP_MODE]
    assert set(modes) == {1}  # spray
    groups = [e for e in l1.entities if isinstance(e, ActionProfileGroup)]
    assert all(m.watch_port == m.member_id for g in groups for m in g.members)


def test_dual_homed_host_routes_from_spine_use_both_leaves() -> None:
    topo = load_topology(ROOT / "topologies" / "dual-homed.yaml")
    hops = next_hops(topo, set())
    assert hops["s1"]["h1"] == sorted(topo.port_of("s1", "l1") + topo.port_of("s1", "l2"))


# ---- against real switches ---------------------------------------------------------------


class Switches:
    """p4sim switch processes with no data-plane ports: P4Runtime only."""

    def __init__(self, names: list[str]) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self.addrs = {n: f"127.0.0.1:{free_port()}" for n in names}
        self.admin = {n: free_port() for n in names}
        try:
            for i, n in enumerate(names, start=1):
                self.start(n, i)
        except BaseException:
            self.close()  # the ones that did start: a failed set-up leaves no process behind
            raise

    def start(self, name: str, device_id: int) -> None:
        argv = [sys.executable, "-m", "p4sim.cli", "switch", "--device-id", str(device_id),
                "--thrift-port", str(self.admin[name]), "--no-p4", "--",
                "--grpc-server-addr", self.addrs[name]]
        self.procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        host, port = self.addrs[name].split(":")
        # (a generous bound: a loaded machine takes seconds to import the switch)
        assert wait_until(lambda: tcp_accepts(int(port), host), 60), f"{name} did not start"

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        proc.wait(timeout=10)

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)


@pytest.fixture(scope="module")
def fabric_build(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("fabric")
    return compile_p4(ROOT / "p4src" / "fabric.p4", out, target="embedded")


@pytest.fixture
def leaf_spine_switches():
    topo = load_topology(LEAF_SPINE)
    sw = Switches(list(topo.switches))
    fabric = Fabric({n: (sw.addrs[n], topo.switches[n].device_id) for n in topo.switches})
    fabric.connect()
    try:
        yield topo, sw, fabric
    finally:
        fabric.close()
        sw.close()


def test_controller_up_is_idempotent_and_diffs_are_minimal(leaf_spine_switches, fabric_build):
    topo, _, fabric = leaf_spine_switches
    json_path, p4info = fabric_build
    ctl = FabricController(topo, fabric, p4info, json_path, log=lambda _: None)
    first = ctl.up()
    assert all(d.writes > 0 and not d.deletes for d in first.values())
    entries = fabric["l1"].read(TableEntry(table=T_LPM))
    assert {e.match["hdr.ipv4.dst_addr"].prefix_len for e in entries} == {32, 24}

    second = ctl.up()
    assert sum(d.writes for d in second.values()) == 0

    # A policy change (spray mode) rewrites only the group modes, everywhere.
    ctl.topo = parse_topology({**_raw(LEAF_SPINE), "fabric": {**_raw(LEAF_SPINE)["fabric"],
                                                             "spray": "round-robin"}})
    third = ctl.sync()
    for name, d in third.items():
        n_groups = len(ctl.plans[name].groups)
        assert (len(d.inserts), len(d.modifies), len(d.deletes)) == (0, n_groups, 0), name
    modes = {e.params["mode"] for e in fabric["s1"].read(TableEntry(table=T_GROUP_MODE))}
    assert modes == {2}


def test_link_failure_updates_only_affected_groups(leaf_spine_switches, fabric_build):
    topo, _, fabric = leaf_spine_switches
    json_path, p4info = fabric_build
    ctl = FabricController(topo, fabric, p4info, json_path, log=lambda _: None)
    ctl.up()
    diffs = ctl.set_link("l1-s1", up=False)
    assert diffs["l1"].writes > 0
    assert diffs["s2"].writes == 0  # s2's paths did not change
    l1_groups = fabric["l1"].read(ActionProfileGroup(profile="MyIngress.spray.group_selector"))
    dead = topo.port_of("l1", "s1")[0]
    assert all(m.member_id != dead for g in l1_groups for m in g.members)
    back = ctl.set_link("l1-s1", up=True)
    assert back["l1"].writes > 0
    assert sum(d.writes for d in ctl.sync().values()) == 0


def test_reroute_reads_only_the_switches_whose_plan_changed(leaf_spine_switches,
                                                            fabric_build) -> None:
    """A failure re-plans the fabric but reads and writes only the switches it changes (the
    reroute does not wait for every switch); the result equals a full sync's."""
    topo, _, fabric = leaf_spine_switches
    json_path, p4info = fabric_build
    ctl = FabricController(topo, fabric, p4info, json_path, log=lambda _: None)
    ctl.up()
    before = dict(ctl.plans)
    reads: list[str] = []
    for name, conn in fabric.connections.items():
        real = conn.read_protos
        conn.read_protos = lambda *e, _n=name, _r=real: (reads.append(_n), _r(*e))[1]
    ctl.set_links(["l1-s1"], up=False)
    changed = {n for n in ctl.plans if ctl.plans[n] != before[n]}
    assert changed and set(reads) == changed != set(fabric.connections)
    assert sum(d.writes for d in ctl.sync().values()) == 0  # nothing left for a full sync


def test_switch_restart_is_resynced(leaf_spine_switches, fabric_build):
    topo, sw, fabric = leaf_spine_switches
    json_path, p4info = fabric_build
    ctl = FabricController(topo, fabric, p4info, json_path, log=lambda _: None)
    ctl.up()
    before = len(fabric["l2"].read(TableEntry(table=T_LPM)))
    sw.stop("l2")
    sw.start("l2", topo.switches["l2"].device_id)
    assert fabric["l2"].wait_resync(count=1, timeout=30)
    assert len(fabric["l2"].read(TableEntry(table=T_LPM))) == before
    assert sum(d.writes for d in ctl.diff().values()) == 0


def _raw(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())



def test_controller_under_its_role_and_a_second_role_cannot_touch_its_tables(fabric_build):
    """The controller runs as role FABRIC_ROLE; an ACL operator under role "acl-operator" is
    refused the controller's tables (PERMISSION_DENIED), writes its own, and the controller's
    next sync neither sees nor deletes the operator's entry (its reads name its role)."""
    from controlplane.errors import P4RuntimeError
    from controlplane.fabric_controller import FABRIC_ROLE, fabric_role_config
    from controlplane.roles import role_config

    topo = load_topology(LEAF_SPINE)
    sw = Switches(list(topo.switches))
    addrs = {n: (sw.addrs[n], topo.switches[n].device_id) for n in topo.switches}
    controller = Fabric(addrs, election_id=(0, 5), role=FABRIC_ROLE,
                        role_config=fabric_role_config())
    operator = Fabric({"l1": addrs["l1"]}, election_id=(0, 1), role="acl-operator",
                      role_config=role_config(["MyIngress.forwarding.acl"]))
    json_path, p4info = fabric_build
    try:
        controller.connect()
        ctl = FabricController(topo, controller, p4info, json_path, log=lambda _: None)
        assert all(d.writes > 0 for d in ctl.up().values())
        operator.connect()
        op = operator["l1"]
        assert controller["l1"].is_primary and op.is_primary  # one primary per role
        op.refresh_p4info()
        route = TableEntry(T_LPM, {"hdr.ipv4.dst_addr": "10.9.9.0/24"},
                           "MyIngress.forwarding.set_next_group", {"group_id": 1})
        with pytest.raises(P4RuntimeError) as exc:
            op.insert(route)
        assert [u.code for u in exc.value.failed] == [code_pb2.PERMISSION_DENIED]
        theirs = controller["l1"].read(TableEntry(table=T_LPM))
        with pytest.raises(P4RuntimeError) as exc:
            op.delete(theirs[0])
        assert [u.code for u in exc.value.failed] == [code_pb2.PERMISSION_DENIED]
        acl = TableEntry("MyIngress.forwarding.acl", {"meta.l4_dst_port": "22&&&0xffff"},
                         "MyIngress.forwarding.acl_drop", priority=10)
        op.insert(acl)
        assert [e.table for e in op.read(TableEntry(table=None))] == \
            ["MyIngress.forwarding.acl"]  # reads under a role see that role's entities
        assert sum(d.writes for d in ctl.sync().values()) == 0  # the ACL entry is not its own
        assert len(controller["l1"].read(TableEntry(table=T_LPM))) == len(theirs)
        assert len(op.read(TableEntry(table="MyIngress.forwarding.acl"))) == 1
    finally:
        operator.close()
        controller.close()
        sw.close()
