"""What every switch of a fabric should hold, computed from a topology: pure, no I/O.

The plan is a list of name-addressed entities per switch (see p4src/README.md for the tables):
routes to every host over all shortest paths, one next-hop group per distinct set of egress
ports (an action-selector group whose members watch their port), the group's spray mode, MAC
rewrites, ECN profiles, INT roles, tenant membership and feedback priority. A link that is
down is left out of the path computation, so re-planning after a failure yields exactly the
routes and groups that avoid it.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    CloneSession,
    Entity,
    GroupMember,
    Replica,
    TableEntry,
)

# The wire contract with fabric.p4 and the hosts lives once, in hosts.wire (constants only).
from hosts.wire import (
    ACK_EVERY,
    INT_INSTRUCTIONS,
    INT_MAX_HOPS,
    OP_ACK,
    OP_CNP,
    ROCE_UDP_PORT,
    TELEMETRY_REPORT_PORT,
)
from topologies.model import Topology, router_mac

SPRAY_MODE_VALUE = {"ecmp": 0, "spray": 1, "round-robin": 2, "adaptive": 3}
ADAPTIVE_BUCKETS = 16
REPORT_SESSION = 100
FEEDBACK_OPCODES = (OP_ACK, OP_CNP)
FEEDBACK_PRIORITY = 1
# A switch's own control frames (a NOS's PacketOuts) on a third queue, above feedback: an
# emulated fabric serves it off the line rate (p4sim's set_port_rate bound; BMv2 paces each
# queue on its own anyway), since its links run ~10^8 times slower than real ones while BFD and
# BGP keep real-time timers, so their frames would take a few percent of an emulated line
# where they take ~10^-6 of a real one. CONTROL_QUEUES: the priority queues a switch needs.
CONTROL_PRIORITY = 2
CONTROL_QUEUES = CONTROL_PRIORITY + 1
CPU_PORT = 510  # fabric.p4's default (p4src/include/defines.p4): the switch's --cpu-port
# A port's line rate is shared by its two queues. Hosts ACK every ACK_EVERY cells, so a port
# that carries data one way and the other flows' ACKs needs about 1/(ACK_EVERY + 1) of its
# packets for feedback (CNPs and grants ride within that): hosts send data at 80% of the line
# (data_rate), which leaves feedback its share plus headroom and is also the rate a message's
# ideal time is counted at. Where a shared line rate cannot be configured (real BMv2 paces
# each priority queue on its own), see separately_paced_rates.
FEEDBACK_SHARE = 0.2


def queue_shares(line_pps: int) -> dict[int, int]:
    """Packets per second per priority for a port of ``line_pps`` (0 = unlimited: both 0)."""
    if line_pps <= 0:
        return {0: 0, FEEDBACK_PRIORITY: 0}
    feedback = min(line_pps - 1, max(1, round(line_pps * FEEDBACK_SHARE)))
    return {0: line_pps - feedback, FEEDBACK_PRIORITY: feedback}


def separately_paced_rates(line_pps: int) -> dict[int, int]:
    """Packets per second per priority where each priority queue is paced on its own (real
    BMv2). Data gets the line less what its ACKs need, not only the hosts' rate: a queue
    served exactly as fast as its senders offer (sprayed cells arrive in random bursts) grows
    like a random walk, where p4sim's shared line lends data whatever feedback leaves unused
    (measured on the k=4 fat-tree: slowdown p50 2.0x at the hosts' rate). Feedback gets the
    whole line: it can use it only while it has packets, and the runner checks over the whole
    window that no link carried more than its rate."""
    if line_pps <= 0:
        return {0: 0, FEEDBACK_PRIORITY: 0}
    feedback = math.ceil(line_pps / (ACK_EVERY + 1))
    return {0: max(data_rate(line_pps), line_pps - feedback), FEEDBACK_PRIORITY: line_pps}


def data_rate(line_pps: int) -> int:
    """What data (priority 0) may use of a port of ``line_pps``."""
    return queue_shares(line_pps)[0]

# Fully-qualified names in fabric.p4 (p4c's naming: control-local instances under their
# control's instance name).
T_MY_STATION = "MyIngress.forwarding.my_station"
T_ARP = "MyIngress.forwarding.arp_responder"
T_LPM = "MyIngress.forwarding.ipv4_lpm"
T_GROUP_MODE = "MyIngress.spray.group_mode"
T_CELL_LENGTH = "MyIngress.spray.cell_length"
T_ADAPTIVE = "MyIngress.spray.adaptive_candidates"
T_GROUP_SELECT = "MyIngress.spray.group_select"
P_SELECTOR = "MyIngress.spray.group_selector"
T_HOST_PORT = "MyIngress.guard.host_port_binding"
T_TENANT_SRC = "MyIngress.isolation.host_tenant_src"
T_TENANT_DST = "MyIngress.isolation.host_tenant_dst"
T_INT_WATCH = "MyIngress.int_ingress.int_watchlist"
T_INT_SINK = "MyIngress.int_ingress.int_sink"
T_FEEDBACK = "MyIngress.feedback.feedback_priority"
T_CONTROL_PRIO = "MyIngress.cpu_out.control_priority"
T_REWRITE = "MyEgress.rewrite.egress_rewrite"
T_ECN = "MyEgress.ecn.ecn_profile"
T_INT_TRANSIT = "MyEgress.int_egress.int_transit_config"
T_REPORT = "MyEgress.report.report_encap"
# fabric.p4's counters and registers the harness reads (every packet out of a port, the cells
# and the switch's own control frames among them, every packet into a port; drops by reason;
# ECN marks; each port's latest queue depth) and its drop reasons (p4src/include/defines.p4,
# DROP_*)
C_PORT_TX = "MyEgress.port_tx"
C_PORT_TX_DATA = "MyEgress.port_tx_data"
C_PORT_TX_CONTROL = "MyEgress.port_tx_control"
C_PORT_RX = "MyIngress.port_rx"
C_DROPS = "drop_counter"
C_ECN_MARKS = "MyEgress.ecn.ecn_marks"
R_QDEPTH = "port_qdepth"
DROP_REASONS = {1: "no_route", 2: "isolation", 3: "ttl", 4: "bad_packet", 5: "l2_miss",
                6: "acl", 7: "same_port", 8: "no_collector",
                # refused at a host port or by the tenant check (p4src/include/isolation.p4)
                9: "spoof_mac", 10: "spoof_ip", 11: "tenant_tag", 12: "forged_int",
                13: "foreign_qp", 14: "foreign_feedback"}


def hash_salt(switch: str) -> int:
    """The switch's hash salt (fabric.p4 SprayGroups): key = bits 31..16 of (16-bit flow hash
    * salt). Derived from the switch's name so that every switch of a topology gets its own,
    the same on every run; odd and >= 2^16 so the product keeps all of the hash's bits."""
    return (zlib.crc32(b"cellfabric-salt:" + switch.encode()) | 0x10001) & 0xFFFFFFFF


