"""BGP and BFD in band: two fabric.p4 switches (p4sim, and real BMv2 when it is on PATH)
joined by one veth pair, each with FRR in its own namespace and a relay (cellfabric.nos.relay)
between its CPU port and its namespace's TAP. The session between them can only come up over
the data plane: punted by local_punt, relayed as a PacketIn (or, with the CPU port a veth of
its own and no --cpu-port, as a frame read off that veth), answered the same way back. Taking
the veth down breaks it: BFD detects it and the session drops. Waits are on FRR's reported
state."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cellfabric.nos.frr import FrrInstance, frr_available
from cellfabric.nos.frr_config import BfdTimers, routing_plan
from cellfabric.nos.namespace import SwitchNamespace, TapPort
from cellfabric.nos.relay import (
    RELAY_ROLE,
    PacketRelay,
    PortRelay,
    RelayPort,
    relay_role_config,
)
from controlplane.connection import SwitchConnection, wait_until
from netlab.hosts import NetLab, free_port, tcp_accepts
from netlab.targets import bmv2_available, compile_p4, switch_argv
from topologies.generators import generate
from topologies.model import router_mac

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
              pytest.mark.skipif(not frr_available(), reason="FRR not installed (make setup)")]
ROOT = Path(__file__).resolve().parents[2]
CPU_PORT = 510
WAIT_S = 90.0
# BFD slow enough that a loaded CI machine (Python switches and relays) never flaps a session
TIMERS = BfdTimers(tx_ms=1000, rx_ms=1000, multiplier=3)


def _until(what: str, check: Callable[[], bool]) -> None:
    assert wait_until(check, timeout=WAIT_S, interval=0.2), \
        f"not reached within {WAIT_S:.0f} s: {what}"


@pytest.fixture(params=[("embedded", "p4runtime"), ("embedded", "cpu-veth"),
                        ("bmv2", "p4runtime"), ("bmv2", "cpu-veth")],
                ids=lambda p: "-".join(p))
def two_switches(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict]:
    target, punt = request.param
    if target == "bmv2" and not bmv2_available():
        pytest.skip("real BMv2 not on PATH (source ../shared/toolchains/activate.sh)")
    json_path, p4info = compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path / "build",
                                   target=target)
    topo = generate("leaf-spine:leaves=1,spines=1,hosts=1")
    plan = routing_plan(topo)
    (link,) = [lk for lk in topo.links if lk.b in topo.switches]
    run_id = f"cfi{os.getpid() % 100000}"
    conns: list[SwitchConnection] = []
    relays: list[PacketRelay] = []
    frrs: dict[str, FrrInstance] = {}
    namespaces: list[SwitchNamespace] = []
    with NetLab(prefix="cfb") as lab:
        veth = dict(zip((link.a, link.b), lab.veth("a", "b"), strict=True))
        try:
            for name, routing in plan.items():
                grpc_port = free_port()
                port = routing.sessions[0].port
                ports = {port: veth[name]}
                cpu_port: int | None = CPU_PORT
                if punt == "cpu-veth":  # the CPU port is an interface: no --cpu-port
                    cpu_end, relay_end = lab.veth(f"{name}c", f"{name}r", mtu=9000)
                    ports[CPU_PORT], cpu_port = cpu_end, None
                lab.popen(None, switch_argv(target, ports, f"127.0.0.1:{grpc_port}",
                                            cpu_port=cpu_port, json=json_path,
                                            thrift_port=free_port()),
                          name=name, log=tmp_path / f"{name}.log")
                _until(f"{name} serves P4Runtime", lambda p=grpc_port: tcp_accepts(p))
                # the pipeline, pushed in the default role as the controller would
                ctl = SwitchConnection(f"127.0.0.1:{grpc_port}", name=name, reconnect=False)
                conns.append(ctl.connect())
                ctl.set_pipeline(p4info, json_path)
                if target == "bmv2":  # PI has one role: only its primary gets PacketIns
                    relay_conn = ctl
                else:
                    relay_conn = SwitchConnection(f"127.0.0.1:{grpc_port}", name=name,
                                                  reconnect=False, role=RELAY_ROLE,
                                                  role_config=relay_role_config())
                    conns.append(relay_conn.connect())
                mac = router_mac(topo.switches[name].device_id)
                taps = [TapPort(s.port, s.interface, f"{s.local_ip}/31", mac)
                        for s in routing.sessions]
                ns = SwitchNamespace(run_id, name, taps)
                ns.create()
                namespaces.append(ns)
                relay_ports = [RelayPort(s.port, s.interface, s.local_ip)
                               for s in routing.sessions]
                relay = (PortRelay(relay_conn, ns.name, relay_ports, relay_end,
                                   tmp_path / "relay" / name)
                         if punt == "cpu-veth" else PacketRelay(relay_conn, ns.name, relay_ports))
                relay.start()
                relays.append(relay)
                frrs[name] = FrrInstance(ns.name, routing, tmp_path / "frr" / name, TIMERS)
                frrs[name].start()
            yield {"lab": lab, "veth": veth, "frrs": frrs, "plan": plan, "relays": relays,
                   "link": link}
        finally:
            for inst in frrs.values():
                inst.stop()
            for relay in relays:
                relay.stop()
            for conn in conns:
                conn.close()
            for ns in namespaces:
                ns.remove()


def test_bgp_session_over_the_data_plane_breaks_with_the_link(two_switches) -> None:
    frrs, plan, link = two_switches["frrs"], two_switches["plan"], two_switches["link"]
    a, b = link.a, link.b
    a_peer = plan[a].sessions[0].peer_ip
    b_peer = plan[b].sessions[0].peer_ip
    _until(f"{a} established with {b}", lambda: frrs[a].established_peers() == {a_peer})
    _until(f"{b} established with {a}", lambda: frrs[b].established_peers() == {b_peer})
    _until("BFD up on both ends", lambda: frrs[a].bfd_peers_up() == {a_peer}
           and frrs[b].bfd_peers_up() == {b_peer})
    # the leaf's host prefix crossed the session
    _until(f"{b} learned {a}'s host", lambda: "10.0.1.1/32" in frrs[b].bgp_routes())
    relays = two_switches["relays"]
    assert all(r.to_tap and r.from_tap for r in relays)  # both ways, through the switch
    assert all(r.unknown_port == 0 and r.malformed == 0 for r in relays)

    two_switches["lab"].set_link(two_switches["veth"][a], up=False)
    _until(f"BFD on {b} detects the link down", lambda: frrs[b].bfd_peers_up() == set())
    _until(f"{b} drops the session", lambda: frrs[b].established_peers() == set())
    _until(f"{b} withdraws {a}'s host", lambda: "10.0.1.1/32" not in frrs[b].bgp_routes())
