"""Command lines of `cellfabric run` and `cellfabric cli`."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from cellfabric.collectives.scheduler import ChannelScheduler
from cellfabric.core.workloads import (
    COLLECTIVE_WORKLOADS,
    PREFIXED,
    WORKLOADS,
    Workload,
    WorkloadError,
    make_workload,
)
from cellfabric.nos.relay import PUNT_PATHS
from controlplane.errors import ControlPlaneError
from netlab.targets import ToolchainError, resolve_target
from topologies.catalog import resolve_topology
from topologies.generators import SPEC_HELP
from topologies.model import CC_MODES, SPRAY_MODES, Topology, TopologyError
from topologies.servers import ranks

TOPOLOGY_HELP = ("topology file, shipped name (leaf-spine, fat-tree, ...) or generator spec: "
                 + SPEC_HELP + "; default leaf-spine")


_FAIL = re.compile(r"^(?P<what>[a-z0-9]+(?:-[a-z0-9]+)?)@(?P<down>[\d.]+)(?::(?P<up>[\d.]+))?$")
FAIL_HELP = ("LINK@T[:T_UP] or SWITCH@T[:T_UP]: bring a link (a-b) down, or a switch (all of "
             "its links: a switch failure), at T seconds into the workload, and up at T_UP")


def parse_fail(spec: str, topo=None):
    """``l1-s1@2:5`` (a link) or, with the topology, ``c1@2`` (every link of switch c1)."""
    from cellfabric.core.config import LinkEvent

    m = _FAIL.match(spec)
    if not m:
        raise ValueError(f"--fail '{spec}': expected LINK@SECONDS[:UP_SECONDS] (e.g. l1-s1@2:5) "
                         "or SWITCH@SECONDS[:UP_SECONDS] (e.g. c1@2)")
    what = m["what"]
    links: tuple[str, ...] = (what,)
    if "-" not in what:
        if topo is None or what not in topo.switches:
            known = ", ".join(topo.switches) if topo is not None else "?"
            raise ValueError(f"--fail '{spec}': no switch '{what}' (switches: {known})")
        links = tuple(f"{lk.a}-{lk.b}" for lk in topo.links if what in (lk.a, lk.b))
    events = [LinkEvent(what, float(m["down"]), up=False, links=links)]
    if m["up"]:
        if float(m["up"]) <= float(m["down"]):
            raise ValueError(f"--fail '{spec}': the link must come up after it went down")
        events.append(LinkEvent(what, float(m["up"]), up=True, links=links))
    return events


def add_workload_options(ap: argparse.ArgumentParser) -> None:
    """The options `cellfabric run` and `cellfabric sim` share, with the same defaults."""
    ap.add_argument("topology", nargs="?", default="leaf-spine",
                    help=TOPOLOGY_HELP)
    ap.add_argument("--target", choices=("embedded", "bmv2"), default=None)
    ap.add_argument("--workload", choices=WORKLOADS, default="permutation")
    ap.add_argument("--cc", choices=CC_MODES, default=None, help="default: the topology's")
    ap.add_argument("--spray", choices=SPRAY_MODES, default=None, help="default: the topology's")
    ap.add_argument("--size", type=int, default=256 * 1024, help="message bytes (default 256 KiB)")
    ap.add_argument("--count", type=int, default=2, help="messages per flow (default 2)")
    ap.add_argument("--senders", type=int, default=None, help="incast: number of senders")
    ap.add_argument("--load", type=float, default=None, metavar="F",
                    help="offered load, 0 < F <= 1: each sending host is offered F of its link "
                         "rate, its --count messages per flow arriving as a seeded Poisson "
                         "process (permutation, all-to-all; default: back to back)")
    ap.add_argument("--channels", type=int, default=None, metavar="C",
                    help="collective workloads: C parallel rings or trees (NCCL's channels), "
                         "each over its own part of the buffer (default 1)")
    ap.add_argument("--chunk-size", type=int, default=None, metavar="BYTES",
                    help="collective workloads: pipeline each step in chunks of at most "
                         "BYTES (default: one chunk per step)")
    ap.add_argument("--gpus-per-server", type=int, default=None, metavar="G",
                    help="collective and train:/trace: workloads: G consecutive hosts (ranks) "
                         "per server (default: a server per leaf)")
    ap.add_argument("--channel-policy", default=None, metavar="static|topology|dynamic",
                    help="collective and train:/trace: workloads: how channels are "
                         "placed: 'static' (as NCCL: rank order, paths by the fabric's "
                         "hash), 'topology' (rails "
                         "respected, concurrent sends on disjoint uplinks), 'dynamic' "
                         "(topology's, re-planned each step around failed links and deep "
                         "queues); default: none, the plain lowering")
    ap.add_argument("--fail", action="append", default=[], metavar="LINK|SWITCH@T[:T_UP]",
                    help=FAIL_HELP)
    ap.add_argument("--credit-unscheduled", default="auto", metavar="auto|CELLS",
                    help="--cc credit: cells a flow sends before its first grant. 'auto' "
                         "(default): 16, and in `sim` at bit rates one base round trip of "
                         "cells (no round trip lost, but an incast's senders start together). "
                         "A number (1: the first cell is only a request to send) also caps "
                         "the granted cells on their way to each receiver at about one round "
                         "trip, so cells in flight toward it never exceed that cap plus "
                         "CELLS + 1 per sender: lossless incast, one round trip per message")
    ap.add_argument("--results", default="results", help="results folder (default results/)")
    ap.add_argument("--seed", type=int, default=1)


def parse_credit_unscheduled(text: str) -> int | None:
    """'auto' -> None; '1', '4' -> cells (at least 1: a receiver learns of a flow from its
    first cell)."""
    if text.strip() == "auto":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"--credit-unscheduled '{text}': expected 'auto' or a number of "
                         "cells >= 1")
    return int(text)


def prepare_workload(args: argparse.Namespace) -> tuple[Topology, Workload, list]:
    """Topology (with the --spray/--cc overrides), workload and link events of a command
    line; raises TopologyError, WorkloadError or ValueError with a one-line message."""
    topo, workload, events, _ = prepare_scheduled_workload(args)
    return topo, workload, events


def prepare_scheduled_workload(args: argparse.Namespace) -> tuple[Topology, Workload, list,
                                                                  ChannelScheduler | None]:
    """prepare_workload's, and the channel scheduler of ``--channel-policy`` (None without
    one): its rank orders are built into the workload, its paths placed step by step."""
    topo = resolve_topology(args.topology)
    topo.fabric = replace(topo.fabric, spray=args.spray or topo.fabric.spray,
                          cc=args.cc or topo.fabric.cc)
    hosts = sorted(topo.hosts, key=lambda h: int(re.sub(r"\D", "", h) or 0))
    # GPUs of a server are grouped by their server, not their leaf: a permutation then sends
    # every GPU to another server's (over the fabric, not within its server) and a ring
    # visits one GPU of each server in turn, as an inter-server ring does
    leaf_of = {h: topo.hosts[h].server or topo.hosts[h].leaves[0] for h in hosts}
    if topo.servers and args.workload.partition(":")[0] in PREFIXED:
        hosts = [r.host for r in ranks(topo)]  # train:/trace: ranks, a server's GPUs in order
    scheduler = _channel_scheduler(args, topo, hosts)
    workload = make_workload(args.workload, hosts, args.size, args.count,
                             senders=args.senders, leaf_of=leaf_of, seed=args.seed,
                             load=args.load, pod_of=pods_of_leaves(topo),
                             channels=args.channels, chunk_size=args.chunk_size,
                             server_of=servers_by_count(hosts, args.gpus_per_server)
                             or servers_in(topo, hosts),
                             order=scheduler.order if scheduler else None,
                             group_order=scheduler.order_over if scheduler else None)
    events = [ev for spec in args.fail for ev in parse_fail(spec, topo)]
    for ev in events:
        for link in ev.links:
            topo.link(link)  # an unknown link is a one-line TopologyError here
    return topo, workload, events, scheduler


def _channel_scheduler(args: argparse.Namespace, topo: Topology,
                       hosts: list[str]) -> ChannelScheduler | None:
    policy = getattr(args, "channel_policy", None)
    if policy is None:
        return None
    if (args.workload not in COLLECTIVE_WORKLOADS
            and args.workload.partition(":")[0] not in PREFIXED):
        raise WorkloadError(f"--channel-policy applies to the collective workloads "
                            f"({', '.join(COLLECTIVE_WORKLOADS)}) and train:/trace:, "
                            f"not to {args.workload}")
    return ChannelScheduler(policy, topo, hosts)


def servers_by_count(hosts: list[str], gpus: int | None) -> dict[str, str] | None:
    """``--gpus-per-server G``: hosts in order, G to a server (server0, server1, ...)."""
    if gpus is None:
        return None
    if gpus < 1:
        raise ValueError(f"--gpus-per-server {gpus}: expected at least 1")
    return {h: f"server{i // gpus}" for i, h in enumerate(hosts)}


def servers_in(topo: Topology, hosts: list[str]) -> dict[str, str] | None:
    """Host -> the AI server it is a GPU of, when the topology names servers (rail fabrics);
    None when it names none."""
    named = {h: topo.hosts[h].server for h in hosts}
    return {h: s for h, s in named.items() if s} or None


def pods_of_leaves(topo: Topology) -> dict[str, str]:
    """Leaf -> its pod, named by the tier-2 switches it connects to (a fat-tree's pod shares
    its aggregation switches; a leaf-spine's leaves all share the spines: one pod)."""
    pods = {}
    for name, sw in topo.switches.items():
        if sw.tier == 1:
            ups = sorted({lk.b if lk.a == name else lk.a for lk in topo.links_of(name)}
                         & {n for n, s in topo.switches.items() if s.tier == 2})
            pods[name] = ",".join(ups)
    return pods


def run_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric run", description=(
        "Bring up an emulated fabric, run a workload through it, print and save a report."))
    add_workload_options(ap)
    ap.add_argument("--pcap", action="store_true", help="per-port pcaps under the run folder")
    ap.add_argument("--switch-log", action="store_true",
                    help="switch packet logs under the run folder (BMv2: info level, at most "
                         "50 MB per switch); off by default, as they slow BMv2 20-36x")
    ap.add_argument("--step-timeout", type=float, default=120.0)
    ap.add_argument("--secure", action="store_true",
                    help="P4Runtime over mutual TLS: a CA made for the run in RUN/pki signs "
                         "every switch's certificate and the controller's; a client without "
                         "one cannot connect")
    ap.add_argument("--routing", choices=("central", "bgp"), default="central",
                    help="central: the controller computes and writes every route (default); "
                         "bgp: FRR (BGP+BFD) on every switch, in band over its CPU port, and "
                         "a route agent per switch writes what it learns")
    ap.add_argument("--bfd-ms", type=int, default=300, metavar="MS",
                    help="with --routing bgp: BFD's transmit/receive interval, detection after "
                         "3 missed (default 300 ms; a loaded machine may need more)")
    ap.add_argument("--punt", choices=PUNT_PATHS, default=PUNT_PATHS[0],
                    help="with --routing bgp: how FRR's frames reach the switch's CPU port: "
                         "veth (default: the port is a veth a relay process reads) or "
                         "p4runtime (--cpu-port: a PacketIn and a PacketOut per frame)")
    ap.add_argument("--trace-sample", type=int, default=0, metavar="N",
                    help="trace 1 packet in N at every switch to RESULTS/traces/ (real BMv2 "
                         "cannot sample: it logs every packet, which slows it) "
                         "(see `cellfabric trace`; default 0: off)")
    args = ap.parse_args(argv)
    if not 10 <= args.bfd_ms <= 60000:  # bfdd's own range for its intervals
        ap.error(f"--bfd-ms {args.bfd_ms}: expected 10 to 60000 (milliseconds)")
    if args.trace_sample > 0:  # read by each switch's command line (emulation.nodes)
        os.environ["CELLFABRIC_TRACE_SAMPLE"] = str(args.trace_sample)
    try:
        from cellfabric.emulation.runner import RunConfig, RunError, execute, print_summary

        topo, workload, events, scheduler = prepare_scheduled_workload(args)
        target = resolve_target(args.target)
        run_dir = Path(args.results) / time.strftime(
            f"%Y%m%d-%H%M%S-{topo.name}-{args.workload.partition(':')[0]}-"  # train:/trace:
            f"{topo.fabric.spray}-{topo.fabric.cc}")
        cfg = RunConfig(topo=topo, target=target, workload=workload, cc=topo.fabric.cc,
                        run_dir=run_dir, events=events, pcap=args.pcap,
                        switch_log=args.switch_log, secure=args.secure,
                        step_timeout_s=args.step_timeout, routing=args.routing,
                        bfd_ms=args.bfd_ms, punt=args.punt,
                        credit_unscheduled=parse_credit_unscheduled(args.credit_unscheduled),
                        scheduler=scheduler)
        metrics, path = execute(cfg)
    except (TopologyError, WorkloadError, ToolchainError, ValueError, RunError,
            ControlPlaneError) as exc:
        print(f"cellfabric run: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cellfabric run: interrupted; everything it started has been stopped",
              file=sys.stderr)
        return 130
    print_summary(metrics, path)
    return 0 if metrics.summary.get("valid") else 3


