"""SwitchConnection and Fabric over real gRPC against real `p4sim switch` processes running the
control-plane test program (cp_fixtures/cp_test.p4, compiled with `p4sim compile`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controlplane.encoding import Match
from controlplane.p4rt import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    CounterEntry,
    DigestConfig,
    DirectCounterEntry,
    Fabric,
    FabricError,
    GroupMember,
    MeterConfig,
    MeterEntry,
    MulticastGroup,
    NoPipelineError,
    NotPrimaryError,
    P4RuntimeError,
    Replica,
    SwitchConnection,
    SwitchUnavailableError,
    TableEntry,
)

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import CPU_PORT, P4simSwitch, compile_test_program


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    json_path, p4info_path = compile_test_program(tmp_path_factory.mktemp("cp-build"))
    return p4info_path, json_path


@pytest.fixture(scope="module")
def switch(tmp_path_factory: pytest.TempPathFactory):
    sw = P4simSwitch(log=tmp_path_factory.mktemp("cp-sw") / "switch.log").start()
    yield sw
    sw.stop()


@pytest.fixture
def conn(switch: P4simSwitch, program: tuple[Path, Path]):
    """A primary connection with the test program freshly pushed (the switch starts empty)."""
    with SwitchConnection(switch.addr) as c:
        c.set_pipeline(*program)
        yield c


def route(prefix: str, port: int) -> TableEntry:
    return TableEntry("ipv4_lpm", match={"dstAddr": prefix}, action="set_nhop",
                      params={"dmac": "00:00:00:00:00:01", "port": port})


def test_pipeline_push_then_get(conn: SwitchConnection, program: tuple[Path, Path]) -> None:
    got = conn.get_pipeline()
    assert got.device_config == program[1].read_bytes()
    assert got.cookie != 0
    assert "MyIngress.ipv4_lpm" in {t.preamble.name for t in got.p4info.tables}
    # A second client learns the P4Info from the switch and resolves names with it.
    with SwitchConnection(conn.addr, election_id=(0, 0)) as other:
        assert other.index.table("ipv4_lpm").preamble.id == conn.index.id("table", "ipv4_lpm")


def test_no_pipeline_is_a_clear_error(tmp_path: Path) -> None:
    with P4simSwitch(log=tmp_path / "sw.log") as empty, SwitchConnection(empty.addr) as c, \
            pytest.raises(NoPipelineError, match=r"switch at 127\.0\.0\.1:\d+ has no pipeline"):
        c.insert(route("10.0.0.0/8", 1))


def test_insert_read_modify_delete_with_wildcards(conn: SwitchConnection) -> None:
    with conn.batch() as b:
        b.insert(route("10.0.0.0/8", 1), route("10.1.0.0/16", 2))
        b.insert(TableEntry("acl", match={"srcAddr": "10.0.0.0&&&255.0.0.0", "protocol": 6,
                                          "dstPort": "1000..2000"},
                            action="drop", priority=5))
    conn.modify(route("10.1.0.0/16", 3))
    lpm = conn.read(TableEntry("ipv4_lpm"))
    assert sorted((e.match["hdr.ipv4.dstAddr"].prefix_len, e.params["port"]) for e in lpm) == [
        (8, 1), (16, 3)]
    everything = [e for e in conn.read(TableEntry()) if not e.is_default]
    assert len(everything) == 3
    (acl,) = conn.read(TableEntry("acl"))
    assert acl.priority == 5
    assert acl.match["hdr.ipv4.srcAddr"] == Match("ternary", 0x0A000000, mask=0xFF000000)
    assert acl.match["hdr.l4.dstPort"] == Match("range", 1000, high=2000)
    conn.delete(route("10.0.0.0/8", 0))
    assert [e.params["port"] for e in conn.read(TableEntry("ipv4_lpm"))] == [3]


def test_default_action_set_and_reset(conn: SwitchConnection) -> None:
    conn.set_default("ipv4_lpm", "set_nhop", dmac=5, port=4)
    (default,) = conn.read(TableEntry("ipv4_lpm", is_default=True))
    assert (default.action, default.params) == ("MyIngress.set_nhop", {"dmac": 5, "port": 4})
    conn.reset_default("ipv4_lpm")
    (default,) = conn.read(TableEntry("ipv4_lpm", is_default=True))
    assert default.action == "NoAction"


def test_server_errors_name_the_failed_update(conn: SwitchConnection) -> None:
    conn.insert(route("10.0.0.0/8", 1))
    with pytest.raises(P4RuntimeError) as info:
        conn.insert(route("11.0.0.0/8", 1), route("10.0.0.0/8", 2), route("12.0.0.0/8", 1))
    msg = str(info.value)
    assert msg.startswith("Write failed: ALREADY_EXISTS: insert table MyIngress.ipv4_lpm entry "
                          "dstAddr=10.0.0.0/8: ")
    assert "\n" not in msg
    assert [u.ok for u in info.value.updates] == [True, False, True]
    assert len(conn.intended) == 3  # the accepted updates are remembered, the rejected is not
    with pytest.raises(P4RuntimeError, match=r"NOT_FOUND: delete table MyIngress\.ipv4_lpm "
                                             r"entry dstAddr=99\.0\.0\.0/8"):
        conn.delete(route("99.0.0.0/8", 1))
    # PI (and p4sim) answer INVALID_ARGUMENT for an unknown member; the message has to say so.
    with pytest.raises(P4RuntimeError, match=r"Write failed: [A-Z_]+: insert table "
                                             r"MyIngress\.ecmp_group entry group_id=1: \S"):
        conn.insert(TableEntry("ecmp_group", match={"group_id": 1}, member=42))


def test_action_selector_members_groups_watch_ports(conn: SwitchConnection) -> None:
    conn.insert(*[ActionProfileMember("ecmp_selector", i, "set_nhop", {"dmac": i, "port": i})
                  for i in (1, 2, 3)])
    conn.insert(ActionProfileGroup("ecmp_selector", 10, [GroupMember(1, 1, watch_port=1),
                                                         GroupMember(2, 2, watch_port=2)]))
    conn.insert(TableEntry("ecmp_group", match={"group_id": 7}, group=10))
    conn.modify(ActionProfileGroup("ecmp_selector", 10, [GroupMember(1, 1, watch_port=1),
                                                         GroupMember(3, 1, watch_port=3)]))
    (group,) = conn.read(ActionProfileGroup("ecmp_selector"))
    assert sorted((m.member_id, m.weight, m.watch_port) for m in group.members) == [
        (1, 1, 1), (3, 1, 3)]
    members = conn.read(ActionProfileMember("ecmp_selector"))
    assert sorted((m.member_id, m.params["port"]) for m in members) == [(1, 1), (2, 2), (3, 3)]
    (entry,) = conn.read(TableEntry("ecmp_group"))
    assert entry.group == 10 and entry.action is None


def test_multicast_groups_and_clone_sessions(conn: SwitchConnection) -> None:
    conn.insert(MulticastGroup(1, [Replica(1), Replica(2), Replica(3, 1)]),
                CloneSession(100, [Replica(CPU_PORT)], packet_length_bytes=64))
    conn.modify(MulticastGroup(1, [Replica(4)]))
    assert conn.read(MulticastGroup()) == [MulticastGroup(1, [Replica(4, 0)])]
    (clone,) = conn.read(CloneSession())
    assert (clone.session_id, clone.replicas, clone.packet_length_bytes) == (
        100, [Replica(CPU_PORT, 0)], 64)
    conn.delete(MulticastGroup(1))
    assert conn.read(MulticastGroup()) == []


def test_counters_direct_counters_and_meters(conn: SwitchConnection) -> None:
    conn.insert(route("10.0.0.0/8", 1))
    counters = conn.read(CounterEntry("port_pkts"))
    assert len(counters) == 512 and {(c.packets, c.bytes) for c in counters} == {(0, 0)}
    conn.modify(CounterEntry("port_pkts", 3, packets=7, bytes=700))
    assert conn.read(CounterEntry("port_pkts", 3)) == [CounterEntry("MyIngress.port_pkts", 3,
                                                                    7, 700)]
    (direct,) = conn.read(DirectCounterEntry(TableEntry("ipv4_lpm")))
    assert direct.table_entry.match["hdr.ipv4.dstAddr"] == Match("lpm", 0x0A000000,
                                                                 prefix_len=8)
    assert (direct.packets, direct.bytes) == (0, 0)
    conn.modify(MeterEntry("rate_meter", 2, MeterConfig(100, 10, 200, 20)))
    (meter,) = conn.read(MeterEntry("rate_meter", 2))
    assert meter.config == MeterConfig(100, 10, 200, 20)


def test_packet_out_loops_back_as_packet_in_with_digest(conn: SwitchConnection) -> None:
    conn.insert(DigestConfig("mac_learn_digest_t", max_timeout_ns=0, max_list_size=1))
    frame = bytes.fromhex("ffffffffffff" "0000000000aa" "88b5") + b"\x00" * 46
    conn.packet_out(frame, egress_port=CPU_PORT)
    pin = conn.packet_in(timeout=10)
    assert pin is not None
    assert pin.payload == frame
    assert pin.metadata["ingress_port"] == CPU_PORT
    dl = conn.digest(timeout=10)
    assert dl is not None
    assert dl.digest == "mac_learn_digest_t"
    assert dl.data == [{"srcAddr": 0xAA, "ingress_port": CPU_PORT}]
    conn.ack_digest(dl)


def test_second_controller_is_backup_and_cannot_write(conn: SwitchConnection) -> None:
    with SwitchConnection(conn.addr, election_id=(0, 0)) as low:
        assert conn.is_primary and not low.is_primary
        with pytest.raises(NotPrimaryError, match="not primary for device 0"):
            low.insert(route("10.0.0.0/8", 1))
        assert low.read(TableEntry("ipv4_lpm")) == []  # a backup may still read
    with SwitchConnection(conn.addr, election_id=(0, 9)) as high:
        assert high.is_primary
        assert conn.wait_until_backup(timeout=5)
    assert conn.wait_until_primary(timeout=5)  # the higher one left: primary again


def test_unreachable_and_wrong_device_give_one_line(switch: P4simSwitch,
                                                    program: tuple[Path, Path]) -> None:
    with pytest.raises(SwitchUnavailableError, match=r"cannot connect to switch at 127\.0\.0\.1:1 "
                                                     r"\(device_id 0\): no answer within 0\.5s"):
        SwitchConnection("127.0.0.1:1", timeout=0.5).connect()
    # A live switch that is not the one asked for: the error names the device and the code.
    with SwitchConnection(switch.addr, device_id=7) as wrong, \
            pytest.raises(P4RuntimeError, match=r"^SetForwardingPipelineConfig failed: [A-Z_]+: "):
        wrong.set_pipeline(*program)


def test_switch_restart_is_noticed_and_state_re_pushed(program: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    seen: list[int] = []
    with P4simSwitch(log=tmp_path / "sw.log") as sw, \
            SwitchConnection(sw.addr, on_resync=lambda c, n: seen.append(n)) as conn:
        conn.set_pipeline(*program)
        conn.insert(ActionProfileMember("ecmp_selector", 1, "set_nhop", {"dmac": 1, "port": 1}))
        conn.insert(ActionProfileGroup("ecmp_selector", 5, [GroupMember(1, watch_port=1)]))
        conn.insert(TableEntry("ecmp_group", match={"group_id": 3}, group=5),
                    route("10.0.0.0/8", 1), route("10.2.0.0/16", 2),
                    MulticastGroup(4, [Replica(1), Replica(2)]))
        conn.set_default("ipv4_lpm", "drop")
        conn.delete(route("10.2.0.0/16", 2))
        sw.restart()  # same port, a fresh process: no pipeline, no entries
        assert conn.wait_resync(1, timeout=30)
        assert seen == [6]
        assert conn.get_pipeline().device_config == program[1].read_bytes()
        lpm = conn.read(TableEntry("ipv4_lpm"))
        assert [e.params["port"] for e in lpm] == [1]
        (default,) = conn.read(TableEntry("ipv4_lpm", is_default=True))
        assert default.action == "MyIngress.drop"
        assert conn.read(TableEntry("ecmp_group"))[0].group == 5
        assert conn.read(MulticastGroup(4))[0].replicas == [Replica(1), Replica(2)]


def test_fabric_drives_three_switches_concurrently(program: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    switches = [P4simSwitch(log=tmp_path / f"s{i}.log").start() for i in range(3)]
    try:
        with Fabric({f"s{i}": (s.addr, 0) for i, s in enumerate(switches)}) as fab:
            fab.run(lambda c: c.set_pipeline(*program))
            fab.run(lambda c: c.insert(route("10.0.0.0/8", int(c.name[1:]) + 1)))
            ports = fab.run(lambda c: c.read(TableEntry("ipv4_lpm"))[0].params["port"])
            assert ports == {"s0": 1, "s1": 2, "s2": 3}
        with pytest.raises(FabricError, match="connect failed on switch bad: cannot connect"):
            Fabric({"ok": switches[0].addr, "bad": "127.0.0.1:1"}, timeout=0.5).connect()
    finally:
        for s in switches:
            s.stop()


def test_a_failing_packet_handler_does_not_break_the_stream(conn: SwitchConnection) -> None:
    got: list[bytes] = []

    def handler(pkt) -> None:
        got.append(pkt.payload)
        raise RuntimeError("handler bug")

    conn.packet_in_handler = handler
    frame = bytes(14) + b"\x01" * 46
    conn.packet_out(frame, egress_port=CPU_PORT)
    conn.packet_out(frame, egress_port=CPU_PORT)
    from controlplane.connection import wait_until

    assert wait_until(lambda: len(got) == 2, timeout=10)
    assert conn.connected and conn.is_primary and conn.resync_count == 0


def test_prebuilt_protos_are_written_and_errors_still_name_the_entry(
        conn: SwitchConnection) -> None:
    from controlplane.p4rt import Update

    ent = conn.codec.to_proto(route("10.0.0.0/8", 1))
    conn.write_protos([Update(type=Update.INSERT, entity=ent)])
    assert len(conn.read(TableEntry("ipv4_lpm"))) == 1 and len(conn.intended) == 1
    with pytest.raises(P4RuntimeError, match=r"ALREADY_EXISTS: insert table MyIngress\.ipv4_lpm "
                                             r"entry hdr\.ipv4\.dstAddr=10\.0\.0\.0/8: "):
        conn.write_protos([Update(type=Update.INSERT, entity=ent)])


def test_close_while_the_switch_is_gone_stops_reconnecting(program: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    import threading
    import time

    from controlplane.connection import wait_until

    sw = P4simSwitch(log=tmp_path / "sw.log").start()
    conn = SwitchConnection(sw.addr, name="gone", timeout=1).connect()
    sw.stop()
    assert wait_until(lambda: not conn.connected, timeout=10)
    time.sleep(0.5)  # let the reconnect loop run a few rounds
    conn.close()

    def stream_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "p4rt-stream-gone"]

    assert wait_until(lambda: not stream_threads(), timeout=10)
    assert not conn.connected


def test_reconnecting_at_once_with_the_same_election_id_is_not_refused(
        switch: P4simSwitch, program: tuple[Path, Path]) -> None:
    """A client that closes and connects again straight away (a PTF test after the previous
    one, a controller restart) keeps its election id: the switch must have let go of the old
    stream by the time close() returns, or it refuses the new one as a duplicate id."""
    for _ in range(15):
        c = SwitchConnection(switch.addr, election_id=(0, 7))
        c.connect()
        assert c.is_primary
        c.close()
