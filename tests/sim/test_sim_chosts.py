"""The simulated hosts in C (cellfabric.sim.chosts, cellfabric/sim/native/hosts*.c) against
the Python hosts (hosts.sender / hosts.receiver under cellfabric.sim.hostsim), both on the C
fabric: byte-identical metrics.json (wall-clock fields aside) and the same metrics from every
host program (their CPU time aside), on runs that go through what the C hosts do: pacing,
reordering under spraying, tail drops with SACK, NAK and timeout retransmissions, ECN marks
and CNPs, several messages per flow, several workload steps, a generated three-tier Clos.
A run the C hosts do not cover says so and runs the Python hosts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cellfabric.sim.cli import sim_main
from cellfabric.sim.net import SimFabric
from cellfabric.sim.run import SimRun
from hosts.receiver import Receiver
from hosts.sender import Sender
from p4sim.switch.native import build

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


@pytest.mark.parametrize("args, why", [
    (["fat-tree:k=4", "--workload", "permutation", "--size", "65536", "--cc", "hpcc"],
     "off: rate control hpcc (C hosts cover none)"),
    (["rail-2x4", "--workload", "allreduce-ring", "--size", "65536", "--cc", "none"],
     "off: NVLinks"),
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

