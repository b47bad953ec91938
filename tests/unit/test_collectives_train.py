"""Training-iteration workloads: a model's collectives as Megatron-style 3D parallelism lays
them out, their lowering to concurrent steps, and the run's iteration figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellfabric.collectives import verify
from cellfabric.collectives.iteration import (
    Call,
    IterationWorkload,
    format_iteration,
    iteration_section,
    lower_iteration,
)
from cellfabric.collectives.train import iteration_calls, parse_model
from cellfabric.core.workloads import WORKLOADS, WorkloadError, make_workload

HOSTS = [f"h{i}" for i in range(1, 9)]
# 2 layers of hidden 64 (12 x 2 x 64^2 = 98304 parameters), activations 16 x 64 x 2 bytes
SMALL = "layers=2,hidden=64,seq=16,tp=2,pp=2,dp=2,bucket=20000"
ACT = 2048


def _ar(group: tuple[int, ...], size: int = ACT) -> tuple[str, int, tuple[int, ...]]:
    return ("all-reduce", size, group)


def _send(src: int, dst: int) -> tuple[str, int, tuple[int, ...]]:
    return ("send", ACT, (src, dst))


def test_a_small_models_iteration_is_the_sequence_derived_by_hand() -> None:
    """Ranks: dp0 stage0 = 0,1; dp0 stage1 = 2,3; dp1 stage0 = 4,5; dp1 stage1 = 6,7.
    Per rank 98304 / (pp x tp) = 24576 gradients of 2 bytes = 49152 bytes: buckets of
    20000, 20000 and 9152 bytes."""
    want = [
        # forward: stage 0's layer 0 (two TP all-reduces per replica), sends to stage 1,
        # stage 1's layer 1
        _ar((0, 1)), _ar((0, 1)), _ar((4, 5)), _ar((4, 5)),
        _send(0, 2), _send(1, 3), _send(4, 6), _send(5, 7),
        _ar((2, 3)), _ar((2, 3)), _ar((6, 7)), _ar((6, 7)),
        # backward: stage 1, sends back, stage 0
        _ar((2, 3)), _ar((2, 3)), _ar((6, 7)), _ar((6, 7)),
        _send(2, 0), _send(3, 1), _send(6, 4), _send(7, 5),
        _ar((0, 1)), _ar((0, 1)), _ar((4, 5)), _ar((4, 5)),
        # gradients: stage 1's buckets over its DP groups, then stage 0's
        _ar((2, 6), 20000), _ar((3, 7), 20000), _ar((2, 6), 20000), _ar((3, 7), 20000),
        _ar((2, 6), 9152), _ar((3, 7), 9152),
        _ar((0, 4), 20000), _ar((1, 5), 20000), _ar((0, 4), 20000), _ar((1, 5), 20000),
        _ar((0, 4), 9152), _ar((1, 5), 9152),
    ]
    calls = iteration_calls(parse_model(SMALL))
    assert [(c.op, c.size, c.group) for c in calls] == want


def test_calls_run_concurrently_where_the_iteration_allows() -> None:
    w = make_workload(f"train:{SMALL},micro_batches=2", HOSTS, 1, 1)
    phase = {pc.call.label: pc.phase for pc in w.calls}
    # the replicas' TP all-reduces at once; stage 1 takes micro-batch 0 while stage 0
    # takes micro-batch 1 (the pipeline)
    assert phase["tp fwd mb0 layer0 attn dp0"] == phase["tp fwd mb0 layer0 attn dp1"] == 0
    assert phase["tp fwd mb0 layer1 attn dp0"] == phase["tp fwd mb1 layer0 attn dp0"] == 3
    # stage 1's gradients go while stage 0 is still in its backward; both DP groups at once
    assert phase["dp bucket0 stage1 tp0"] == phase["dp bucket0 stage1 tp1"]
    assert phase["dp bucket0 stage1 tp0"] < phase["tp bwd mb1 layer0 mlp dp0"]
    assert phase["dp bucket1 stage1 tp0"] == phase["dp bucket0 stage1 tp0"] + 1
    assert phase["dp bucket0 stage0 tp0"] == phase["tp bwd mb1 layer0 mlp dp0"] + 1


def test_every_collective_of_an_iteration_is_correct_on_every_rank() -> None:
    """Every op the iteration uses (TP/DP all-reduce, PP send, EP all-to-all, ZeRO's
    reduce-scatter and all-gather) through the symbolic checker, with uneven sizes."""
    spec = ("layers=4,hidden=24,seq=7,tp=2,pp=2,dp=4,ep=2,moe_every=2,dp_op=rs-ag,"
            "bucket=1001,micro_batches=2")
    hosts = [f"h{i}" for i in range(1, 17)]
    w = make_workload(f"train:{spec}", hosts, 1, 1, channels=2)
    assert {pc.call.op for pc in w.calls} == {"all-reduce", "send", "all-to-all",
                                              "reduce-scatter", "all-gather"}
    for pc, schedule in zip(w.calls, w.schedules, strict=True):
        assert verify(schedule) == [], pc.call.label
    assert w.total_bytes == sum(s.bytes_sent for s in w.schedules)


def test_a_step_is_the_union_of_its_phases_sends() -> None:
    """Two 4-rank rings at once (6 steps each, both in every step), then one that waits."""
    calls = [Call("all-reduce", 400, (0, 1, 2, 3)), Call("all-reduce", 400, (4, 5, 6, 7)),
             Call("broadcast", 100, (0, 4), after=(0, 1))]
    w = lower_iteration(calls, HOSTS, "trace")
    assert len(w.steps) == 7
    for step in w.steps[:6]:
        assert sorted((t.src, t.dst, t.size) for t in step.transfers) == sorted(
            [(HOSTS[g + i], HOSTS[g + (i + 1) % 4], 100) for g in (0, 4) for i in range(4)])
    assert [(t.src, t.dst, t.size) for t in w.steps[6].transfers] == [("h1", "h5", 100)]
    assert [(pc.phase, pc.first_step, pc.steps) for pc in w.calls] == [(0, 0, 6), (0, 0, 6),
                                                                        (1, 6, 1)]


def test_concurrent_sends_between_one_pair_share_a_transfer() -> None:
    calls = [Call("send", 300, (0, 1)), Call("send", 500, (0, 1))]
    (step,) = lower_iteration(calls, HOSTS[:2], "trace").steps
    assert [(t.src, t.dst, t.size, t.count) for t in step.transfers] == [("h1", "h2", 800, 1)]


def test_the_iteration_section_sums_each_collectives_steps() -> None:
    calls = [Call("all-reduce", 3000, (0, 1, 2)), Call("send", 1000, (3, 4)),
             Call("all-gather", 3000, (0, 1, 2), after=(0,))]
    w = lower_iteration(calls, HOSTS[:5], "trace")
    assert len(w.steps) == 6  # the ring's 4 steps (the send in the first), the gather's 2
    step_s = [1e-6, 2e-6, 3e-6, 4e-6, 5e-6, 6e-6]
    msgs = [{"src": t.src, "dst": t.dst, "step": k, "fct_s": step_s[k]}
            for k, st in enumerate(w.steps) for t in st.transfers]
    msgs.append({"src": "h4", "dst": "h5", "step": 0, "fct_s": 0.5e-6})  # not the slowest
    sec = iteration_section(w, {"steps": [{"step": k, "sim_s": t} for k, t in
                                          enumerate(step_s)], "messages": msgs})
    assert sec["communication_time_s"] == pytest.approx(21e-6)
    ar, send, ag = sec["collectives"]
    assert ar["time_s"] == pytest.approx(10e-6) and send["time_s"] == pytest.approx(1e-6)
    assert ag["time_s"] == pytest.approx(11e-6)
    assert ar["algbw_gbps"] == pytest.approx(3000 / 10e-6 / 1e9)
    assert ar["busbw_gbps"] == pytest.approx(0.3 * 4 / 3)  # 2(n-1)/n
    assert ag["busbw_gbps"] == pytest.approx(3000 / 11e-6 / 1e9 * 2 / 3)  # (n-1)/n
    assert send["busbw_gbps"] == pytest.approx(1.0)
    assert (ar["group_size"], ar["bytes"]) == (3, 3000)
    # every one of ranks 0-2 takes part in all six steps; h5 only in the first
    assert sec["slowest_rank"]["time_s"] == pytest.approx(21e-6)
    assert sec["slowest_rank"]["rank"] in (0, 1, 2)
    assert iteration_section(make_workload("allreduce-ring", HOSTS, 100, 1), {}) == {}


def test_model_descriptions_as_files_and_inline(tmp_path: Path) -> None:
    doc = {"layers": 2, "hidden": 64, "seq": 16, "tp": 2, "pp": 2, "dp": 2,
           "bucket": "20000", "params": "1.5M"}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "m.yaml").write_text("".join(f"{k}: {v}\n" for k, v in doc.items()))
    a, b = (parse_model(str(tmp_path / n)) for n in ("m.json", "m.yaml"))
    assert a == b == parse_model(SMALL + ",params=1500000")
    assert a.total_params == 1_500_000 and a.activation_bytes == ACT
    assert parse_model("layers=1,hidden=8,bucket=25MiB").bucket == 25 * 2**20
    assert "train:..." in WORKLOADS and f"train:{SMALL}" in WORKLOADS


@pytest.mark.parametrize(("spec", "needle"), [
    ("layers=3,hidden=8,pp=2", "layers 3 do not split into pp 2"),
    ("layers=2,hidden=8,colour=red", "unknown field 'colour'"),
    ("layers=2,hidden=8,tp=0", "tp 0 must be at least 1"),
    ("layers=2,hidden=lots", "hidden 'lots' is not a number"),
    ("hidden=8,tp=2", "needs 'layers'"),
    ("layers=2,hidden=8,dp=4,ep=3", "ep 3 does not divide dp 4"),
    ("layers=2,hidden=8,dp_op=allgather", "dp_op 'allgather'"),
    ("layers=2,hidden=8,tp=4,dp=4", "16 ranks, the topology has 8 hosts"),
    ("layers=2,hidden=8", "sends nothing"),
    ("/nonexistent/model.yaml", "cannot read it"),
])
def test_bad_model_descriptions_are_one_line_errors(spec: str, needle: str) -> None:
    with pytest.raises(WorkloadError) as err:
        make_workload(f"train:{spec}", HOSTS, 1, 1)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_tp_groups_must_stay_inside_a_server() -> None:
    servers = {h: f"server{i // 3}" for i, h in enumerate(HOSTS)}
    with pytest.raises(WorkloadError, match="tp 2 group h3, h4 spans servers server0, server1"):
        make_workload(f"train:{SMALL}", HOSTS, 1, 1, server_of=servers)
    ok = {h: f"server{i // 4}" for i, h in enumerate(HOSTS)}
    assert make_workload(f"train:{SMALL}", HOSTS, 1, 1, server_of=ok).steps


def test_the_reports_lines_name_the_slowest_collectives_first() -> None:
    row = {"op": "all-reduce", "group_size": 4, "bytes": 1000, "algbw_gbps": 1.0,
           "busbw_gbps": 1.5, "label": ""}
    section = {"communication_time_s": 30e-6, "phases": 2, "steps": 3,
               "slowest_rank": {"rank": 2, "host": "h3", "time_s": 25e-6},
               "collectives": [{**row, "index": 0, "time_s": 10e-6},
                               {**row, "index": 1, "time_s": 20e-6, "label": "dp bucket0"}]}
    lines = format_iteration(section).splitlines()
    assert lines[0].endswith("2 collectives in 2 phases, 3 steps, communication 30.00 us")
    assert lines[1].strip() == "slowest rank 2 (h3): 25.00 us communicating"
    assert lines[3].split()[0] == "1" and lines[3].endswith("dp bucket0")
    assert lines[4].split()[0] == "0"
    section["communication_time_s"] = 0.5  # an emulated run's: milliseconds
    assert format_iteration(section).splitlines()[0].endswith("communication 500.00 ms")


def test_gpus_per_server_groups_consecutive_hosts(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from cellfabric.run_cli import servers_by_count
    from cellfabric.sim.cli import sim_main

    assert servers_by_count(HOSTS[:5], 2) == {"h1": "server0", "h2": "server0",
                                              "h3": "server1", "h4": "server1",
                                              "h5": "server2"}
    assert servers_by_count(HOSTS, None) is None
    with pytest.raises(ValueError, match="--gpus-per-server 0: expected at least 1"):
        servers_by_count(HOSTS, 0)
    # leaf-spine's 4 hosts, 3 to a server: the second TP pair (h3, h4) would span two
    assert sim_main(["leaf-spine", "--workload", "train:layers=2,hidden=8,tp=2,dp=2",
                     "--gpus-per-server", "3", "--quiet",
                     "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert "tp 2 group h3, h4 spans servers server0, server1" in err and "\n" not in err
    assert not (tmp_path / "results").exists()


def test_a_rail_fabrics_servers_hold_the_tp_groups() -> None:
    """rail-2x4: servers sv1 (h1-h4) and sv2 (h5-h8). Ranks are its servers' GPUs in order,
    so tp=4 is one server each; tp=8 would span both."""
    from cellfabric.run_cli import prepare_workload
    from cellfabric.sim.cli import _parser

    def workload(spec: str) -> IterationWorkload:
        return prepare_workload(_parser().parse_args(["rail-2x4", "--workload", spec]))[1]

    w = workload("train:layers=2,hidden=8,tp=4,dp=2")
    tp = {tuple(w.hosts[r] for r in pc.call.group) for pc in w.calls
          if pc.call.label.startswith("tp ")}
    assert tp == {("h1", "h2", "h3", "h4"), ("h5", "h6", "h7", "h8")}
    with pytest.raises(WorkloadError, match=r"tp 8 group h1, .*, h8 spans servers sv1, sv2"):
        workload("train:layers=2,hidden=8,tp=8")
