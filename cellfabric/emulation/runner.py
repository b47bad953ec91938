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

from cellfabric.collectives.iteration import iteration_section
from cellfabric.collectives.scheduler import ChannelScheduler, FabricView
from cellfabric.core import linkload
from cellfabric.core.config import FABRIC_P4, ROOT, LinkEvent
from cellfabric.core.experiment import run_experiment, run_header
from cellfabric.core.hostmetrics import collect_host_metrics, step_durations
from cellfabric.core.hostplan import (
    StepPlan,
    expected_arrival_s,
    plan_step,
    read_metrics,
    start_together,
)
from cellfabric.core.report import (
    RunMetrics,
    format_summary,
    link_accounting,
    summarize,
    write_report,
)
from cellfabric.core.validity import (
    duplicate_totals,
    loss_problems,
    over_rate_problems,
    service_problems,
    switch_drops,
)
from cellfabric.core.workloads import Workload
from cellfabric.emulation.admin import SwitchAdmin
from cellfabric.emulation.monitor import FabricMonitor
from cellfabric.emulation.network import FabricNet
from cellfabric.emulation.secure import RunPki
from cellfabric.nos.relay import PUNT_PATHS
from controlplane.errors import ControlPlaneError
from controlplane.fabric import Fabric
from controlplane.fabric_controller import FABRIC_ROLE, FabricController, fabric_role_config
from controlplane.fabric_plan import CONTROL_PRIORITY, CONTROL_QUEUES, QueuePlan
from controlplane.fabric_plan import CPU_PORT as FABRIC_CPU_PORT
from netlab.hosts import stop_process
from netlab.targets import compile_p4
from topologies.model import Topology

# fabric.p4's default CPU_PORT (p4src/include/defines.p4): under bgp, the port each switch
# maps to a veth its relay reads
CPU_PORT = FABRIC_CPU_PORT


