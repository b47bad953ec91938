"""The route agent against a real `p4sim switch` process over P4Runtime: a namespace's static
multipath routes become fabric.p4 routes and next-hop groups, changes are followed (a next hop
withdrawn shrinks its group in place, a deleted route loses its entries), and only what changed
is written, under the agent's own role."""

from __future__ import annotations

import contextlib
import ipaddress
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cellfabric.nos.route_agent import RouteAgent
from controlplane.connection import SwitchConnection, wait_until
from controlplane.entities import ActionProfileGroup, ActionProfileMember, TableEntry
from controlplane.errors import P4RuntimeError
from controlplane.fabric_plan import SPRAY_MODE_VALUE, T_GROUP_MODE, T_LPM, T_MY_STATION, hash_salt
from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config
from netlab.targets import compile_p4

sys.path.insert(0, str(Path(__file__).parent / "nos_fixtures"))
sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from bmv2_group_refusal import ShrinkRefusingConnection
from p4sim_switch import P4simSwitch
from route_lab import RouteLab, needs_root, route_lab

pytestmark = needs_root
ROOT = Path(__file__).resolve().parents[2]
SELECTOR = "MyIngress.spray.group_selector"


@pytest.fixture(scope="module")
def fabric_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path_factory.mktemp("ra"), "embedded")


@pytest.fixture
def bare_switch(tmp_path: Path):
    with route_lab() as lab, P4simSwitch(1, log=tmp_path / "switch.log") as sw:
        yield lab, sw


@pytest.fixture
def setup(fabric_build, tmp_path: Path):
    """(lab, controller connection, agent connection) on a fresh switch."""
    json_path, p4info_path = fabric_build
    with route_lab() as lab, P4simSwitch(1, log=tmp_path / "switch.log") as sw:
        ctl = SwitchConnection(sw.addr, 1, (0, 1), reconnect=False).connect()
        try:
            ctl.set_pipeline(p4info_path, json_path)
            agent_conn = SwitchConnection(sw.addr, 1, (0, 1), reconnect=False,
                                          role=ROUTE_AGENT_ROLE,
                                          role_config=route_agent_role_config()).connect()
            try:
                yield lab, ctl, agent_conn
            finally:
                agent_conn.close()
        finally:
            ctl.close()


def routes_on(conn: SwitchConnection) -> dict[str, int]:
    out = {}
    for e in conn.read(TableEntry(table=T_LPM)):
        m = e.match["hdr.ipv4.dst_addr"]
        out[f"{ipaddress.IPv4Address(m.value)}/{m.prefix_len}"] = e.params["group_id"]
    return out


def groups_on(conn: SwitchConnection) -> dict[int, set[int]]:
    return {g.group_id: {m.member_id for m in g.members}
            for g in conn.read(ActionProfileGroup(profile=SELECTOR))}


def members_on(conn: SwitchConnection) -> set[int]:
    return {m.member_id for m in conn.read(ActionProfileMember(profile=SELECTOR))}


def make_agent(lab: RouteLab, conn: SwitchConnection, spray: bool = True) -> RouteAgent:
    return RouteAgent(lab.ns, "l1", lab.port_of_ifname, conn, spray, log=lambda _line: None)


def test_sync_writes_routes_and_groups_that_read_back(setup) -> None:
    lab, ctl, conn = setup
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
    lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
    lab.ip("route", "add", "10.3.3.0/24", *lab.via(3))
    agent = make_agent(lab, conn)
    diff = agent.sync()
    routes = routes_on(ctl)
    assert set(routes) == {"10.1.0.0/16", "10.2.0.0/16", "10.3.3.0/24"}
    assert routes["10.1.0.0/16"] == routes["10.2.0.0/16"]  # one next-hop set, one group
    groups = groups_on(ctl)
    assert groups == {routes["10.1.0.0/16"]: {1, 2, 3}, routes["10.3.3.0/24"]: {3}}
    assert members_on(ctl) == {1, 2, 3}
    modes = {e.match["meta.group_id"]: (e.params["mode"], e.params["salt"])
             for e in ctl.read(TableEntry(table=T_GROUP_MODE))}
    assert set(modes.values()) == {(SPRAY_MODE_VALUE["spray"], hash_salt("l1"))}
    # 3 members, 2 groups with their select and mode entries, 3 routes
    assert (len(diff.inserts), len(diff.modifies), len(diff.deletes)) == (3 + 2 * 3 + 3, 0, 0)
    assert len(agent.writes) == 1
    assert agent.sync().writes == 0  # the second pass finds nothing to write
    assert len(agent.writes) == 1


