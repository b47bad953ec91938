"""The end-host programs of a run: the configuration of each, and their metrics.

One receiver per destination host of a step (it serves every flow into that host), one sender
per transfer. Senders pace at their NIC's line rate (the host link's rate in packets per
second) under the run's rate control; what that rate control needs of the hosts comes from
its registry entry (``hosts.cc``). The emulation runs each as ``cellfabric host send|recv``
with the command line rendered from its configuration; the simulator runs the objects.
"""

from __future__ import annotations

import json
import math
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellfabric.core.workloads import Step, Transfer
from controlplane.fabric_plan import data_rate
from hosts import wire
from hosts.arrivals import mean_gap_s
from hosts.cc import CcAlgorithm, algorithm
from hosts.cli import host_argv
from hosts.config import ReceiverConfig, SenderConfig
from hosts.wire import TELEMETRY_REPORT_PORT
from topologies.model import Topology, router_mac

# With data at 80% of the line (controlplane.fabric_plan), ACKs, grants and CNPs must stay
# well inside the other 20%: one ACK per 4 cells filled it exactly, and the fat-tree's queues
# then grew without bound.
ACK_EVERY = wire.ACK_EVERY


def host_cli() -> list[str]:
    return [sys.executable, "-m", "cellfabric.cli", "host"]


def cells_for(size: int, cell: int) -> int:
    """Cells of a ``size``-byte message: the last cell gives 4 bytes to the immediate that
    carries the message length (hosts/wire.py)."""
    return max(1, math.ceil((size + 4) / cell))


@dataclass
class HostPlan:
    """One host program of a step: its configuration, where its metrics go, and (senders)
    the transfer it carries; ``proc`` and ``log`` once the emulation started it."""

    host: str
    config: SenderConfig | ReceiverConfig
    metrics: Path
    transfer: Transfer | None = None  # senders only
    proc: Any = None
    log: Path | None = None

    def command(self) -> list[str]:
        return [*host_cli(), *host_argv(self.config), "--metrics", str(self.metrics)]


@dataclass
class HostCommand:
    """A host program given as its command line (the INT collector)."""

    host: str
    argv: list[str]
    metrics: Path
    proc: Any = None
    log: Path | None = None

    def command(self) -> list[str]:
        return self.argv


@dataclass
class StepPlan:
    index: int
    receivers: list[HostPlan] = field(default_factory=list)
    senders: list[HostPlan] = field(default_factory=list)
    # the unscheduled cells the plan gave a granting rate control's hosts (None: their defaults)
    credit_unscheduled: int | None = None


def host_line_rate(topo: Topology, host: str) -> int:
    """Cells per second a host's link carries: its rate less the feedback queue's share."""
    return data_rate(min(lk.queue.rate_pps for lk in topo.links_of(host)))


def nvlink_line_rate(topo: Topology, host: str) -> int:
    """Cells per second an NVLink of ``host`` carries for data: its NIC link's packet rate
    scaled by nvlink_rate / nic_rate, less the feedback share, as a NIC link's."""
    line = min(lk.queue.rate_pps for lk in topo.links_of(host))
    return data_rate(round(line * topo.server_settings.nvlink_ratio))


def nvlink_flows(step: Step, t: Transfer) -> int:
    """Flows of a step from ``t``'s source GPU to its destination GPU (over their NVLink)."""
    return max(1, _pair_counts(step).get((t.src, t.dst), 0))


# id(step) -> (step, flows per (src, dst)): counted once per step, not once per transfer (a
# step of 256 transfers scanned itself 256 times); the step is kept so its id stays its own
_PAIR_COUNTS: dict[int, tuple[Step, dict[tuple[str, str], int]]] = {}


def _pair_counts(step: Step) -> dict[tuple[str, str], int]:
    found = _PAIR_COUNTS.get(id(step))
    if found is not None and found[0] is step:
        return found[1]
    counts: dict[tuple[str, str], int] = {}
    for x in step.transfers:
        counts[(x.src, x.dst)] = counts.get((x.src, x.dst), 0) + 1
    if len(_PAIR_COUNTS) >= 64:
        _PAIR_COUNTS.clear()
    _PAIR_COUNTS[id(step)] = (step, counts)
    return counts


