"""Packets follow what the route agent wrote: fabric.p4 on p4sim's data plane in process, its
P4Runtime server on loopback, the agent following a namespace's routes over P4Runtime."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from cellfabric.nos.route_agent import RouteAgent
from controlplane.connection import SwitchConnection, wait_until
from controlplane.entities import TableEntry
from controlplane.fabric_plan import T_MY_STATION
from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config
from netlab.targets import compile_p4
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.p4runtime import serve

sys.path.insert(0, str(Path(__file__).parent / "nos_fixtures"))
from route_lab import needs_root, route_lab

pytestmark = needs_root
ROOT = Path(__file__).resolve().parents[2]
ROUTER_MAC = "02:00:00:00:00:01"
IN_PORT = 9  # no route leaves by it


class InProcessSwitch:
    def __init__(self, json_path: Path, p4info_path: Path) -> None:
        self.dp = DataPlane(device_id=1, cpu_port=510)
        self.out: list[int] = []  # egress port per frame sent
        self.dp.tx = lambda port, _frame: self.out.append(port)
        self.handle = serve(self.dp, "127.0.0.1:0", 1)
        self.addr = f"127.0.0.1:{self.handle.port}"
        self.ctl = SwitchConnection(self.addr, 1, (0, 1), reconnect=False).connect()
        self.ctl.set_pipeline(p4info_path, json_path)
        self.ctl.insert(TableEntry(table=T_MY_STATION, action="NoAction",
                                   match={"hdr.ethernet.dst_addr": ROUTER_MAC}))

    def send(self, dst: str, flows: int = 32) -> set[int]:
        """Ports the switch sends ``flows`` UDP flows to ``dst`` out of."""
        self.out.clear()
        for sport in range(1000, 1000 + flows):
            frame = bytes(Ether(dst=ROUTER_MAC, src="02:00:00:00:00:99")
                          / IP(src="10.200.0.1", dst=dst, ttl=64)
                          / UDP(sport=sport, dport=5000) / bytes(32))
            self.dp.receive(IN_PORT, frame)
        self.dp.drain()
        return set(self.out)

    def close(self) -> None:
        self.ctl.close()
        self.handle.stop()


@pytest.fixture
def rig(tmp_path: Path):
    json_path, p4info_path = compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path, "embedded")
    with route_lab() as lab:
        sw = InProcessSwitch(json_path, p4info_path)
        conn = SwitchConnection(sw.addr, 1, (0, 1), reconnect=False, role=ROUTE_AGENT_ROLE,
                                role_config=route_agent_role_config()).connect()
        try:
            yield lab, sw, conn
        finally:
            conn.close()
            sw.close()


def until(check: Callable[[], bool]) -> bool:
    # gated on what the switch does; the bound only keeps a broken agent from hanging the test
    return wait_until(check, timeout=30.0, interval=0.05)


def test_packets_follow_the_agents_routes_as_they_change(rig) -> None:
    lab, sw, conn = rig
    lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 3))
    assert sw.send("10.1.2.3") == set()  # nothing programmed yet: dropped
    agent = RouteAgent(lab.ns, "l1", lab.port_of_ifname, conn, spray=False,
                       log=lambda _line: None)
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert until(lambda: sw.send("10.1.2.3") == {1, 3})  # flows hashed over both
        lab.ip("route", "replace", "10.1.0.0/16", "proto", "bgp", *lab.via(3))
        assert until(lambda: sw.send("10.1.2.3") == {3})
        lab.ip("route", "add", "10.1.5.0/24", "proto", "bgp", *lab.via(2))
        assert until(lambda: sw.send("10.1.5.9") == {2})  # the longer prefix wins
        assert sw.send("10.1.6.9") == {3}
        lab.ip("route", "del", "10.1.0.0/16")
        assert until(lambda: sw.send("10.1.2.3") == set())
        assert sw.send("10.1.5.9") == {2}
    finally:
        stop.set()
        thread.join(timeout=30)
    assert agent.errors == []