def test_connected_and_unmapped_routes_get_no_entry(setup) -> None:
    lab, ctl, conn = setup
    lab.ip("route", "add", "10.4.0.0/16", "dev", "lo")
    agent = make_agent(lab, conn, spray=False)
    agent.sync()
    assert routes_on(ctl) == {}
    assert "no front-panel port behind lo" in agent.entries.skipped["10.4.0.0/16"]
    assert "connected" in agent.entries.skipped["10.77.1.0/24"]


def test_the_role_keeps_the_agent_out_of_other_tables(setup) -> None:
    _lab, _ctl, conn = setup
    with pytest.raises(P4RuntimeError, match="PERMISSION_DENIED"):
        conn.insert(TableEntry(table=T_MY_STATION, action="NoAction",
                               match={"hdr.ethernet.dst_addr": "00:00:00:00:00:01"}))


def follow(agent: RouteAgent, *run_args: float) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop, *run_args), daemon=True)
    thread.start()
    return stop, thread


@contextlib.contextmanager
def agent_and_controller(sw: P4simSwitch) -> Iterator[tuple[SwitchConnection,
                                                            SwitchConnection]]:
    """(the agent's connection, under its role; a controller's) to a switch of its own."""
    with SwitchConnection(sw.addr, 1, (0, 1), reconnect=False, role=ROUTE_AGENT_ROLE,
                          role_config=route_agent_role_config()) as conn, \
            SwitchConnection(sw.addr, 1, (0, 1), reconnect=False) as ctl:
        yield conn, ctl


def settled(agent: RouteAgent, check: Callable[[], bool]) -> bool:
    # gated on the switch's state; the bound only keeps a broken agent from hanging the test
    return wait_until(check, timeout=30.0, interval=0.05)


def test_following_changes_shrinks_groups_and_deletes_routes(setup) -> None:
    lab, ctl, conn = setup
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
    lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
    lab.ip("route", "add", "10.3.0.0/16", "proto", "bgp", *lab.via(2, 3))
    agent = make_agent(lab, conn)
    stop, thread = follow(agent)
    try:
        # the switch shows a batch's entries before the agent has recorded the batch: wait
        # for both, or a record could land after the count taken below
        assert settled(agent, lambda: len(routes_on(ctl)) == 3 and len(agent.writes) == 1)
        gid = routes_on(ctl)["10.3.0.0/16"]
        batches = len(agent.writes)
        # the only route over {2,3} loses port 2: its group shrinks in place
        lab.ip("route", "replace", "10.3.0.0/16", "proto", "bgp", *lab.via(3))
        assert settled(agent, lambda: groups_on(ctl).get(gid) == {3}
                       and len(agent.writes) > batches)
        assert routes_on(ctl)["10.3.0.0/16"] == gid
        shrink = agent.writes[batches:]
        assert [(b.inserts, b.modifies, b.deletes) for b in shrink] == [(0, 1, 0)]
        # port 2 withdrawn from the other two routes (zebra replaces each route: one or two
        # bursts, depending on how fast they come), then port 2's member is unused
        lab.ip("route", "replace", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 3))
        lab.ip("route", "replace", "10.2.0.0/16", "proto", "bgp", *lab.via(1, 3))
        assert settled(agent, lambda: sorted(map(sorted, groups_on(ctl).values()))
                       == [[1, 3], [3]] and members_on(ctl) == {1, 3})
        routes = routes_on(ctl)
        assert routes["10.1.0.0/16"] == routes["10.2.0.0/16"] != gid
        lab.ip("route", "del", "10.2.0.0/16")
        # the delete is its own batch, the last one recorded (waited for: see above)
        assert settled(agent, lambda: set(routes_on(ctl)) == {"10.1.0.0/16", "10.3.0.0/16"}
                       and agent.writes[-1].prefixes == ("10.2.0.0/16",))
        lab.ip("route", "del", "10.1.0.0/16")
        lab.ip("route", "del", "10.3.0.0/16")
        assert settled(agent, lambda: not routes_on(ctl) and not groups_on(ctl)
                       and not members_on(ctl))
        assert agent.errors == []
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_switch_without_pipeline_is_one_error_then_programmed(fabric_build,
                                                                 bare_switch) -> None:
    json_path, p4info_path = fabric_build
    lab, sw = bare_switch
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2))
    with agent_and_controller(sw) as (conn, ctl):
        agent = make_agent(lab, conn)
        stop, thread = follow(agent)
        try:
            assert settled(agent, lambda: bool(agent.errors))
            assert "has no pipeline" in agent.errors[0] and "\n" not in agent.errors[0]
            ctl.set_pipeline(p4info_path, json_path)
            # retried without any kernel change
            assert settled(agent, lambda: routes_on(ctl) == {"10.1.0.0/16": 1})
            assert agent.errors_cleared == len(agent.errors) == 1  # not one line per retry
        finally:
            stop.set()
            thread.join(timeout=30)


