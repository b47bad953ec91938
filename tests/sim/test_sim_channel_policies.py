"""The channel policies through `cellfabric sim`: static is the plain lowering, the topology
policy's uplinks carry one send at a time as the switches forwarded them (their counters),
and dynamic completes a collective through a link failure, every send of its verified
schedule delivered, sooner than static."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from cellfabric.collectives import CollectiveSpec, build, verify
from cellfabric.collectives.lower import collective_time_s
from cellfabric.collectives.scheduler import ChannelScheduler
from cellfabric.sim.cli import sim_main
from topologies.catalog import resolve_topology

# figures of a run that do not depend on the wall clock
FIGURES = ("messages_completed", "fct_p50_s", "fct_p99_s", "cells_sent",
           "retransmitted_cells", "goodput_fraction", "step_time_max_s")


def _run(tmp: Path, name: str, *args: str) -> dict:
    out = tmp / name
    assert sim_main([*args, "--quiet", "--results", str(out)]) == 0
    (run_dir,) = list(out.iterdir())
    return json.loads((run_dir / "metrics.json").read_text())


def test_static_reproduces_the_plain_lowering(tmp_path: Path) -> None:
    args = ["leaf-spine", "--workload", "allreduce-ring", "--channels", "2", "--size",
            "65536", "--spray", "ecmp"]
    plain = _run(tmp_path, "plain", *args)
    static = _run(tmp_path, "static", *args, "--channel-policy", "static")
    assert {k: static["summary"][k] for k in FIGURES} == {k: plain["summary"][k]
                                                         for k in FIGURES}
    assert static["run"]["sim"]["events"] == plain["run"]["sim"]["events"]
    assert static["run"]["channel_scheduler"]["policy"] == "static"


def test_topology_policy_uplinks_carry_one_send_per_step(tmp_path: Path) -> None:
    size, channels, ranks = 65536, 2, 16
    m = _run(tmp_path, "topo", "fat-tree:k=4", "--workload", "allreduce-ring", "--channels",
             str(channels), "--size", str(size), "--spray", "ecmp", "--cc", "none",
             "--channel-policy", "topology")
    assert m["summary"]["retransmitted_cells"] == 0
    steps = 2 * (ranks - 1)
    cell = resolve_topology("fat-tree:k=4").fabric.cell_size
    per_send = math.ceil((size // channels // ranks + 4) / cell)
    uplinks = [d["cells"] for rec in m["link_load"]["links"]
               for key, d in rec["directions"].items()
               if rec["tier"] != "host" and _goes_up(key)]
    assert uplinks and max(uplinks) == steps * per_send  # one send per step, never two


def _goes_up(direction: str) -> bool:
    a, b = direction.split("->")
    rank = {"h": 0, "e": 1, "a": 2, "c": 3}
    return rank[a[0]] > 0 and rank[b[0]] > rank[a[0]]


def test_dynamic_completes_through_a_link_failure_sooner_than_static(tmp_path: Path) -> None:
    topology, size, channels = "fat-tree:k=4", 262144, 2
    args = [topology, "--workload", "allreduce-tree", "--channels", str(channels), "--size",
            str(size), "--spray", "ecmp", "--cc", "dcqcn", "--fail", "a11-c1@0.00001"]
    static = _run(tmp_path, "static", *args, "--channel-policy", "static")
    dynamic = _run(tmp_path, "dynamic", *args, "--channel-policy", "dynamic")
    for m in (static, dynamic):
        s = m["summary"]
        assert s["messages_completed"] == s["messages_total"] > 0
        assert any("a11-c1 down" in e["event"] for e in m["run"]["events"])
    # the run carried exactly the sends of the schedule the scheduler's orders build, and
    # that schedule leaves every rank with the right chunks
    topo = resolve_topology(topology)
    hosts = sorted(topo.hosts, key=lambda h: int(re.sub(r"\D", "", h)))
    sched = ChannelScheduler("dynamic", topo, hosts)
    schedule = build("allreduce-tree", CollectiveSpec(len(hosts), size, channels,
                                                      order=sched.order))
    assert verify(schedule) == []
    levels = [lv for lv in schedule.levels() if any(x.nbytes for x in lv)]
    got = dynamic["messages"]
    for k, level in enumerate(levels):
        want = sorted((hosts[x.src], hosts[x.dst], x.nbytes) for x in level if x.nbytes)
        assert sorted((m["src"], m["dst"], m["size"]) for m in got if m["step"] == k) == want
    assert collective_time_s(dynamic) < collective_time_s(static)


def _moved_after(m: dict, link: str) -> tuple[int, list[int]]:
    """The sends dynamic moved off ``link``, and the steps it planned with the link down."""
    steps = m["run"]["channel_scheduler"]["steps"]
    return (sum(st["moved"] for st in steps),
            [st["step"] for st in steps if link in st["down"]])


def test_a_nic_port_failure_mid_collective_completes_under_both_policies(tmp_path: Path) -> None:
    # rail-2x4: every GPU's NIC has two ports; h1 loses port 0 30 us into a 2-channel ring
    # (its second channel sends h1 -> h5 over the fabric every step)
    args = ["rail-2x4", "--workload", "allreduce-ring", "--channels", "2", "--size", "262144",
            "--spray", "ecmp", "--cc", "dcqcn"]
    fail = ["--fail", "h1-r0l1@0.00003"]
    ok = _run(tmp_path, "ok", *args, "--channel-policy", "dynamic")
    static = _run(tmp_path, "static", *args, *fail, "--channel-policy", "static")
    dynamic = _run(tmp_path, "dynamic", *args, *fail, "--channel-policy", "dynamic")
    for m in (static, dynamic):
        s = m["summary"]
        assert s["messages_completed"] == s["messages_total"] == ok["summary"]["messages_total"]
        (down,) = [e for e in m["run"]["events"] if e["event"].startswith("link h1-r0l1 down")
                   and "injected" in e["event"]]
        assert down["t"] < collective_time_s(m)  # the port failed mid-collective
    moved, planned_down = _moved_after(dynamic, "h1-r0l1")
    assert moved > 0 and planned_down and min(planned_down) > 0
    # the penalty: the failure costs dynamic time (cells in flight on the port resent), and
    # dynamic with the failure still finishes before static does
    assert collective_time_s(ok) < collective_time_s(dynamic) < collective_time_s(static)


def test_a_link_failure_mid_iteration_completes_under_both_policies(tmp_path: Path) -> None:
    # a 16-rank iteration (tp 2, pp 2, dp 4) on fat-tree k=4: its DP buckets cross the
    # cores from about 90 us to 470 us; core link a11-c1 fails at 250 us
    args = ["fat-tree:k=4", "--workload", "train:layers=2,hidden=64,seq=64,tp=2,pp=2,dp=4,"
            "bucket=20000", "--gpus-per-server", "2", "--channels", "2", "--spray", "ecmp",
            "--cc", "dcqcn", "--fail", "a11-c1@0.00025"]
    static = _run(tmp_path, "static", *args, "--channel-policy", "static")
    dynamic = _run(tmp_path, "dynamic", *args, "--channel-policy", "dynamic")
    for m in (static, dynamic):
        s, it = m["summary"], m["iteration"]
        assert s["messages_completed"] == s["messages_total"] > 0
        assert it["communication_time_s"] is not None
        assert all(r["time_s"] for r in it["collectives"])
        (down,) = [e for e in m["run"]["events"] if e["event"] == "link a11-c1 down (injected)"]
        assert down["t"] < it["communication_time_s"]
    moved, planned_down = _moved_after(dynamic, "a11-c1")
    assert moved > 0 and 0 < min(planned_down) < dynamic["iteration"]["steps"] - 1


def test_a_nic_port_failure_mid_iteration_completes_under_both_policies(tmp_path: Path) -> None:
    # rail-2x4 (2 servers x 4 GPUs, NICs of two ports), tp 2, pp 2, dp 2: rank 0 (h1) and
    # rank 4 (h5) all-reduce stage 0's gradient buckets across the servers from about 112 us
    # to the iteration's end (172 us); h1's NIC port 0 fails at 125 us, inside that phase
    args = ["rail-2x4", "--workload", "train:layers=2,hidden=256,seq=512,tp=2,pp=2,dp=2,"
            "bucket=262144", "--channels", "2", "--spray", "ecmp", "--cc", "dcqcn"]
    fail = ["--fail", "h1-r0l1@0.000125"]
    ok = _run(tmp_path, "ok", *args, "--channel-policy", "static")
    static = _run(tmp_path, "static", *args, *fail, "--channel-policy", "static")
    dynamic = _run(tmp_path, "dynamic", *args, *fail, "--channel-policy", "dynamic")
    total = ok["summary"]["messages_total"]
    for m in (static, dynamic):
        s, it = m["summary"], m["iteration"]
        assert s["messages_completed"] == s["messages_total"] == total  # none lost
        (down,) = [e for e in m["run"]["events"] if e["event"] == "link h1-r0l1 down (injected)"]
        assert 0 < down["t"] < it["communication_time_s"]  # the port failed mid-iteration
        # the penalty the report gives: the cells in flight on the port are resent
        assert it["communication_time_s"] > ok["iteration"]["communication_time_s"]
    moved, planned_down = _moved_after(dynamic, "h1-r0l1")
    assert moved > 0 and 0 < min(planned_down) < dynamic["iteration"]["steps"] - 1
    assert not _moved_after(static, "h1-r0l1")[0]  # static leaves it to the NIC's failover
