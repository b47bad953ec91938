"""`cellfabric run` on a rail fabric: 2 servers x 2 GPUs, two tiers (4 rail leaves, 2 spines),
each GPU's NIC on both leaves of its rail. One run carries a permutation across the servers
over the fabric and a transfer each way inside every server over its NVLink (a direct veth),
and loses a GPU's NIC port mid-run: every message arrives, the GPU's flows fail over to its
other port, and no NVLink frame ever reaches a switch."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from cellfabric.core.workloads import Step, Transfer, Workload
from cellfabric.emulation.runner import RunConfig, execute
from cellfabric.run_cli import parse_fail
from netlab.hosts import existing_links
from topologies.catalog import resolve_topology

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]


def test_rail_run_delivers_fabric_and_nvlink_messages_through_a_port_failure(
        tmp_path: Path) -> None:
    topo = resolve_topology("rail:servers=2,gpus=2")
    (a0, a1), (b0, b1) = topo.servers["sv1"].gpus, topo.servers["sv2"].gpus
    size = 24 * 1024
    fabric = [(a0, b1), (a1, b0), (b0, a0), (b1, a1)]  # cross-server, cross-rail
    nvlink = [(a0, a1), (b1, b0)]
    work = Workload("rail-mix", (Step(tuple(Transfer(s, d, size, 2)
                                            for s, d in fabric + nvlink)),))
    failed = f"{a0}-{topo.hosts[a0].leaves[0]}"
    metrics = None
    for _attempt in range(2):  # a run the machine could not keep up with is run once more
        cfg = RunConfig(topo=topo, target="embedded", workload=work, cc="dcqcn",
                        run_dir=tmp_path / f"run-{secrets.token_hex(2)}",
                        events=parse_fail(f"{failed}@0.3", topo), step_timeout_s=120,
                        progress=False)
        metrics, _ = execute(cfg)
        assert not {n for n in existing_links() if cfg.run_dir.name[-4:] in n}
        if not metrics.run["invalid_reasons"]:
            break
    assert metrics is not None
    assert not metrics.run["invalid_reasons"], metrics.run["invalid_reasons"]
    assert metrics.summary["messages_completed"] == metrics.summary["messages_total"] == 12
    moved = {key for key, flow in metrics.flows.items()
             if any(f["reason"] == "link down" for f in flow["failovers"])}
    assert moved and all(key.startswith(f"{a0}->") for key in moved)
    assert f"{a0}->{a1}" not in moved  # its NVLink flow never used the failed port
    # every data cell a leaf delivered to a GPU belongs to a fabric flow: the NVLink
    # messages' 100 cells (2 flows x 2 messages x 25) never reached a switch; the fabric's
    # 200 all did (and a few resent after the failure, far fewer than 100)
    cells = sum(d["cells"] for rec in metrics.link_load["links"] if rec["tier"] == "host-leaf"
                for d in rec["directions"].values())
    fabric_cells, nvlink_cells = len(fabric) * 2 * 25, len(nvlink) * 2 * 25
    assert fabric_cells <= cells < fabric_cells + nvlink_cells
