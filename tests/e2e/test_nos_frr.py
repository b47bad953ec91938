"""FRR per switch namespace (cellfabric.nos): real zebra, bfdd and bgpd, one instance per
switch of a leaf-spine fabric, their TAPs joined pairwise by a wire in this test (no data plane:
tests/e2e/test_nos_inband.py carries the same sessions over fabric.p4). Sessions come up on
every link, leaves learn each other's hosts over both spines, and a cut wire is detected by
BFD and its paths withdrawn. Every wait is on a state FRR reports, with a generous bound."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cellfabric.nos.frr import FrrInstance, frr_available
from cellfabric.nos.frr_config import BfdTimers, port_interface, routing_plan
from cellfabric.nos.namespace import SwitchNamespace, TapPort, open_taps, run_namespaces
from controlplane.connection import wait_until
from topologies.generators import generate
from topologies.model import Topology, router_mac

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
              pytest.mark.skipif(not frr_available(), reason="FRR not installed (make setup)")]
WAIT_S = 90.0
# BFD slow enough that a loaded CI machine (the wire is a Python thread) never flaps a session
TIMERS = BfdTimers(tx_ms=1000, rx_ms=1000, multiplier=3)


class Wire:
    """Copies frames between the two TAPs of every fabric link; ``cut`` stops one link."""

    def __init__(self, topo: Topology, fds: dict[str, dict[str, int]]) -> None:
        self.peer: dict[int, int] = {}
        self.link_of: dict[int, str] = {}
        self.cut_links: set[str] = set()
        for lk in topo.links:
            if lk.b in topo.switches:
                a = fds[lk.a][port_interface(lk.a_port)]
                b = fds[lk.b][port_interface(lk.b_port)]
                self.peer[a], self.peer[b] = b, a
                self.link_of[a] = self.link_of[b] = lk.name
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select(list(self.peer), [], [], 0.2)
            for fd in ready:
                frame = os.read(fd, 65536)
                if self.link_of[fd] not in self.cut_links:
                    os.write(self.peer[fd], frame)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _until(what: str, check: Callable[[], bool]) -> None:
    assert wait_until(check, timeout=WAIT_S, interval=0.2), \
        f"not reached within {WAIT_S:.0f} s: {what}"


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[Topology, dict[str, FrrInstance], Wire, str]]:
    topo = generate("leaf-spine:leaves=2,spines=2,hosts=2")
    plan = routing_plan(topo)
    run_id = f"cft{os.getpid() % 100000}"
    namespaces: list[SwitchNamespace] = []
    frrs: dict[str, FrrInstance] = {}
    fds: dict[str, dict[str, int]] = {}
    wire = None
    try:
        for name, routing in plan.items():
            mac = router_mac(topo.switches[name].device_id)
            ports = [TapPort(s.port, s.interface, f"{s.local_ip}/31", mac)
                     for s in routing.sessions]
            ns = SwitchNamespace(run_id, name, ports)
            ns.create()
            namespaces.append(ns)
            fds[name] = open_taps(ns.name, [p.ifname for p in ports])
        wire = Wire(topo, fds)
        for name, routing in plan.items():
            frrs[name] = FrrInstance(f"{run_id}-{name}", routing, tmp_path / name, TIMERS)
            frrs[name].start()
        yield topo, frrs, wire, run_id
    finally:
        if wire is not None:
            wire.close()
        for inst in frrs.values():
            inst.stop()
        for ports in fds.values():
            for fd in ports.values():
                os.close(fd)
        for ns in namespaces:
            ns.remove()


def test_sessions_routes_ecmp_and_bfd_detects_a_cut(fabric) -> None:
    topo, frrs, wire, run_id = fabric
    plan = routing_plan(topo)
    for name, inst in frrs.items():
        want = {s.peer_ip for s in plan[name].sessions}
        _until(f"{name} established with {want}", lambda i=inst, w=want:
               i.established_peers() == w)
    remote = {"l1": ("10.0.2.1/32", "10.0.2.2/32"), "l2": ("10.0.1.1/32", "10.0.1.2/32")}
    for leaf, prefixes in remote.items():
        _until(f"{leaf} has both spines for {prefixes}", lambda leaf=leaf, p=prefixes:
               all(frrs[leaf].bgp_routes().get(x) == 2 for x in p))
        kernel = subprocess.run(["ip", "-n", f"{run_id}-{leaf}", "route", "show",
                                 prefixes[0]], capture_output=True, text=True).stdout
        assert kernel.count("nexthop via 172.16.") == 2   # zebra installed both next hops
    _until("BFD up on every session of l1", lambda: frrs["l1"].bfd_peers_up()
           == {s.peer_ip for s in plan["l1"].sessions})

    wire.cut_links.add("l1-s1")
    s1_ip = next(s.peer_ip for s in plan["l1"].sessions if s.peer == "s1")
    _until("BFD on l1 reports s1 down", lambda: s1_ip not in frrs["l1"].bfd_peers_up())
    _until("l1 drops the session to s1", lambda: s1_ip not in frrs["l1"].established_peers())
    _until("l2 reaches l1's hosts over s2 only", lambda:
           frrs["l2"].bgp_routes().get("10.0.1.1/32") == 1)
    assert frrs["l1"].bgp_routes().get("10.0.2.1/32") == 1
    # the other link of l1 never went down
    s2_ip = next(s.peer_ip for s in plan["l1"].sessions if s.peer == "s2")
    assert s2_ip in frrs["l1"].bfd_peers_up()
    assert run_namespaces(run_id) == sorted(f"{run_id}-{n}" for n in topo.switches)


def test_teardown_leaves_nothing(tmp_path: Path) -> None:
    topo = generate("leaf-spine:leaves=1,spines=1,hosts=1")
    plan = routing_plan(topo)
    run_id = f"cfz{os.getpid() % 100000}"
    ns = SwitchNamespace(run_id, "l1", [TapPort(1, "port1", "172.16.0.0/31", "02:fa:00:00:00:02")])
    ns.create()
    inst = FrrInstance(ns.name, plan["l1"], tmp_path / "l1")
    try:
        inst.start()
        pids = [p.pid for p in inst.procs.values()]
        assert len(pids) == 3
    finally:
        inst.stop()
        ns.remove()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie_or_gone(pid)
    assert run_namespaces(run_id) == []


def _zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_killing_a_spines_bgpd_affects_only_its_paths_and_restart_restores(fabric) -> None:
    _topo, frrs, _wire, _run_id = fabric
    both = ("10.0.2.1/32", "10.0.1.1/32")
    _until("both leaves have both spines", lambda: frrs["l1"].bgp_routes().get(both[0]) == 2
           and frrs["l2"].bgp_routes().get(both[1]) == 2)
    frrs["s1"].stop_daemon("bgpd", signal.SIGKILL)
    # the leaves lose the paths through s1 only: every remote host stays reachable via s2
    _until("l1 down to one path", lambda: frrs["l1"].bgp_routes().get(both[0]) == 1)
    _until("l2 down to one path", lambda: frrs["l2"].bgp_routes().get(both[1]) == 1)
    assert set(frrs["l1"].bgp_routes()) >= {"10.0.2.1/32", "10.0.2.2/32"}
    assert frrs["s2"].bgp_routes().get("10.0.1.1/32") == 1  # s2 never depended on s1
    frrs["s1"].start_daemon("bgpd")
    _until("l1 back to both spines", lambda: frrs["l1"].bgp_routes().get(both[0]) == 2)
    _until("l2 back to both spines", lambda: frrs["l2"].bgp_routes().get(both[1]) == 2)
