"""Offered load (`--load`): the seeded Poisson arrival process, the workloads it applies to,
the host command lines the plan writes for it, and a sender that times each message from its
arrival."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from cellfabric.core.hostplan import plan_step
from cellfabric.core.workloads import WorkloadError, make_workload
from cellfabric.sim.cli import sim_main
from hosts.arrivals import mean_gap_s, poisson_arrivals
from hosts.cli import host_argv, parse_host_args, sender_config
from hosts.sender import Sender, SenderConfig
from topologies.model import load_topology

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ["h1", "h2", "h3", "h4"]
LEAF = {"h1": "l1", "h2": "l1", "h3": "l2", "h4": "l2"}


def test_mean_gap_is_message_bits_over_offered_rate() -> None:
    # 64 KiB at half of 100 Gb/s: 524288 bits / 50e9 b/s
    assert mean_gap_s(65536, 0.5, 100e9) == pytest.approx(1.048576e-5, rel=1e-12)
    assert mean_gap_s(1000, 1.0, 8000) == pytest.approx(1.0)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="0 < load <= 1"):
            mean_gap_s(1000, bad, 8000)


def test_arrivals_are_deterministic_per_seed_and_differ_between_seeds() -> None:
    a, b, c = (poisson_arrivals(50, 2e-6, seed) for seed in (7, 7, 8))
    assert a == b
    assert a.times_s != c.times_s
    assert all(t1 < t2 for t1, t2 in zip(a.times_s, a.times_s[1:]))
    assert a.times_s[0] > 0 and a.window_s > a.times_s[-1]


def test_gaps_are_exponential_with_the_configured_mean() -> None:
    n, mean = 40000, 3e-6
    arr = poisson_arrivals(n, mean, seed=11)
    gaps = [arr.times_s[0], *(t2 - t1 for t1, t2 in zip(arr.times_s, arr.times_s[1:]))]
    # An exponential's standard deviation is its mean: the sample mean of n gaps lies within
    # 5 standard errors (mean x 5 / sqrt(n), 2.5% here) but for odds of about 1 in 3.5 million.
    assert abs(statistics.fmean(gaps) - mean) < 5 * mean / math.sqrt(n)
    assert statistics.stdev(gaps) == pytest.approx(mean, rel=0.05)
    # memoryless: about 1/e of the gaps exceed the mean
    assert sum(g > mean for g in gaps) / n == pytest.approx(math.exp(-1), abs=0.01)


def test_messages_over_window_estimate_the_rate_without_bias() -> None:
    # The window is n + 1 gaps: n / window averages to 1 / mean gap even for n = 2 (the time
    # of the n-th arrival alone would average to n / (n - 1) of it, twice at n = 2).
    mean = 1.0
    rates = [2 / poisson_arrivals(2, mean, seed).window_s for seed in range(20000)]
    assert statistics.fmean(rates) == pytest.approx(1 / mean, rel=0.05)


def test_permutation_and_all_to_all_take_a_load_the_bursts_refuse_it() -> None:
    perm = make_workload("permutation", HOSTS, 4096, 3, leaf_of=LEAF, seed=5, load=0.3)
    flows = perm.flows()
    assert perm.load == 0.3 and {t.load for t in flows} == {0.3}
    assert len({t.arrival_seed for t in flows}) == len(flows)  # each flow its own process
    again = make_workload("permutation", HOSTS, 4096, 3, leaf_of=LEAF, seed=5, load=0.3)
    assert again == perm
    a2a = make_workload("all-to-all", HOSTS, 4096, 3, load=0.6)
    per_host: dict[str, float] = {}
    for t in a2a.flows():
        per_host[t.src] = per_host.get(t.src, 0.0) + t.load
    assert per_host == pytest.approx({h: 0.6 for h in HOSTS})
    for name in ("incast", "allreduce"):
        with pytest.raises(WorkloadError, match=f"does not apply to --workload {name}"):
            make_workload(name, HOSTS, 4096, 1, load=0.5)
    for bad in (0.0, 1.2, -1.0):
        with pytest.raises(WorkloadError, match="0 < load <= 1"):
            make_workload("permutation", HOSTS, 4096, 1, load=bad)


def test_without_load_nothing_changes() -> None:
    wl = make_workload("permutation", HOSTS, 4096, 3, leaf_of=LEAF, seed=5)
    assert wl.load == 0.0
    assert all(t.load == 0.0 and t.arrival_seed == 0 for t in wl.flows())


def test_plan_writes_the_mean_gap_of_the_topologys_packet_rate(tmp_path: Path) -> None:
    topo = load_topology(ROOT / "topologies" / "leaf-spine.yaml")
    assert {lk.queue.rate_pps for lk in topo.links} == {200}
    wl = make_workload("permutation", sorted(topo.hosts), 65536, 2, leaf_of=LEAF, load=0.5)
    plan = plan_step(topo, wl.steps[0], 0, tmp_path, lambda h, i: f"{h}-eth{i}", "dcqcn", 1)
    # 200 cells/s of 1082-byte frames (Ethernet 14, IPv4 20, UDP 8, BTH 12, 1024 payload,
    # ICRC 4; no INT shim: under dcqcn without a collector the hosts are no INT source)
    link_bps = 200 * 8 * 1082
    for hp in plan.senders:
        cfg = sender_config(parse_host_args(host_argv(hp.config)))
        assert cfg.mean_gap_s == pytest.approx(65536 * 8 / (0.5 * link_bps), rel=1e-12)
        assert cfg.arrival_seed == hp.transfer.arrival_seed
    plain = make_workload("permutation", sorted(topo.hosts), 65536, 2, leaf_of=LEAF)
    plan = plan_step(topo, plain.steps[0], 0, tmp_path, lambda h, i: f"{h}-eth{i}", "dcqcn", 1)
    assert not any(hp.config.mean_gap_s or "--mean-gap" in hp.command() for hp in plan.senders)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sender(clock: _Clock, mean_gap: float) -> Sender:
    cfg = SenderConfig(ifaces=["x"], dst_macs=["00:00:00:00:00:01"], src_ip="10.0.0.1",
                       dst_ip="10.0.0.2", msg_size=4096, count=4, mean_gap_s=mean_gap,
                       arrival_seed=3)
    port = SimpleNamespace(ifname="x", sent=0, send_errors=0, up=True, events=[])
    return Sender(cfg, clock=clock, ports=[port])  # type: ignore[list-item]


def test_without_load_every_message_is_there_at_once() -> None:
    clock = _Clock()
    s = _sender(clock, 0.0)
    s.begin()
    assert [m.queued_at for m in s.transport.messages] == [0.0] * 4
    assert s._until_arrival(0.0) is None


def test_with_load_messages_appear_at_their_arrivals_and_are_timed_from_them() -> None:
    clock = _Clock()
    s = _sender(clock, 0.5)
    arrivals = poisson_arrivals(4, 0.5, 3).times_s
    clock.now = 10.0
    s.begin()  # the flow starts at 10 s: nothing has arrived yet
    assert not s.transport.messages
    assert s._until_arrival(10.0) == pytest.approx(arrivals[0])
    # the sender looks again only between the second and third arrivals: both messages that
    # arrived keep their arrival times
    clock.now = 10.0 + (arrivals[1] + arrivals[2]) / 2
    s.finished(clock.now)
    queued = [m.queued_at for m in s.transport.messages]
    assert queued == pytest.approx([10.0 + arrivals[0], 10.0 + arrivals[1]])
    first = s.transport.messages[0]
    first.first_sent, first.completed = clock.now, clock.now + 0.1
    s.transport.done.append(first)
    fct = s.metrics(clock.now + 0.1 - 10.0)["fct_list_s"][0]
    # from its arrival, including the time it waited, not from its first cell (0.1 s)
    assert fct == pytest.approx((arrivals[1] + arrivals[2]) / 2 - arrivals[0] + 0.1)


def test_cli_rejects_load_where_it_does_not_apply(tmp_path: Path, capsys) -> None:
    rc = sim_main(["leaf-spine", "--workload", "incast", "--load", "0.5", "--quiet",
                   "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--load does not apply to --workload incast" in err[0]
    rc = sim_main(["leaf-spine", "--load", "1.5", "--quiet", "--results", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "0 < load <= 1" in err[0]
