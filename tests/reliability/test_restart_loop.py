"""kill -9 / restart / re-sync loop under a running workload.

A `p4sim switch` running fabric.p4 as a leaf between two end hosts (`cellfabric host send` and
`recv` in their own namespaces, RoCEv2 cells with SACK/retransmission) is SIGKILLed several
times while messages flow and while the controller is writing. Each time it comes back empty
on the same address; the controller's connection notices, pushes the pipeline again, replays
its intended state and verifies it by reading back.

Checked: every message arrives, complete and in order (no message lost); after every restart
the switch holds exactly the intended state — the routes deleted before the kill stay deleted
(no stale entry survives), the ones written stay; the batch in flight at the kill is
reconciled; nothing leaks (NetLab removes namespaces, veths and processes by name and PID).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from fuzzlib import ROUTER_MAC
from targets import SwitchProcess, assert_nothing_left, compile_program, toolchain_env

from controlplane.connection import SwitchConnection
from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    GroupMember,
    TableEntry,
)
from controlplane.errors import ControlPlaneError
from hosts.cells import message_bytes, message_crc
from netlab.hosts import NetLab, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veths and namespaces need root")
ROOT = Path(__file__).resolve().parents[2]

PY = sys.executable
KILLS = 3
MESSAGES, SIZE = 200, 8192  # 1,600 cells at 150 cells/s: traffic spans every kill
MACS = {"send": "02:00:00:00:01:01", "recv": "02:00:00:00:02:01"}
ING, EGR = "MyIngress", "MyEgress"


def two_way_leaf() -> list:
    """10.0.1.0/24 (the sender) out of port 0, 10.0.2.0/24 (the receiver) out of port 1."""
    ents = [TableEntry(f"{ING}.forwarding.my_station",
                       {"hdr.ethernet.dst_addr": ROUTER_MAC.hex(":")}, "NoAction"),
            TableEntry(f"{ING}.spray.cell_length", {"meta.cell_payload_len": 1024},
                       f"{ING}.spray.cell_length_ok")]
    for port, net, mac in ((0, "10.0.1.0/24", MACS["send"]), (1, "10.0.2.0/24", MACS["recv"])):
        gid = port + 1
        ents += [
            TableEntry(f"{ING}.forwarding.ipv4_lpm", {"hdr.ipv4.dst_addr": net},
                       f"{ING}.forwarding.set_next_group", {"group_id": gid}),
            TableEntry(f"{ING}.spray.group_mode", {"meta.group_id": gid},
                       f"{ING}.spray.set_group_mode", {"mode": 1, "salt": 0x10000}),
            ActionProfileMember(f"{ING}.spray.group_selector", gid,
                                f"{ING}.spray.set_egress_port", {"port": port}),
            ActionProfileGroup(f"{ING}.spray.group_selector", gid, [GroupMember(gid, 1)]),
            TableEntry(f"{ING}.spray.group_select", {"meta.group_id": gid}, group=gid),
            TableEntry(f"{EGR}.rewrite.egress_rewrite", {"standard_metadata.egress_port": port},
                       f"{EGR}.rewrite.set_port_macs",
                       {"src_mac": ROUTER_MAC.hex(":"), "dst_mac": mac}),
            TableEntry(f"{EGR}.ecn.ecn_profile", {"standard_metadata.egress_port": port},
                       f"{EGR}.ecn.set_ecn_profile", {"kmin": 50, "kmax": 200, "step": 873}),
        ]
    return ents


def churn_route(i: int) -> TableEntry:
    """A route the controller adds and removes as the run goes (never used by traffic)."""
    return TableEntry(f"{ING}.forwarding.ipv4_lpm", {"hdr.ipv4.dst_addr": f"10.9.{i}.0/24"},
                      f"{ING}.forwarding.set_next_group", {"group_id": 1})


def _route(entry: TableEntry) -> tuple[int, int]:
    m = entry.match["hdr.ipv4.dst_addr"]
    return m.value, m.prefix_len


def routes_on_switch(conn: SwitchConnection) -> set[tuple[int, int]]:
    return {_route(e) for e in conn.read(TableEntry(f"{ING}.forwarding.ipv4_lpm"))}


def routes_intended(conn: SwitchConnection) -> set[tuple[int, int]]:
    entries = [conn.codec.from_proto(u.entity) for u in conn.intended.replay_updates()
               if u.entity.WhichOneof("entity") == "table_entry"]
    return {_route(e) for e in entries
            if e.table == f"{ING}.forwarding.ipv4_lpm" and not e.is_default}


def churn_key(i: int) -> tuple[int, int]:
    return 0x0A090000 | i << 8, 24


def batch_in_flight(conn: SwitchConnection, i: int, outcome: list[str]) -> threading.Thread:
    """A big batch of inserts racing the kill: its outcome is for the read-back to settle."""
    def run() -> None:
        try:
            conn.insert(*[TableEntry(f"{ING}.forwarding.ipv4_lpm",
                                     {"hdr.ipv4.dst_addr": f"10.{100 + i}.{k}.0/24"},
                                     f"{ING}.forwarding.set_next_group", {"group_id": 1})
                          for k in range(200)])
            outcome.append("ok")
        except ControlPlaneError as err:
            outcome.append(type(err).__name__)
        except Exception as err:  # anything else is a client bug: the test fails on it
            outcome.append(f"unexpected {type(err).__name__}: {err}")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture(scope="module", params=["embedded", "bmv2"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(target, its environment, fabric.p4 compiled by its own compiler)."""
    env = None
    if request.param == "bmv2":
        env = toolchain_env()
        if env is None:
            pytest.skip("real BMv2: no ../shared/toolchains beside the repository")
    program = compile_program(request.param, tmp_path_factory.mktemp("restart-build"), env,
                              src=ROOT / "p4src" / "fabric.p4", includes=(ROOT / "p4src",))
    return request.param, env, program