@dataclass(frozen=True)
class QueuePlan:
    """One egress port's queues as planned: its line rate and depth, and the two priorities'
    rates for a target that paces each priority queue on its own (real BMv2). A target whose
    queues share the line (p4sim) needs only the line; each target applies it its own way."""

    port: int
    line_pps: int  # the link's rate in packets per second (0: unlimited)
    depth: int  # packets per queue
    data_pps: int  # priority 0 when paced separately (separately_paced_rates)
    feedback_pps: int  # FEEDBACK_PRIORITY when paced separately


def queue_plan(port: int, line_pps: int, depth: int) -> QueuePlan:
    rates = separately_paced_rates(line_pps)
    return QueuePlan(port, line_pps, depth, rates[0], rates[FEEDBACK_PRIORITY])


@dataclass
class SwitchPlan:
    switch: str
    entities: list[Entity] = field(default_factory=list)
    groups: dict[tuple[int, ...], int] = field(default_factory=dict)  # ports -> group id
    routes: dict[str, int] = field(default_factory=dict)  # prefix -> group id
    queues: dict[int, QueuePlan] = field(default_factory=dict)  # by port


def _link_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


def next_hops(topo: Topology, down: set[frozenset[str]]) -> dict[str, dict[str, list[int]]]:
    """switch -> host -> ports of that switch on a shortest path to the host (over up links;
    hosts are never transit nodes).

    Hosts attached to the same switches (every host of a leaf, both ports of a dual-homed NIC
    on the same pair) have the same distances from every switch and the same next hops on
    every switch but their own: one search per attachment set, not per host (a k=16
    fat-tree's 1024 hosts are 128 sets, 320 switches x 16 ports each)."""
    adj: dict[str, list[tuple[str, int]]] = defaultdict(list)  # node -> (peer, own port)
    for lk in topo.links:
        if _link_key(lk.a, lk.b) in down:
            continue
        adj[lk.a].append((lk.b, lk.a_port))
        adj[lk.b].append((lk.a, lk.b_port))
    result: dict[str, dict[str, list[int]]] = {s: {} for s in topo.switches}
    by_attachment: dict[frozenset[str], list[str]] = defaultdict(list)
    for host in topo.hosts:
        by_attachment[frozenset(p for p, _ in adj[host] if p in topo.switches)].append(host)
    for attached, hosts in by_attachment.items():
        dist = _switch_distances(topo, adj, attached)
        for sw, d in dist.items():
            # toward the hosts through another switch one hop nearer (none for d == 1)
            shared = {port for peer, port in adj[sw] if dist.get(peer) == d - 1}
            for host in hosts:
                ports = shared
                if d == 1:  # the host's own switch: its ports to the host itself
                    ports = shared | {port for peer, port in adj[sw] if peer == host}
                if ports:
                    result[sw][host] = sorted(ports)
    return result


