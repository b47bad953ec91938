"""Exactness of the simulated fabric, against figures computed from first principles (link
rate, propagation delay, buffer size), never from the simulator's own output."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from simlib import bring_up, capture, leaf_spine, send_cells, template

from controlplane.fabric_plan import C_PORT_TX
from hosts import wire
from hosts.cells import CellTemplate, parse_roce
from hosts.layers import parse_int_block
from topologies.model import router_mac

RATE = 8_000_000_000  # 8 Gb/s: one byte per nanosecond, so serialization is whole ns
DELAY = 1000  # ns per link


def test_one_cell_over_an_idle_path_takes_hops_times_serialization_plus_delay(
        tmp_path: Path) -> None:
    run = bring_up(tmp_path, leaf_spine(tmp_path), RATE, DELAY, 512 * 1024)
    got = capture(run, "h3")  # h1 (leaf l1) -> h3 (leaf l2): h1-l1, l1-spine, spine-l2, l2-h3
    tpl = template(run, "h1", "h3")
    start = run.engine.now
    send_cells(run, "h1", tpl, 0, 1)
    run.engine.run()
    assert len(got) == 1
    t, frame = got[0]
    assert len(frame) == tpl.frame_len  # no INT added on the way: every hop sent this size
    assert t - start == 4 * (tpl.frame_len * 8 * 10**9 // RATE + DELAY)


def _offer_twice(run, dst_leaf: str, dst: str, count: int, int_source: bool = False) -> int:
    """Both spines send ``count`` cells each to ``dst`` back to back, at the same instants:
    ``dst``'s port on ``dst_leaf`` is offered exactly twice its rate. Returns the cell time."""
    leaf_mac = router_mac(run.topo.switches[dst_leaf].device_id)
    d = run.topo.hosts[dst]
    cell_ns = 0
    for n, spine in enumerate(("s1", "s2")):
        tpl = CellTemplate(router_mac(run.topo.switches[spine].device_id), leaf_mac,
                           run.topo.hosts["h1" if n == 0 else "h2"].ip, d.ip, 7 + n,
                           int_source=int_source)
        cell_ns = tpl.frame_len * 8 * 10**9 // RATE
        port = run.topo.port_of(spine, dst_leaf)[0]
        wire_out = run.fabric.switches[spine].wires[port]
        for psn in range(count):
            run.engine.at(psn * cell_ns, wire_out.transmit, tpl.frame(psn, 1, bytes(1024)))
    return cell_ns


def test_a_port_offered_twice_its_rate_grows_by_the_difference_until_tail_drop(
        tmp_path: Path) -> None:
    buffer = 40 * 1100  # 40 cells of 1082 bytes fit, the 41st does not
    run = bring_up(tmp_path, leaf_spine(tmp_path), RATE, DELAY, buffer)
    got = capture(run, "h3")
    l2 = run.fabric.switches["l2"]
    port = run.topo.port_of("l2", "h3")[0]
    cell_ns = _offer_twice(run, "l2", "h3", 100)
    depths: list[int] = []
    sampled: list[tuple[int, int]] = []  # the run's periodic sampler's read: (tx, depth)

    def sample(_: object) -> None:
        depths.append(l2.queue_depth(port))  # (the C hop holds the queues mid-run)
        ports, tx, depth = l2.port_samples(C_PORT_TX)
        sampled.append((tx[ports.index(port)], depth[ports.index(port)]))
        if len(depths) < 120:
            run.engine.after(cell_ns, sample)

    # Sampled once per cell time, half a cell time after each pair of arrivals.
    run.engine.at(cell_ns + DELAY + cell_ns // 2, sample)
    run.engine.run()
    cap = buffer // 1082
    # Two cells arrive and one leaves per cell time: +1 per cell time, until the buffer is full.
    assert depths[:cap] == list(range(1, cap + 1))
    assert max(depths) == cap
    assert [d for _, d in sampled] == depths
    # the port sends one cell per cell time while its queue holds any
    sent = [tx for tx, _ in sampled]
    assert all(b - a == 1 for a, b in pairwise(sent[:cap + 1]))
    drops = l2.dp.stats().ports[port].queue_drops
    assert len(got) + drops == 200  # every cell arrived or was tail-dropped at l2
    assert drops == 200 - len(got) > 0


def test_ecn_marks_exactly_the_cells_that_found_the_queue_at_the_threshold(
        tmp_path: Path) -> None:
    k = 6
    run = bring_up(tmp_path, leaf_spine(tmp_path, ecn=(k, k)), RATE, DELAY, 512 * 1024)
    got = capture(run, "h3")
    _offer_twice(run, "l2", "h3", 40, int_source=True)
    run.engine.run()
    assert len(got) == 80
    marked = found = 0
    for _, frame in got:
        f = parse_roce(frame)
        assert f is not None and f.int_block is not None
        hops = parse_int_block(f.int_block)[2]
        queued = max(h.queue_occupancy for h in hops)  # what each hop's enqueue found
        ce = f.ecn == wire.ECN_CE
        assert ce == (queued >= k), (queued, f.ecn)
        marked += ce
        found += queued >= k
    assert 0 < marked < 80  # the scenario does reach the threshold, and not for every cell


@pytest.mark.parametrize("rate", [100_000_000_000])
def test_data_center_rate_serialization_rounds_within_a_nanosecond_per_hop(
        tmp_path: Path, rate: int) -> None:
    run = bring_up(tmp_path, leaf_spine(tmp_path), rate, DELAY, 512 * 1024)
    got = capture(run, "h3")
    tpl = template(run, "h1", "h3")
    send_cells(run, "h1", tpl, 0, 1)
    run.engine.run()
    exact = 4 * (tpl.frame_len * 8 * 1e9 / rate + DELAY)
    assert 0 <= got[0][0] - exact < 4
