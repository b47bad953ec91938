"""Structured traces on the simulated fat-tree: a cell's journey has every hop, its link
times are the physics (serialization + propagation), its parts add up to the one-way latency
the receiving host saw, and a cell dropped at a full queue says where and why."""

from __future__ import annotations

import json
from pathlib import Path

from simlib import ROOT, capture, send_cells, template

from cellfabric.core.journeys import dropped_journeys, journeys, load_traces
from cellfabric.core.workloads import Workload
from cellfabric.sim.hostsetup import SimSettings
from cellfabric.sim.run import SimConfig, SimRun
from cellfabric.trace_cli import main as trace_main
from topologies.model import load_topology

RATE = 8_000_000_000  # one byte per ns: a frame's serialization is its length in ns
DELAY = 1000


def traced_fat_tree(tmp: Path, buffer_bytes: int, every: int = 1) -> SimRun:
    topo = load_topology(ROOT / "topologies" / "fat-tree.yaml")
    cfg = SimConfig(topo=topo, workload=Workload("none", ()), cc=topo.fabric.cc,
                    run_dir=tmp / "run", settings=SimSettings(RATE, DELAY, buffer_bytes, seed=1),
                    progress=False, trace_sample=every)
    run = SimRun(cfg)
    run.bring_up()
    return run


def test_a_cross_pod_cell_journey_adds_up_to_its_one_way_latency(tmp_path: Path) -> None:
    run = traced_fat_tree(tmp_path, 512 * 1024)
    got = capture(run, "h16")
    # h1 and h2 (both on e11) send 6 cells each at once to h16: they meet at e42's port to
    # h16 (and on shared uplinks), so later cells wait in queues.
    tpl1, tpl2 = template(run, "h1", "h16", qpn=7), template(run, "h2", "h16", qpn=8)
    send_cells(run, "h1", tpl1, 0, 6)
    send_cells(run, "h2", tpl2, 0, 6)
    run.engine.run()
    run.tear_down()
    assert len(got) == 12
    arrival = {}
    for t, frame in got:  # the receiving host's own clock readings, independent of the trace
        arrival[(frame[26:30], frame[18:20])] = t

    tr = load_traces(run.cfg.run_dir)
    found = journeys(tr, "h1", "h16") + journeys(tr, "h2", "h16")
    assert len(found) == 12
    waited = 0
    for j in found:
        # Cross-pod in a k=4 fat-tree: edge, aggregation, core, aggregation, edge.
        assert [h["switch"][0] for h in j["hops"]] == ["e", "a", "c", "a", "e"]
        assert j["hops"][0]["switch"] == "e11" and j["hops"][-1]["switch"] == "e42"
        src_ip = bytes(int(x) for x in j["id"]["src"].split("."))
        measured = arrival[(src_ip, j["id"]["ip_id"].to_bytes(2, "big"))] - j["t_send"]
        assert j["one_way_ns"] == measured
        b = j["breakdown"]
        assert abs(b["sum_ns"] - measured) <= 0.01 * measured
        # Every link: the frame's bytes at one byte per ns, plus the propagation delay.
        links = [h["link_in_ns"] for h in j["hops"]] + [j["link_out_ns"]]
        assert links == [tpl1.frame_len + DELAY] * 6
        waited += b["queue_waits_ns"] + b["nic_wait_ns"]
    assert waited > 0  # the cells did queue somewhere: the waits are part of the sums
    # The selector decision is recorded with its alternatives: at e11 (two uplinks).
    choice = next(d for d in found[0]["hops"][0]["decisions"] if d["ev"] == "choice")
    assert len(choice["members"]) == 2 and choice["chosen"] in (0, 1)
    chosen_port = choice["members"][choice["chosen"]]["args"][0]
    assert found[0]["hops"][0]["out_port"] == chosen_port
    assert found[0]["hops"][0]["changes"]["ttl"] == [64, 63]


def test_a_cell_dropped_at_a_full_queue_shows_where_and_why(tmp_path: Path, capsys) -> None:
    # Room for 3 cells at e42's port to h16; 2 senders x 10 cells arrive twice as fast as
    # that port drains them.
    run = traced_fat_tree(tmp_path, 3 * 1100)
    got = capture(run, "h16")
    send_cells(run, "h1", template(run, "h1", "h16", qpn=7), 0, 10)
    send_cells(run, "h2", template(run, "h2", "h16", qpn=8), 0, 10)
    run.engine.run()
    run.tear_down()
    assert 0 < len(got) < 20
    tr = load_traces(run.cfg.run_dir)
    lost = [j for j in journeys(tr, None, "h16") if "dropped" in j]
    assert len(lost) == 20 - len(got)
    port = run.topo.port_of("e42", "h16")[0]
    for j in lost:
        d = j["dropped"]
        assert d["switch"] == "e42" and d["stage"] == "queue" and d["port"] == port
        assert "tail drop" in d["reason"] and "full" in d["reason"]
    assert len(dropped_journeys(tr)) == len(lost)
    # The command shows it too, and --json gives the same journeys.
    assert trace_main([str(run.cfg.run_dir), "--flow", "h1-h16", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert f"DROPPED at e42 in queue: tail drop: queue ({port}, 0) full" in out
    assert trace_main([str(run.cfg.run_dir), "--flow", "h2-h16", "--psn", "9", "--json"]) == 0
    (one,) = json.loads(capsys.readouterr().out)
    assert one["cell"]["psn"] == 9 and one["src"] == "h2"


def test_sampling_keeps_the_same_cells_at_every_hop(tmp_path: Path) -> None:
    run = traced_fat_tree(tmp_path, 512 * 1024, every=4)
    capture(run, "h16")
    send_cells(run, "h1", template(run, "h1", "h16"), 0, 40)
    run.engine.run()
    run.tear_down()
    tr = load_traces(run.cfg.run_dir)
    found = journeys(tr, "h1", "h16")
    assert 0 < len(found) < 40  # about 1 in 4 kept, by the cells' identities
    assert all(len(j["hops"]) == 5 and "t_recv" in j for j in found)


def test_trace_of_a_folder_without_traces_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert trace_main([str(tmp_path), "--flow", "h1-h2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cellfabric trace: error:") and "no traces/" in err
    assert len(err.splitlines()) == 1


def test_without_host_records_journeys_join_the_switch_records_alone(tmp_path: Path) -> None:
    # An emulated run has only the switches' records (its hosts are processes of their own)
    # and its switch files are named by Mininet node (switch name + the run's tag).
    run = traced_fat_tree(tmp_path, 512 * 1024)
    capture(run, "h16")
    tpl = template(run, "h1", "h16")
    send_cells(run, "h1", tpl, 0, 3)
    run.engine.run()
    run.tear_down()
    traces = run.cfg.run_dir / "traces"
    (traces / "hosts.jsonl").unlink()
    for path in traces.glob("*.jsonl"):
        path.rename(traces / f"{path.stem}ab12.jsonl")
    tr = load_traces(run.cfg.run_dir)
    found = journeys(tr, "10.1.1.1", "10.4.2.2")
    assert len(found) == 3
    for j in found:
        assert [h["switch"] for h in j["hops"]][0::4] == ["e11", "e42"]
        b = j["breakdown"]
        assert j["span_ns"] == b["links_ns"] + b["queue_waits_ns"] + b["processing_ns"]
        # Between switches: 4 links of serialization + propagation.
        assert b["links_ns"] == 4 * (tpl.frame_len + DELAY)
