"""`fabricctl` round trips and errors against a real `p4sim switch` process running the
control-plane test program (cp_fixtures/cp_test.p4)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from controlplane.cli import main
from controlplane.p4info import load_p4info
from controlplane.p4rt import (
    ActionProfileGroup,
    ActionProfileMember,
    GroupMember,
    SwitchConnection,
)

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch, compile_test_program


@dataclass
class Target:
    server: P4simSwitch
    p4info: Path
    json: Path

    @property
    def addr(self) -> str:
        return self.server.addr


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("cli")
    json_path, p4info_path = compile_test_program(work / "build")
    with P4simSwitch(log=work / "switch.log") as server:
        yield Target(server, p4info_path, json_path)


@pytest.fixture
def sw(target: Target):
    """The switch with a freshly pushed pipeline (so every test starts empty)."""
    rc = main(["--switch", target.addr, "pipeline", "push", str(target.p4info),
               str(target.json)])
    assert rc == 0
    return target


def ctl(target: Target, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["--switch", f"{target.addr},0", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def dump(target: Target, capsys, table: str = "ipv4_lpm") -> list[dict]:
    rc, out, err = ctl(target, capsys, "--json", "table", "dump", table)
    assert rc == 0, err
    return json.loads(out)


ROUTE = ["hdr.ipv4.dstAddr=10.1.0.0/16", "action=set_nhop", "dmac=00:00:00:00:00:0a", "port=3"]


def test_pipeline_push_and_show(sw: Target, capsys) -> None:
    rc, out, _ = ctl(sw, capsys, "--json", "pipeline", "show")
    assert rc == 0
    shown = json.loads(out)
    expected = load_p4info(sw.p4info)
    assert shown["loaded"] is True
    assert shown["tables"] == len(expected.tables)
    assert shown["actions"] == len(expected.actions)
    assert shown["device_config_bytes"] > 0


def test_tables_lists_every_table_with_entry_counts(sw: Target, capsys) -> None:
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    rc, out, _ = ctl(sw, capsys, "--json", "tables")
    assert rc == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {t.preamble.name for t in load_p4info(sw.p4info).tables}
    assert rows["MyIngress.ipv4_lpm"]["entries"] == 1
    assert rows["MyIngress.acl"]["entries"] == 0
    rc, out, _ = ctl(sw, capsys, "tables")
    assert "MyIngress.ipv4_lpm" in out and "hdr.ipv4.dstAddr:lpm" in out


def test_table_show_describes_keys_and_actions(sw: Target, capsys) -> None:
    rc, out, _ = ctl(sw, capsys, "--json", "table", "show", "ipv4_lpm")
    assert rc == 0
    info = json.loads(out)
    assert info["match_fields"] == [{"name": "hdr.ipv4.dstAddr", "match_type": "lpm",
                                     "bitwidth": 32}]
    nhop = next(a for a in info["actions"] if a["name"] == "MyIngress.set_nhop")
    assert nhop["params"] == [{"name": "dmac", "bitwidth": 48}, {"name": "port", "bitwidth": 9}]
    rc, out, _ = ctl(sw, capsys, "table", "show", "MyIngress.ecmp_group")
    assert "action selector MyIngress.ecmp_selector" in out


def test_table_add_dump_modify_delete_round_trip(sw: Target, capsys) -> None:
    rc, out, _ = ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)
    assert rc == 0 and out.startswith("added: table MyIngress.ipv4_lpm")
    assert dump(sw, capsys) == [{
        "table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": "10.1.0.0/16"},
        "action": "MyIngress.set_nhop", "params": {"dmac": "00:00:00:00:00:0a", "port": "3"}}]
    rc, _, _ = ctl(sw, capsys, "table", "modify", "ipv4_lpm", "dstAddr=10.1.0.0/16",
                   "action=drop")
    assert rc == 0
    assert [e["action"] for e in dump(sw, capsys)] == ["MyIngress.drop"]
    rc, out, _ = ctl(sw, capsys, "table", "dump", "ipv4_lpm")
    assert "10.1.0.0/16" in out and "MyIngress.drop()" in out and "1 entries" in out
    assert ctl(sw, capsys, "table", "delete", "ipv4_lpm", "dstAddr=10.1.0.0/16")[0] == 0
    assert dump(sw, capsys) == []


def test_ternary_range_optional_entry_with_priority(sw: Target, capsys) -> None:
    rc, _, err = ctl(sw, capsys, "table", "add", "acl", "srcAddr=10.0.0.0&&&255.0.0.0",
                     "dstPort=80..443", "ingress_port=*", "protocol=6", "action=drop",
                     "priority=10")
    assert rc == 0, err
    (entry,) = dump(sw, capsys, "acl")
    assert entry["priority"] == 10
    assert entry["match"] == {"hdr.ipv4.srcAddr": "10.0.0.0&&&255.0.0.0",
                              "hdr.l4.dstPort": "80..443", "hdr.ipv4.protocol": "6"}


BAD_INPUTS = [
    (["table", "add", "ipv4_lpx", *ROUTE], "unknown table 'ipv4_lpx'"),
    (["table", "add", "ipv4_lpm", "hdr.ipv4.dstAdr=10.0.0.0/8", "action=drop"],
     "unknown match field 'hdr.ipv4.dstAdr' in table MyIngress.ipv4_lpm"),
    (["table", "add", "ipv4_lpm", "dstAddr=10.0.0.0/8", "action=set_nhop", "dmac=0", "port=512"],
     "param port: value 512 does not fit in 9 bits"),
    (["table", "add", "ipv4_lpm", "dstAddr=10.0.0.0/8", "action=set_nhop", "port=1"],
     "missing param 'dmac'"),
    (["table", "add", "ipv4_lpm", "dstAddr=10.0.0.0/8", "action=set_smac", "smac=1"],
     "not an action of table MyIngress.ipv4_lpm"),
    (["table", "add", "acl", "protocol=6", "action=drop"], "needs priority > 0"),
    (["table", "add", "ipv4_lpm", "dstAddr=300.0.0.0/8", "action=drop"],
     "cannot parse value '300.0.0.0'"),
    (["registers", "write", "queue_occ", "600", "1"], "index 600 out of range 0..511"),
    (["registers", "write", "queue_occ", "1", str(1 << 32)], "does not fit in 32 bits"),
    (["table", "frobnicate", "ipv4_lpm"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("args", "needle"), BAD_INPUTS, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(BAD_INPUTS)])
def test_bad_input_one_line_exit_2_switch_unchanged(sw: Target, capsys, args: list[str],
                                                    needle: str) -> None:
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    before = dump(sw, capsys)
    rc, out, err = ctl(sw, capsys, *args)
    assert rc == 2
    assert out == ""
    assert err.startswith("fabricctl: error: ") and err.count("\n") == 1
    assert needle in err
    assert dump(sw, capsys) == before


def test_duplicate_insert_names_the_entry_and_the_code(sw: Target, capsys) -> None:
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    rc, _, err = ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)
    assert rc == 2
    assert "ALREADY_EXISTS" in err and "dstAddr=10.1.0.0/16" in err and err.count("\n") == 1


def test_unreachable_switch_and_not_primary(sw: Target, capsys, tmp_path: Path) -> None:
    rc = main(["--switch", "127.0.0.1:1", "--timeout", "0.5", "tables"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot connect to switch at 127.0.0.1:1" in err
    with SwitchConnection(sw.addr, election_id=(0, 100)):  # another controller is primary
        rc, _, err = ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)
        assert rc == 2 and "not primary" in err and err.count("\n") == 1
        assert "the primary's election id is (0, 100)" in err
        assert "pass --election-id 0,101 or higher to take over" in err
        assert ctl(sw, capsys, "table", "dump", "ipv4_lpm")[0] == 0  # backups may read
    assert dump(sw, capsys) == []


def test_groups_show_members_and_watch_ports(sw: Target, capsys) -> None:
    with SwitchConnection(sw.addr) as conn:
        conn.insert(ActionProfileMember("ecmp_selector", 1, "set_nhop", {"dmac": 1, "port": 1}),
                    ActionProfileMember("ecmp_selector", 2, "set_nhop", {"dmac": 2, "port": 2}))
        conn.insert(ActionProfileGroup("ecmp_selector", 7, [GroupMember(1, 1, watch_port=1),
                                                            GroupMember(2, 1, watch_port=2)]))
    rc, out, _ = ctl(sw, capsys, "--json", "groups")
    assert rc == 0
    prof = json.loads(out)["MyIngress.ecmp_selector"]
    assert sorted(m["member_id"] for m in prof["members"]) == [1, 2]
    (group,) = prof["groups"]
    assert group["group_id"] == 7
    assert sorted((m["member_id"], m["watch_port"]) for m in group["members"]) == [(1, 1), (2, 2)]
    rc, out, _ = ctl(sw, capsys, "groups", "ecmp_selector")
    assert "1*1@1" in out and "MyIngress.set_nhop(dmac=" in out
    # Indirect table entries point at the group (or a member) by id.
    assert ctl(sw, capsys, "table", "add", "ecmp_group", "group_id=4", "group=7")[0] == 0
    assert ctl(sw, capsys, "table", "add", "ecmp_group", "group_id=5", "member=2")[0] == 0
    entries = {e["match"]["meta.group_id"]: e for e in dump(sw, capsys, "ecmp_group")}
    assert entries["4"]["group"] == 7 and entries["5"]["member"] == 2
    rc, _, err = ctl(sw, capsys, "table", "add", "ecmp_group", "group_id=6", "group=99")
    assert rc == 2 and "insert table MyIngress.ecmp_group entry group_id=6" in err


def test_counters_indirect_and_direct(sw: Target, capsys) -> None:
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    rc, out, _ = ctl(sw, capsys, "--json", "counters", "port_pkts")
    assert rc == 0
    rows = json.loads(out)["MyIngress.port_pkts"]
    assert len(rows) == 512 and all(r["packets"] == 0 for r in rows)
    rc, out, _ = ctl(sw, capsys, "--json", "counters", "lpm_hits")
    assert rc == 0
    assert json.loads(out)["MyIngress.lpm_hits"] == [
        {"match": {"hdr.ipv4.dstAddr": "10.1.0.0/16"}, "packets": 0, "bytes": 0}]
    rc, _, err = ctl(sw, capsys, "counters", "no_such_counter")
    assert rc == 2 and "unknown counter 'no_such_counter'" in err


def test_registers_without_any_channel_is_one_clear_line(sw: Target, capsys) -> None:
    # BMv2's PI (and p4sim, which follows it) answers UNIMPLEMENTED for P4Runtime register
    # access; with the admin channel unreachable too, fabricctl says so in one line, exit 2.
    rc, out, err = ctl(sw, capsys, "--admin", "127.0.0.1:1", "registers", "write",
                       "queue_occ", "5", "0x1234")
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1
    assert "UNIMPLEMENTED" in err and "127.0.0.1:1" in err


def test_registers_write_then_read(sw: Target, capsys) -> None:
    admin = ["--admin", sw.server.admin_addr]
    assert ctl(sw, capsys, *admin, "registers", "write", "queue_occ", "5", "0x1234")[0] == 0
    rc, out, _ = ctl(sw, capsys, *admin, "--json", "registers", "read", "queue_occ", "5")
    assert rc == 0 and json.loads(out) == [{"index": 5, "value": 0x1234}]


def test_mcast_add_show_modify_delete(sw: Target, capsys) -> None:
    assert ctl(sw, capsys, "mcast", "add", "5", "1", "2", "3:1")[0] == 0
    rc, out, _ = ctl(sw, capsys, "--json", "mcast")
    groups = [g for g in json.loads(out) if "multicast_group_id" in g]
    assert groups == [{"multicast_group_id": 5, "replicas": [
        {"port": 1, "instance": 0}, {"port": 2, "instance": 0}, {"port": 3, "instance": 1}]}]
    assert ctl(sw, capsys, "mcast", "modify", "5", "4")[0] == 0
    rc, out, _ = ctl(sw, capsys, "mcast")
    assert "multicast  5   4" in out
    assert ctl(sw, capsys, "mcast", "delete", "5")[0] == 0
    rc, out, _ = ctl(sw, capsys, "--json", "mcast")
    assert [g for g in json.loads(out) if "multicast_group_id" in g] == []
    rc, _, err = ctl(sw, capsys, "mcast", "delete", "5")
    assert rc == 2 and "NOT_FOUND" in err


def test_queues_over_the_admin_channel(sw: Target, capsys) -> None:
    admin = ["--admin", sw.server.admin_addr]
    rc, out, err = ctl(sw, capsys, *admin, "queues", "--port", "1", "--rate", "100",
                       "--depth", "16")
    assert rc == 0, err
    assert out.strip() == "queues of port 1: rate 100 pps, depth 16 packets"
    rc, out, _ = ctl(sw, capsys, *admin, "--json", "queues")
    assert rc == 0 and {"ports", "parser_errors", "pipeline_drops"} <= set(json.loads(out))
    rc, out, err = ctl(sw, capsys, *admin, "queues", "--rate", "-5")
    assert (rc, out) == (2, "") and err.count("\n") == 1
    assert "set_queue_rate -5" in err
    rc, _, err = ctl(sw, capsys, "--admin", "127.0.0.1:1", "queues")
    assert rc == 2 and "admin channel 127.0.0.1:1" in err and err.count("\n") == 1


def test_console_script_exit_status(sw: Target) -> None:
    exe = Path(sys.executable).with_name("fabricctl")
    proc = subprocess.run([str(exe), "--switch", sw.addr, "table", "add", "nope", "a=1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("fabricctl: error: unknown table 'nope'")
    assert "Traceback" not in proc.stderr


def test_p4runtime_shell_and_fabricctl_see_the_same_entries(sw: Target, capsys) -> None:
    import p4runtime_sh.shell as sh

    sh.setup(device_id=0, grpc_addr=sw.addr, election_id=(0, 2), verbose=False)
    try:
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.set_nhop")
        te.match["hdr.ipv4.dstAddr"] = "10.9.0.0/16"
        te.action["dmac"] = "00:00:00:00:00:09"
        te.action["port"] = "9"
        te.insert()
        # fabricctl (election id 0,1) is a backup now: it reads the shell's entry...
        assert dump(sw, capsys) == [{
            "table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": "10.9.0.0/16"},
            "action": "MyIngress.set_nhop", "params": {"dmac": "00:00:00:00:00:09",
                                                       "port": "9"}}]
    finally:
        sh.teardown()
    # ...and once the shell is gone it is primary and writes; the shell then reads both.
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    sh.setup(device_id=0, grpc_addr=sw.addr, election_id=(0, 2), verbose=False)
    try:
        seen = {(str(e.match["hdr.ipv4.dstAddr"]).strip(),
                 e.action["port"].value) for e in sh.TableEntry("MyIngress.ipv4_lpm").read()}
    finally:
        sh.teardown()
    assert len(seen) == 2
    assert {int.from_bytes(port, "big") for _, port in seen} == {3, 9}


def test_table_default_set_and_reset(sw: Target, capsys) -> None:
    rc, out, err = ctl(sw, capsys, "table", "default", "ipv4_lpm", "action=set_nhop",
                       "dmac=00:00:00:00:00:07", "port=7")
    assert rc == 0, err
    rc, out, _ = ctl(sw, capsys, "--json", "table", "show", "ipv4_lpm")
    assert json.loads(out)["default_action"] == {
        "action": "MyIngress.set_nhop", "params": {"dmac": "00:00:00:00:00:07", "port": "7"}}
    assert ctl(sw, capsys, "table", "default", "ipv4_lpm")[0] == 0  # back to the program's
    rc, out, _ = ctl(sw, capsys, "--json", "table", "show", "ipv4_lpm")
    assert json.loads(out)["default_action"]["action"] == "NoAction"
    rc, _, err = ctl(sw, capsys, "table", "default", "ipv4_lpm", "dstAddr=1.0.0.0/8",
                     "action=drop")
    assert rc == 2 and "the default entry has no match key" in err


def test_shell_opens_p4runtime_shell_on_the_switch(sw: Target, capsys) -> None:
    assert ctl(sw, capsys, "table", "add", "ipv4_lpm", *ROUTE)[0] == 0
    exe = Path(sys.executable).with_name("fabricctl")
    script = 'print("ENTRIES", len(list(TableEntry("MyIngress.ipv4_lpm").read())))\nexit\n'
    proc = subprocess.run([str(exe), "--switch", f"{sw.addr},0", "shell"], input=script,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "ENTRIES 1" in proc.stdout


def test_topology_names_a_switch(sw: Target, capsys, tmp_path: Path) -> None:
    topo = tmp_path / "running.yaml"
    topo.write_text(f"switches:\n  - {{name: l1, grpc: '{sw.addr}', device_id: 0, "
                    f"admin: '{sw.server.admin_addr}'}}\n")
    assert main(["--topology", str(topo), "--switch", "l1", "table", "add", "ipv4_lpm",
                 *ROUTE]) == 0
    capsys.readouterr()
    assert len(dump(sw, capsys)) == 1
    assert main(["--topology", str(topo), "--switch", "l1", "queues", "--rate", "50"]) == 0
    assert main(["--topology", str(topo), "--switch", "l9", "tables"]) == 2
    assert "no switch named 'l9' (known: l1)" in capsys.readouterr().err


def test_topology_file_without_addresses_uses_the_runner_ports() -> None:
    from controlplane.addresses import GRPC_BASE, THRIFT_BASE, topology_addresses
    from topologies.model import load_topology

    path = Path(__file__).parents[2] / "topologies" / "leaf-spine.yaml"
    topo = load_topology(path)
    addrs = topology_addresses(path)
    assert list(addrs) == list(topo.switches)
    for name, sw in topo.switches.items():
        assert addrs[name].device_id == sw.device_id
        assert addrs[name].grpc_addr == f"127.0.0.1:{GRPC_BASE + sw.device_id}"
        assert addrs[name].admin_addr == f"127.0.0.1:{THRIFT_BASE + sw.device_id}"


def test_topology_without_switch_runs_on_every_switch(sw: Target, capsys,
                                                      tmp_path: Path) -> None:
    with P4simSwitch(log=tmp_path / "second.log") as second:
        topo = tmp_path / "running.yaml"
        topo.write_text(f"switches:\n  - {{name: l1, grpc: '{sw.addr}', device_id: 0}}\n"
                        f"  - {{name: l2, grpc: '{second.addr}', device_id: 0}}\n")
        assert main(["--topology", str(topo), "pipeline", "push", str(sw.p4info),
                     str(sw.json)]) == 0
        assert main(["--topology", str(topo), "table", "add", "ipv4_lpm", *ROUTE]) == 0
        capsys.readouterr()
        assert main(["--topology", str(topo), "--json", "table", "dump", "ipv4_lpm"]) == 0
        dumped = json.loads(capsys.readouterr().out)
        assert set(dumped) == {"l1", "l2"}
        assert dumped["l1"] == dumped["l2"] and len(dumped["l1"]) == 1
        assert main(["--topology", str(topo), "table", "add", "ipv4_lpm", *ROUTE]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fabricctl: error: switch l1: Write failed: ALREADY_EXISTS")


def test_election_id_in_use_is_a_clear_error(sw: Target, capsys) -> None:
    with SwitchConnection(sw.addr, election_id=(0, 1)):
        rc, out, err = ctl(sw, capsys, "tables")
        assert (rc, out) == (2, "") and err.count("\n") == 1
        assert "INVALID_ARGUMENT" in err and "another client holds election id (0, 1)" in err
        rc, _, _ = ctl(sw, capsys, "--election-id", "0,2", "tables")
        assert rc == 0


def test_device_id_mismatch_names_the_served_device(target: Target, capsys,
                                                    tmp_path: Path) -> None:
    """The runner starts switch N as device N while fabricctl defaults to device 0: the error
    says so instead of PI's bare "Error when trying to assign device"."""
    with P4simSwitch(device_id=1, log=tmp_path / "dev1.log") as dev1:
        push = ["pipeline", "push", str(target.p4info), str(target.json)]
        rc = main(["--switch", dev1.addr, *push])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1
        assert f"switch at {dev1.addr} refused device id 0 (UNKNOWN: Error when trying to " \
               "assign device): it was started with another --device-id" in err
        assert main(["--switch", f"{dev1.addr},1", *push]) == 0
        capsys.readouterr()
        rc = main(["--switch", dev1.addr, "tables"])
        err = capsys.readouterr().err
        assert rc == 2 and err == (
            f"fabricctl: error: switch at {dev1.addr} has no pipeline on device id 0 but has "
            f"one on device id 1: pass --device-id 1 (or --switch {dev1.addr},1)\n")


def test_role_options_from_the_command_line() -> None:
    from controlplane.cli import UsageError, build_parser, role_options
    from controlplane.roles import role_config

    parse = build_parser().parse_args
    assert role_options(parse(["tables"])) == {"role": "", "role_config": None}
    opts = role_options(parse(["--role", "acl", "--role-entities", "MyIngress.acl, x", "tables"]))
    assert opts["role"] == "acl"
    assert opts["role_config"] == role_config(["MyIngress.acl", "x"], packet_replication=True,
                                              receives_packet_ins=True,
                                              can_send_packet_outs=True)
    assert role_options(parse(["--role", "ops", "tables"]))["role_config"] is None
    with pytest.raises(UsageError, match="--role-entities needs --role"):
        role_options(parse(["--role-entities", "x", "tables"]))
