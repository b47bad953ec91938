"""A NOS's in-band frames (PacketOuts: BGP, BFD, ARP) join the control queue, ahead of the
data a congested port holds, once the bgp controller has written control_priority; a switch
without priority queues gets no entry (its plan maps no feedback either)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from cellfabric.nos.base_controller import control_priority
from controlplane.connection import SwitchConnection
from controlplane.fabric_plan import CONTROL_PRIORITY, CONTROL_QUEUES, CPU_PORT, plan_fabric
from netlab.targets import compile_p4
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.p4runtime import serve
from topologies.catalog import resolve_topology

ROOT = Path(__file__).resolve().parents[2]
PORT = 1


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path_factory.mktemp("cp"), "embedded")


def bfd_frame() -> bytes:
    return bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
                 / IP(src="172.16.0.0", dst="172.16.0.1", ttl=255)
                 / UDP(sport=49152, dport=3784) / bytes(24))


def queued_by_priority(build: tuple[Path, Path], entries: list) -> tuple[int, int]:
    """(priority 0, control priority) depth of PORT after 4 PacketOuts to it, with each of
    the port's queues paced at 1 packet/s and the clock stopped: nothing but the first
    leaves."""
    json_path, p4info_path = build
    dp = DataPlane(device_id=1, cpu_port=CPU_PORT, priorities=CONTROL_QUEUES,
                   clock=lambda: 0)
    dp.tx = lambda _port, _frame: None
    handle = serve(dp, "127.0.0.1:0", 1)
    try:
        with SwitchConnection(f"127.0.0.1:{handle.port}", 1, (0, 1),
                              reconnect=False) as conn:
            conn.set_pipeline(p4info_path, json_path)
            for entry in entries:
                conn.insert(entry)
            dp.set_queue_rate(1, PORT)
            for _ in range(4):
                conn.packet_out(bfd_frame(), egress_port=PORT, _pad=0)
            # packet-outs are handed to the data plane on the stream's thread
            for _ in range(200):
                with dp.lock:
                    depths = (dp.tm.depth(PORT, 0), dp.tm.depth(PORT, CONTROL_PRIORITY))
                if sum(depths) >= 3:
                    break
                time.sleep(0.01)
            return depths
    finally:
        handle.stop()


def test_packet_outs_ride_the_control_queue(build) -> None:
    plan = plan_fabric(resolve_topology("leaf-spine"))["s1"]
    entries = control_priority(plan)
    assert len(entries) == 1
    low, high = queued_by_priority(build, entries)
    assert (low, high) == (0, 3)


def test_without_the_entry_they_queue_with_data(build) -> None:
    low, high = queued_by_priority(build, [])
    assert (low, high) == (3, 0)


def test_no_entry_without_priority_queues() -> None:
    plan = plan_fabric(resolve_topology("leaf-spine"), priority_queues=False)["s1"]
    assert control_priority(plan) == []