def start_hosts(lab: NetLab, ns: dict[str, str], ports: dict[str, str], tmp: Path):
    recv = lab.popen(ns["recv"], [PY, "-m", "hosts.cli", "recv", "--iface", ports["recv"],
                                  "--expect-messages", str(MESSAGES), "--linger", "1.0",
                                  "--duration", "120", "--metrics", str(tmp / "recv.json")],
                     name="receiver", log=tmp / "recv.log")
    time.sleep(1.0)  # the receiver's socket must be open before the first cell
    send = lab.popen(ns["send"], [PY, "-m", "hosts.cli", "send", "--iface", ports["send"],
                                  "--dst-mac", ROUTER_MAC.hex(":"), "--src-ip", "10.0.1.1",
                                  "--dst-ip", "10.0.2.1", "--msg-size", str(SIZE),
                                  "--count", str(MESSAGES), "--rate", "150pps",
                                  "--duration", "100", "--drain", "20", "--rto", "0.1",
                                  "--metrics", str(tmp / "send.json")],
                     name="sender", log=tmp / "send.log")
    return send, recv


def test_kill_restart_resync_loop_under_traffic(target, tmp_path: Path) -> None:
    name, env, program = target
    base = two_way_leaf()
    with NetLab(prefix="rl") as lab:
        ns = {role: lab.netns(role[0]) for role in MACS}
        ports, sw_ports = {}, {}
        for num, role in enumerate(MACS):
            s_end, h_end = lab.veth(f"s{num}", f"h{num}", None, ns[role])
            lab.run(ns[role], ["ip", "link", "set", h_end, "address", MACS[role]])
            ports[role], sw_ports[num] = h_end, s_end
        sw = SwitchProcess(name, env, tmp_path / "switch.log", interfaces=sw_ports)
        with sw, SwitchConnection(sw.addr, 1, timeout=20) as conn:
            conn.set_pipeline(*program)
            conn.insert(*base)
            send, recv = start_hosts(lab, ns, ports, tmp_path)
            base_routes = routes_on_switch(conn)
            in_flight: list[str] = []
            sending_at_kill: list[bool] = []
            for i in range(1, KILLS + 1):
                time.sleep(1.5)  # traffic flows
                conn.insert(churn_route(i))
                if i > 1:
                    conn.delete(churn_route(i - 1))
                racer = batch_in_flight(conn, i, in_flight)
                time.sleep(0.05)
                sending_at_kill.append(send.alive())
                sw.kill()  # SIGKILL: no goodbye, nothing saved
                sw.start()
                racer.join(timeout=60)
                assert conn.wait_resync(i, timeout=60), f"no re-sync after kill {i}"
                on_switch = routes_on_switch(conn)
                assert conn.last_verification is not None and conn.last_verification.ok
                assert base_routes <= on_switch
                assert on_switch == routes_intended(conn)  # nothing stale, nothing missing
                assert churn_key(i) in on_switch
                assert churn_key(i - 1) not in on_switch, f"deleted route back after kill {i}"
            assert sw.proc is not None
            switch_pid = sw.proc.pid
            assert wait_until(lambda: not send.alive(), timeout=120), "sender did not finish"
            assert wait_until(lambda: not recv.alive(), timeout=30), "receiver did not finish"
            resyncs = conn.resync_count
        assert sw.proc is None
    assert_nothing_left(lab, switch_pid)
    assert sending_at_kill == [True] * KILLS  # every kill hit a running workload
    assert len(in_flight) == KILLS and not [o for o in in_flight if o.startswith("unexpected")]
    sent = json.loads((tmp_path / "send.json").read_text())
    assert sent["cells"]["retransmits"] > 0  # cells were lost to the kills, and recovered
    flows = json.loads((tmp_path / "recv.json").read_text())["flows"]
    assert sent["messages_completed"] == MESSAGES
    assert len(flows) == 1
    log = flows[0]["message_log"]
    assert [m["index"] for m in log] == list(range(MESSAGES))  # none lost, in order
    assert [m["crc32"] for m in log] == [message_crc(message_bytes(i, SIZE))
                                         for i in range(MESSAGES)]
    print(f"restart loop on {name}: {KILLS} kills, {resyncs} re-syncs, {MESSAGES} messages delivered; "
          f"batches racing the kills: {in_flight}; sender retransmissions "
          f"{sent['cells']['retransmits']} of {sent['cells']['cells_sent']} cells")