class RunError(RuntimeError):
    pass


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
    secure: bool = False  # --secure: mutual TLS on every switch's P4Runtime (RUN/pki)
    routing: str = "central"  # --routing: central (the controller) or bgp (FRR per switch)
    bfd_ms: int = 300  # --bfd-ms: BFD transmit and receive interval (detection: 3 of them)
    punt: str = "veth"  # --punt: FRR's frames to the CPU port (cellfabric.nos.relay.RELAYS)
    scheduler: ChannelScheduler | None = None  # --channel-policy: places each step's sends

    def __post_init__(self) -> None:
        if self.punt not in PUNT_PATHS:
            raise ValueError(f"punt {self.punt!r}: expected one of {', '.join(PUNT_PATHS)}")


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
        self.down: frozenset[frozenset[str]] = frozenset()  # links down (pairs of node names)
        self.t0 = 0.0
        self.collector: Any = None
        self.load_before: linkload.Snapshot | None = None
        self.traffic_start: float | None = None
        self.load_after: linkload.Snapshot | None = None
        self._timers: list[threading.Timer] = []
        # Each link event runs on its own timer thread; the controller re-plans one event at a
        # time, in the order they were injected (a recovery re-planned while the failure's
        # plan was still being written once modified a group that plan had just deleted).
        self._replan_lock = threading.Lock()
        self._qp = 1  # the next flow's queue pair number (unique over the whole workload)
        self.out = cfg.run_dir / "hosts"
        self.pki: RunPki | None = None
        self.nos: Any = None  # cellfabric.nos.fabric_nos.FabricNos under --routing bgp
        self.bgp: dict[str, Any] = {}

    # -- bring-up ---------------------------------------------------------------------------
    def bring_up(self) -> None:
        cfg, topo = self.cfg, self.topo
        build = cfg.run_dir / "build"
        _say(f"[1/5] compiling {FABRIC_P4.relative_to(ROOT)} for {cfg.target}")
        json_path, p4info = compile_p4(FABRIC_P4, build, target=cfg.target)
        if cfg.secure:
            self.pki = RunPki.create(cfg.run_dir / "pki", list(topo.switches))
        secured = f" (P4Runtime over mutual TLS, CA in {cfg.run_dir / 'pki'})" if self.pki else ""
        _say(f"[2/5] starting {len(topo.switches)} switches and {len(topo.hosts)} hosts{secured}")
        self.fnet = FabricNet(topo, cfg.target, None, cfg.run_dir, pcap=cfg.pcap,
                              switch_log=cfg.switch_log, pki=self.pki,
                              cpu_port=CPU_PORT if self._punt == "p4runtime" else None,
                              cpu_link_port=CPU_PORT if self._punt == "veth" else None,
                              # a NOS's own frames get a queue of their own, off the line
                              priority_queues=CONTROL_QUEUES if self._punt else 2)
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
            for name, sw in topo.switches.items()}, reconnect=False,
            tls=self.pki.client_tls() if self.pki else None,
            # its own P4Runtime role: an operator's client in another role (or the default
            # one, e.g. fabricctl) is a primary of its own, never the controller's rival
            role=FABRIC_ROLE, role_config=self._controller_role_config())
        self.fabric.connect()
        _say("[3/5] installing tables, groups and queue settings")
        self.controller = self._controller_class()(
            topo, self.fabric, p4info, json_path,
            queue_setter=self._set_queue,
            log=lambda m: self.event_log.append({"t": time.time(), "event": m}),
            # real BMv2 cannot shrink a group in place: a reroute writes new groups
            modify_groups=cfg.target != "bmv2")
        diffs = self.controller.up()
        total = sum(d.writes for d in diffs.values())
        _say(f"      {total} entities written to {len(diffs)} switches")
        if cfg.routing == "bgp":
            self._start_bgp()

    @property
    def _punt(self) -> str | None:
        """How the switches' CPU ports carry FRR's frames (None: central routing, no NOS)."""
        return self.cfg.punt if self.cfg.routing == "bgp" else None

    def _controller_class(self) -> type[FabricController]:
        if self.cfg.routing == "bgp":  # routes and groups are the route agents'
            from cellfabric.nos.base_controller import BaseController
            return BaseController
        return FabricController

    def _controller_role_config(self) -> Any:
        if self.cfg.routing == "bgp":
            from cellfabric.nos.base_controller import base_role_config
            return base_role_config()
        return fabric_role_config()

    def _start_bgp(self) -> None:
        """FRR, relays and route agents on every switch, then wait for BGP to converge."""
        from cellfabric.nos.fabric_nos import FabricNos
        from cellfabric.nos.frr import FrrError
        from cellfabric.nos.frr_config import BfdTimers
        from cellfabric.nos.namespace import NamespaceError

        assert self.fnet is not None and self.controller is not None and self.fabric is not None
        cfg, topo = self.cfg, self.topo
        how = ("a veth its relay process reads" if self._punt == "veth"
               else "PacketIn and PacketOut over P4Runtime")
        _say("      --routing bgp: FRR (zebra, bfdd, bgpd) in a namespace per switch, "
             f"in band over each switch's CPU port ({CPU_PORT}: {how})")
        self.nos = FabricNos(topo, cfg.run_dir.name, cfg.run_dir.resolve() / "frr", {
            name: (self.fnet.switch(name).grpc_addr, sw.device_id)
            for name, sw in topo.switches.items()},
            log=lambda m: self.event_log.append({"t": time.time(), "event": m}),
            timers=BfdTimers(tx_ms=cfg.bfd_ms, rx_ms=cfg.bfd_ms),
            # real BMv2 has no P4Runtime roles: relays and agents use the controller's streams
            shared=dict(self.fabric.connections) if cfg.target == "bmv2" else None,
            cpu_ifaces=({name: self.fnet.cpu_relay_ifname(name) for name in topo.switches}
                        if self._punt == "veth" else None))
        try:
            self.nos.start()
            converged = self.nos.wait_converged()
        except (FrrError, NamespaceError, ControlPlaneError) as exc:
            raise RunError(str(exc)) from exc
        self.bgp = {"converged_s": converged, "bfd_ms": cfg.bfd_ms, **self.nos.summary()}
        _say(f"      BGP converged in {converged:.1f} s: every switch forwards every host "
             f"prefix ({self.bgp['sessions']} sessions, "
             f"{self.bgp['route_agents']} route agents)")
        self.event_log.append({"t": time.time(), "event": f"BGP converged in {converged:.2f} s"})

    def _set_queue(self, sw: str, queue: QueuePlan) -> None:
        # The link's rate is shared by the data and the feedback queue (see SwitchAdmin).
        assert self.fnet is not None
        self.admins[sw].apply_queue(queue, priorities=self.fnet.priority_queues)

    # -- traffic ----------------------------------------------------------------------------
    def start_workload(self) -> None:
        cfg = self.cfg
        assert self.fnet is not None and self.fabric is not None
        self.monitor = FabricMonitor(self.topo, self.fabric, self.admins)
        self.load_before = linkload.snapshot(self.topo, self.fabric, self._switch_ifnames())
        self.monitor.start()
        self.out.mkdir(parents=True, exist_ok=True)
        n_steps = len(cfg.workload.steps)
        _say(f"[4/5] workload {cfg.workload.name}: {n_steps} step(s), "
             f"{cfg.workload.total_bytes / 1e6:.2f} MB, cc {cfg.cc}, spray {self.topo.fabric.spray}")
        self._start_collector(self.out)
        self.t0 = time.time()
        self._timers = [threading.Timer(ev.at_s, self._link_event, args=(ev,))
                        for ev in cfg.events]

    def run_step(self, index: int) -> bool:
        cfg = self.cfg
        assert self.fnet is not None and self.fabric is not None
        step = cfg.workload.steps[index]
        if cfg.scheduler is not None:
            # the channel scheduler's hook between steps: the emulation gives it the links
            # down (its queue telemetry is the simulator's)
            step = cfg.scheduler.place(index, step, FabricView(down=self.down))
        plan = plan_step(self.topo, step, index, self.out, self.fnet.host_ifname, cfg.cc,
                         self._qp, credit_unscheduled=cfg.credit_unscheduled)
        self._qp += len(step.transfers)
        self.steps.append(plan)
        start = time.time()
        self._run_step(plan)
        self.step_times.append({"step": index, "wall_s": time.time() - start})
        if index == len(cfg.workload.steps) - 1:
            self.load_after = linkload.snapshot(self.topo, self.fabric, self._switch_ifnames(),
                                                kernel_first=True)
        return True

    def finish_workload(self) -> None:
        for t in self._timers:
            t.cancel()
            if self.nos is not None and t.is_alive():
                t.join()  # a failure being measured: its record must be in the metrics
        if self.monitor is not None:
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
            try:
                self.fnet.set_link(link, ev.up, blackhole=self.cfg.target == "bmv2")
            except RuntimeError as exc:  # the run goes on: its report shows what this cost
                self.event_log.append({"t": time.time(), "event": f"link state: {exc}"})
            spec = self.topo.link(link)
            pair = frozenset((spec.a, spec.b))
            self.down = self.down - {pair} if ev.up else self.down | {pair}
        what = ev.link if len(ev.links) == 1 else f"{ev.link} ({len(ev.links)} links)"
        self.event_log.append({"t": t_inject, "event": f"link {what} "
                               f"{'up' if ev.up else 'down'} (injected)"})
        record: dict[str, Any] = {"what": ev.link, "links": list(ev.links), "up": ev.up,
                                  "at_s": t_inject - self.t0, "reroute_s": None, "writes": 0}
        if self.nos is not None:
            self._bgp_link_event(ev, what, t_inject, record)
            return
        try:
            with self._replan_lock:
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

    def _bgp_link_event(self, ev: LinkEvent, what: str, t_inject: float,
                        record: dict[str, Any]) -> None:
        """Under BGP the switches reroute by themselves: only measure them."""
        timing = self.nos.measure_failure(list(ev.links), ev.up, t_inject)
        record.update(timing, routing="bgp")
        if timing["reprogram_s"] is not None:
            record["reroute_s"] = timing["reprogram_s"]

        def ms(v: float | None) -> str:
            return "not seen" if v is None else f"{1000 * v:.0f} ms"
        self.event_log.append({"t": time.time(), "event": (
            f"link {what} {'up' if ev.up else 'down'}: BFD {ms(timing['detect_s'])}, "
            f"BGP converged {ms(timing['converge_s'])}, "
            f"reprogrammed {ms(timing['reprogram_s'])}")})
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
        m = RunMetrics(run=run_header(cfg.run_dir.name, topo, cfg.target, cfg.workload,
                                      cfg.cc, self.event_log, t0=self.t0,
                                      failures=self.failures))
        if cfg.secure:
            m.run["p4runtime"] = "mutual TLS"
        m.run["routing"] = cfg.routing
        if self.bgp:
            m.run["bgp"] = self.bgp
        if self.monitor is not None:
            m.links = self.monitor.samples.link_samples(self.topo)
            m.queues = self.monitor.samples.queue_samples()
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
            # (the control queue's frames are off the line and out of its load)
            paced = (min(self.fnet.priority_queues, CONTROL_PRIORITY)
                     if cfg.target == "bmv2" and self.fnet else 1)
            end = self.load_after["t"] + linkload.last_slot_s(topo, paced)
            m.link_load = {"window_s": max(1e-3, end - start),
                           "links": linkload.link_totals(topo, self.load_before,
                                                         self.load_after)}
            m.run["invalid_reasons"] += over_rate_problems(
                link_accounting(m.link_load["links"], m.link_load["window_s"])["directions"])
        self._collect_hosts(m)
        if self.bgp:
            s = summarize(m)
            lost = s["messages_total"] - s["messages_completed"]
            self.bgp["messages_lost"] = lost
            if self.nos is not None:  # what each switch's routes did while the workload ran
                self.bgp["routes_during_workload"] = self.nos.route_health(
                    self.traffic_start or self.t0 or 0.0)
            for failure in self.failures:
                failure["messages_lost_in_run"] = lost
        m.run["invalid_reasons"] += loss_problems(cfg.target, m.drops, m.flows,
                                                  duplicate_totals(m.reorder))
        if self.collector is not None:
            m.telemetry = read_metrics(self.collector.metrics) or {}
        if len(cfg.workload.steps) > 1:
            m.steps = step_durations(m, self.step_times)
        if cfg.scheduler is not None:
            m.run["channel_scheduler"] = cfg.scheduler.summary()
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
        _say("[5/5] tearing down")
        procs = [self.collector] if self.collector is not None else []
        procs += [hp for plan in self.steps for hp in plan.senders + plan.receivers]
        for hp in procs:
            if hp.proc is not None:
                with contextlib.suppress(Exception):
                    _stop_proc(hp.proc)
        if self.nos is not None:
            self.nos.stop()
        if self.fabric is not None:
            with contextlib.suppress(Exception):
                self.fabric.close()
        if self.fnet is not None:
            self.fnet.stop()


def _stop_proc(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        stop_process(proc)


def execute(cfg: RunConfig) -> tuple[RunMetrics, Path]:
    """Run one experiment end to end; always tears down what it started."""
    run = FabricRun(cfg)
    old = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # Ctrl-C must stop a run even when started from a shell that ignores SIGINT for it.
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        metrics = run_experiment(run, len(cfg.workload.steps))
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
    metrics.iteration = iteration_section(cfg.workload, {"steps": metrics.steps,
                                                         "messages": metrics.messages})
    path = write_report(metrics, cfg.run_dir)
    return metrics, path


def print_summary(metrics: RunMetrics, path: Path) -> None:
    print()
    print(format_summary(metrics))
    print(f"  results: {path.parent}")
    sys.stdout.flush()
