"""Command lines of `cellfabric run` and `cellfabric cli`."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from controlplane.errors import ControlPlaneError
from controlplane.topology import CC_MODES, SPRAY_MODES, TopologyError, load_topology
from netlab.targets import ToolchainError, resolve_target
from topologies.workloads import WORKLOADS, WorkloadError, make_workload

TOPO_DIR = Path(__file__).resolve().parent


def find_topology(name: str) -> Path:
    """A path, or the name of a file in topologies/ (with or without .yaml)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (TOPO_DIR / name, TOPO_DIR / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(p.stem for p in TOPO_DIR.glob("*.yaml")))
    raise TopologyError(f"{name}: no such topology file (shipped: {known})")


_FAIL = re.compile(r"^(?P<link>[a-z0-9]+-[a-z0-9]+)@(?P<down>[\d.]+)(?::(?P<up>[\d.]+))?$")


def parse_fail(spec: str):
    from topologies.runner import LinkEvent

    m = _FAIL.match(spec)
    if not m:
        raise ValueError(f"--fail '{spec}': expected LINK@SECONDS[:UP_SECONDS], e.g. l1-s1@2:5")
    events = [LinkEvent(m["link"], float(m["down"]), up=False)]
    if m["up"]:
        if float(m["up"]) <= float(m["down"]):
            raise ValueError(f"--fail '{spec}': the link must come up after it went down")
        events.append(LinkEvent(m["link"], float(m["up"]), up=True))
    return events


def run_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellfabric run", description=(
        "Bring up an emulated fabric, run a workload through it, print and save a report."))
    ap.add_argument("topology", nargs="?", default="leaf-spine",
                    help="topology file or shipped name (default leaf-spine)")
    ap.add_argument("--target", choices=("embedded", "bmv2"), default=None)
    ap.add_argument("--workload", choices=WORKLOADS, default="permutation")
    ap.add_argument("--cc", choices=CC_MODES, default=None, help="default: the topology's")
    ap.add_argument("--spray", choices=SPRAY_MODES, default=None, help="default: the topology's")
    ap.add_argument("--size", type=int, default=256 * 1024, help="message bytes (default 256 KiB)")
    ap.add_argument("--count", type=int, default=2, help="messages per flow (default 2)")
    ap.add_argument("--senders", type=int, default=None, help="incast: number of senders")
    ap.add_argument("--fail", action="append", default=[], metavar="LINK@T[:T_UP]",
                    help="bring a link down at T seconds into the workload (and up at T_UP)")
    ap.add_argument("--pcap", action="store_true", help="per-port pcaps under the run folder")
    ap.add_argument("--switch-log", action="store_true",
                    help="switch packet logs under the run folder (BMv2: info level, at most "
                         "50 MB per switch); off by default, as they slow BMv2 20-36x")
    ap.add_argument("--results", default="results", help="results folder (default results/)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--step-timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    try:
        from topologies.runner import RunConfig, RunError, execute, print_summary

        topo = load_topology(find_topology(args.topology))
        topo.fabric = replace(topo.fabric, spray=args.spray or topo.fabric.spray,
                              cc=args.cc or topo.fabric.cc)
        target = resolve_target(args.target)
        hosts = sorted(topo.hosts, key=lambda h: int(re.sub(r"\D", "", h) or 0))
        leaf_of = {h: topo.hosts[h].leaves[0] for h in hosts}
        workload = make_workload(args.workload, hosts, args.size, args.count,
                                 senders=args.senders, leaf_of=leaf_of, seed=args.seed)
        events = [ev for spec in args.fail for ev in parse_fail(spec)]
        for ev in events:
            topo.link(ev.link)
        run_dir = Path(args.results) / time.strftime(
            f"%Y%m%d-%H%M%S-{topo.name}-{args.workload}-{topo.fabric.spray}-{topo.fabric.cc}")
        cfg = RunConfig(topo=topo, target=target, workload=workload, cc=topo.fabric.cc,
                        run_dir=run_dir, events=events, pcap=args.pcap,
                        switch_log=args.switch_log,
                        step_timeout_s=args.step_timeout)
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
    ap.add_argument("topology", nargs="?", default="leaf-spine")
    ap.add_argument("--target", choices=("embedded", "bmv2"), default=None)
    ap.add_argument("--results", default="results")
    args = ap.parse_args(argv)
    try:
        from mininet.cli import CLI

        from topologies.runner import FabricRun, RunConfig, RunError
        from topologies.workloads import Workload

        topo = load_topology(find_topology(args.topology))
        cfg = RunConfig(topo=topo, target=resolve_target(args.target),
                        workload=Workload("none", ()), cc=topo.fabric.cc,
                        run_dir=Path(args.results) / time.strftime(f"cli-%Y%m%d-%H%M%S-{topo.name}"))
        run = FabricRun(cfg)
        old_term = signal.signal(signal.SIGTERM,
                                 lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            run.bring_up()
            assert run.fnet is not None and run.fnet.net is not None
            print("hosts: " + ", ".join(f"{h} = {run.fnet.node_name(h)} ({topo.hosts[h].ip})"
                                        for h in topo.hosts))
            CLI(run.fnet.net)
        finally:
            run.tear_down()
            signal.signal(signal.SIGTERM, old_term)
    except (TopologyError, ToolchainError, ValueError, RunError, ControlPlaneError) as exc:
        print(f"cellfabric cli: error: {exc}", file=sys.stderr)
        return 2
    return 0