@pytest.mark.parametrize("applies", [True, False], ids=["modify-applied", "modify-not-applied"])
def test_a_switch_that_cannot_shrink_groups_gets_new_ones(setup, applies: bool) -> None:
    lab, ctl, conn = setup
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
    lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(3))
    refusing = ShrinkRefusingConnection(conn, applies)
    said: list[str] = []
    agent = RouteAgent(lab.ns, "l1", lab.port_of_ifname, refusing, True, log=said.append)
    agent.sync()
    lab.ip("route", "replace", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 3))
    agent.sync()
    assert refusing.refused == 1 and agent.errors == []
    assert any("cannot shrink a group in place" in line for line in said)
    groups, routes = groups_on(ctl), routes_on(ctl)
    assert groups[routes["10.1.0.0/16"]] == {1, 3} and groups[routes["10.2.0.0/16"]] == {3}
    assert len(groups) == 2 and members_on(ctl) == {1, 3}
    # from now on no group is modified
    lab.ip("route", "replace", "10.1.0.0/16", "proto", "bgp", *lab.via(1))
    third = agent.sync()
    assert all(e.WhichOneof("entity") != "action_profile_group" for e in third.modifies)
    assert refusing.refused == 1 and agent.errors == []
    assert groups_on(ctl)[routes_on(ctl)["10.1.0.0/16"]] == {1}


def test_a_netlink_overflow_reads_the_table_again(setup, monkeypatch) -> None:
    """A watch whose receive buffer overflowed (ENOBUFS: notifications lost, every later
    read fails) is replaced by a new one whose dump is the table: the agent keeps following
    instead of freezing the switch's routes as they were."""
    import errno

    from cellfabric.nos import route_agent
    from controlplane.kernel_routes import KernelRouteWatch

    overflows = [1]

    class OverflowingWatch(KernelRouteWatch):
        async def changes(self, timeout: float):
            got = await super().changes(timeout)
            if got != [] and overflows[0]:
                overflows[0] -= 1
                raise OSError(errno.ENOBUFS, "No buffer space available")
            return got

    monkeypatch.setattr(route_agent, "KernelRouteWatch", OverflowingWatch)
    lab, ctl, conn = setup
    agent = make_agent(lab, conn)
    stop, thread = follow(agent)
    try:
        assert settled(agent, lambda: agent._installed is not None)
        # this change arrives on the watch that overflows: only a new dump has it
        lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2))
        assert settled(agent, lambda: set(routes_on(ctl)) == {"10.1.0.0/16"})
        assert overflows == [0] and agent.watch_restarts == 1 and agent.failed is None
        lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(3))
        assert settled(agent, lambda: set(routes_on(ctl)) == {"10.1.0.0/16", "10.2.0.0/16"})
        assert agent.forwarded_prefixes() == {"10.1.0.0/16", "10.2.0.0/16"}
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_the_agent_waits_long_while_programmed_and_retries_a_failed_pass_soon(
        fabric_build, bare_switch, monkeypatch) -> None:
    """Each wait on the kernel table is one of two lengths: ``poll_s`` while a failed pass
    waits to be retried (a switch without a pipeline), ``idle_s`` once the switch holds the
    table (a change ends either wait at once: the route below is followed in a long wait)."""
    from cellfabric.nos import route_agent
    from controlplane.kernel_routes import KernelRouteWatch

    waits: list[tuple[float, bool]] = []  # (timeout, programmed when the wait began)
    agent_box: list[RouteAgent] = []

    class RecordingWatch(KernelRouteWatch):
        async def changes(self, timeout: float):
            waits.append((timeout, agent_box[0]._installed is not None))
            return await super().changes(timeout)

    monkeypatch.setattr(route_agent, "KernelRouteWatch", RecordingWatch)
    json_path, p4info_path = fabric_build
    lab, sw = bare_switch
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2))
    with agent_and_controller(sw) as (conn, ctl):
        agent = make_agent(lab, conn)
        agent_box.append(agent)
        stop, _thread = follow(agent, 0.05, 5.0)
        try:
            assert settled(agent, lambda: bool(agent.errors))
            ctl.set_pipeline(p4info_path, json_path)
            assert settled(agent, lambda: routes_on(ctl) == {"10.1.0.0/16": 1})
            assert settled(agent, lambda: any(t == 5.0 for t, _ in waits))
            lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(3))
            assert settled(agent, lambda: set(routes_on(ctl)) == {"10.1.0.0/16", "10.2.0.0/16"})
        finally:
            stop.set()
        # burst-settling waits (settle_s) aside, a wait's length follows the agent's state
        state_waits = [(t, programmed) for t, programmed in waits if t != agent.settle_s]
        assert (0.05, False) in state_waits and (5.0, True) in state_waits
        assert all((t == 5.0) == programmed for t, programmed in state_waits)
