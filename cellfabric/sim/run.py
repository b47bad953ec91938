"""One simulated run: compile, build the fabric, plan every entry with the FabricController,
run the workload's steps on the engine, and report in `cellfabric run`'s format.

    compile p4src/fabric.p4 -> one p4sim DataPlane per switch on the virtual clock ->
    FabricController writes every entity through the P4Runtime device code -> per step:
    the runner's host plan, run as Sender/Receiver programs on simulated NICs -> samples of
    port counters and queues in virtual time -> results/RUN/metrics.json + plots + summary.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cellfabric.collectives.iteration import iteration_section
from cellfabric.collectives.scheduler import ChannelScheduler, FabricView
from cellfabric.core import linkload
from cellfabric.core.config import FABRIC_P4, LinkEvent
from cellfabric.core.counters import drop_counters, switch_ports
from cellfabric.core.experiment import run_experiment, run_header
from cellfabric.core.hostmetrics import collect_host_metrics, step_durations
from cellfabric.core.hostplan import StepPlan, host_line_rate, plan_step
from cellfabric.core.plotworker import PlotWorker, start_plot_worker
from cellfabric.core.report import RunMetrics, format_summary, write_report
from cellfabric.core.sampler import FabricSamples
from cellfabric.core.validity import switch_drops
from cellfabric.core.workloads import Workload
from cellfabric.sim import chosts
from cellfabric.sim.collector import CollectorPolicy
from cellfabric.sim.control import LocalConnection, LocalFabric
from cellfabric.sim.engine import NS, Engine, to_ns
from cellfabric.sim.hostsetup import (
    SimSettings,
    host_hops,
    idle_latency_s,
    line_rate,
    planning_topology,
    sim_topology,
    start_step,
)
from cellfabric.sim.hostsim import Program
from cellfabric.sim.net import LinkModel, SimFabric
from cellfabric.sim.tracing import FabricTracing
from controlplane.fabric_controller import FabricController
from controlplane.fabric_plan import C_PORT_TX, C_PORT_TX_DATA
from hosts.collector import Collector
from hosts.wire import TELEMETRY_REPORT_PORT
from netlab.targets import compile_p4_cached
from topologies.model import Topology

PROGRESS_EVERY_S = 2.0  # wall seconds between progress lines
SAMPLES_PER_RUN = 200  # bit-rate mode: sampling interval = the workload's ideal time / this


@dataclass
class SimConfig:
    topo: Topology
    workload: Workload
    cc: str
    run_dir: Path
    settings: SimSettings
    target: str = "embedded"  # which compiler makes the BMv2 JSON
    events: list[LinkEvent] = field(default_factory=list)
    progress: bool = True
    credit_unscheduled: int | None = None  # --credit-unscheduled (None: auto)
    trace_sample: int = 0  # --trace-sample N: 1 packet in N traced to run_dir/traces (0: off)
    scheduler: ChannelScheduler | None = None  # --channel-policy: places each step's sends


def _say(cfg: SimConfig, msg: str) -> None:
    if cfg.progress:
        print(msg, flush=True)


def run_name(cfg: SimConfig) -> str:
    """Deterministic (the folder adds the wall-clock date): sim-TOPO-WORKLOAD-SPRAY-CC-sSEED."""
    return (f"sim-{cfg.topo.name}-{cfg.workload.name}-{cfg.topo.fabric.spray}-{cfg.cc}"
            f"-s{cfg.settings.seed}")


class SimRun:
    # execute_sim runs set-up with the garbage collector off and the engine with set-up's
    # objects frozen out of it (cellfabric.sim.collector; False: the collector as it is).
    tune_collector = True

    def __init__(self, cfg: SimConfig) -> None:
        cfg.topo = sim_topology(cfg.topo, cfg.settings, cfg.cc)
        self.cfg = cfg
        self.topo = cfg.topo
        self.plan_topo = planning_topology(cfg.topo, cfg.settings, cfg.cc)
        self.engine = Engine()
        s = cfg.settings
        self.fabric = SimFabric(cfg.topo, self.engine,
                                LinkModel(s.link_rate_bps, s.hop_delay_ns, s.buffer_bytes),
                                seed=s.seed)
        self.local: LocalFabric | None = None
        self.controller: FabricController | None = None
        self.steps: list[StepPlan] = []
        self.step_times: list[dict[str, Any]] = []
        self.event_log: list[dict[str, Any]] = []
        self.running: list[Program] = []
        self.finished = False
        self.samples = FabricSamples()
        self.host_metrics: dict[Path, dict[str, Any]] = {}
        self.wall_s = 0.0
        self.load_before: linkload.Snapshot | None = None
        self.load_after: linkload.Snapshot | None = None
        self._qp = 1
        self._step_start = 0
        self._wall0 = 0.0
        self._last_progress = 0.0
        self.collector: Collector | None = None
        self.tracing: FabricTracing | None = None
        self.collector_policy = CollectorPolicy(False)  # execute_sim's replaces it
        self.down: set[frozenset[str]] = set()  # links down now (pairs of node names)
        self._records_seen = 0  # INT records the scheduler has looked at
        self._ideal: tuple[Workload, float] | None = None  # (workload, _ideal_s of it)
        self._sample_scale = 1  # the sampling interval's multiple of its planned value
        # per switch, its sampled ports and their (switch, port) keys (_sample)
        self._sample_keys: dict[str, tuple[list[int], list[tuple[str, int]]]] = {}
        self.c_fabric = "off: not started"  # cellfabric.sim.cfabric: on, or why not
        self.c_hosts = "off: not started"  # cellfabric.sim.chosts: on, or why not

    # -- bring-up ---------------------------------------------------------------------------
    def bring_up(self) -> None:
        cfg = self.cfg
        _say(cfg, f"[1/4] compiling {FABRIC_P4.name} ({cfg.target} compiler)")
        json_path, p4info = compile_p4_cached(FABRIC_P4, cfg.run_dir / "build",
                                             target=cfg.target)
        self.fabric.build()
        self.tracing = (FabricTracing(self.fabric, self.topo, cfg.run_dir / "traces",
                                      cfg.trace_sample) if cfg.trace_sample else None)
        self._start_collector()
        self.local = LocalFabric({
            name: LocalConnection(name, sw.dp, self.topo.switches[name].device_id)
            for name, sw in self.fabric.switches.items()})
        _say(cfg, f"[2/4] {len(self.topo.switches)} switches, {len(self.topo.hosts)} hosts: "
                  "installing tables with the FabricController")
        self.controller = FabricController(
            self.topo, self.local, p4info, json_path, queue_setter=self.fabric.apply_queue,
            log=lambda msg: self.event_log.append({"t": self.engine.clock(), "event": msg}))
        diffs = self.controller.up()
        _say(cfg, f"      {sum(d.writes for d in diffs.values())} entities written")
        self.collector_policy.settled()

    def _start_collector(self) -> None:
        """As `run` starts the INT collector on the fabric's collector host: here it takes the
        Telemetry Reports that reach that host's NIC over the fabric (from host sinks, the
        receivers), stamped in virtual time."""
        fab = self.topo.fabric
        if fab.int.mode == "off" or not fab.int.collector:
            return
        s = self.cfg.settings
        self.collector = Collector("", TELEMETRY_REPORT_PORT,
                                   self.cfg.run_dir / "hosts" / "int.jsonl",
                                   link_bps=s.link_rate_bps, clock=self.engine.clock)
        self.fabric.hosts[fab.int.collector].collector = self.collector.ingest

    # -- workload ---------------------------------------------------------------------------
    def start_workload(self) -> None:
        cfg, engine = self.cfg, self.engine
        _say(cfg, f"[3/4] workload {cfg.workload.name}: {len(cfg.workload.steps)} step(s), "
                  f"{cfg.workload.total_bytes / 1e6:.2f} MB, cc {cfg.cc}, "
                  f"spray {self.topo.fabric.spray}, {self._describe_links()}")
        # decided once, before the workload's first event: the C fabric or the plain path
        why, hosts_why = self.fabric.start_native(
            traced=self.tracing is not None,
            hosts_refusal=lambda fab: chosts.refusal(fab, cfg.cc, cfg.workload,
                                                     bool(cfg.events)))
        self.c_fabric = "on" if why is None else f"off: {why}"
        self.c_hosts = "on" if hosts_why is None else f"off: {hosts_why}"
        if why is None and hosts_why is not None and hosts_why != "off":
            _say(cfg, f"      hosts on the Python path: {hosts_why}")
        for ev in cfg.events:
            engine.at(to_ns(ev.at_s), self._link_event, ev)
        self.load_before = self._load_snapshot()
        # Step 0 begins at time 0; each later one when the step before it ends (_sender_done).
        engine.at(0, self._begin_step, 0)
        engine.at(0, self._sample, None)
        self._wall0 = self._last_progress = time.perf_counter()

    def run_step(self, index: int) -> bool:
        """Run the engine until step ``index`` has ended (False: stopped first, by --until
        or with nothing left to do)."""
        cfg, engine = self.cfg, self.engine
        until = to_ns(cfg.settings.until_s) if cfg.settings.until_s else None
        while len(self.step_times) <= index:
            engine.run(until_ns=until, max_events=20000)
            if len(self.step_times) > index:
                break
            if not engine.pending() or (until is not None and engine.now >= until):
                return False
            now = time.perf_counter()
            if cfg.progress and now - self._last_progress >= PROGRESS_EVERY_S:
                self._last_progress = now
                self._progress(now - self._wall0)
        return True

    def finish_workload(self) -> None:
        self.wall_s = time.perf_counter() - self._wall0
        self.load_after = self._load_snapshot()
        if not self.finished:
            until = self.cfg.settings.until_s
            self.event_log.append({"t": self.engine.clock(), "event": "stopped at --until"
                                   if until else "stopped: nothing left to do"})

    def _load_snapshot(self) -> linkload.Snapshot:
        assert self.local is not None
        snap = linkload.snapshot(self.topo, self.local)
        snap["t"] = self.engine.clock()
        # Every packet counted so far has left its line by then (see linkload.last_slot_s).
        free = max((sw.line_free_ns() for sw in self.fabric.switches.values()), default=0)
        snap["lines_free_t"] = max(self.engine.now, free) / NS
        snap["bytes"] = {(name, port): (sw.dp.counter_read(C_PORT_TX, port)[1],
                                        sw.dp.counter_read(C_PORT_TX_DATA, port)[1])
                         for name, sw in self.fabric.switches.items() for port in sw.wires}
        snap["wire_bytes"] = {(name, port): wire.bytes
                              for name, sw in self.fabric.switches.items()
                              for port, wire in sw.wires.items()}
        return snap

    def _bytes_as_cells(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Bit-rate mode: a link's rate is bytes, and an ACK takes a tenth of a cell's time,
        so "other" packets are counted in cells of the fabric's mean cell size by their bytes
        and the capacity in those cells per second (packet mode counts packets, as the
        emulation's queues do). The load itself is exact: ``line_s``, the bytes the wire
        carried (as sent, INT included: the counters see a packet's length as it arrived) at
        the link's rate."""
        assert self.load_before is not None and self.load_after is not None
        before, after = self.load_before["bytes"], self.load_after["bytes"]
        wire0, wire1 = self.load_before["wire_bytes"], self.load_after["wire_bytes"]
        bps = self.cfg.settings.link_rate_bps
        cells = sum(d["cells"] for r in records for d in r["directions"].values())
        data = sum(after[k][1] - before.get(k, (0, 0))[1] for k in after)
        cell_bytes = data / cells if cells else 1.0
        for rec in records:
            rec["capacity_pps"] = self.cfg.settings.link_rate_bps / (8 * cell_bytes)
            rec["units"] = f"cells of {cell_bytes:.0f} B; other traffic by its bytes"
            for d in rec["directions"].values():
                sw, port = d["queue"].split(":")
                key = (sw, int(port))
                total = after[key][0] - before.get(key, (0, 0))[0]
                other = total - (after[key][1] - before.get(key, (0, 0))[1])
                d["other"] = round(other / cell_bytes)
                d["line_s"] = (wire1[key] - wire0.get(key, 0)) * 8 / bps
        return records

    def _describe_links(self) -> str:
        s = self.cfg.settings
        if not s.bit_rate_mode:
            return "links at the topology's packet rates"
        ecn = self.topo.fabric.ecn
        return (f"links {s.link_rate_bps / 1e9:g} Gb/s, {s.hop_delay_ns} ns per hop, "
                f"{s.buffer_bytes} B buffers, ECN {ecn.kmin}-{ecn.kmax} cells up to "
                f"{100 * ecn.pmax:g}%" + (" (DCQCN's, scaled to the link rate)"
                                         if s.scale_ecn else " (the topology's)"))

    def _progress(self, wall: float) -> None:
        done = sum(1 for p in self.running if p.done)
        ev = self.engine.events
        print(f"      virtual {self.engine.now / 1e3:,.1f} us: step {len(self.steps)}/"
              f"{len(self.cfg.workload.steps)}, {done}/{len(self.running)} senders done, "
              f"{ev:,} events ({ev / wall:,.0f}/s)", flush=True)

    def _begin_step(self, index: int) -> None:
        cfg = self.cfg
        step = cfg.workload.steps[index]
        if cfg.scheduler is not None:  # the channel scheduler's hook, between steps
            live = cfg.scheduler.policy.live
            step = cfg.scheduler.place(index, step, self._fabric_view() if live else None)
        out = cfg.run_dir / "hosts"
        plan = plan_step(self.plan_topo, step, index, out, lambda h, i: f"{h}-eth{i}",
                         cfg.cc, self._qp, credit_unscheduled=cfg.credit_unscheduled)
        self._qp += len(step.transfers)
        self.steps.append(plan)
        self._step_start = self.engine.now
        self.samples.open_window(self._step_start / NS)
        self.running = start_step(plan, self.plan_topo, cfg.settings, cfg.cc, self.engine,
                                  self.fabric.hosts, self._sender_done,
                                  native=self.fabric.chosts)

    def _fabric_view(self) -> FabricView:
        """What the run knows before a step: the links down, and per directed switch link
        the deepest queue the sampler (and the INT collector's hop records) saw since the
        step before began."""
        topo = self.topo
        peer = {(lk.a, lk.a_port): lk.b for lk in topo.links}
        peer.update({(lk.b, lk.b_port): lk.a for lk in topo.links})
        depth: dict[tuple[str, str], float] = {}
        # the deepest of every sample since then (kept as they come: a scan of the run's
        # samples before each step grew with its square, and thinned ones are gone)
        for (switch, port), seen in self.samples.window_peak.items():
            if seen and (switch, port) in peer:
                depth[(switch, peer[(switch, port)])] = float(seen)
        if self.collector is not None:
            names = {sw.node_id: name for name, sw in topo.switches.items()}
            for rec in self.collector.records[self._records_seen:]:
                key = (names.get(rec.get("node_id")), rec.get("egress_port"))
                if key not in peer or rec.get("queue_occupancy") is None:
                    continue
                hop = (key[0], peer[key])
                depth[hop] = max(depth.get(hop, 0.0), float(rec["queue_occupancy"]))
            self._records_seen = len(self.collector.records)
        return FabricView(frozenset(self.down), depth)

    def _sender_done(self, prog: Program) -> None:
        if not all(p.done for p in self.running):
            return
        index = len(self.steps) - 1
        self.step_times.append({"step": index,
                                "sim_s": (self.engine.now - self._step_start) / NS})
        self._metrics_of_step(self.steps[-1])
        if index + 1 < len(self.cfg.workload.steps):
            self.engine.at(self.engine.now, self._begin_step, index + 1)
        else:
            self.finished = True
        self.engine.stop()  # back to run_step: this step has ended

    def _metrics_of_step(self, plan: StepPlan) -> None:
        """Each program's metrics, as `cellfabric host` writes them (times are virtual)."""
        hosts = self.fabric.hosts
        progs = [hosts[hp.host].receiver for hp in plan.receivers]
        progs += [p for p in self.running]
        for prog in progs:
            if prog is None or prog.plan is None or prog.metrics is not None:
                continue
            node = prog.node
            start = getattr(node, "_start", self._step_start / NS)
            data = node.metrics(self.engine.clock() - start)
            if "wall_start" in data:
                data["wall_start"] = start  # rate samples are placed on the virtual clock
            prog.metrics = data
            self.host_metrics[prog.plan.metrics] = data

    def _link_event(self, ev: LinkEvent) -> None:
        assert self.controller is not None
        for name in ev.links:  # a switch failure takes down every link of the switch
            link = self.topo.link(name)
            self.fabric.set_link(link, ev.up)
            pair = frozenset((link.a, link.b))
            self.down = self.down - {pair} if ev.up else self.down | {pair}
        self.event_log.append({"t": self.engine.clock(), "event": f"link {ev.link} "
                               f"{'up' if ev.up else 'down'} (injected)"})
        for name in ev.links:
            self.controller.set_link(name, ev.up)

    def _sample(self, _: Any) -> None:
        if self.finished:
            return
        t = self.engine.clock()
        tx: dict[tuple[str, int], int] = {}
        depth: dict[tuple[str, int], int] = {}
        known = self._sample_keys
        for name, sw in self.fabric.switches.items():
            ports, packets, depths = sw.port_samples(C_PORT_TX)
            seen = known.get(name)
            if seen is None or seen[0] != ports:  # the keys once per switch, not per sample
                seen = known[name] = (ports, [(name, port) for port in ports])
            keys = seen[1]
            tx.update(zip(keys, packets, strict=True))
            depth.update(zip(keys, depths, strict=True))
        self.samples.add_tx(t, tx)
        self.samples.add_depth(t, depth)
        interval = self._sample_interval_ns()
        if self.cfg.settings.bit_rate_mode and len(self.samples.times) >= 2 * SAMPLES_PER_RUN:
            # The run has outlasted twice the time the interval was planned for (a
            # latency-bound collective's steps): every other sample goes and the interval
            # doubles, so a run keeps 200-400 samples per port however long it lasts (a
            # 128-rank ring kept 1,972, 200 MB of metrics.json). The next sample is still
            # one interval away: the samples kept are those at even multiples of it.
            self.samples.thin()
            self._sample_scale *= 2
        self.engine.after(interval, self._sample, None)

    def _sample_interval_ns(self) -> int:
        s = self.cfg.settings
        if not s.bit_rate_mode:
            return NS // 2  # the emulation's monitor interval
        ideal = self._ideal_s()
        return max(1000, to_ns(ideal / SAMPLES_PER_RUN)) * self._sample_scale

    def _ideal_s(self) -> float:
        """The workload's time at line rate (each step's busiest host link, summed): worked
        out once per workload (a frozen object), not at every sample (a 128-rank ring's
        254 steps of 256 transfers each, at each of its ~2,000 samples, was half its run)."""
        workload = self.cfg.workload
        if self._ideal is not None and self._ideal[0] is workload:
            return self._ideal[1]
        rate = self.cfg.settings.link_rate_bps / 8
        total = 0.0
        for step in workload.steps:
            load: dict[str, int] = {}
            for t in step.transfers:
                for h in (t.src, t.dst):
                    load[h] = load.get(h, 0) + t.size * t.count
            total += max(load.values(), default=0) / rate
        self._ideal = (workload, total)
        return total

    # -- results ----------------------------------------------------------------------------
    def collect(self) -> RunMetrics:
        cfg, topo, s = self.cfg, self.topo, self.cfg.settings
        _say(cfg, "[4/4] report")
        if self.steps and len(self.step_times) < len(self.steps):
            self._metrics_of_step(self.steps[-1])  # stopped mid-step (--until)
        m = RunMetrics(run=run_header(run_name(cfg), topo, "sim", cfg.workload, cfg.cc,
                                      self.event_log, compiler=cfg.target, t0=0.0,
                                      invalid_reasons=[]))
        m.links = self.samples.link_samples(self.plan_topo)
        if self.load_before is not None and self.load_after is not None:
            records = linkload.link_totals(self.plan_topo, self.load_before, self.load_after)
            if s.bit_rate_mode:
                records = self._bytes_as_cells(records)
            # to the moment the last packet counted has left its line
            end = max(self.load_after["t"], self.load_after["lines_free_t"])
            m.link_load = {"window_s": max(1e-9, end - self.load_before["t"]),
                           "links": records}
        m.queues = self.samples.queue_samples()
        assert self.local is not None
        counters = drop_counters(self.local, switch_ports(topo))
        peaks: dict[str, int] = {}
        for name, sw in self.fabric.switches.items():
            m.drops[name] = switch_drops(counters.get(name, {}), asdict(sw.dp.stats()))
            for port, peak in sorted(sw.peak.items()):
                peaks[f"{name}:{port}"] = peak
        hops = {h: host_hops(topo, h) for h in topo.hosts} if s.bit_rate_mode else {}
        collect_host_metrics(
            m, self.plan_topo, self.steps, read=self.host_metrics.get,
            line_rate=line_rate if s.bit_rate_mode else host_line_rate,
            base_latency=(lambda a, b: idle_latency_s(topo, s, cfg.cc, a, b, hops[a]))
            if s.bit_rate_mode else None, serialized=s.bit_rate_mode)
        if len(cfg.workload.steps) > 1:
            m.steps = step_durations(m, self.step_times)
        if cfg.scheduler is not None:
            m.run["channel_scheduler"] = cfg.scheduler.summary()
        if self.collector is not None:
            m.telemetry = self.collector.metrics(self.engine.clock())
            path = self.collector.records_path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in self.collector.records))
        wires = [w for pair in self.fabric.link_wires.values() for w in pair]
        m.run["sim"] = {
            "link_rate_bps": s.link_rate_bps, "hop_delay_ns": s.hop_delay_ns,
            "buffer_bytes": s.buffer_bytes, "seed": s.seed, "until_s": s.until_s,
            "ecn_profile": {"kmin_cells": topo.fabric.ecn.kmin, "kmax_cells": topo.fabric.ecn.kmax,
                            "pmax": topo.fabric.ecn.pmax,
                            "from": "dcqcn-scaled" if s.bit_rate_mode and s.scale_ecn
                            else "topology"},
            "mode": "bit-rate" if s.bit_rate_mode else "packet (the topology's rates)",
            "events": self.engine.events, "virtual_time_s": self.engine.now / NS,
            "packets": sum(w.frames for w in wires),
            "lost_on_failed_links": sum(w.dropped for w in wires),
            "frames_to_no_program": sum(h.unclaimed for h in self.fabric.hosts.values())
            + (self.fabric.chosts.unclaimed() if self.fabric.chosts is not None else 0),
            "finished": self.finished,
            # exact: every arrival at a switch checks the queue its packet joined
            "peak_queue_packets": peaks,
        }
        ev = self.engine.events
        sim_ms = self.engine.now / 1e6
        m.run["wall_clock"] = {
            "run_dir": str(cfg.run_dir), "wall_s": self.wall_s,
            "events_per_wall_s": ev / self.wall_s if self.wall_s else None,
            "wall_s_per_sim_ms": self.wall_s / sim_ms if sim_ms else None,
            # which of p4sim's paths ran each switch: it changes the speed, never a figure
            "dataplane": dict(Counter(sw.dp.dataplane for sw in self.fabric.switches.values())),
            "c_fabric": self.c_fabric,
            "c_hosts": self.c_hosts,
        }
        return m

    def tear_down(self) -> None:
        # Each switch's P4Runtime device runs a digest timer thread: left running, a process
        # that simulates many runs (the sim bench, a sweep worker) carried 582 of them, each
        # waking on its own, and its all-reduce took 18 min instead of 151 s.
        if self.local is not None:
            self.local.close()
        if self.tracing is not None:
            self.tracing.close()