def cli_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric cli", description=(
        "Bring a topology up (tables installed) and open the Mininet CLI to explore it."))
    ap.add_argument("topology", nargs="?", default="leaf-spine", help=TOPOLOGY_HELP)
    ap.add_argument("--target", choices=("embedded", "bmv2"), default=None)
    ap.add_argument("--results", default="results")
    ap.add_argument("--secure", action="store_true",
                    help="P4Runtime over mutual TLS from a CA made in RUN/pki (as `run`)")
    ap.add_argument("--routing", choices=("central", "bgp"), default="central",
                    help="as `run`. With bgp, each switch's FRR answers vtysh in the "
                         "switch's namespace: `ip netns exec RUN-SWITCH vtysh --vty_socket "
                         "DIR` (the exact line per switch is printed before the CLI opens)")
    args = ap.parse_args(argv)
    try:
        from mininet.cli import CLI

        from cellfabric.core.workloads import Workload
        from cellfabric.emulation.runner import FabricRun, RunConfig, RunError

        topo = resolve_topology(args.topology)
        cfg = RunConfig(topo=topo, target=resolve_target(args.target),
                        workload=Workload("none", ()), cc=topo.fabric.cc, secure=args.secure,
                        routing=args.routing,
                        run_dir=Path(args.results) / time.strftime(f"cli-%Y%m%d-%H%M%S-{topo.name}"))
        run = FabricRun(cfg)
        old_term = signal.signal(signal.SIGTERM,
                                 lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            run.bring_up()
            assert run.fnet is not None and run.fnet.net is not None
            print("hosts: " + ", ".join(f"{h} = {run.fnet.node_name(h)} ({topo.hosts[h].ip})"
                                        for h in topo.hosts))
            if run.pki is not None:
                first = next(iter(topo.switches.values()))
                print(f"P4Runtime is mutual TLS: fabricctl --switch "
                      f"{run.fnet.switch(first.name).grpc_addr},{first.device_id} "
                      f"{run.pki.fabricctl_args()} --election-id 0,0 tables (a backup: "
                      "the controller holds 0,1)")
            if run.nos is not None:
                print("FRR per switch (vtysh in its namespace; e.g. show bgp summary, "
                      "show bfd peers, show ip route):")
                for name, hint in run.nos.summary()["vtysh"].items():
                    print(f"  {name}: {hint}")
            CLI(run.fnet.net)
        finally:
            run.tear_down()
            signal.signal(signal.SIGTERM, old_term)
    except (TopologyError, ToolchainError, ValueError, RunError, ControlPlaneError) as exc:
        print(f"cellfabric cli: error: {exc}", file=sys.stderr)
        return 2
    return 0
