"""Helpers for the simulator's tests: a small fabric brought up by the real SimRun (compiler,
FabricController, P4Runtime device code), and cells injected from a host's NIC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cellfabric.core.workloads import Workload
from cellfabric.sim.hostsetup import SimSettings
from cellfabric.sim.run import SimConfig, SimRun
from hosts.cells import CellTemplate
from topologies.model import load_topology, router_mac

ROOT = Path(__file__).resolve().parents[2]


def leaf_spine(tmp: Path, ecn: tuple[int, int] | None = None, spray: str = "spray",
               cc: str = "none") -> Path:
    """The shipped 2x2 leaf-spine with the given ECN thresholds (packets) and modes."""
    doc = yaml.safe_load((ROOT / "topologies" / "leaf-spine.yaml").read_text())
    doc["fabric"]["spray"] = spray
    doc["fabric"]["cc"] = cc
    if ecn is not None:
        doc["fabric"]["ecn"] = {"kmin": ecn[0], "kmax": ecn[1], "pmax": 1.0}
    path = tmp / "topo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def bring_up(tmp: Path, topo_file: Path, rate_bps: int, delay_ns: int,
             buffer_bytes: int) -> SimRun:
    topo = load_topology(topo_file)
    cfg = SimConfig(topo=topo, workload=Workload("none", ()), cc=topo.fabric.cc,
                    run_dir=tmp / "run", settings=SimSettings(rate_bps, delay_ns, buffer_bytes,
                                                              seed=1), progress=False)
    run = SimRun(cfg)
    run.bring_up()
    return run


def template(run: SimRun, src: str, dst: str, int_source: bool = False,
             qpn: int = 7) -> CellTemplate:
    topo = run.topo
    h, d = topo.hosts[src], topo.hosts[dst]
    leaf = topo.switches[h.leaves[0]]
    return CellTemplate(h.nic_mac(0), router_mac(leaf.device_id), h.ip, d.ip, qpn,
                        int_source=int_source)


def capture(run: SimRun, host: str) -> list[tuple[int, bytes]]:
    """Every frame arriving at ``host`` from now on, with its arrival time (ns)."""
    got: list[tuple[int, bytes]] = []
    sim_host = run.fabric.hosts[host]

    def receive(frame: bytes, nic: int) -> None:
        got.append((run.engine.now, frame))

    sim_host.receive = receive  # type: ignore[method-assign]
    return got


def send_cells(run: SimRun, src: str, tpl: CellTemplate, first_psn: int, count: int) -> Any:
    """Queue ``count`` cells on ``src``'s NIC now (it serializes them back to back)."""
    wire = run.fabric.hosts[src].wires[0]
    payload = bytes(tpl.payload_len)
    for psn in range(first_psn, first_psn + count):
        assert wire.send(tpl.frame(psn, 1, payload))
    return wire
