"""Link accounting in the simulator: a link driven at exactly its rate for the whole window
reads 100% of it and no more, in packet mode (the emulation's packet rates) and in bit-rate
mode; a generated three-tier run never reports a link above its rate."""

from __future__ import annotations

import json
from pathlib import Path

from simlib import bring_up, leaf_spine

from cellfabric.core.report import accounting_of
from cellfabric.sim.cli import sim_main
from cellfabric.sim.run import SimRun
from hosts.cells import CellTemplate
from topologies.model import router_mac

RATE = 8_000_000_000  # 8 Gb/s: one byte per nanosecond
DELAY = 1000  # ns per link


def _cells_from_spine(run: SimRun, count: int, spacing_ns: int) -> CellTemplate:
    """s1 puts ``count`` cells for h3 on its wire to l2, one every ``spacing_ns``."""
    topo = run.topo
    tpl = CellTemplate(router_mac(topo.switches["s1"].device_id),
                       router_mac(topo.switches["l2"].device_id),
                       topo.hosts["h1"].ip, topo.hosts["h3"].ip, 7)
    wire_out = run.fabric.switches["s1"].wires[topo.port_of("s1", "l2")[0]]
    for psn in range(count):
        run.engine.at(psn * spacing_ns, wire_out.transmit, tpl.frame(psn, 1, bytes(1024)))
    return tpl


def _account(run: SimRun) -> dict:
    run.load_before = run._load_snapshot()
    run.engine.run()
    run.load_after = run._load_snapshot()
    acct = accounting_of(run.collect())
    return acct["directions"]["l2->h3"] | {"window_s": acct["window_s"]}


def test_packet_mode_link_busy_for_the_whole_window_reads_exactly_its_rate(
        tmp_path: Path) -> None:
    run = bring_up(tmp_path, leaf_spine(tmp_path), 0, 0, 0)
    rate = run.topo.link("l2-h3").queue.rate_pps
    n = 60  # fits the port's queue: l2 sends them back to back at its packet rate from t=0
    _cells_from_spine(run, n, 0)
    d = _account(run)
    assert d["cells"] == n and d["other"] == 0
    # n packets at ``rate`` hold the line n / rate seconds (not (n - 1) / rate: the last one
    # is counted as it starts to leave)
    assert abs(d["window_s"] - n / rate) < 1e-9
    assert 0.99 <= d["offered"] <= 1.0


def test_bit_rate_link_load_is_its_wire_time_over_the_window(tmp_path: Path) -> None:
    run = bring_up(tmp_path, leaf_spine(tmp_path), RATE, DELAY, 512 * 1024)
    n = 400
    tpl = _cells_from_spine(run, n, 0)
    cell_ns = tpl.frame_len * 8 * 10**9 // RATE
    d = _account(run)
    assert d["cells"] == n
    # All n reach l2 at once (one cell + one delay after s1 put them on its wire); l2 sends
    # them back to back, and the last reaches h3 one cell and one delay after it started,
    # when the run ends.
    window_ns = (cell_ns + DELAY) + n * cell_ns + DELAY
    assert abs(d["window_s"] - window_ns / 1e9) < 1e-12
    assert abs(d["offered"] - n * cell_ns / window_ns) < 1e-9
    assert 0.99 <= d["offered"] <= 1.0


def test_a_generated_three_tier_run_reports_no_link_above_its_rate(tmp_path: Path) -> None:
    # Without rate control ECMP puts two flows on some links (160% of their rate offered);
    # with queues deep enough that nothing drops (no retransmission gaps) such a link is busy
    # from its first cell to the last whatever the seed, which read 100.05% before the window
    # included the last packet's slot.
    assert sim_main(["clos:pods=2,leaves=2,aggs=2,cores=2,hosts=2,depth=4096", "--workload",
                     "permutation", "--link-rate", "topology", "--cc", "none", "--spray",
                     "ecmp", "--quiet", "--results", str(tmp_path)]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    acct = json.loads((run_dir / "metrics.json").read_text())["summary"]["link_accounting"]
    offered = [d["offered"] for d in acct["directions"].values()]
    assert max(offered) <= 1.0
    assert max(offered) >= 0.99  # the scenario does drive a link at its rate
    assert acct["max_offered"] == max(offered)
