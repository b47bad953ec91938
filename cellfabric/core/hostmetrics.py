"""Per-message, per-flow and reorder figures from the host programs' metrics, and step
durations: the metric model both drivers fill the same way (the emulation reads the hosts'
metrics files, the simulator hands over the same dicts in memory)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from cellfabric.core.hostplan import (
    StepPlan,
    cells_for,
    flow_key,
    host_line_rate,
    host_link_bps,
    read_metrics,
)
from cellfabric.core.report import RunMetrics
from hosts import wire
from topologies.model import Topology


def _medium(topo: Topology, host: str, peer: str) -> tuple[str, str]:
    """What a flow between ``host`` and ``peer`` uses at ``host``: its NIC (``(host, "")``)
    or, within a server, its NVLink to ``peer``."""
    return (host, peer) if topo.same_server(host, peer) else (host, "")


def _ports(topo: Topology, medium: tuple[str, str]) -> int:
    """Ports of a medium: an NVLink is one, a NIC has one per leaf it is wired to."""
    host, peer = medium
    return 1 if peer else max(1, len(topo.hosts[host].leaves))


@dataclass(frozen=True)
class _Ideal:
    """A message's ideal at its bottleneck (see collect_host_metrics)."""

    ideal: float  # seconds, base latency included
    share: int  # flows through its busier end
    bottleneck: str  # that end's host
    thru: float  # cells/s it gets at its fair share
    own: float  # its cells at its own pace, alone (s)


def _ideal(topo: Topology, t: Any, shares: tuple[int, int], rate: float, line: Any,
           base: float, serialized: bool) -> _Ideal:
    """``rate``: the flow's own pace in cells/s (its sender's, alone); ``shares``: flows on
    the medium at its destination and at its source."""
    nvlink = topo.same_server(t.src, t.dst)
    dkey, skey = _medium(topo, t.dst, t.src), _medium(topo, t.src, t.dst)
    k_dst, k_src = shares
    share = 1 if t.load else max(k_dst, k_src)
    bottleneck = t.dst if k_dst >= k_src else t.src
    thru = rate
    if share > 1:
        for key, k in ((dkey, k_dst), (skey, k_src)):
            # An NVLink carries what its senders pace (the plan gives each of k flows 1/k of
            # it). A NIC's flows together can fill the whole line of every one of its ports
            # (the feedback queue takes its share only when it has packets), so k flows on a
            # dual-port NIC share two lines, and two of them go at their own pace.
            cap = rate if nvlink else _ports(topo, key) * line(key[0])
            thru = min(thru, cap / max(k, 1))
    cells = cells_for(t.size, topo.fabric.cell_size)
    # A cell leaves its sender in one slot of its pace, so the last of N leaves N - 1 slots
    # of its share after the first; at the emulation's settings (packet mode) it is then on
    # its way at once (veths and an idle switch queue do not hold it for a slot), on a line
    # that serializes (bit-rate mode) it takes one cell time of its own line more.
    # (In slots of its own pace, so that a flow alone at its pace reads exactly N of them.)
    slots = (cells - 1) * (rate / thru) + (1 if serialized else 0)
    ideal = slots / rate + base
    return _Ideal(ideal, share, bottleneck, thru, cells / rate)