def format_sim_summary(m: RunMetrics) -> str:
    sim, wall = m.run.get("sim", {}), m.run.get("wall_clock", {})
    vt = sim.get("virtual_time_s", 0.0)
    eps = wall.get("events_per_wall_s")
    s = m.summary
    lines = [format_summary(m)]
    if sim.get("link_rate_bps"):  # data-center times are microseconds: the ms rows read 0.0
        us = [f"{1e6 * v:.2f} us" if isinstance(v, float) and v == v else "-"
              for v in (s.get("fct_p50_s"), s.get("fct_p99_s"))]
        lines.append(f"  message time p50 / p99 in us     {us[0]} / {us[1]}")
        if s.get("step_time_p50_s") is not None:
            lines.append(f"  all-reduce step p50 / max in us  {1e6 * s['step_time_p50_s']:.2f} / "
                         f"{1e6 * s['step_time_max_s']:.2f}")
    lines += [
             f"  simulated {vt * 1e6:,.1f} us of virtual time: {sim.get('events', 0):,} events, "
             f"{sim.get('packets', 0):,} packets on links"
             + ("" if sim.get("finished", True) else " (stopped before the workload ended)"),
             f"  wall clock {wall.get('wall_s', 0.0):.1f} s"
             + (f", {eps:,.0f} events/s" if eps else "")
             + _dataplane_note(wall.get("dataplane", {}))
             + (f", {wall['wall_s_per_sim_ms']:.2f} s per simulated ms"
                if wall.get("wall_s_per_sim_ms") else "")]
    return "\n".join(lines)