def cell_frame_bytes(topo: Topology, cc: str) -> int:
    """A data cell's frame as the sender builds it (INT shim when the host is the source)."""
    int_source = algorithm(cc).int_source or host_reports(topo)
    return wire.cell_frame_bytes(topo.fabric.cell_size, int_source)


def host_link_bps(topo: Topology, host: str, cc: str) -> float:
    """A host link's rate in bits per second, the rate offered load is a fraction of: its
    packet rate in cell frames (the simulator's planning topology holds --link-rate as
    exactly that, so this gives it back)."""
    return min(lk.queue.rate_pps for lk in topo.links_of(host)) * 8 * cell_frame_bytes(topo, cc)


def expected_arrival_s(topo: Topology, step: Step, cc: str) -> float:
    """The longest mean arrival window of a step's loaded flows (0 without load): the time
    its messages take to arrive at all, which a step's time limit must allow on top."""
    return max(((t.count + 1) * mean_gap_s(t.size, t.load, host_link_bps(topo, t.src, cc))
                for t in step.transfers if t.load), default=0.0)


def path_switches(topo: Topology, src: str, dst: str) -> int:
    """Switches on a shortest path between two hosts (hosts are never transit nodes); none
    between two GPUs of one server (their NVLink)."""
    if topo.same_server(src, dst):
        return 0
    return topo.distances(src).get(dst, 2) - 1


def time_scale(rate_pps: float) -> float:
    """How much slower this fabric's clock runs than a datacenter's: DCQCN's published timers
    (55 us, 50 us CNP interval...) assume a cell takes well under a microsecond on the wire;
    here a cell takes 1/rate seconds. Scaling by cell time / 5 us keeps the controllers'
    reaction time the same number of cell times (a 200 pps link: x1000)."""
    return (1.0 / max(1, rate_pps)) / 5e-6


def timing_args(rate_pps: float, depth: int = 64) -> dict[str, float]:
    """Loss-recovery timers scaled to the fabric's time base: at a few hundred packets per
    second a cell spends milliseconds per hop, so sprayed cells legitimately arrive tens of
    cell-times apart; hold-offs shorter than that would retransmit reordered, not lost, cells."""
    cell_time = 1.0 / max(1, rate_pps)
    # A full queue holds a cell for depth cell times: a timeout shorter than that resends
    # cells that are only waiting, and the copies fill the queue further.
    return {"sack_holdoff": 40 * cell_time, "rto": (depth + 100) * cell_time,
            "port_timeout": 60 * cell_time}


def flow_sport(src: str, dst: str, qp: int) -> int:
    """RoCEv2 senders pick the UDP source port per queue pair to give ECMP entropy; a hash
    of the flow stands in for that (deterministic, so runs repeat). Consecutive ports would
    not do: CRC hashes are linear, so flows whose 5-tuples differ by the same bits always
    collide, or never, in every step of a workload."""
    digest = zlib.crc32(f"{src}>{dst}#{qp}".encode()) * 2654435761
    return 49152 + (digest >> 7) % 16384


def flow_key(t: Transfer, step: int, multi_step: bool) -> str:
    """A flow's key in the metrics: ``src->dst``, ``#cN`` for a channel other than 0 (two
    channels' flows between one pair are two flows) and ``@stepI`` in a workload of several
    steps (the same pair sends again in later steps; one key per pair kept only the last)."""
    key = f"{t.src}->{t.dst}" + (f"#c{t.channel}" if t.channel else "")
    return key + (f"@step{step}" if multi_step else "")


def host_reports(topo: Topology) -> bool:
    """Host-sink INT with a collector: senders add INT, receivers report the stacks."""
    return topo.fabric.int.mode == "host-sink" and topo.fabric.int.collector is not None


def hosts_index(topo: Topology, host: str) -> int:
    return list(topo.hosts).index(host) + 1


