"""`cellfabric sim` on rail fabrics: every message of a permutation and an all-reduce
delivered, transfers within a server carried by the NVLink model (no switch sees a cell of
them, and they finish faster than any NIC port could carry them), and a failed NIC port of a
GPU moved to its other port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.core.experiment import run_experiment
from cellfabric.core.workloads import Step, Transfer, Workload
from cellfabric.sim.cli import sim_main
from cellfabric.sim.hostsetup import SimSettings
from cellfabric.sim.run import SimConfig, SimRun
from topologies.catalog import resolve_topology

RAIL = "rail:servers=2,gpus=3,tiers=3"  # two pods of one server: 6 ranks, odd per server


def _run(tmp: Path, args: list[str]) -> dict:
    assert sim_main([RAIL, "--quiet", "--results", str(tmp), *args]) == 0
    (run_dir,) = list(tmp.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize("workload", ["permutation", "allreduce"])
def test_rail_workloads_deliver_everything(tmp_path: Path, workload: str) -> None:
    data = _run(tmp_path, ["--workload", workload, "--size", "49152", "--count", "1"])
    s = data["summary"]
    expected = 6 if workload == "permutation" else 2 * 5 * 6  # 2(N-1) steps of N chunks
    assert s["messages_completed"] == s["messages_total"] == expected
    assert sum(d.get("dropped", 0) for d in data["drops"].values()) == 0


def test_intra_server_transfers_take_the_nvlink(tmp_path: Path) -> None:
    topo = resolve_topology(RAIL)
    g = topo.servers["sv1"].gpus
    size = 262144
    # GPU 0 -> 1 and 2 -> 0 within server 1: NVLink only; nothing crosses the fabric
    work = Workload("nvlink", (Step((Transfer(g[0], g[1], size, 1),
                                     Transfer(g[2], g[0], size, 1))),))
    rate = 100 * 10**9
    cfg = SimConfig(topo=topo, workload=work, cc="dcqcn", run_dir=tmp_path / "run",
                    settings=SimSettings(rate, 1000, 512 * 1024, seed=1), progress=False)
    run = SimRun(cfg)
    m = run_experiment(run, 1)
    assert [x["fct_s"] is not None for x in m.messages] == [True, True]
    # no switch received a frame: not a cell, not an ACK (the bring-up sends none either)
    assert all(sw.received == 0 for sw in run.fabric.switches.values())
    assert sum(w.frames for w in run.fabric.nvlink_wires) > 2 * size // 1024
    # a NIC port at 100 Gb/s needs 21 us for 256 KiB alone; the 400G NVLink about a quarter
    nic_time = size * 8 / rate
    assert all(x["fct_s"] < nic_time / 2 for x in m.messages)


def test_a_failed_nic_port_moves_a_gpu_to_its_other_port(tmp_path: Path) -> None:
    topo = resolve_topology(RAIL)
    h = topo.hosts[topo.servers["sv1"].gpus[1]]
    data = _run(tmp_path, ["--workload", "permutation", "--size", "131072", "--count", "1",
                           "--fail", f"{h.name}-{h.leaves[0]}@0.000005"])
    s = data["summary"]
    assert s["messages_completed"] == s["messages_total"] == 6
    failovers = [f for flow in data["flows"].values() for f in flow["failovers"]]
    assert "link down" in [f["reason"] for f in failovers]


def test_a_128_gpu_three_tier_rail_fabric_delivers_a_permutation(tmp_path: Path) -> None:
    # 16 servers x 8 GPUs: 64 switches; every GPU sends to another server's GPU
    assert sim_main(["rail:servers=16,gpus=8,tiers=3", "--quiet", "--results", str(tmp_path),
                     "--size", "16384", "--count", "1"]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    s = data["summary"]
    assert s["messages_completed"] == s["messages_total"] == 128
    topo = resolve_topology("rail:servers=16,gpus=8,tiers=3")
    assert not any(topo.same_server(m["src"], m["dst"]) for m in data["messages"])
