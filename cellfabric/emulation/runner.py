"""`cellfabric run`: bring up a fabric, drive a workload through it, report, tear down.

    compile p4src/fabric.p4 -> start one switch process per topology switch (Mininet, either
    target) -> FabricController installs every entry and queue setting -> per workload step:
    receivers, then senders, in the Mininet hosts -> metrics from hosts and switches ->
    results/RUN/metrics.json + PNG plots + a summary table.

Everything the run starts is stopped on success, on error and on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellfabric.core import linkload
from cellfabric.core.hostplan import (
    StepPlan,
    cells_for,
    expected_arrival_s,
    host_line_rate,
    host_link_bps,
    plan_step,
    read_metrics,
    start_together,
)
from cellfabric.core.report import RunMetrics, format_summary, link_accounting, write_report
from cellfabric.core.validity import (
    loss_problems,
    over_rate_problems,
    service_problems,
    switch_drops,
)
from cellfabric.core.workloads import Workload
from cellfabric.emulation.admin import SwitchAdmin
from cellfabric.emulation.monitor import FabricMonitor
from cellfabric.emulation.network import FabricNet
from controlplane.fabric import Fabric
from controlplane.fabric_controller import FabricController
from netlab.targets import compile_p4
from topologies.model import Topology

ROOT = Path(__file__).resolve().parents[2]
FABRIC_P4 = ROOT / "p4src" / "fabric.p4"


class RunError(RuntimeError):
    pass


@dataclass
class LinkEvent:
    link: str  # what was named: a link "a-b" or a switch
    at_s: float
    up: bool
    links: tuple[str, ...] = ()  # the links it takes down or up (default: ``link`` itself)

    def __post_init__(self) -> None:
        if not self.links:
            self.links = (self.link,)


@dataclass
class RunConfig:
    topo: Topology
    target: str
    workload: Workload
    cc: str
    run_dir: Path
    events: list[LinkEvent] = field(default_factory=list)
    pcap: bool = False
    switch_log: bool = False  # per-packet switch logs (opt-in: they slow BMv2 down 20-36x)
    step_timeout_s: float = 120.0
    progress: bool = True
    credit_unscheduled: int | None = None  # --credit-unscheduled (None: auto)


def _say(msg: str) -> None:
    # Progress must never be what stops a teardown (a closed pipe raises BrokenPipeError).
    with contextlib.suppress(OSError):
        print(msg, flush=True)


class FabricRun:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.topo = cfg.topo
        self.fnet: FabricNet | None = None
        self.fabric: Fabric | None = None
        self.controller: FabricController | None = None
        self.monitor: FabricMonitor | None = None
        self.admins: dict[str, SwitchAdmin] = {}
        self.steps: list[StepPlan] = []
        self.step_times: list[dict[str, Any]] = []
        self.event_log: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []  # injected failures and their reroute times
        self.t0 = 0.0
        self.collector: Any = None
        self.load_before: linkload.Snapshot | None = None
        self.traffic_start: float | None = None
        self.load_after: linkload.Snapshot | None = None
        self._timers: list[threading.Timer] = []

    # -- bring-up ---------------------------------------------------------------------------
    def bring_up(self) -> None:
        cfg, topo = self.cfg, self.topo
        build = cfg.run_dir / "build"
        _say(f"[1/5] compiling {FABRIC_P4.relative_to(ROOT)} for {cfg.target}")
        json_path, p4info = compile_p4(FABRIC_P4, build, target=cfg.target)
        _say(f"[2/5] starting {len(topo.switches)} switches and {len(topo.hosts)} hosts")
        self.fnet = FabricNet(topo, cfg.target, None, cfg.run_dir, pcap=cfg.pcap,
                              switch_log=cfg.switch_log)
        self.fnet.build()
        dead = self.fnet.start()
        if dead:
            logs = cfg.run_dir / "logs"
            raise RunError(f"switches did not start: {', '.join(dead)} (logs in {logs})")
        self.admins = {
            name: SwitchAdmin(name, cfg.target, self.fnet.switch(name).thrift_port)
            for name in topo.switches}
        self.fabric = Fabric({
            name: (self.fnet.switch(name).grpc_addr, sw.device_id)
            for name, sw in topo.switches.items()}, reconnect=False)
        self.fabric.connect()
        _say("[3/5] installing tables, groups and queue settings")
        self.controller = FabricController(
            topo, self.fabric, p4info, json_path,
            queue_setter=self._set_queue,
            log=lambda m: self.event_log.append({"t": time.time(), "event": m}))
        diffs = self.controller.up()
        total = sum(d.writes for d in diffs.values())
        _say(f"      {total} entities written to {len(diffs)} switches")

    def _set_queue(self, sw: str, port: int, pps: int, depth: int) -> None:
        # The link's rate is shared by the data and the feedback queue (see SwitchAdmin).
        assert self.fnet is not None
        self.admins[sw].set_queue(port, pps, depth, priorities=self.fnet.priority_queues)

    # -- traffic ----------------------------------------------------------------------------
    def run_workload(self) -> None:
        cfg = self.cfg
        assert self.fnet is not None and self.fabric is not None
        self.monitor = FabricMonitor(self.topo, self.fabric, self.admins)
        self.load_before = linkload.snapshot(self.topo, self.fabric, self._switch_ifnames())
        self.monitor.start()
        out = cfg.run_dir / "hosts"
        out.mkdir(parents=True, exist_ok=True)
        n_steps = len(cfg.workload.steps)
        _say(f"[4/5] workload {cfg.workload.name}: {n_steps} step(s), "
             f"{cfg.workload.total_bytes / 1e6:.2f} MB, cc {cfg.cc}, spray {self.topo.fabric.spray}")
        self._start_collector(out)
        self.t0 = time.time()
        self._timers = [threading.Timer(ev.at_s, self._link_event, args=(ev,))
                        for ev in cfg.events]
        try:
            qp = 1
            for i, step in enumerate(cfg.workload.steps):
                plan = plan_step(self.topo, step, i, out, self.fnet.host_ifname, cfg.cc, qp,
                                 credit_unscheduled=cfg.credit_unscheduled)
                qp += len(step.transfers)
                self.steps.append(plan)
                start = time.time()
                self._run_step(plan)
                self.step_times.append({"step": i, "wall_s": time.time() - start})
            self.load_after = linkload.snapshot(self.topo, self.fabric, self._switch_ifnames(),
                                                kernel_first=True)
        finally:
            for t in self._timers:
                t.cancel()
            self.monitor.stop()
            if self.collector is not None:
                _stop_proc(self.collector.proc)

    def _switch_ifnames(self) -> dict[str, dict[int, str]]:
        assert self.fnet is not None
        return {sw: self.fnet.switch(sw).port_map() for sw in self.topo.switches}

    def _start_collector(self, out: Path) -> None:
        """With a collector host, it runs the INT collector for the whole run: switch sinks
        send it Telemetry Reports, or (host-sink) the receiving hosts do."""
        from cellfabric.core.hostplan import HostCommand, host_cli

        fab = self.topo.fabric
        if fab.int.mode == "off" or not fab.int.collector:
            return
        metrics = out / "collector.json"
        argv = [*host_cli(), "collect", "--records", str(out / "int.jsonl"),
                "--metrics", str(metrics)]
        self.collector = HostCommand(fab.int.collector, argv, metrics)
        self._start(self.collector, out / "collector.log")
        time.sleep(1.0)

    def _link_event(self, ev: LinkEvent) -> None:
        """Take the links down (or up) in Mininet, then let the controller re-plan; the time
        from the injection to the last switch written is the reroute time."""
        assert self.fnet is not None and self.controller is not None
        t_inject = time.time()
        for link in ev.links:
            self.fnet.set_link(link, ev.up)
        what = ev.link if len(ev.links) == 1 else f"{ev.link} ({len(ev.links)} links)"
        self.event_log.append({"t": t_inject, "event": f"link {what} "
                               f"{'up' if ev.up else 'down'} (injected)"})
        record: dict[str, Any] = {"what": ev.link, "links": list(ev.links), "up": ev.up,
                                  "at_s": t_inject - self.t0, "reroute_s": None, "writes": 0}
        try:
            diffs = self.controller.set_links(list(ev.links), ev.up)
        except Exception as exc:
            self.event_log.append({"t": time.time(), "event": f"controller: {exc}"})
        else:
            record["reroute_s"] = time.time() - t_inject
            record["writes"] = sum(d.writes for d in diffs.values())
            self.event_log.append({"t": time.time(), "event": (
                f"link {what} {'up' if ev.up else 'down'}: rerouted in "
                f"{1000 * record['reroute_s']:.0f} ms (controller wrote {record['writes']} "
                f"updates on {sum(1 for d in diffs.values() if d.writes)} switches)")})
        self.failures.append(record)

    def _start(self, hp, log: Path, extra: tuple[str, ...] | list[str] = ()) -> None:
        assert self.fnet is not None
        node = self.fnet.host(hp.host)
        hp.log = log
        with open(log, "wb") as fh:
            hp.proc = node.popen([*hp.command(), *extra], stdout=fh, stderr=subprocess.STDOUT)

    def _run_step(self, plan: StepPlan) -> None:
        start_together(plan, self.cfg.run_dir / "hosts", self._start)
        if self.traffic_start is None:
            self.traffic_start = time.time()  # no data can move before the senders go
        if plan.index == 0:
            # Failure times (and the plots' time axis) count from the moment the senders go,
            # so that "l1-s1@2" hits traffic two seconds in, whatever process start-up took.
            self.t0 = self.traffic_start
            for t in self._timers:
                t.daemon = True
                t.start()
        # Offered load spreads the messages' arrivals out: the limit counts from the last
        # (twice the mean window: a Poisson window that long is rare).
        deadline = time.time() + self.cfg.step_timeout_s + 2 * expected_arrival_s(
            self.topo, self.cfg.workload.steps[plan.index], self.cfg.cc)
        last = 0.0
        while time.time() < deadline:
            running = [hp for hp in plan.senders + plan.receivers if hp.proc.poll() is None]
            if not running:
                break
            if not any(hp.proc.poll() is None for hp in plan.senders):
                # Every sender has its ACKs (or gave up): nothing is left for a receiver to
                # answer, however long it would linger for a resend after a lost last ACK.
                for hp in plan.receivers:
                    _stop_proc(hp.proc)
                continue
            if self.cfg.progress and time.time() - last >= 2.0:
                last = time.time()
                senders = sum(1 for hp in plan.senders if hp.proc.poll() is None)
                _say(f"      step {plan.index + 1}/{len(self.cfg.workload.steps)}: "
                     f"{senders} sender(s) running, {time.time() - self.t0:.0f}s elapsed")
            time.sleep(0.2)
        for hp in plan.senders + plan.receivers:
            _stop_proc(hp.proc)

    # -- results ----------------------------------------------------------------------------
    def collect(self) -> RunMetrics:
        cfg, topo = self.cfg, self.topo
        m = RunMetrics(run={
            "name": cfg.run_dir.name, "topology": topo.name, "target": cfg.target,
            "workload": cfg.workload.name, "cc": cfg.cc, "spray": topo.fabric.spray,
            "cell_size": topo.fabric.cell_size, "t0": self.t0, "events": self.event_log,
            "failures": self.failures, "load": cfg.workload.load or None,
        })
        if self.monitor is not None:
            m.links = self.monitor.link_samples()
            m.queues = self.monitor.queue_samples()
            counters = self.monitor.counters()
            if self.monitor.errors:
                m.run["monitor_errors"] = self.monitor.errors
        else:
            counters = {}
        stats = {name: a.stats() for name, a in self.admins.items()}
        service: dict[str, dict[int, dict[str, Any]]] = {}
        for name, st in stats.items():
            m.drops[name] = switch_drops(counters.get(name, {}), st)
            if st is not None:
                service[name] = {int(p): v for p, v in st.get("ports", {}).items()}
        self._add_unread_frames(m, service)
        # A port whose link was failed on purpose cannot serve its rate: not the machine's fault.
        excluded = self._failed_ports()
        for name, ports in excluded.items():
            for port in ports:
                service.get(name, {}).pop(port, None)
        if excluded:
            m.run["validity_excluded_ports"] = {n: sorted(p) for n, p in excluded.items()}
        m.run["invalid_reasons"] = service_problems(service)
        if self.load_before is not None and self.load_after is not None:
            # The window runs from the first sender's start (the counters before it saw only
            # ARP) to the end of the last step, plus the slot the last packet counted holds
            # its line after the read (so a link busy throughout reads at most 100%).
            start = self.traffic_start or self.load_before["t"]
            paced = self.fnet.priority_queues if cfg.target == "bmv2" and self.fnet else 1
            end = self.load_after["t"] + linkload.last_slot_s(topo, paced)
            m.link_load = {"window_s": max(1e-3, end - start),
                           "links": linkload.link_totals(topo, self.load_before,
                                                         self.load_after)}
            m.run["invalid_reasons"] += over_rate_problems(
                link_accounting(m.link_load["links"], m.link_load["window_s"])["directions"])
        self._collect_hosts(m)
        m.run["invalid_reasons"] += loss_problems(cfg.target, m.drops, m.flows)
        if self.collector is not None:
            m.telemetry = read_metrics(self.collector.metrics) or {}
        if len(cfg.workload.steps) > 1:
            m.steps = step_durations(m, self.step_times)
        return m

    def _add_unread_frames(self, m: RunMetrics, service: dict[str, dict[int, dict]]) -> None:
        """Frames the kernel received on a switch's port but its pipeline never counted
        (linkload.unread_frames): the kernel dropped them, the switch reading too slowly. A
        target that counts its socket drops itself (p4sim) keeps its own figure; for BMv2 this
        is the only measure of them."""
        if self.load_before is None or self.load_after is None:
            return
        for name, ports in linkload.unread_frames(self.load_before, self.load_after).items():
            m.drops.setdefault(name, {})["unread_frames"] = sum(ports.values())
            for port, frames in ports.items():
                st = service.setdefault(name, {}).setdefault(port, {})
                st.setdefault("rx_socket_drops", frames)

    def _failed_ports(self) -> dict[str, set[int]]:
        """Switch ports at either end of a link that an injected failure took down."""
        out: dict[str, set[int]] = {}
        for failure in self.failures:
            if failure["up"]:
                continue
            for link in failure["links"]:
                lk = self.topo.link(link)
                for node, peer in ((lk.a, lk.b), (lk.b, lk.a)):
                    if node in self.topo.switches:
                        out.setdefault(node, set()).update(self.topo.port_of(node, peer))
        return out

    def _collect_hosts(self, m: RunMetrics) -> None:
        collect_host_metrics(m, self.topo, self.steps)

    # -- teardown ---------------------------------------------------------------------------
    def tear_down(self) -> None:
        """Stop hosts, controller connections, switches and links; each step runs even if an
        earlier one failed, so nothing is left behind."""
        procs = [self.collector] if self.collector is not None else []
        procs += [hp for plan in self.steps for hp in plan.senders + plan.receivers]
        for hp in procs:
            if hp.proc is not None:
                with contextlib.suppress(Exception):
                    _stop_proc(hp.proc)
        if self.fabric is not None:
            with contextlib.suppress(Exception):
                self.fabric.close()
        if self.fnet is not None:
            self.fnet.stop()


def collect_host_metrics(m: RunMetrics, topo: Topology, steps: list[StepPlan],
                         read: Any = read_metrics, line_rate: Any = host_line_rate,
                         base_latency: Any = None) -> None:
    """Messages, flows and reorder figures from the host programs' metrics files (``read``
    maps a path to its JSON; ``line_rate(topo, host)`` the cells/s a host sends at); shared
    by the emulated runner and the simulator.

    A message's ideal time is its cells at the bottleneck's rate and share, plus
    ``base_latency(src, dst)``: what the idle path adds on top (the last cell's way to the
    receiver and its ACK's way back; the sender's message time ends at that ACK). The
    simulator knows it exactly at data-center settings, where a round trip is a hundred cell
    times; in the emulation (packet mode) it is far below one cell time and taken as 0."""
    for plan in steps:
        share_dst: dict[str, int] = {}
        share_src: dict[str, int] = {}
        for hp in plan.senders:
            t = hp.transfer
            share_dst[t.dst] = share_dst.get(t.dst, 0) + 1
            share_src[t.src] = share_src.get(t.src, 0) + 1
        for hp in plan.senders:
            t = hp.transfer
            data = read(hp.metrics) or {}
            rate = min(line_rate(topo, t.src), line_rate(topo, t.dst))
            # Under offered load a message's ideal is the line to itself (the usual FCT
            # slowdown); back to back, its flows share the busiest end all the time.
            share = 1 if t.load else max(share_dst[t.dst], share_src[t.src])
            bottleneck = t.dst if share_dst[t.dst] >= share_src[t.src] else t.src
            base = base_latency(t.src, t.dst) if base_latency else 0.0
            cells = cells_for(t.size, topo.fabric.cell_size)
            ideal = cells * share / rate + base
            # What this flow's cells take of its bottleneck: several senders into one host
            # can fill its whole link (the feedback queue takes its share only when it has
            # packets); one sender goes no faster than its own pacing.
            line = min((lk.queue.rate_pps for lk in topo.links_of(bottleneck)), default=rate)
            pace = max(rate, line) if share > 1 else rate
            work = cells / pace
            fcts = data.get("fct_list_s") or []
            done = int(data.get("messages_completed", 0))
            for k in range(t.count):
                fct = fcts[k] if k < len(fcts) else None
                if fct is None and k < done and not fcts:
                    fct = (data.get("fct_s") or {}).get("avg")
                m.messages.append({"src": t.src, "dst": t.dst, "size": t.size,
                                   "step": plan.index, "fct_s": fct, "ideal_s": ideal,
                                   "base_latency_s": base, "share": share,
                                   "bottleneck": bottleneck, "work_s": work,
                                   "slot_s": 1 / pace})
            key = f"{t.src}->{t.dst}"
            m.flows[key] = {"samples": _rate_samples(data, topo.fabric.cell_size),
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
    for st in step_times:
        times = [x["fct_s"] for x in m.messages if x["step"] == st["step"]]
        st["duration_s"] = (max(times) if times and None not in times else None)
        st["ideal_s"] = max((x["ideal_s"] for x in m.messages
                             if x["step"] == st["step"]), default=None)
    return step_times


def _rate_samples(data: dict[str, Any], cell: int) -> list[list[float]]:
    """The sender's rate history (bits/s) as cells per second over wall-clock time."""
    frame_bits = 8 * max(1, int((data.get("cells") or {}).get("frame_bytes", cell + 58)))
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


def _stop_proc(proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def execute(cfg: RunConfig) -> tuple[RunMetrics, Path]:
    """Run one experiment end to end; always tears down what it started."""
    run = FabricRun(cfg)
    old = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # Ctrl-C must stop a run even when started from a shell that ignores SIGINT for it.
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run.bring_up()
        run.run_workload()
        metrics = run.collect()
    finally:
        try:
            _say("[5/5] tearing down")
            run.tear_down()
        finally:
            signal.signal(signal.SIGTERM, old)
            signal.signal(signal.SIGINT, old_int)
    path = write_report(metrics, cfg.run_dir)
    return metrics, path


def print_summary(metrics: RunMetrics, path: Path) -> None:
    print()
    print(format_summary(metrics))
    print(f"  results: {path.parent}")
    sys.stdout.flush()