def hpcc_base_rtt_cells(switches: int) -> int:
    """HPCC's T in cell times: the window it opens is B x T, so T must cover the whole time
    from a cell's departure to the ACK that frees its window: the cell over the path's links
    (switches + 1 of them, a cell time each), the ACK back as long, and the ACK batching (the
    last cell of a batch of ``ACK_EVERY`` comes ACK_EVERY - 1 cell times after the first).
    Without the batching term a fat-tree's cross-pod flows (5 switches) were window-bound at
    about 70% of their rate: 13 cells open against a 19-cell round trip."""
    return 2 * (max(switches, 1) + 1) + ACK_EVERY - 1


def credit_window_cells(rtt_cells: float) -> int:
    """A receiver's cap on granted cells in flight (``--credit-unscheduled CELLS``): a round
    trip of them keeps its downlink busy, and two grant batches more cover a batch being
    filled while the one before it is on its way."""
    return math.ceil(rtt_cells) + 2 * ACK_EVERY


def plan_step(topo: Topology, step: Step, index: int, out_dir: Path, ifname_of,
              cc: str, qp_base: int, credit_unscheduled: int | None = None) -> StepPlan:
    """``ifname_of(host, nic_index)`` gives the Mininet interface name of a host's NIC.
    ``credit_unscheduled``: cells each credit flow sends before its first grant, with
    receivers capping granted cells in flight (None: the hosts' defaults, no cap)."""
    algo = algorithm(cc)
    plan = StepPlan(index, credit_unscheduled=credit_unscheduled if algo.grants else None)
    depth = max(lk.queue.depth for lk in topo.links)  # the deepest queue a cell may wait in
    expected: dict[str, int] = {}
    for t in step.transfers:
        expected[t.dst] = expected.get(t.dst, 0) + t.count
    for dst, count in sorted(expected.items()):
        cfg = _receiver(topo, step, dst, count, ifname_of, algo, credit_unscheduled, depth)
        plan.receivers.append(HostPlan(dst, cfg, out_dir / f"step{index}-recv-{dst}.json"))
    for n, t in enumerate(step.transfers):
        cfg = _sender(topo, step, t, qp_base + n, ifname_of, algo, credit_unscheduled, depth)
        channel = f"-c{t.channel}" if t.channel else ""
        metrics = out_dir / f"step{index}-send-{t.src}-{t.dst}{channel}.json"
        plan.senders.append(HostPlan(t.src, cfg, metrics, transfer=t))
    return plan


def _receiver(topo: Topology, step: Step, dst: str, count: int, ifname_of, algo: CcAlgorithm,
              unscheduled: int | None, depth: int) -> ReceiverConfig:
    rate = host_line_rate(topo, dst)
    # A receiver that has every message keeps answering long enough for a sender whose
    # last ACK was lost to time out and resend (two RTOs); the runner ends it sooner, as
    # soon as the step's senders have all finished.
    rto = timing_args(rate, depth)["rto"]
    cfg = ReceiverConfig(
        # every port, NVLinks included: a receiver answers on the port a flow's cells use
        ifaces=[ifname_of(dst, i) for i in range(topo.host_ports(dst))],
        ack_every=ACK_EVERY, expect_messages=count, linger_s=max(1.0, 2 * rto),
        # Feedback paced to the link's time base: at most one ACK per ACK_EVERY cell times,
        # and a NAK only for a gap older than the reordering spraying can cause.
        cnp_interval_s=50 * time_scale(rate) * 1e-6, ack_delay_s=ACK_EVERY / rate,
        nak_holdoff_s=timing_args(rate)["sack_holdoff"])
    if algo.grants:
        cfg.credit_cells_per_s = float(rate)
        if unscheduled is not None:
            # a round trip in cell times, as HPCC's base RTT below: 8 per 3 switches
            hops = max(path_switches(topo, t.src, dst) for t in step.transfers if t.dst == dst)
            cfg.credit_initial_cells = unscheduled
            cfg.credit_window_cells = credit_window_cells(8.0 * max(hops, 1) / 3)
    if host_reports(topo):
        collector = topo.hosts[str(topo.fabric.int.collector)]
        cfg.collector = (collector.ip, TELEMETRY_REPORT_PORT)
        cfg.node_id = 1000 + hosts_index(topo, dst)
    return cfg