def _switch_distances(topo: Topology, adj: dict[str, list[tuple[str, int]]],
                      attached: frozenset[str]) -> dict[str, int]:
    """Links from a host attached to ``attached`` to every switch it reaches (the switches
    only: hosts never forward)."""
    dist = dict.fromkeys(attached, 1)
    todo = deque(sorted(attached))
    while todo:
        node = todo.popleft()
        for peer, _ in adj[node]:
            if peer not in dist and peer in topo.switches:
                dist[peer] = dist[node] + 1
                todo.append(peer)
    return dist


def _neighbor_mac(topo: Topology, node: str, port: int) -> str:
    peer, peer_port = topo.peer(node, port)
    if peer in topo.switches:
        return router_mac(topo.switches[peer].device_id)
    host = topo.hosts[peer]
    index = [lk.b_port for lk in topo.links if lk.b == peer].index(peer_port)
    return host.nic_mac(index)


def _aggregate(routes: dict[str, int], topo: Topology) -> dict[str, int]:
    """Replace a /24's host routes by one prefix route when every host of that /24 in the
    topology leaves by the same group (fewer entries, same forwarding)."""
    by_net: dict[str, list[str]] = defaultdict(list)
    for host in topo.hosts.values():
        # the model keeps addresses canonical (str(IPv4Address)): the /24 is the first three
        # octets (ipaddress here was a tenth of planning a k=16 fat-tree)
        by_net[f"{host.ip.rpartition('.')[0]}.0/24"].append(host.ip)
    out: dict[str, int] = {}
    for net, ips in by_net.items():
        groups = {routes.get(ip) for ip in ips}
        if len(groups) == 1 and None not in groups and len(ips) > 1:
            out[net] = groups.pop()  # type: ignore[assignment]
        else:
            out.update({f"{ip}/32": routes[ip] for ip in ips if ip in routes})
    return out


def plan_switch(topo: Topology, name: str, hops: dict[str, dict[str, list[int]]],
                priority_queues: bool = True,
                group_ids: Mapping[tuple[int, ...], int] | None = None) -> SwitchPlan:
    """``group_ids``: port sets whose group keeps the id it has (see _plan_groups)."""
    sw = topo.switches[name]
    fab = topo.fabric
    plan = SwitchPlan(name)
    ents = plan.entities
    my_mac = router_mac(sw.device_id)
    own_links = topo.links_of(name)
    own_ports = sorted(lk.a_port if lk.a == name else lk.b_port for lk in own_links)

    ents.append(TableEntry(table=T_MY_STATION, match={"hdr.ethernet.dst_addr": my_mac},
                           action="NoAction"))
    host_ports = [p for p in own_ports if topo.peer(name, p)[0] in topo.hosts]
    if host_ports:
        for host in topo.hosts.values():
            ents.append(TableEntry(table=T_ARP, match={"hdr.arp.tpa": host.ip},
                                   action="MyIngress.forwarding.arp_reply",
                                   params={"gateway_mac": my_mac}))

    host_routes = _plan_groups(topo, name, hops, plan, group_ids)
    plan.routes = _aggregate(host_routes, topo)
    ents.extend(route_entry(prefix, gid) for prefix, gid in sorted(plan.routes.items()))
    ents.append(TableEntry(table=T_CELL_LENGTH,
                           # the key is the BTH payload length: the configured cell size
                           match={"meta.cell_payload_len": fab.cell_size},
                           action="MyIngress.spray.cell_length_ok"))

    _plan_ports(topo, name, own_links, my_mac, plan)

    if priority_queues:
        for opcode in FEEDBACK_OPCODES:
            ents.append(TableEntry(table=T_FEEDBACK, match={"hdr.bth.opcode": opcode},
                                   action="MyIngress.feedback.set_priority",
                                   params={"prio": FEEDBACK_PRIORITY}))

    if fab.int.mode != "off":
        ents.append(TableEntry(table=T_INT_TRANSIT, match={"hdr.int_shim.int_type": 1},
                               action="MyEgress.int_egress.int_transit",
                               params={"node_id": sw.node_id}))
    if fab.int.mode == "switch-sink" and host_ports:
        _plan_switch_sink(topo, name, host_ports, hops, ents)

    if host_ports:
        _plan_host_ports(topo, name, host_ports, ents)
        _plan_tenants(topo, ents)
    return plan


