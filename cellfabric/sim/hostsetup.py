"""The host programs of a simulated step: the runner's own plan (``plan_step``: the same
configurations `cellfabric run` starts in its Mininet hosts), run on simulated NICs.

At the emulation's settings (packet mode) nothing is changed: every timer is the one the
emulated run uses. At data-center settings (bit-rate mode) the plan sees each link as its
rate in cells per second and its buffer in cells, so every timer the runner scales by cell
time (ACK delay, NAK and SACK hold-offs, RTO) scales the same way; the few settings that are
real-time constants in the emulation take their data-center values instead: DCQCN's published
timers and CNP interval (no time scaling), HPCC's base RTT and the credit scheme's unscheduled
window from the fabric's real base RTT, health checks at a quarter RTO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from cellfabric.core.hostplan import (
    ACK_EVERY,
    StepPlan,
    cell_frame_bytes,
    credit_window_cells,
    timing_args,
)
from cellfabric.sim.chosts import CReceiver, CSender
from cellfabric.sim.engine import Engine
from cellfabric.sim.hostsim import Program, SimHost
from hosts import wire
from hosts.config import ReceiverConfig, SenderConfig
from hosts.receiver import Receiver
from hosts.sender import Sender
from topologies.model import EcnSpec, QueueSpec, Topology

ACK_FRAME_BYTES = wire.ACK_FRAME_BYTES


@dataclass(frozen=True)
class SimSettings:
    link_rate_bps: int  # 0: packet mode, the topology's own rates and depths
    hop_delay_ns: int
    buffer_bytes: int
    seed: int
    until_s: float | None = None
    # bit-rate mode: ECN marking as DCQCN's paper sets it, scaled to the link rate
    # (dcqcn_ecn_profile), instead of the topology's profile in cells, which is sized for the
    # emulation's 64-cell queues
    scale_ecn: bool = False

    @property
    def bit_rate_mode(self) -> bool:
        return self.link_rate_bps > 0


# DCQCN's marking profile (Zhu et al., SIGCOMM 2015) for its 40 Gb/s links: RED-like from
# Kmin = 5 KB to Kmax = 200 KB with Pmax = 1%, every packet above Kmax. Deployments scale the
# thresholds with the link rate (HPCC's simulations: 4x at 100 Gb/s what they use at 25).
DCQCN_REF_BPS = 40e9
DCQCN_KMIN_BYTES = 5_000
DCQCN_KMAX_BYTES = 200_000
DCQCN_PMAX = 0.01


def dcqcn_ecn_profile(topo: Topology, s: SimSettings, cc: str) -> EcnSpec:
    """DCQCN's profile at this link rate, in cells (queue depths count packets), with Kmax
    kept inside the port's buffer."""
    frame = cell_frame_bytes(topo, cc)
    scale = s.link_rate_bps / DCQCN_REF_BPS
    buffer_cells = max(2, s.buffer_bytes // frame)
    kmax = min(buffer_cells, max(2, round(DCQCN_KMAX_BYTES * scale / frame)))
    kmin = min(kmax - 1, max(1, round(DCQCN_KMIN_BYTES * scale / frame)))
    return EcnSpec(kmin=kmin, kmax=kmax, pmax=DCQCN_PMAX)


def sim_topology(topo: Topology, s: SimSettings, cc: str) -> Topology:
    """The topology the switches are programmed from: the file's, or in bit-rate mode with
    ``scale_ecn`` its ECN profile replaced by DCQCN's at the link rate."""
    if not (s.bit_rate_mode and s.scale_ecn):
        return topo
    return replace(topo, fabric=replace(topo.fabric, ecn=dcqcn_ecn_profile(topo, s, cc)))


def planning_topology(topo: Topology, s: SimSettings, cc: str) -> Topology:
    """The topology the host plan is computed from: in bit-rate mode each link's queue is its
    rate in cells per second and its buffer in cells."""
    if not s.bit_rate_mode:
        return topo
    frame = cell_frame_bytes(topo, cc)
    q = QueueSpec(rate_pps=s.link_rate_bps / (8 * frame),  # type: ignore[arg-type]
                  depth=max(1, s.buffer_bytes // frame))
    return replace(topo, links=[replace(lk, queue=q) for lk in topo.links])


def host_hops(topo: Topology, src: str) -> dict[str, int]:
    """Links on the shortest path from host ``src`` to every host (hosts do not forward)."""
    return {h: d for h, d in topo.distances(src).items() if h in topo.hosts}


def max_host_hops(topo: Topology) -> int:
    """Links on the longest shortest path between two hosts (4 in a leaf-spine)."""
    key = (id(topo), len(topo.links), len(topo.hosts))
    found = _MAX_HOPS.get(key)
    if found is not None and found[0] is topo:
        return found[1]
    hops = max((d for src in topo.hosts for d in host_hops(topo, src).values()), default=0)
    if len(_MAX_HOPS) >= 16:
        _MAX_HOPS.clear()
    _MAX_HOPS[key] = (topo, hops)
    return hops


# (id, links, hosts) of a topology -> (it, max_host_hops of it): every step of a run asks
# (base_rtt_s), and the search from every host was a tenth of a 128-rank ring's run
_MAX_HOPS: dict[tuple[int, int, int], tuple[Topology, int]] = {}


def idle_latency_s(topo: Topology, s: SimSettings, cc: str, src: str, dst: str,
                   hops: dict[str, int] | None = None) -> float:
    """What an idle path adds to a message's cells at line rate, until its sender has the
    last ACK: the last cell, stored and forwarded, crosses every link (its first
    serialization is the message's own) and the ACK comes back over as many. ``hops``:
    ``host_hops(topo, src)``, if already known."""
    links = (hops if hops is not None else host_hops(topo, src)).get(dst, 0)
    rate = s.link_rate_bps
    if topo.same_server(src, dst):  # one NVLink, at its own rate
        links, rate = 1, rate * topo.server_settings.nvlink_ratio
    if not links or not s.bit_rate_mode:
        return 0.0
    cell = cell_frame_bytes(topo, cc) * 8 / rate
    ack = ACK_FRAME_BYTES * 8 / rate
    delay = s.hop_delay_ns * 1e-9
    return (links - 1) * cell + links * delay + links * (ack + delay)


def base_rtt_s(topo: Topology, s: SimSettings, cc: str) -> float:
    """A cell out and its ACK back over the longest path of an idle fabric."""
    hops = max_host_hops(topo)
    ser = (cell_frame_bytes(topo, cc) + ACK_FRAME_BYTES) * 8 / s.link_rate_bps
    return hops * (ser + 2 * s.hop_delay_ns * 1e-9)


def line_rate(topo: Topology, host: str) -> float:
    """Bit-rate mode: hosts send at their link's full rate in cells per second (the serializer
    is shared by data and feedback, which take what they need; no fixed share as in packet
    mode, where hostprocs.host_line_rate leaves the feedback queue its share)."""
    return min(lk.queue.rate_pps for lk in topo.links_of(host))


def data_center_sender(cfg: SenderConfig, rtt: float, cell_s: float, depth: int,
                       unscheduled: int | None) -> SenderConfig:
    """A planned sender at data-center settings. The plan's timers are sized for hundreds of
    packets per second: the same formulas at this cell time, and never below what a round
    trip needs (in the emulation a hop's latency is far below one cell; here a round trip is
    about a hundred cells, and a sprayed cell is only late after about two). ``unscheduled``:
    the plan's (None: a round trip of cells, at least credit's default 16)."""
    timers = timing_args(1 / cell_s, depth)
    rate_bps = (1 / cell_s) * cfg.frame_bytes * 8
    # A cell behind a full buffer waits ``depth`` cell times more than one on an idle path,
    # and SACKs of cells that took the idle path come back meanwhile: a hole younger than
    # that is a late cell, not a lost one (resending it only adds to the full queue).
    rto = max(timers["rto"], 8 * rtt)
    return replace(
        cfg, rate_bps=rate_bps, link_bps=rate_bps if cfg.link_bps else 0.0,
        link_pps=0.0,  # the plan's rates are in packets/s; these links serialize bytes
        time_scale=1.0, base_rtt_s=rtt,
        sack_holdoff_s=max(timers["sack_holdoff"], 2 * rtt, rtt + depth * cell_s),
        rto_s=rto, port_timeout_s=max(timers["port_timeout"], rto),
        credit_probe_s=max(4 * rtt, 64 * cell_s),
        health_interval_s=rto / 4, idle_poll_s=rto / 4,
        credit_initial_cells=cfg.credit_initial_cells if unscheduled is not None
        else max(16, math.ceil(rtt / cell_s)))


def data_center_receiver(cfg: ReceiverConfig, rtt: float, cell_s: float,
                         unscheduled: int | None) -> ReceiverConfig:
    """A planned receiver at data-center settings: DCQCN's published CNP interval, ACKs
    after the plan's ACK_EVERY cell times, grants at the line's cell rate, and the credit
    window from the fabric's real round trip, not the plan's estimate."""
    return replace(
        cfg, cnp_interval_s=wire.CNP_INTERVAL_US * 1e-6, ack_delay_s=ACK_EVERY * cell_s,
        credit_cells_per_s=1 / cell_s if cfg.credit_cells_per_s else cfg.credit_cells_per_s,
        nak_holdoff_s=max(40 * cell_s, 2 * rtt),
        credit_initial_cells=cfg.credit_initial_cells if unscheduled is not None
        else max(16, math.ceil(rtt / cell_s)),
        credit_window_cells=credit_window_cells(rtt / cell_s) if cfg.credit_window_cells
        else 0,
        credit_idle_s=8 * rtt)


def start_step(plan: StepPlan, topo: Topology, s: SimSettings, cc: str, engine: Engine,
               hosts: dict[str, SimHost], on_sender_done, native: Any = None) -> list[Any]:
    """Create and start the step's receivers, then its senders; returns the senders.
    ``native``: the run's cellfabric.sim.chosts.NativeHosts, which then runs them in C."""
    rtt = base_rtt_s(topo, s, cc) if s.bit_rate_mode else 0.0
    cell_s = cell_frame_bytes(topo, cc) * 8 / s.link_rate_bps if s.bit_rate_mode else 0.0
    depth = max(lk.queue.depth for lk in topo.links)
    for hp in plan.receivers:
        rcfg = hp.config
        assert isinstance(rcfg, ReceiverConfig)
        if s.bit_rate_mode:
            rcfg = data_center_receiver(rcfg, rtt, cell_s, plan.credit_unscheduled)
        host = hosts[hp.host]
        rkind = Receiver if native is None else CReceiver
        node = rkind(rcfg, clock=engine.clock, ports=host.nics(rcfg.ifaces), report_frames=True)
        prog = Program(engine, node) if native is None else native.receiver(hp.host, node)
        prog.plan = hp
        host.receiver = prog
        prog.start()
    senders = []
    for hp in plan.senders:
        cfg = hp.config
        assert isinstance(cfg, SenderConfig)
        if s.bit_rate_mode:
            # an NVLink flow's cells take nic_rate / nvlink_rate of a NIC cell time
            t = hp.transfer
            nv = topo.server_settings.nvlink_ratio if t and topo.same_server(t.src, t.dst) else 1
            cfg = data_center_sender(cfg, rtt, cell_s / nv, depth, plan.credit_unscheduled)
        host = hosts[hp.host]
        node = (Sender if native is None else CSender)(cfg, clock=engine.clock,
                                                        ports=host.nics(cfg.ifaces))
        node.open()
        prog = Program(engine, node, on_done=on_sender_done) if native is None \
            else native.sender(hp.host, node, on_sender_done)
        prog.plan = hp
        host.senders[cfg.qpn] = prog
        senders.append(prog)
    for prog in senders:
        prog.start()
    return senders