def collect_host_metrics(m: RunMetrics, topo: Topology, steps: list[StepPlan],
                         read: Any = read_metrics, line_rate: Any = host_line_rate,
                         base_latency: Any = None, serialized: bool = False) -> None:
    """Messages, flows and reorder figures from the host programs' metrics files (``read``
    maps a path to its JSON; ``line_rate(topo, host)`` the cells/s a host sends at); shared
    by the emulated runner and the simulator.

    A message's ideal time runs from its first cell's departure to its sender's last ACK on
    an otherwise idle fabric, with its flows sharing their bottleneck fairly: its cells less
    one at its fair share of the bottleneck (one flow: its own pace; several flows into one
    host: that host's lines, every port of its NIC, or an NVLink, split between them), plus,
    where lines serialize (``serialized``: the simulator at data-center settings), its last
    cell's own cell time, plus ``base_latency(src, dst)``: what the idle path adds on top
    (the last cell's way to the receiver and its ACK's way back). The simulator knows it
    exactly at data-center settings, where a round trip is a hundred cell times; in the
    emulation (packet mode) it is far below one cell time and taken as 0, so a one-cell
    message there has no ideal (0: it counts in no slowdown)."""
    multi_step = len(steps) > 1
    for plan in steps:
        # Flows share a host's NIC, or (within a server) the NVLink between two GPUs.
        share_dst: dict[tuple[str, str], int] = {}
        share_src: dict[tuple[str, str], int] = {}
        for hp in plan.senders:
            t = hp.transfer
            dkey, skey = _medium(topo, t.dst, t.src), _medium(topo, t.src, t.dst)
            share_dst[dkey] = share_dst.get(dkey, 0) + 1
            share_src[skey] = share_src.get(skey, 0) + 1
        for hp in plan.senders:
            t = hp.transfer
            data = read(hp.metrics) or {}
            rate = min(line_rate(topo, t.src), line_rate(topo, t.dst))
            if topo.same_server(t.src, t.dst):
                rate *= topo.server_settings.nvlink_ratio
            shares = (share_dst[_medium(topo, t.dst, t.src)],
                      share_src[_medium(topo, t.src, t.dst)])
            base = base_latency(t.src, t.dst) if base_latency else 0.0
            ideal = _ideal(topo, t, shares, rate, partial(_line, topo, rate), base, serialized)
            share = ideal.share
            # What this flow's cells take of its bottleneck: the group's cells at the
            # bottleneck's whole rate add up to the time its busy lines need.
            pace = ideal.thru * share
            work = cells_for(t.size, topo.fabric.cell_size) / pace
            key = flow_key(t, plan.index, multi_step)
            fcts = data.get("fct_list_s") or []
            done = int(data.get("messages_completed", 0))
            for k in range(t.count):
                fct = fcts[k] if k < len(fcts) else None
                if fct is None and k < done and not fcts:
                    fct = (data.get("fct_s") or {}).get("avg")
                m.messages.append({"src": t.src, "dst": t.dst, "size": t.size,
                                   "step": plan.index, "fct_s": fct, "ideal_s": ideal.ideal,
                                   "base_latency_s": base, "share": share,
                                   "bottleneck": ideal.bottleneck, "work_s": work,
                                   "own_s": ideal.own, "slot_s": 1 / pace, "flow": key})
            m.flows[key] = {"step": plan.index, "channel": t.channel,
                            "samples": _rate_samples(data, topo.fabric.cell_size),
                            "flow_time_s": data.get("flow_time_s"),
                            "flow_start_s": data.get("flow_start_s"),
                            "bytes": t.size * done,
                            "cnps": data.get("cnps_received", 0),
                            "rate_min_pps": _rate_min_pps(data),
                            "failovers": data.get("failovers", []),
                            "retransmits": (data.get("cells") or {}).get("retransmits", 0),
                            "cells_sent": (data.get("cells") or {}).get("cells_sent")}
            if t.load:
                m.flows[key]["load"] = offered_record(t, data, host_link_bps(topo, t.src,
                                                                           topo.fabric.cc))
        for hp in plan.receivers:
            data = read(hp.metrics) or {}
            agg = m.reorder.setdefault(hp.host, {"max_depth": 0, "p99_depth": 0,
                                                 "out_of_order": 0, "duplicates": 0})
            for flow in data.get("flows", []):
                r = flow.get("reorder", {})
                agg["max_depth"] = max(agg["max_depth"], int(r.get("max_depth", 0)))
                agg["p99_depth"] = max(agg["p99_depth"], int(r.get("p99_depth", 0) or 0))
                agg["out_of_order"] += int(r.get("out_of_order", 0))
                agg["duplicates"] += int(r.get("duplicates", 0))


def _line(topo: Topology, default: float, host: str) -> float:
    """The packet rate of a host's NIC links (each port's)."""
    return min((lk.queue.rate_pps for lk in topo.links_of(host)), default=default)


def offered_record(t: Any, data: dict[str, Any], link_bps: float) -> dict[str, Any]:
    """A loaded flow's offered and delivered bytes with the intervals they count over (the
    sender's, hosts/sender.py), and its sender's link rate; report.summarize adds them up."""
    arr = data.get("arrivals") or {}
    return {"configured": t.load, "link_bps": link_bps,
            "offered_bytes": arr.get("offered_bytes", t.size * t.count),
            "window_s": arr.get("window_s"), "delivered_bytes": arr.get("delivered_bytes", 0),
            "interval_s": arr.get("interval_s")}


def step_durations(m: RunMetrics, step_times: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step: its duration (its slowest transfer, measured by the senders themselves, so
    process start-up between steps is the harness's, not the network's) and its ideal."""
    by_step: dict[Any, list[dict[str, Any]]] = {}
    for x in m.messages:  # grouped once: a scan of every message per step was quadratic
        by_step.setdefault(x["step"], []).append(x)
    for st in step_times:
        mine = by_step.get(st["step"], [])
        times = [x["fct_s"] for x in mine]
        st["duration_s"] = (max(times) if times and None not in times else None)
        st["ideal_s"] = max((x["ideal_s"] for x in mine), default=None)
    return step_times


def _rate_samples(data: dict[str, Any], cell: int) -> list[list[float]]:
    """The sender's rate history (bits/s) as cells per second over wall-clock time."""
    frame_bits = 8 * max(1, int((data.get("cells") or {}).get("frame_bytes", wire.cell_frame_bytes(cell, False))))
    start = data.get("wall_start")
    rows = []
    for t, bps in data.get("rate_history", []):
        rows.append([(start + t) if start is not None else t, bps / frame_bits])
    return rows


def _rate_min_pps(data: dict[str, Any]) -> float | None:
    rc = data.get("rate_control") or {}
    frame = (data.get("cells") or {}).get("frame_bytes")
    if rc.get("rate_bps_min") is None or not frame:
        return None
    return rc["rate_bps_min"] / (8 * frame)