def _plan_groups(topo: Topology, name: str, hops: dict[str, dict[str, list[int]]],
                 plan: SwitchPlan,
                 group_ids: Mapping[tuple[int, ...], int] | None = None) -> dict[str, int]:
    """Selector members, groups and their spray mode (with this switch's hash salt), adaptive
    candidates; returns host IP -> group id for the routes.

    Without ``group_ids`` groups are numbered 1, 2, ... in host order. With it (the switch's
    groups as they are: port set -> id), a port set found there keeps its id and any other
    set gets the lowest id none of them holds: a changed member set becomes a new group and
    no existing group changes its members (for a target that cannot shrink a group in place;
    the old group stays until nothing points at it)."""
    fab = topo.fabric
    ents = plan.entities
    # One group per distinct port set; members are ports (member id = port).
    host_routes: dict[str, int] = {}
    taken = set(group_ids.values()) if group_ids else set()
    for host, ports in sorted(hops[name].items()):
        key = tuple(ports)
        if key not in plan.groups:
            if group_ids is None:
                plan.groups[key] = len(plan.groups) + 1
            elif key in group_ids:
                plan.groups[key] = group_ids[key]
            else:
                gid = 1
                while gid in taken:
                    gid += 1
                taken.add(gid)
                plan.groups[key] = gid
        host_routes[topo.hosts[host].ip] = plan.groups[key]
    used_ports = sorted({p for ports in plan.groups for p in ports})
    ents.extend(selector_member(port) for port in used_ports)
    salt = hash_salt(name)
    for ports, gid in sorted(plan.groups.items(), key=lambda kv: kv[1]):
        ents.extend(group_entities(gid, ports, fab.spray, salt))
    return host_routes


def selector_member(port: int) -> ActionProfileMember:
    """The spray selector's member for ``port`` (member id = port)."""
    return ActionProfileMember(profile=P_SELECTOR, member_id=port,
                               action="MyIngress.spray.set_egress_port", params={"port": port})


def group_entities(gid: int, ports: tuple[int, ...], spray: str, salt: int) -> list[Entity]:
    """Next-hop group ``gid`` over ``ports`` (members must exist): the selector group (each
    member watching its port), its group_select entry, its spray mode (with the switch's hash
    salt) and, for adaptive spraying, its candidate pairs."""
    ents: list[Entity] = [
        ActionProfileGroup(profile=P_SELECTOR, group_id=gid,
                           members=[GroupMember(member_id=p, weight=1, watch_port=p)
                                    for p in ports]),
        TableEntry(table=T_GROUP_SELECT, match={"meta.group_id": gid}, group=gid),
        TableEntry(table=T_GROUP_MODE, match={"meta.group_id": gid},
                   action="MyIngress.spray.set_group_mode",
                   params={"mode": SPRAY_MODE_VALUE[spray], "salt": salt})]
    if spray == "adaptive" and len(ports) >= 2:
        for bucket in range(ADAPTIVE_BUCKETS):
            a = ports[bucket % len(ports)]
            b = ports[(bucket + 1) % len(ports)]
            ents.append(TableEntry(
                table=T_ADAPTIVE, match={"meta.group_id": gid, "meta.adaptive_bucket": bucket},
                action="MyIngress.spray.set_candidates", params={"port_a": a, "port_b": b}))
    return ents


def route_entry(prefix: str, gid: int) -> TableEntry:
    """The ipv4_lpm entry sending ``prefix`` to next-hop group ``gid``."""
    return TableEntry(table=T_LPM, match={"hdr.ipv4.dst_addr": prefix},
                      action="MyIngress.forwarding.set_next_group", params={"group_id": gid})


