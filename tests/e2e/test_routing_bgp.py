"""`cellfabric run --routing bgp` on the leaf-spine fabric (p4sim): FRR on every switch, in band,
route agents programming what BGP learned. Every message is delivered, with and without a
link failure mid-transfer; the failure is detected by BFD, withdrawn by BGP and reprogrammed by
the agents (each time is recorded; none is asserted against the clock). The run leaves no
namespace and no FRR daemon behind."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.core.workloads import permutation
from cellfabric.emulation.runner import RunConfig, execute
from cellfabric.nos.frr import frr_available
from cellfabric.nos.namespace import run_namespaces
from cellfabric.run_cli import parse_fail
from topologies.model import load_topology

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
              pytest.mark.skipif(not frr_available(), reason="FRR not installed (make setup)")]
ROOT = Path(__file__).resolve().parents[2]


def _frr_of_run(run_id: str) -> list[int]:
    """PIDs of FRR daemons whose command line names the run's folders."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "/usr/lib/frr/" in cmd and run_id in cmd:
                pids.append(int(entry.name))
    return pids


def _run(tmp_path: Path, fail: str | None, punt: str = "veth"):
    topo = load_topology(ROOT / "topologies" / "leaf-spine.yaml")
    hosts = sorted(topo.hosts, key=lambda h: int(h[1:]))
    cfg = RunConfig(topo=topo, target="embedded", workload=permutation(hosts, 128 * 1024, 2),
                    # namespaces are named after the run folder: unique per test run
                    cc=topo.fabric.cc, run_dir=tmp_path / f"bgp-{secrets.token_hex(3)}",
                    routing="bgp", punt=punt,
                    events=parse_fail(fail, topo) if fail else [], step_timeout_s=120,
                    progress=False)
    links = _links()
    metrics, _ = execute(cfg)
    assert run_namespaces(cfg.run_dir.name) == []
    assert _frr_of_run(cfg.run_dir.name) == []
    assert _links() - links == set()  # the CPU-port veths went with the switches
    return metrics


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(": ")[1].split("@")[0] for line in out.splitlines() if ": " in line}


@pytest.mark.parametrize(("punt", "path"), [("veth", "CPU port veth"),
                                            ("p4runtime", "P4Runtime PacketIn/PacketOut")])
def test_bgp_routing_delivers_every_message_through_a_link_failure(
        tmp_path: Path, punt: str, path: str) -> None:
    m = _run(tmp_path, "l1-s1@0.3", punt)
    assert m.summary["messages_completed"] == m.summary["messages_total"] == 8
    assert m.run["routing"] == "bgp"
    bgp = m.run["bgp"]
    assert bgp["sessions"] == 4 and bgp["route_agents"] == 4
    assert bgp["converged_s"] > 0 and bgp["messages_lost"] == 0
    assert bgp["frames_relayed_in"] > 0 and bgp["frames_relayed_out"] > 0
    # in band through each switch's CPU port: a veth its relay process reads, or P4Runtime
    assert bgp["punt_path"] == path and bgp["frames_not_relayed"] == 0
    (failure,) = m.run["failures"]
    assert failure["what"] == "l1-s1" and not failure["up"]
    # BFD on l1 or s1 saw the session go down, BGP tables changed, the agents wrote
    assert failure["detect_s"] is not None
    assert failure["converge_s"] is not None
    assert failure["reprogram_s"] is not None
    assert failure["bfd_sessions"] == 2
