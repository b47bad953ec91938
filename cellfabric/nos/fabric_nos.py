"""--routing bgp: a network OS on every switch of a run, and what it is measured by.

Per switch: a namespace with a TAP per fabric port (namespace), a relay between the switch's
CPU port and those TAPs under its own P4Runtime role (relay), FRR's zebra, bfdd and bgpd
configured from the topology (frr, frr_config), and the route agent that turns the
namespace's kernel routes into fabric.p4's routes and groups (cellfabric.nos.route_agent; the
controller writes the rest, cellfabric.nos.base_controller). A leaf's hosts are routes over
dummy interfaces named after their ports, so the agent finds them in the same table. The run
waits until every switch's P4 table forwards every host prefix (what the workload needs); each
injected failure is timed from injection to BFD's detection, to the last change of any
switch's BGP table (convergence), and to the agents' last P4 write (reprogramming).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellfabric.nos.frr import FrrError, FrrInstance
from cellfabric.nos.frr_config import BfdTimers, SwitchRouting, port_interface, routing_plan
from cellfabric.nos.frrlog import LogTail, bfd_changes, route_updates
from cellfabric.nos.namespace import HostPort, SwitchNamespace, TapPort, remove_run_namespaces
from cellfabric.nos.relay import (
    RELAY_ROLE,
    PacketRelay,
    PortRelay,
    RelayPort,
    relay_role_config,
)
from controlplane.connection import SwitchConnection
from controlplane.errors import ControlPlaneError
from topologies.model import Topology, router_mac

CONVERGE_WAIT_S = 120.0
READY_QUIET_S = 1.0   # no route agent wrote for this long: the run's tables have settled
QUIET_S = 3.0          # no bgpd handed its zebra a route this long: a failure has converged
FAILURE_WAIT_S = 30.0
LOG_POLL_S = 0.25     # FRR's logs, read for what they gained (no vtysh: a failure's
                      # timing reads bfdd's and bgpd's own records, cellfabric.nos.frrlog)


@dataclass
class SwitchNos:
    name: str
    routing: SwitchRouting
    namespace: SwitchNamespace
    relay_conn: SwitchConnection
    relay: PacketRelay | None = None
    frr: FrrInstance | None = None
    agent: Any = None
    agent_conn: SwitchConnection | None = None  # the agent's own, when it has one
    owns_conn: bool = True  # relay_conn is the relay's own (else the controller's)


@dataclass
class FabricNos:
    topo: Topology
    run_id: str
    folder: Path
    addrs: dict[str, tuple[str, int]]  # switch -> (P4Runtime address, device id)
    timers: BfdTimers = field(default_factory=BfdTimers)
    # A target without P4Runtime roles (real BMv2: PI puts every client in one role, where
    # only the primary gets PacketIns) shares the controller's connection per switch instead
    shared: dict[str, SwitchConnection] | None = None
    log: Callable[[str], None] = lambda _msg: None
    # switch -> the interface its relay reads for the CPU port (PortRelay); None: the
    # relay takes PacketIns and sends PacketOuts over P4Runtime (the switch's --cpu-port)
    cpu_ifaces: dict[str, str] | None = None
    switches: dict[str, SwitchNos] = field(default_factory=dict)
    frr_started_at: float | None = None  # when the first FRR instance started
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        plan = routing_plan(self.topo)
        for name, routing in plan.items():
            self._start_switch(name, routing)

    def _start_switch(self, name: str, routing: SwitchRouting) -> None:
        mac = router_mac(self.topo.switches[name].device_id)
        ns = SwitchNamespace(self.run_id, name, [
            TapPort(s.port, s.interface, f"{s.local_ip}/31", mac) for s in routing.sessions],
            self._host_ports(name))
        ns.create()
        addr, device_id = self.addrs[name]
        own = self.shared is None
        conn = (SwitchConnection(addr, device_id, name=name, reconnect=False, role=RELAY_ROLE,
                                 role_config=relay_role_config()) if own
                else self.shared[name])
        sw = SwitchNos(name, routing, ns, conn, owns_conn=own)
        self.switches[name] = sw
        if own:
            conn.connect()
        relay_ports = [RelayPort(s.port, s.interface, s.local_ip) for s in routing.sessions]
        sw.relay = (PortRelay(conn, ns.name, relay_ports, self.cpu_ifaces[name],
                              self.folder / name / "relay")
                    if self.cpu_ifaces is not None else PacketRelay(conn, ns.name, relay_ports))
        sw.relay.start()
        sw.frr = FrrInstance(ns.name, routing, self.folder / name, self.timers)
        if self.frr_started_at is None:
            self.frr_started_at = time.time()
        sw.frr.start()
        ports = {s.interface: s.port for s in routing.sessions}
        ports.update({hp.ifname: hp.port for hp in ns.host_ports})
        sw.agent, sw.agent_conn = start_route_agent(sw, ports, self.topo.fabric.spray, addr,
                                                    device_id, self._stop, self.log,
                                                    None if own else conn)

    def _host_ports(self, name: str) -> list[HostPort]:
        out = []
        for lk in self.topo.links_of(name):
            host, port = (lk.b, lk.a_port) if lk.a == name else (lk.a, lk.b_port)
            if host in self.topo.hosts:
                out.append(HostPort(port, port_interface(port),
                                    (f"{self.topo.hosts[host].ip}/32",)))
        return out

    @property
    def agents(self) -> dict[str, Any]:
        return {n: sw.agent for n, sw in self.switches.items() if sw.agent is not None}

    # -- measurements -------------------------------------------------------------------------
    def host_prefixes(self) -> set[str]:
        """Every host prefix the fabric carries (what the leaves announce)."""
        return {p for sw in self.switches.values() for p in sw.routing.prefixes}

    def _missing_routes(self) -> dict[str, int | str]:
        """What the workload still lacks: per switch, sessions not established, a route agent
        that stopped, and host prefixes its P4 table does not forward yet (read back from the
        switch: route, group_select entry, a group with members). Every switch, not only the
        leaves: a cell crosses aggregation and core switches too, and an agent there may lag
        behind the BGP table that already reached the leaves.

        The switches are read back only once nothing cheaper is missing (every session up,
        every agent's own record of what it wrote complete): the reads run in the process
        that relays every switch's BFD frames, and during bring-up they would cost BFD the
        CPU it needs to keep its sessions up."""
        missing: dict[str, int | str] = {}
        want = self.host_prefixes()
        for name, sw in self.switches.items():
            if sw.frr is not None:
                want_peers = {s.peer_ip for s in sw.routing.sessions}
                down = len(want_peers - sw.frr.established_peers())
                if down:
                    missing[f"{name} sessions"] = down
            if sw.agent is None:
                continue
            if sw.agent.failed:
                missing[f"{name} route agent"] = sw.agent.failed
            lacking = want - sw.agent.entries.routes.keys()
            if lacking:
                missing[f"{name} prefixes"] = len(lacking)
        if missing:
            return missing
        for name, sw in self.switches.items():
            if sw.agent is None:
                continue
            try:
                lacking = want - sw.agent.forwarded_prefixes()
            except ControlPlaneError as err:
                missing[f"{name} P4 routes"] = f"unreadable: {err}"
                continue
            if lacking:
                missing[f"{name} prefixes"] = len(lacking)
        return missing

    def _last_write(self) -> float:
        return max((b.wall_time for a in self.agents.values() for b in list(a.writes)),
                   default=0.0)

    def wait_converged(self, timeout_s: float = CONVERGE_WAIT_S) -> float:
        """Seconds from the first FRR's start until every session is up and every switch's
        P4 table forwards every host prefix, with no agent having written for READY_QUIET_S
        (path hunting over: the tables the workload starts on are the final ones)."""
        t0 = self.frr_started_at or time.time()
        while True:
            missing = self._missing_routes()
            quiet = time.time() - self._last_write()
            if not missing and quiet >= READY_QUIET_S:
                # the tables became final at the last write, not at this poll
                return max(self._last_write(), t0) - t0
            if time.time() - t0 > timeout_s:
                raise FrrError(f"BGP did not converge within {timeout_s:.0f} s: still missing: "
                               f"{missing or 'quiet route agents'} (FRR logs in {self.folder})")
            # every poll is a vtysh per switch: on a busy machine they cost what FRR needs
            self._stop.wait(0.5)

    def route_health(self, since: float) -> dict[str, dict[str, Any]]:
        """Per switch, what its routes did from ``since`` (wall clock) on: the agent's write
        batches and deleted entries, its errors and netlink restarts, whether it still runs,
        and the host prefixes its P4 table does not forward now."""
        want = self.host_prefixes()
        out: dict[str, dict[str, Any]] = {}
        for name, agent in self.agents.items():
            batches = [b for b in list(agent.writes) if b.wall_time >= since]
            try:
                lacking: Any = sorted(want - agent.forwarded_prefixes())
            except ControlPlaneError as err:
                lacking = f"unreadable: {err}"
            out[name] = {"write_batches": len(batches),
                         "deletes": sum(b.deletes for b in batches),
                         "errors": len(agent.errors), "watch_restarts": agent.watch_restarts,
                         "failed": agent.failed, "missing_prefixes": lacking}
        return out

    def measure_failure(self, links: list[str], up: bool, t_inject: float) -> dict[str, Any]:
        """Detection (the first BFD state change to down, or to up for a repair, on an end
        of a failed link, from bfdd's log), convergence (the last route any bgpd handed its
        zebra, once none did for QUIET_S, from bgpd's log) and reprogramming (the route
        agents' last write) after ``t_inject``, in seconds (None: not seen)."""
        ends: set[tuple[str, str]] = set()  # (switch, peer address) per failed session end
        for link in links:
            for sw in self.switches.values():
                for s in sw.routing.sessions:
                    if s.link == link or (set(link.split("-")) == {sw.name, s.peer}):
                        ends.add((sw.name, s.peer_ip))
        tails = {name: (LogTail(sw.frr.log_path("bfdd")), LogTail(sw.frr.log_path("bgpd")))
                 for name, sw in self.switches.items() if sw.frr is not None}
        detected: list[float] = []
        last_change: float | None = None
        state = "up" if up else "down"
        while time.time() - t_inject < FAILURE_WAIT_S and not self._stop.is_set():
            for name, (bfd_tail, bgp_tail) in tails.items():
                detected += [c.t for c in bfd_changes(bfd_tail.new_lines())
                             if c.t >= t_inject and c.new == state and (name, c.peer) in ends]
                for t, _, _ in route_updates(bgp_tail.new_lines()):
                    if t >= t_inject and (last_change is None or t > last_change):
                        last_change = t
            if last_change is not None and time.time() - last_change >= QUIET_S:
                break
            self._stop.wait(LOG_POLL_S)
        writes = [b.wall_time for a in self.agents.values() for b in list(a.writes)
                  if b.wall_time >= t_inject]
        return {"detect_s": min(detected) - t_inject if detected else None,
                "converge_s": None if last_change is None else last_change - t_inject,
                "reprogram_s": max(writes) - t_inject if writes else None,
                "bfd_sessions": len(ends)}

    def summary(self) -> dict[str, Any]:
        relays = [sw.relay for sw in self.switches.values() if sw.relay is not None]
        return {"switches": len(self.switches),
                "sessions": sum(len(sw.routing.sessions) for sw in self.switches.values()) // 2,
                "route_agents": len(self.agents),
                "frames_relayed_in": sum(sum(r.to_tap.values()) for r in relays),
                "frames_relayed_out": sum(sum(r.from_tap.values()) for r in relays),
                "frames_not_relayed": sum(r.unknown_port + r.malformed for r in relays),
                "punt_path": ("CPU port veth" if self.cpu_ifaces is not None
                              else "P4Runtime PacketIn/PacketOut"),
                "vtysh": {n: sw.frr.vtysh_hint() for n, sw in self.switches.items()
                          if sw.frr is not None}}

    def stop(self) -> None:
        """Stops agents, FRR and relays, closes their connections, removes the namespaces;
        each step runs even if an earlier one failed."""
        self._stop.set()
        for sw in self.switches.values():
            for step in (sw.frr.stop if sw.frr else None,
                         sw.relay.stop if sw.relay else None,
                         sw.relay_conn.close if sw.owns_conn else None,
                         sw.agent_conn.close if sw.agent_conn else None,
                         sw.namespace.remove):
                if step is not None:
                    with contextlib.suppress(Exception):
                        step()
        with contextlib.suppress(Exception):
            remove_run_namespaces(self.run_id)


def start_route_agent(sw: SwitchNos, port_of_ifname: dict[str, int], spray: str, addr: str,
                      device_id: int, stop: threading.Event, log: Callable[[str], None],
                      shared: SwitchConnection | None = None,
                      ) -> tuple[Any, SwitchConnection | None]:
    """The route agent of one switch (cellfabric.nos.route_agent) under its own role (or on
    ``shared``), synced once and then following the namespace's kernel table on a thread;
    returns it and the connection it owns (None when shared)."""
    from cellfabric.nos.route_agent import RouteAgent
    from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config

    own = None
    if shared is None:
        own = SwitchConnection(addr, device_id, name=sw.name, reconnect=False,
                               role=ROUTE_AGENT_ROLE, role_config=route_agent_role_config())
        own.connect()
    conn = shared or own
    # a shared stream means real BMv2, whose PI cannot shrink a group of watched members
    agent = RouteAgent(sw.namespace.name, sw.name, port_of_ifname, conn, spray != "ecmp",
                       spray_mode=spray, modify_groups=shared is None, log=log)
    agent.sync()
    threading.Thread(target=agent.run, args=(stop,), name=f"route-agent-{sw.name}",
                     daemon=True).start()
    return agent, own