def _plan_ports(topo: Topology, name: str, own_links: list, my_mac: str,
                plan: SwitchPlan) -> None:
    """Per port: MAC rewrite, ECN profile, queue settings."""
    ents = plan.entities
    ecn = topo.fabric.ecn
    step = 0 if ecn.kmax == ecn.kmin else int(ecn.pmax * 65536 / (ecn.kmax - ecn.kmin))
    for lk in own_links:
        port = lk.a_port if lk.a == name else lk.b_port
        ents.append(TableEntry(table=T_REWRITE, match={"standard_metadata.egress_port": port},
                               action="MyEgress.rewrite.set_port_macs",
                               params={"src_mac": my_mac,
                                       "dst_mac": _neighbor_mac(topo, name, port)}))
        ents.append(TableEntry(table=T_ECN, match={"standard_metadata.egress_port": port},
                               action="MyEgress.ecn.set_ecn_profile",
                               params={"kmin": ecn.kmin, "kmax": ecn.kmax, "step": step}))
        plan.queues[port] = queue_plan(port, lk.queue.rate_pps, lk.queue.depth)



def _plan_host_ports(topo: Topology, name: str, host_ports: list[int],
                     ents: list[Entity]) -> None:
    """Source guard: each host-facing port bound to the NIC behind it (that NIC's MAC, the
    host's address, its tenant or 0), so the leaf refuses frames that claim another host."""
    for port in host_ports:
        host = topo.hosts[topo.peer(name, port)[0]]
        ents.append(TableEntry(table=T_HOST_PORT,
                               match={"standard_metadata.ingress_port": port},
                               action="MyIngress.guard.bind_host_port",
                               params={"tenant": topo.tenant_of(host.name),
                                       "mac": _neighbor_mac(topo, name, port),
                                       "ip": host.ip}))


def _plan_tenants(topo: Topology, ents: list[Entity]) -> None:
    """Tenant ACL tables on a switch with hosts: every tenant host's source and destination."""
    for host in topo.hosts.values():
        tenant = topo.tenant_of(host.name)
        if tenant:
            for table, action in ((T_TENANT_SRC, "set_src_tenant"),
                                  (T_TENANT_DST, "set_dst_tenant")):
                field_name = "hdr.ipv4.src_addr" if table == T_TENANT_SRC else "hdr.ipv4.dst_addr"
                ents.append(TableEntry(table=table, match={field_name: host.ip},
                                       action=f"MyIngress.isolation.{action}",
                                       params={"tenant": tenant}))


def _plan_switch_sink(topo: Topology, name: str, host_ports: list[int],
                      hops: dict[str, dict[str, list[int]]], ents: list[Entity]) -> None:
    """A leaf is INT source for RoCEv2 from its hosts and sink towards them; reports go to
    the collector host through a clone session on the first port towards it."""
    sw = topo.switches[name]
    ents.append(TableEntry(table=T_INT_WATCH, match={"meta.l4_dst_port": f"{ROCE_UDP_PORT}&&&0xffff"},
                           priority=10, action="MyIngress.int_ingress.int_source",
                           params={"instructions": INT_INSTRUCTIONS, "max_hops": INT_MAX_HOPS}))
    collector = topo.fabric.int.collector
    report_port = hops[name].get(collector, [None])[0] if collector else None
    for port in host_ports:
        if report_port is None:
            ents.append(TableEntry(table=T_INT_SINK,
                                   match={"standard_metadata.egress_spec": port},
                                   action="MyIngress.int_ingress.int_sink_strip"))
        else:
            ents.append(TableEntry(table=T_INT_SINK,
                                   match={"standard_metadata.egress_spec": port},
                                   action="MyIngress.int_ingress.int_sink_report",
                                   params={"session": REPORT_SESSION}))
    if report_port is not None:
        ents.append(CloneSession(session_id=REPORT_SESSION,
                                 replicas=[Replica(port=report_port, instance=0)]))
        collector_spec = topo.hosts[collector]
        ents.append(TableEntry(
            table=T_REPORT, match={"standard_metadata.egress_port": report_port},
            action="MyEgress.report.encap_report",
            params={"src_mac": router_mac(sw.device_id),
                    "dst_mac": _neighbor_mac(topo, name, report_port),
                    "src_ip": f"10.255.{sw.device_id >> 8}.{sw.device_id & 255}",
                    "dst_ip": collector_spec.ip, "udp_src_port": TELEMETRY_REPORT_PORT,
                    "udp_dst_port": TELEMETRY_REPORT_PORT, "node_id": sw.node_id}))


def plan_fabric(topo: Topology, down: set[frozenset[str]] | None = None,
                priority_queues: bool = True,
                group_ids: Mapping[str, Mapping[tuple[int, ...], int]] | None = None,
                ) -> dict[str, SwitchPlan]:
    """Every switch's plan; ``group_ids``: per switch, the group ids to keep (plan_switch)."""
    hops = next_hops(topo, down or set())
    kept = group_ids or {}
    return {name: plan_switch(topo, name, hops, priority_queues, kept.get(name))
            for name in topo.switches}
