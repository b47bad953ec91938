"""Run reports: headline figures, plots and the invalid-run check."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from cellfabric.core.report import (
    RunMetrics,
    format_summary,
    goodput_fraction,
    link_accounting,
    percentile,
    summarize,
    write_report,
)
from cellfabric.core.validity import service_problems


def _metrics() -> RunMetrics:
    m = RunMetrics(run={"name": "r1", "topology": "leaf-spine", "t0": 100.0})
    m.links["l1-s1"] = {"capacity_pps": 1000,
                        "samples": [[100.5, 950, 0], [101.0, 970, 10], [101.5, 0, 0]]}
    m.queues["s1:1"] = [[100.5, 3], [101.0, 17], [101.5, 0]]
    m.flows["h1->h3"] = {"samples": [[100.5, 400], [101.0, 500]], "bytes": 10**6}
    m.messages = [{"src": "h1", "dst": "h3", "size": 8192, "fct_s": f, "ideal_s": 0.008}
                  for f in (0.010, 0.012, 0.016, 0.040)]
    m.messages.append({"src": "h2", "dst": "h4", "size": 8192, "fct_s": None, "ideal_s": 0.008})
    m.reorder = {"h3": {"max_depth": 6, "p99_depth": 4}}
    m.drops = {"s1": {"queue_drops": 2}, "l1": {"queue_drops": 1, "no_route": 5}}
    return m


def test_percentile_nearest_rank() -> None:
    assert percentile([5, 1, 4, 2, 3], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99
    assert math.isnan(percentile([], 50))


def test_summary_figures() -> None:
    s = summarize(_metrics())
    assert s["messages_completed"] == 4 and s["messages_total"] == 5
    assert s["fct_p50_s"] == 0.012
    assert s["slowdown_p99"] == 0.040 / 0.008
    assert s["cells_dropped"] == 3  # queue drops only, not policy drops
    assert s["peak_queue_depth"] == 17
    assert s["max_reorder_depth"] == 6


def _records() -> list[dict]:
    # a leaf-spine's two uplinks of l1 (tier leaf-spine, up) and one host link (down)
    return [
        {"link": "l1-s1", "tier": "leaf-spine", "capacity_pps": 100,
         "directions": {"l1->s1": {"queue": "l1:1", "up": True, "cells": 300, "other": 50},
                        "s1->l1": {"queue": "s1:1", "up": False, "cells": 0, "other": 75}}},
        {"link": "l1-s2", "tier": "leaf-spine", "capacity_pps": 100,
         "directions": {"l1->s2": {"queue": "l1:2", "up": True, "cells": 100, "other": 0},
                        "s2->l1": {"queue": "s2:1", "up": False, "cells": 0, "other": 0}}},
        {"link": "l1-h1", "tier": "host-leaf", "capacity_pps": 100,
         "directions": {"l1->h1": {"queue": "l1:3", "up": False, "cells": 10, "other": 2}}},
    ]


def test_link_accounting_counts_both_queues_against_one_rate() -> None:
    acct = link_accounting(_records(), window_s=5.0)
    d = acct["directions"]["l1->s1"]
    assert (d["cells"], d["other"], d["capacity_packets"]) == (300, 50, 500)
    assert d["offered"] == 350 / 500
    assert acct["directions"]["s1->l1"]["offered"] == 75 / 500
    assert acct["max_offered"] == 350 / 500


def test_per_tier_balance_is_min_and_max_over_mean_cells() -> None:
    tiers = link_accounting(_records(), window_s=5.0)["tiers"]
    up = tiers["leaf-spine up"]
    assert up["links"] == 2 and up["mean_cells"] == 200
    assert (up["min_over_mean"], up["max_over_mean"]) == (0.5, 1.5)
    assert tiers["leaf-spine down"]["min_over_mean"] is None  # no cells: no balance to speak of
    assert tiers["host-leaf down"]["links"] == 1


def test_goodput_fraction_is_ideal_over_actual_flow_time() -> None:
    m = RunMetrics()
    m.messages = [{"src": "h1", "dst": "h3", "fct_s": 2.0, "ideal_s": 1.0},
                  {"src": "h1", "dst": "h3", "fct_s": 3.0, "ideal_s": 1.0}]
    m.flows = {"h1->h3": {"flow_time_s": 2.5}}
    assert goodput_fraction(m) == 2.0 / 2.5
    m.messages[0]["fct_s"] = None
    assert goodput_fraction(m) == 0.0


def test_nos_frames_are_counted_beside_the_line_not_in_it() -> None:
    """fabric.p4's port_tx counts a switch's own control frames too; they are served off the
    emulated line, so the link totals take them out of 'other' and the load leaves them out:
    a link full of cells reads 100%, not more, with BFD beside it."""
    from cellfabric.core.linkload import link_totals
    from topologies.catalog import resolve_topology

    topo = resolve_topology("leaf-spine")
    lk = next(lk for lk in topo.links if lk.a in topo.switches and lk.b in topo.switches)
    key = (lk.a, lk.a_port)
    before = {"t": 0.0, "ports": {key: (10, 0, 4)}}
    after = {"t": 5.0, "ports": {key: (10 + 500 + 30 + 40, 500, 4 + 40)}}  # cells, other, NOS
    (rec,) = [r for r in link_totals(topo, before, after) if r["link"] == lk.name]
    d = rec["directions"][f"{lk.a}->{lk.b}"]
    assert (d["cells"], d["other"], d["control"]) == (500, 30, 40)
    rate = lk.queue.rate_pps
    acct = link_accounting([rec], window_s=530 / rate)
    assert acct["directions"][f"{lk.a}->{lk.b}"]["offered"] == pytest.approx(1.0)
    m = _metrics()
    m.link_load = {"window_s": 530 / rate, "links": [rec]}
    assert ("100.0% of its rate (500 cells + 30 other; 40 NOS frames beside, off the line)"
            in format_summary(m))


def test_goodput_fraction_of_several_steps_counts_each_step_once() -> None:
    # all-reduce: the same pair in every step; m.flows keeps only the last step's record
    m = RunMetrics()
    m.messages = [{"src": "h1", "dst": "h3", "step": i, "fct_s": 2.0, "ideal_s": 1.0}
                  for i in range(6)]
    m.flows = {"h1->h3": {"flow_time_s": 2.0}}
    assert goodput_fraction(m) == 0.5


def test_report_writes_json_and_every_plot(tmp_path: Path) -> None:
    m = _metrics()
    m.link_load = {"window_s": 5.0, "links": _records()}
    path = write_report(m, tmp_path)
    data = json.loads(path.read_text())
    assert data["summary"]["messages_completed"] == 4
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["completion_times.png", "flow_rates.png", "link_load.png",
                    "queue_depth.png", "reorder_depth.png"]
    assert data["summary"]["link_accounting"]["tiers"]["leaf-spine up"]["links"] == 2
    for p in tmp_path.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = format_summary(m)
    assert "4/5" in text and "run valid" in text
    assert "l1->s1 70.0% of its rate (300 cells + 50 other)" in text


def test_the_run_page_is_the_one_cellfabric_report_makes_from_metrics_json(
        tmp_path: Path) -> None:
    """write_report hands the page the sections it shows instead of having it read
    metrics.json back: the page must be the one `cellfabric report` makes from the file."""
    from cellfabric.core.html import PAGE, write_run_page

    m = _metrics()
    m.link_load = {"window_s": 5.0, "links": _records()}
    m.run["events"] = [{"t": 0.5, "event": "link l1-s1 down"}]
    m.run["ratio"] = float("nan")  # an encoder's special case, in a section the page reads
    write_report(m, tmp_path)
    handed = (tmp_path / PAGE).read_text()
    assert "l1-s1 down" in handed and "messages_completed" in handed
    write_run_page(tmp_path)
    assert (tmp_path / PAGE).read_text() == handed


def test_invalid_run_is_loud() -> None:
    m = _metrics()
    m.run["invalid_reasons"] = ["s1 port 1: served 400 pps while backlogged, configured 1000"]
    assert "RUN INVALID" in format_summary(m)
    assert summarize(m)["valid"] is False


def test_service_problems_flags_starved_ports_only() -> None:
    stats = {
        "s1": {1: {"rate_pps": 1000, "busy_seconds": 2.0, "busy_tx_packets": 1990},
               2: {"rate_pps": 1000, "busy_seconds": 2.0, "busy_tx_packets": 1200},
               3: {"rate_pps": 1000, "busy_seconds": 0.05, "busy_tx_packets": 1}},
        "l1": {1: {"rate_pps": 0, "rx_socket_drops": 7}},
    }
    reasons = service_problems(stats)
    assert len(reasons) == 2
    assert reasons[0].startswith("l1 port 1: kernel dropped 7 frames")
    assert reasons[1].startswith("s1 port 2: served 600 pps")


def test_bmv2_unmeasured_figures_are_unknown_and_retransmissions_invalidate() -> None:
    """BMv2 counts no queue drops: the report must not print 0 for them, and host-side
    retransmissions then make the run invalid (congestion cannot be told from a switch that
    fell behind); with no retransmission at all, no cell was lost."""
    from cellfabric.core.validity import loss_problems

    m = _metrics()
    m.drops = {"s1": {"l2_miss": 2}, "l1": {"ecn_marks": 4}}  # what BMv2's counters give
    m.queues = {}
    m.flows["h1->h3"].update(retransmits=21, cells_sent=2048)
    m.reorder["h3"]["duplicates"] = 5
    s = summarize(m)
    assert s["cells_dropped"] is None and s["peak_queue_depth"] is None
    assert (s["retransmitted_cells"], s["cells_sent"], s["duplicate_cells"]) == (21, 2048, 5)
    text = format_summary(m)
    assert re.search(r"cells dropped at switches +unknown", text)
    assert "21 of 2048 sent (1.0%), 5 duplicates" in text
    reasons = loss_problems("bmv2", m.drops, m.flows, duplicates=5)
    assert len(reasons) == 1 and reasons[0].startswith("21 cells retransmitted (1.0% of 2048")
    assert "5 received twice" in reasons[0]
    # every resent cell received twice: neither copy was lost, so nothing was (BMv2 on a busy
    # CPU delays cells past the sender's hold-off and it resends early)
    m.flows["h1->h3"]["retransmits"] = 5
    assert loss_problems("bmv2", m.drops, m.flows, duplicates=5) == []
    assert summarize(m)["cells_dropped"] == 0
    # one resend short of its duplicate: a cell may have been lost
    m.reorder["h3"]["duplicates"] = 4
    assert summarize(m)["cells_dropped"] is None
    assert loss_problems("bmv2", m.drops, m.flows, duplicates=4)
    m.flows["h1->h3"]["retransmits"] = 0
    assert summarize(m)["cells_dropped"] == 0 and loss_problems("bmv2", m.drops, m.flows) == []
    # where queue drops and kernel socket drops are counted (p4sim), retransmissions beyond
    # the drops are the transport resending early: printed, not a reason to invalidate
    m.drops = {"s1": {"queue_drops": 3}}
    m.flows["h1->h3"]["retransmits"] = 300
    assert loss_problems("embedded", m.drops, m.flows) == []
    assert "300 of 2048 sent (14.6%)" in format_summary(m)


def test_goodput_fraction_of_flows_sharing_a_bottleneck_stays_within_its_capacity() -> None:
    # 2:1 incast, each flow 1.0 s of cells at line rate: fair share 2.0 s each. One finishes
    # first (1.0 s), the other at 2.0 s: the receiver's link was busy throughout (100%), and
    # summing per-flow fair shares over per-flow times would read 133%.
    m = RunMetrics()
    m.messages = [{"src": src, "dst": "h3", "fct_s": fct, "ideal_s": 2.0, "share": 2,
                   "bottleneck": "h3"} for src, fct in (("h1", 1.0), ("h2", 2.0))]
    m.flows = {"h1->h3": {"flow_time_s": 1.0}, "h2->h3": {"flow_time_s": 2.0}}
    assert goodput_fraction(m) == 1.0
    m.flows["h2->h3"]["flow_time_s"] = 2.5  # the link idled for 0.5 s
    assert goodput_fraction(m) == 2.0 / 2.5


def test_goodput_fraction_does_not_count_the_first_cells_slot() -> None:
    # 100 cells paced at 100/s over an idle path much faster than a slot: the last cell
    # leaves 0.99 s after the first and its ACK is back 2 ms later. Counting all 100 slots
    # as the ideal read 1.0 / 0.992 = 100.8%.
    m = RunMetrics()
    m.messages = [{"src": "h1", "dst": "h3", "fct_s": 0.992, "ideal_s": 1.0, "work_s": 1.0,
                   "slot_s": 0.01, "base_latency_s": 0.0}]
    m.flows = {"h1->h3": {"flow_time_s": 0.992}}
    assert goodput_fraction(m) == pytest.approx(0.99 / 0.992)
    assert goodput_fraction(m) <= 1.0


def test_goodput_fraction_times_a_shared_bottleneck_from_its_first_sender() -> None:
    # 2:1 incast at one cell per slot on every link: each flow is 1.0 s of cells, 2.0 s of the
    # receiver's link together. The second sender process starts 0.5 s after the first; the
    # link is busy from 0 to 2.0 s. Timing the group by its slowest member alone (1.5 s) read
    # 133%.
    m = RunMetrics()
    m.messages = [{"src": src, "dst": "h3", "fct_s": ft, "ideal_s": 2.0, "share": 2,
                   "bottleneck": "h3", "work_s": 1.0} for src, ft in (("h1", 1.0), ("h2", 1.5))]
    m.flows = {"h1->h3": {"flow_time_s": 1.0, "flow_start_s": 100.0},
               "h2->h3": {"flow_time_s": 1.5, "flow_start_s": 100.5}}
    assert goodput_fraction(m) == pytest.approx(1.0)
    # a second sender that starts late on an idle link cannot be asked to finish sooner than
    # its own start plus its own cells: 1.5 s late, alone from then on, ends at 2.5 s
    m.flows["h2->h3"].update(flow_start_s=101.5, flow_time_s=1.0)
    assert goodput_fraction(m) == pytest.approx(1.0)
    m.flows["h2->h3"]["flow_time_s"] = 1.5  # it took 0.5 s longer than it had to
    assert goodput_fraction(m) == pytest.approx(2.5 / 3.0)


def test_queue_heatmap_leaves_intervals_without_a_sample_empty_not_zero() -> None:
    # A monitor that fell behind (one round of reads took 16 s on real BMv2) has no sample for
    # most of the run: painting those intervals as empty queues would show a fabric that
    # drained at once.
    from cellfabric.core.plots import depth_grid

    series = [[[100.0, 3], [100.4, 5], [109.0, 0]], [[100.1, 1]]]
    grid = depth_grid(series, 100.0, 10.0, 10)
    assert grid[0][0] == 5 and grid[0][9] == 0  # the deepest sample of an interval
    assert grid[0][1:9] == [None] * 8
    assert grid[1][0] == 1 and grid[1][1:] == [None] * 9


def test_queue_heatmap_of_a_simulated_microsecond_run_spans_the_whole_run() -> None:
    # a simulated run lasts microseconds: its samples spread over every interval, not into
    # the first ninth of a millisecond-wide axis with the rest "no sample"
    from cellfabric.core.plots import depth_grid

    series = [[[i * 1e-6, i % 4] for i in range(114)]]  # a sample each 1 us over 113 us
    grid = depth_grid(series, 0.0, 113e-6, 100)
    assert None not in grid[0]
    assert max(grid[0]) == 3


def test_the_channel_schedulers_moves_are_in_the_report() -> None:
    m = _metrics()
    m.run["channel_scheduler"] = {"policy": "dynamic", "steps": [
        {"step": 0, "shared_uplinks": 1, "moved": 0, "down": []},
        {"step": 1, "shared_uplinks": 0, "moved": 3, "down": ["a11-c1"]},
        {"step": 2, "shared_uplinks": 2, "moved": 1, "down": ["a11-c1", "h1-e11"]}]}
    line = next(x for x in format_summary(m).splitlines() if "channel scheduler" in x)
    assert line.split("scheduler", 1)[1].strip() == (
        "dynamic: 3 steps placed, at most 2 uplinks shared by two sends; links down from "
        "step 1: 4 sends moved off them")
    m.run["channel_scheduler"] = {"policy": "static", "steps": []}
    assert "static: rank order, paths by the fabric's hash" in format_summary(m)


def test_event_times_are_shown_in_a_unit_that_shows_them() -> None:
    m = _metrics()  # t0 = 100.0 s
    m.run["events"] = [{"t": 100.00002, "event": "link a11-c1 down (injected)"},
                       {"t": 100.0035, "event": "link a11-c1 up (injected)"},
                       {"t": 102.5, "event": "link l1-s1 down (injected)"}]
    lines = [x.strip() for x in format_summary(m).splitlines() if x.strip().startswith("event")]
    assert lines == ["event at 20.000 us: link a11-c1 down (injected)",
                     "event at 3.500 ms: link a11-c1 up (injected)",
                     "event at 2.50 s: link l1-s1 down (injected)"]


def test_bgp_route_churn_and_holes_during_the_workload_are_one_line() -> None:
    m = _metrics()
    health = {"c1": {"write_batches": 3, "deletes": 7, "missing_prefixes": []},
              "e42": {"write_batches": 2, "deletes": 1, "missing_prefixes": ["10.1.1.1/32"]},
              "a11": {"write_batches": 0, "deletes": 0, "missing_prefixes": [],
                      "failed": "OSError: [Errno 105] No buffer space available"}}
    m.run["bgp"] = {"sessions": 32, "converged_s": 12.8, "messages_lost": 1,
                    "routes_during_workload": health}
    text = format_summary(m)
    assert ("5 agent write batches, 8 deletes; switches not forwarding every host prefix at "
            "the end: a11, e42") in text
    assert "every switch forwarded every host prefix 12.8 s after FRR started" in text
