"""The simulated hosts in C (cellfabric.sim.chosts, cellfabric/sim/native/hosts*.c) against
the Python hosts (hosts.sender / hosts.receiver under cellfabric.sim.hostsim), both on the C
fabric: byte-identical metrics.json (wall-clock fields aside) and the same metrics from every
host program (their CPU time aside), on runs that go through what the C hosts do: pacing,
reordering under spraying, tail drops with SACK, NAK and timeout retransmissions, ECN marks
and CNPs, several messages per flow, several workload steps, a generated three-tier Clos;
rail fabrics, whose GPUs spray over two NIC ports and reach the GPUs of their server over
NVLinks, and dual-homed hosts under drops, where ports time out for lack of ACKs and their
cells are resent on the other port. A run the C hosts do not cover says so and runs the
Python hosts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cellfabric.sim import hostsetup
from cellfabric.sim.cli import sim_main
from cellfabric.sim.net import SimFabric
from cellfabric.sim.run import SimRun
from hosts.receiver import Receiver
from hosts.sender import Sender
from p4sim.switch.native import build
from topologies.catalog import resolve_topology

pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--link-rate", "100G", "--quiet", "--cc", "none"]
RUNS: dict[str, list[str]] = {
    "fat-tree-spray": ["fat-tree:k=4", "--workload", "permutation", "--spray", "spray",
                       "--size", "262144", "--count", "1"],
    # 15:1 into 4 KiB buffers: drops, SACK holes, NAKs, timeouts, ECN marks and CNPs
    "incast-lossy": ["fat-tree:k=4", "--workload", "incast", "--spray", "adaptive",
                     "--size", "65536", "--buffer", "4K", "--count", "2"],
    "leaf-spine-messages": [str(ROOT / "topologies" / "leaf-spine.yaml"), "--workload",
                            "permutation", "--spray", "round-robin", "--size", "100003",
                            "--count", "3", "--buffer", "8K", "--seed", "7"],
    "clos-all-to-all": ["clos:pods=3,leaves=2,aggs=2,cores=2,hosts=2", "--workload",
                        "all-to-all", "--spray", "spray", "--size", "32768", "--count", "1",
                        "--buffer", "32K"],
    "clos-allreduce-steps": ["clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2", "--workload",
                             "allreduce", "--spray", "ecmp", "--size", "262144",
                             "--count", "1"],
    # GPUs on two NIC ports each (sprayed), ring neighbours in a server over an NVLink
    "rail-allreduce-ring": ["rail-2x4", "--workload", "allreduce-ring", "--size", "131072",
                            "--count", "1"],
    # the hierarchical all-reduce's steps within a server: NVLinks only
    "rail-allreduce-hier": ["rail-2x4", "--workload", "allreduce-hier", "--size", "262144",
                            "--count", "1"],
    "rail-three-tier": ["rail:servers=3,gpus=2,tiers=3", "--workload", "allreduce-ring",
                        "--size", "131072", "--count", "2"],
    # two ports per host into 4 KiB buffers: drops, resends, and ports whose cells see no ACK
    # for port_timeout_s declared down, their cells resent on the other port and recovered
    # (no run this short lives the port_retry_s that would bring such a port back up)
    "dual-homed-failovers": ["fat-tree-dual", "--workload", "incast", "--spray", "spray",
                             "--size", "262144", "--count", "2", "--buffer", "4K"],
    "dual-homed-all-to-all": ["fat-tree-dual", "--workload", "all-to-all", "--spray", "spray",
                              "--size", "32768", "--count", "1", "--buffer", "4K"],
    "dual-homed-incast": ["dual-homed", "--workload", "incast", "--spray", "spray",
                          "--size", "65536", "--count", "2", "--buffer", "4K"],
}
_TAKE = SimRun._metrics_of_step


def _run(results: Path, args: list[str], monkeypatch: pytest.MonkeyPatch,
         ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """metrics.json without its wall-clock section (as canonical text), that section, and
    every host program's metrics (CPU time aside), in the order the run took them."""
    programs: list[dict[str, Any]] = []

    def kept(self: SimRun, plan: Any) -> None:
        _TAKE(self, plan)
        for path, data in self.host_metrics.items():
            programs.append({"program": Path(path).name,
                             **{k: v for k, v in data.items() if k != "cpu_s"}})

    monkeypatch.setattr(SimRun, "_metrics_of_step", kept)
    assert sim_main([*args, *BASE, "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    wall = data["run"].pop("wall_clock")
    return json.dumps(data, sort_keys=True), wall, programs


def _python_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the Python hosts' per-frame calls (none while the hosts are C's)."""
    seen = [0]
    for cls in (Sender, Receiver):
        real = cls.on_frame

        def counted(self: Any, *args: Any, _real: Any = real) -> None:
            seen[0] += 1
            _real(self, *args)

        monkeypatch.setattr(cls, "on_frame", counted)
    return seen


@pytest.mark.parametrize("name", sorted(RUNS))
def test_c_hosts_give_the_python_hosts_metrics(name: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _python_calls(monkeypatch)
    fast, wall, fast_programs = _run(tmp_path / "c", RUNS[name], monkeypatch)
    assert wall["c_hosts"] == "on" and calls[0] == 0
    monkeypatch.setattr(SimFabric, "native_hosts", False)
    plain, plain_wall, plain_programs = _run(tmp_path / "py", RUNS[name], monkeypatch)
    assert plain_wall["c_hosts"] == "off: off" and calls[0] > 0
    assert plain_wall["c_fabric"] == wall["c_fabric"] == "on"
    assert fast_programs == plain_programs
    assert fast == plain
    summary = json.loads(plain)["summary"]
    assert summary["messages_completed"] == summary["messages_total"]


def test_the_lossy_runs_retransmit_every_way(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """What the comparison above leans on: the lossy incast (on the Python hosts) drops cells
    and recovers them by SACK, NAK and timeout, and marks ECN."""
    monkeypatch.setattr(SimFabric, "native_hosts", False)
    _, _, programs = _run(tmp_path, RUNS["incast-lossy"], monkeypatch)
    senders = [p for p in programs if p["role"] == "send"]
    total = {k: sum(p["cells"][k] for p in senders)
             for k in ("retx_sack", "retx_nak", "retx_timeout")}
    assert all(total.values()), total
    assert sum(p["cnps_received"] for p in senders) > 0


def _nvlink_port(topo: Any, iface: str) -> bool:
    """Is the program port ``HOST-ethI`` one of its host's NVLinks (after its NIC ports)?"""
    host, _, port = iface.rpartition("-eth")
    return int(port) >= len(topo.hosts[host].leaves)


def test_the_multi_port_runs_use_every_kind_of_port(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What the comparisons above lean on, on the C hosts: the rail runs spray over both NIC
    ports and carry cells over NVLinks; the lossy dual-homed run fails ports for lack of
    ACKs, moves their cells to the other port and recovers them."""
    for name in ("rail-allreduce-ring", "rail-allreduce-hier"):
        topo = resolve_topology(RUNS[name][0])
        _, wall, programs = _run(tmp_path / name, RUNS[name], monkeypatch)
        assert wall["c_hosts"] == "on"
        senders = [p for p in programs if p["role"] == "send"]
        nic = [p["ports"] for p in senders if not _nvlink_port(topo, p["ports"][0]["iface"])]
        nvlink = [p["ports"] for p in senders if _nvlink_port(topo, p["ports"][0]["iface"])]
        assert nvlink and all(len(ports) == 1 and ports[0]["sent"] > 0 for ports in nvlink)
        if name == "rail-allreduce-ring":
            assert nic and all(len(ports) == 2 and ports[0]["sent"] > 0 and ports[1]["sent"] > 0
                               for ports in nic)
    _, wall, programs = _run(tmp_path / "dual", RUNS["dual-homed-failovers"], monkeypatch)
    assert wall["c_hosts"] == "on"
    failovers = [f for p in programs if p["role"] == "send" for f in p["failovers"]]
    assert failovers and {f["reason"] for f in failovers} == {"no ACK progress"}
    assert sum(f["cells_moved"] for f in failovers) > 0
    assert any("recovered_s" in f for f in failovers)
    events = [e for p in programs if p["role"] == "send" for q in p["ports"]
              for e in q["events"]]
    assert len(events) == len(failovers) and {e["event"] for e in events} == {"down"}
    summary = {k: sum(p["cells"][k] for p in programs if p["role"] == "send")
               for k in ("retx_failover", "retx_sack", "retx_timeout")}
    assert all(summary.values()), summary


def test_ports_retried_after_a_failover_come_back_the_same(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A port failed for lack of ACKs is tried again after port_retry_s (a second: longer
    than these runs last). Retried after half the port timeout here, on both sides, the
    lossy dual-homed run brings its failed ports back up, the same in C as in Python."""
    real = hostsetup.data_center_sender

    def quick_retry(*args: Any, **kwargs: Any) -> Any:
        cfg = real(*args, **kwargs)
        return replace(cfg, port_retry_s=cfg.port_timeout_s / 2)

    monkeypatch.setattr(hostsetup, "data_center_sender", quick_retry)
    args = RUNS["dual-homed-failovers"]
    fast, wall, fast_programs = _run(tmp_path / "c", args, monkeypatch)
    assert wall["c_hosts"] == "on"
    monkeypatch.setattr(SimFabric, "native_hosts", False)
    plain, _, plain_programs = _run(tmp_path / "py", args, monkeypatch)
    assert fast_programs == plain_programs
    assert fast == plain
    events = [e["event"] for p in plain_programs if p["role"] == "send" for q in p["ports"]
              for e in q["events"]]
    assert events.count("up") > 0 and events.count("down") > 0


@pytest.mark.parametrize("args, why", [
    (["fat-tree:k=4", "--workload", "permutation", "--size", "65536", "--cc", "hpcc"],
     "off: rate control hpcc (C hosts cover none)"),
    (["rail-2x4", "--workload", "allreduce-ring", "--size", "65536", "--cc", "dcqcn"],
     "off: rate control dcqcn (C hosts cover none)"),
    (["leaf-spine", "--workload", "all-to-all", "--size", "32768", "--cc", "none",
      "--fail", "l1-s1@0.000004"], "off: link failures scheduled"),
    (["fat-tree:k=4", "--workload", "permutation", "--size", "65536", "--cc", "none",
      "--load", "0.5"], "off: offered load (Poisson arrivals)"),
])
def test_runs_the_c_hosts_do_not_cover_say_why(args: list[str], why: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _python_calls(monkeypatch)
    assert sim_main([*args, "--link-rate", "100G", "--quiet", "--count", "1",
                     "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    wall = json.loads((run_dir / "metrics.json").read_text())["run"]["wall_clock"]
    assert wall["c_hosts"] == why
    assert calls[0] > 0