def _dataplane_note(paths: dict[str, int]) -> str:
    """" (native data plane)" when every switch ran natively, else how many ran which path."""
    if not paths:
        return ""
    if set(paths) == {"native"}:
        return " (native data plane)"
    return " (" + ", ".join(f"{n} switches on the {p} path" for p, n in sorted(paths.items())) \
        + ")"


# Hosts from which a run draws its plots in a worker: the worker's import of matplotlib
# (~1.5 CPU s) pays only when the simulation lasts longer than that (k=8: 128 hosts, ~25 s);
# a small run's simulation is over first, and the worker would only add CPU beside it.
PLOT_WORKER_MIN_HOSTS = 64


def execute_sim(cfg: SimConfig) -> tuple[RunMetrics, Path]:
    # started first, so that its import of matplotlib runs on the second core while this
    # one simulates; write_report closes it, and the with closes it after a failed run
    big = len(cfg.topo.hosts) >= PLOT_WORKER_MIN_HOSTS
    with (start_plot_worker() if big else None) or nullcontext() as plots:
        return _execute_sim(cfg, plots)


def _execute_sim(cfg: SimConfig, plots: PlotWorker | None) -> tuple[RunMetrics, Path]:
    run = SimRun(cfg)
    with CollectorPolicy(SimRun.tune_collector) as run.collector_policy:
        m = run_experiment(run, len(cfg.workload.steps))
        run.collector_policy.quiet()
        peaks = m.run["sim"]["peak_queue_packets"]
        exact = {"peak_queue_depth": max(peaks.values())} if peaks else {}
        m.iteration = iteration_section(cfg.workload, {"steps": m.steps,
                                                       "messages": m.messages})
        return m, write_report(m, cfg.run_dir, exact, plots)
