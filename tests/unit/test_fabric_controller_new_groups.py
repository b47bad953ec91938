"""FabricController against switches that cannot shrink a group in place (as real BMv2's PI:
a group MODIFY that drops a watched member fails with UNKNOWN, applied or not): a reroute
writes new groups instead, make-before-break, whether told up front (``modify_groups=False``)
or learning it from the switch's error. p4sim switch processes refusing through a wrapper."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from bmv2_group_refusal import ShrinkRefusingConnection
from test_fabric_controller import Switches

from controlplane.entities import ActionProfileGroup, TableEntry
from controlplane.fabric import Fabric
from controlplane.fabric_controller import FabricController
from controlplane.fabric_plan import P_SELECTOR, T_GROUP_SELECT, T_LPM
from netlab.targets import compile_p4
from topologies.model import load_topology

ROOT = Path(__file__).resolve().parents[2]
LEAF_SPINE = ROOT / "topologies" / "leaf-spine.yaml"


class CheckedShrinkRefusingConnection(ShrinkRefusingConnection):
    """Refuses group modifies as BMv2 does and, after every write, checks that each route
    names a group the switch holds."""

    def __init__(self, conn, applies: bool) -> None:
        super().__init__(conn, applies)
        self.dangling: list[str] = []  # a route found pointing at a missing group

    def after_write(self) -> None:
        self.dangling.extend(dangling_routes(self.conn))


def groups_on(conn) -> dict[int, set[int]]:
    return {g.group_id: {m.member_id for m in g.members}
            for g in conn.read(ActionProfileGroup(profile=P_SELECTOR))}


def routes_on(conn) -> dict[str, int]:
    out = {}
    for e in conn.read(TableEntry(table=T_LPM)):
        m = e.match["hdr.ipv4.dst_addr"]
        out[f"{ipaddress.IPv4Address(m.value)}/{m.prefix_len}"] = e.params["group_id"]
    return out


def dangling_routes(conn) -> list[str]:
    """Routes whose group id has no group_select entry, or whose entry's group is missing."""
    selects = {e.match["meta.group_id"]: e.group
               for e in conn.read(TableEntry(table=T_GROUP_SELECT))}
    groups = groups_on(conn)
    return [f"{conn.name} {prefix} -> group {gid}" for prefix, gid in routes_on(conn).items()
            if selects.get(gid) not in groups]


@pytest.fixture(scope="module")
def fabric_build(tmp_path_factory) -> tuple[Path, Path]:
    return compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path_factory.mktemp("fabric"),
                      target="embedded")


@pytest.fixture
def refusing_fabric(request):
    topo = load_topology(LEAF_SPINE)
    sw = Switches(list(topo.switches))
    fabric = Fabric({n: (sw.addrs[n], topo.switches[n].device_id) for n in topo.switches})
    try:
        fabric.connect()
        wrapped = {n: CheckedShrinkRefusingConnection(c, request.param)
                   for n, c in fabric.connections.items()}
        real = dict(fabric.connections)
        fabric.connections.update(wrapped)
        try:
            yield topo, fabric, wrapped
        finally:
            fabric.connections.update(real)
            fabric.close()
    finally:
        sw.close()


def uplink_routes(topo, fabric) -> set[int]:
    """The ports l1's route to l2's hosts sprays over."""
    l1 = fabric["l1"]
    return groups_on(l1)[routes_on(l1)["10.0.2.0/24"]]


@pytest.mark.parametrize("refusing_fabric", [True, False], indirect=True,
                         ids=["modify-applied", "modify-not-applied"])
def test_controller_learns_from_the_refusal_and_writes_new_groups(refusing_fabric,
                                                                   fabric_build) -> None:
    topo, fabric, wrapped = refusing_fabric
    json_path, p4info = fabric_build
    said: list[str] = []
    ctl = FabricController(topo, fabric, p4info, json_path, log=said.append)
    ctl.up()
    to_s1, to_s2 = topo.port_of("l1", "s1")[0], topo.port_of("l1", "s2")[0]
    assert uplink_routes(topo, fabric) == {to_s1, to_s2}

    down = ctl.set_link("l1-s1", up=False)  # shrinks l1's uplink group: refused, then redone
    assert wrapped["l1"].refused == 1
    assert any("switch l1 cannot modify a group in place" in line for line in said)
    assert uplink_routes(topo, fabric) == {to_s2}
    assert not any(e.WhichOneof("entity") == "action_profile_group"
                   for e in down["l1"].modifies)  # what was written in the end
    assert sum(d.writes for d in ctl.sync().values()) == 0  # nothing left over

    refused = {n: c.refused for n, c in wrapped.items()}
    ctl.set_link("l1-s1", up=True)  # recovery: the learnt switches modify no group either
    assert {n: c.refused for n, c in wrapped.items()} == refused
    assert uplink_routes(topo, fabric) == {to_s1, to_s2}
    assert sum(d.writes for d in ctl.sync().values()) == 0
    assert all(not c.dangling for c in wrapped.values()), [c.dangling for c in wrapped.values()]


@pytest.mark.parametrize("refusing_fabric", [False], indirect=True, ids=["refusing"])
def test_controller_told_up_front_never_modifies_a_group(refusing_fabric,
                                                         fabric_build) -> None:
    """modify_groups=False (the runner's choice for real BMv2): no refusal ever, every route
    names an existing group after every write, failure and recovery converge."""
    topo, fabric, wrapped = refusing_fabric
    json_path, p4info = fabric_build
    ctl = FabricController(topo, fabric, p4info, json_path, log=lambda _: None,
                           modify_groups=False)
    ctl.up()
    before = {n: groups_on(fabric[n]) for n in topo.switches}
    for up in (False, True):
        diffs = ctl.set_link("l1-s1", up=up)
        assert diffs["l1"].writes and diffs["s1"].writes  # both ends rerouted
        assert sum(d.writes for d in ctl.sync().values()) == 0
    assert all(c.refused == 0 and not c.dangling for c in wrapped.values())
    after = {n: groups_on(fabric[n]) for n in topo.switches}
    # the same member sets as before the failure (their ids may differ)
    assert ({n: sorted(map(sorted, g.values())) for n, g in after.items()}
            == {n: sorted(map(sorted, g.values())) for n, g in before.items()})
