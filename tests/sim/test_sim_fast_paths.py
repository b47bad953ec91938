"""The simulator's fast paths against the plain paths they replace: the same run either way.

- SimSwitch, after an arrival, asks the traffic manager for its next deadline alone; the
  plain path polls the data plane a second time (which serves nothing more at that instant).
  It checks for a new peak backlog only on the port the traffic manager enqueued on, when
  it enqueued once since the last check; the plain path checks every port.
- execute_sim runs set-up with the garbage collector off and set-up's objects frozen out of
  it for the engine (cellfabric.sim.collector); the plain path leaves the collector alone.
- Engine.run keeps its counters in locals; a plain heap loop written here is the reference
  for the order, the clock and the count of events, with ``until_ns``, ``max_events`` and
  ``stop()``.
"""

from __future__ import annotations

import gc
import heapq
import json
import random
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main
from cellfabric.sim.collector import ENGINE_GEN0, CollectorPolicy
from cellfabric.sim.engine import Engine
from cellfabric.sim.net import SimSwitch
from cellfabric.sim.run import SimRun

SMALL = ["leaf-spine", "--workload", "permutation", "--spray", "spray", "--cc", "none",
         "--size", "65536", "--count", "1", "--link-rate", "100G", "--seed", "5", "--quiet"]


def _metrics(results: Path, args: list[str] = SMALL) -> dict:
    assert sim_main([*args, "--results", str(results)]) == 0
    (run_dir,) = list(results.iterdir())
    data = json.loads((run_dir / "metrics.json").read_text())
    data["run"].pop("wall_clock")  # the only figures allowed to differ
    return data


# packet mode (`--link-rate topology`): the topology's rates per queue and per port, the other
# traffic manager path
PACKET_MODE = [{"100G": "topology", "65536": "16384"}.get(a, a) for a in SMALL]


@pytest.mark.parametrize("args", [SMALL, PACKET_MODE], ids=["bit-rate", "packet"])
def test_deadline_only_after_an_arrival_gives_the_plain_paths_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    fast = _metrics(tmp_path / "fast", args)
    monkeypatch.setattr(SimSwitch, "deadline_only", False)
    monkeypatch.setattr(SimSwitch, "peak_one_port", False)
    plain = _metrics(tmp_path / "plain", args)
    assert fast == plain
    # the mode asked for ran: packet mode paces by the topology's packets per second
    assert fast["run"]["sim"]["link_rate_bps"] == (0 if "topology" in args else 100 * 10**9)
    # queues did build (the path under test ran), and every message arrived
    assert max(fast["run"]["sim"]["peak_queue_packets"].values()) > 1
    assert fast["summary"]["messages_completed"] == fast["summary"]["messages_total"] == 4


def test_collector_policy_gives_the_plain_collectors_run_and_restores_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert gc.isenabled()
    thresholds = gc.get_threshold()
    tuned = _metrics(tmp_path / "tuned")
    # nothing left off, frozen or retuned
    assert gc.isenabled() and not gc.get_freeze_count() and gc.get_threshold() == thresholds
    monkeypatch.setattr(SimRun, "tune_collector", False)
    plain = _metrics(tmp_path / "plain")
    assert tuned == plain
    assert tuned["summary"]["messages_completed"] == tuned["summary"]["messages_total"] == 4


def test_collector_policy_freezes_set_up_and_is_inert_when_the_collector_was_off() -> None:
    thresholds = gc.get_threshold()
    with CollectorPolicy() as policy:
        assert not gc.isenabled()  # set-up: no collection passes
        kept = [[i] for i in range(1000)]  # set-up's survivors
        policy.settled()
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
        assert gc.get_threshold() == (ENGINE_GEN0, *thresholds[1:])
        policy.quiet()
        assert not gc.isenabled()
    assert gc.isenabled() and not gc.get_freeze_count()
    assert gc.get_threshold() == thresholds
    gc.disable()
    try:
        with CollectorPolicy() as policy:
            policy.settled()
            assert not gc.isenabled() and not gc.get_freeze_count()  # left as it found it
    finally:
        gc.enable()


def _reference(schedule: list[tuple[int, int]], until: int | None, limit: int | None,
               stop_at: int | None) -> tuple[list[tuple[int, int]], int, int]:
    """A plain heap loop: (what ran at which time, the clock after, events run)."""
    heap = [(t, i, i) for i, (t, _) in enumerate(schedule)]
    heapq.heapify(heap)
    ran, now, n = [], 0, 0
    while heap and (limit is None or n < limit):
        if until is not None and heap[0][0] > until:
            now = until
            break
        t, _, i = heapq.heappop(heap)
        now = t
        n += 1
        ran.append((t, i))
        if i == stop_at:
            break
    return ran, now, n


@pytest.mark.parametrize("seed", range(6))
def test_engine_runs_events_as_a_plain_heap_loop_does(seed: int) -> None:
    rnd = random.Random(seed)
    # many ties on the same nanosecond: their order is the order they were scheduled in
    schedule = [(rnd.randrange(0, 50), i) for i in range(200)]
    until = rnd.choice([None, 10, 25])
    limit = rnd.choice([None, 0, 7, 120])
    stop_at = rnd.choice([None, rnd.randrange(200)])
    eng = Engine()
    ran: list[tuple[int, int]] = []

    def event(i: int) -> None:
        ran.append((eng.now, i))
        if i == stop_at:
            eng.stop()

    for t, i in schedule:
        eng.at(t, event, i)
    eng.run(until_ns=until, max_events=limit)
    expected, now, n = _reference(schedule, until, limit, stop_at)
    assert ran == expected
    assert eng.events == n
    assert eng.now == now
    # what is left runs on later calls, and the counter keeps adding up to every event
    while eng.pending():
        eng.run()
    assert eng.events == len(ran) == len(schedule)


def test_pipeline_files_are_read_once_and_again_when_they_change(tmp_path: Path) -> None:
    from cellfabric.sim.control import pipeline_files

    info = tmp_path / "p.txtpb"
    blob = tmp_path / "p.json"
    info.write_text('pkg_info { arch: "v1model" }\n')
    blob.write_bytes(b'{"a": 1}')
    first = pipeline_files(info, blob)
    assert first.config.p4info.pkg_info.arch == "v1model"
    assert first.config.p4_device_config == b'{"a": 1}'
    assert pipeline_files(info, blob) is first  # every switch after the first: no parse
    blob.write_bytes(b'{"a": 22}')  # recompiled: another size, another mtime
    assert pipeline_files(info, blob).config.p4_device_config == b'{"a": 22}'
