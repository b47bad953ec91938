"""Per-link packet totals over a workload, read from fabric.p4's egress counters.

``port_tx`` counts every packet a switch sends out of a port, ``port_tx_data`` the RoCEv2
data packets (cells) among them and ``port_tx_control`` the switch's own control frames (a
NOS's BGP, BFD and ARP), which an emulated fabric serves off the line rate
(fabric_plan.CONTROL_PRIORITY): they are reported beside the line's load, not in it. Two snapshots, one before the workload and one after it, give
what each link direction carried over the whole workload; ``link_totals`` turns them into the
plain per-link records that ``cellfabric.core.report.link_accounting`` (a pure function, shared with
the simulator) derives loads and per-tier balance from.

Given the switches' interface names, a snapshot also reads ``port_rx`` (every packet the
program's ingress saw on a port) beside the kernel's receive count of that interface, so
``unread_frames`` tells, on either target, how many frames reached a switch's port but never
its pipeline: the kernel dropped them because the switch read too slowly (BMv2 reports no such
figure itself; its libpcap ring is the place they are lost).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cellfabric.core.counters import switch_ports
from controlplane.channel import SwitchChannel, SwitchChannels
from controlplane.entities import CounterEntry
from controlplane.fabric_plan import C_PORT_RX, C_PORT_TX, C_PORT_TX_CONTROL, C_PORT_TX_DATA
from topologies.model import Topology

# {"t": seconds, "ports": {(switch, port): (all, data, control)}, "rx": ...}
Snapshot = dict[str, Any]
IfNames = Mapping[str, Mapping[int, str]]  # switch -> port -> interface (root namespace)


def kernel_rx_packets(ifname: str) -> int | None:
    """Frames the kernel received on ``ifname`` (its sysfs counter); None if it is gone."""
    try:
        return int(Path(f"/sys/class/net/{ifname}/statistics/rx_packets").read_text())
    except (OSError, ValueError):
        return None


def snapshot(topo: Topology, fabric: SwitchChannels, ifnames: IfNames | None = None,
             kernel_first: bool = False) -> Snapshot:
    """Egress counters of every switch port; with ``ifnames`` also ``port_rx`` and the
    kernel's receive counters. ``kernel_first`` reads the kernel's before the switches'
    (for the snapshot after a workload; the one before reads the switches' first), so frames
    arriving between the two reads can only make ``unread_frames`` smaller, never larger."""
    ports = switch_ports(topo)

    names = (C_PORT_TX, C_PORT_TX_DATA, C_PORT_TX_CONTROL) + ((C_PORT_RX,) if ifnames else ())

    def read(conn: SwitchChannel) -> dict[int, tuple[int, ...]]:
        entries = conn.read(*(CounterEntry(counter=name, index=p)
                              for name in names for p in ports[conn.name]))
        per = {name: {e.index: e.packets for e in entries if e.counter == name}
               for name in names}
        return {p: tuple(per[name].get(p, 0) for name in names) for p in ports[conn.name]}

    def kernel() -> dict[tuple[str, int], int | None]:
        return {(sw, p): kernel_rx_packets(ifname)
                for sw, per in (ifnames or {}).items() for p, ifname in per.items()}

    kernel_rx = kernel() if kernel_first else {}
    result = fabric.run(read, "counter read")
    if not kernel_first:
        kernel_rx = kernel()
    snap: Snapshot = {"t": time.time(), "ports": {
        (sw, p): v[:3] for sw, per in result.items() for p, v in per.items()}}
    if ifnames:
        snap["rx"] = {(sw, p): (v[3], kernel_rx.get((sw, p)))
                      for sw, per in result.items() for p, v in per.items()}
    return snap


def unread_frames(before: Snapshot, after: Snapshot) -> dict[str, dict[int, int]]:
    """Per switch port: frames its interface received between the snapshots that the
    program's ingress never counted (0 where both agree; ports without a kernel count left
    out)."""
    out: dict[str, dict[int, int]] = {}
    for key, (p4_1, kern_1) in after.get("rx", {}).items():
        p4_0, kern_0 = before.get("rx", {}).get(key, (None, None))
        if None in (kern_0, kern_1, p4_0):
            continue
        sw, port = key
        out.setdefault(sw, {})[port] = max(0, (kern_1 - kern_0) - (p4_1 - p4_0))
    return out


def last_slot_s(topo: Topology, paced_queues: int = 1) -> float:
    """How long past a counter read the packets it counted may still hold their lines.

    A packet is counted when it starts to leave and then holds its line for one slot (1 / rate
    in packet mode), so the last one counted before the read ends up to a slot after it: a
    window that ends at the read misses that slot and a link busy all along reads n / (n - 1)
    of its rate. ``paced_queues``: the port's queues that are paced each on its own (BMv2's
    per-priority rates: each may start a packet at once, one slot of its own share); p4sim's
    shared line paces them as one."""
    rates = [lk.queue.rate_pps for lk in topo.links if lk.queue.rate_pps]
    return max(paced_queues, 1) / min(rates) if rates else 0.0


def tier_of(topo: Topology, a: str, b: str) -> tuple[str, int, int]:
    """A link's tier label ('host-leaf', 'leaf-spine', 'spine-core') and both ends' levels
    (hosts are level 0)."""
    levels = {n: (topo.switches[n].tier if n in topo.switches else 0) for n in (a, b)}
    names = {0: "host", 1: "leaf", 2: "spine", 3: "core"}
    lo, hi = sorted(levels.values())
    return f"{names[lo]}-{names[hi]}", levels[a], levels[b]


def link_totals(topo: Topology, before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
    """Per link: its tier, capacity and, per measured direction (the sending end is a switch),
    cells, other packets and the switch's own control frames carried between the two
    snapshots (other: what is neither; control is off the line, see the module's note)."""
    out = []
    for lk in topo.links:
        tier, level_a, level_b = tier_of(topo, lk.a, lk.b)
        rec: dict[str, Any] = {"link": lk.name, "a": lk.a, "b": lk.b, "tier": tier,
                               "capacity_pps": lk.queue.rate_pps, "directions": {}}
        for src, dst, port, up in ((lk.a, lk.b, lk.a_port, level_a < level_b),
                                   (lk.b, lk.a, lk.b_port, level_b < level_a)):
            key = (src, port)
            if src not in topo.switches or key not in after["ports"]:
                continue  # a host's sending side has no counter
            total1, data1, control1 = after["ports"][key]
            total0, data0, control0 = before["ports"].get(key, (0, 0, 0))
            cells, control = max(0, data1 - data0), max(0, control1 - control0)
            rec["directions"][f"{src}->{dst}"] = {
                "queue": f"{src}:{port}", "up": up, "cells": cells,
                "other": max(0, (total1 - total0) - cells - control), "control": control}
        out.append(rec)
    return out