def _sender(topo: Topology, step: Step, t: Transfer, qp: int, ifname_of, algo: CcAlgorithm,
            unscheduled: int | None, depth: int) -> SenderConfig:
    src = topo.hosts[t.src]
    frame = cell_frame_bytes(topo, algo.name)
    if topo.same_server(t.src, t.dst):
        # within a server: the NVLink to the peer GPU, never the NIC (no switch sees it)
        # The veth that stands for an NVLink has no rate of its own: flows that share one
        # split it, as its arbitration would, so k of them never carry k NVLinks' worth.
        rate = nvlink_line_rate(topo, t.src) / nvlink_flows(step, t)
        nics: range | list[int] = [topo.nvlink_port(t.src, t.dst) - 1]
        dst_macs = [topo.hosts[t.dst].nic_mac(topo.nvlink_port(t.dst, t.src) - 1)]
    else:
        rate = host_line_rate(topo, t.src)
        # a channel scheduler may keep a flow off a NIC port (one that failed)
        nics = list(t.nics) if t.nics else range(len(src.leaves))
        dst_macs = [router_mac(topo.switches[src.leaves[i]].device_id) for i in nics]
    timers = timing_args(rate, depth)
    cfg = SenderConfig(
        ifaces=[ifname_of(t.src, i) for i in nics], dst_macs=dst_macs,
        src_macs=[src.nic_mac(i) for i in nics], src_ip=src.ip, dst_ip=topo.hosts[t.dst].ip,
        qpn=qp, msg_size=t.size, count=t.count, payload_len=topo.fabric.cell_size,
        cc=algo.name, rate_bps=float(rate) * frame * 8,
        sport=t.sport or flow_sport(t.src, t.dst, qp), drain_s=10.0,
        rto_s=timers["rto"], sack_holdoff_s=timers["sack_holdoff"],
        port_timeout_s=timers["port_timeout"],
        int_source=algo.int_source or host_reports(topo), time_scale=time_scale(rate),
        # see hpcc_base_rtt_cells
        base_rtt_s=hpcc_base_rtt_cells(path_switches(topo, t.src, t.dst)) / rate)
    if t.load:
        cfg.mean_gap_s = mean_gap_s(t.size, t.load, host_link_bps(topo, t.src, algo.name))
        cfg.arrival_seed = t.arrival_seed
    if algo.int_source:
        # The links' B is their whole line, which INT's tx bytes are measured against, not
        # the data share the host sends at: against that, data alone reads u = 1 and HPCC
        # cuts every flow below its share.
        line = min(lk.queue.rate_pps for lk in topo.links_of(t.src))
        cfg.link_bps, cfg.link_pps = float(line) * frame * 8, float(line)
    if algo.grants:
        sharing = sum(1 for x in step.transfers if x.dst == t.dst)
        cfg.credit_probe_s = max(0.1, 4.0 * sharing / host_line_rate(topo, t.dst))
        if unscheduled is not None:
            cfg.credit_initial_cells = unscheduled
    return cfg


def read_metrics(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# How long a step waits for its hosts to open their ports before its senders go anyway.
START_TIMEOUT_S = 60.0


def start_together(plan: StepPlan, logs: Path, start: Any,
                   timeout_s: float = START_TIMEOUT_S) -> None:
    """Start every host of a step (``start(hp, log, extra_argv)``), and let the senders go only
    once all of them have their ports open: on a small machine starting 32 Python processes
    takes seconds of CPU, and flows that began meanwhile ran against a fabric starved of it
    (a CI run's senders started up to 13 s apart). A host that exited (a bad argument) is
    not waited for: it is reported with its log as before."""
    go = logs / f"step{plan.index}.go"
    hosts = plan.receivers + plan.senders
    for hp in hosts:
        gate = ["--start-when", str(go)] if hp.transfer is not None else []  # senders
        start(hp, logs / f"{hp.metrics.stem}.log",
              ["--ready-file", str(hp.metrics.with_suffix(".ready")), *gate])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(
            hp.metrics.with_suffix(".ready").exists() or hp.proc.poll() is not None
            for hp in hosts):
        time.sleep(0.02)
    go.touch()
