"""A port's line rate is shared by its priority queues: the runner configures per-priority rates
that add up to the link's rate, addressed the way each target's CLI numbers its queues."""

from __future__ import annotations

import pytest

from cellfabric.core.hostplan import host_line_rate
from cellfabric.emulation import admin as admin_mod
from cellfabric.emulation.admin import SwitchAdmin
from controlplane.fabric_plan import (
    FEEDBACK_PRIORITY,
    data_rate,
    queue_shares,
    separately_paced_rates,
)
from hosts.wire import ACK_EVERY
from topologies.generators import generate


@pytest.mark.parametrize("line", [5, 100, 200, 333, 5000])
def test_shares_add_up_to_the_line_rate(line: int) -> None:
    shares = queue_shares(line)
    assert sum(shares.values()) == line
    assert shares[0] > shares[FEEDBACK_PRIORITY] >= 1


@pytest.mark.parametrize("line", [30, 100, 200, 5000])
def test_separately_paced_queues_leave_data_headroom_and_feedback_the_line(line: int) -> None:
    # real BMv2 cannot share one line between its priority queues: feedback may use the whole
    # line while it has packets (as under p4sim's shared line); data is served faster than the
    # hosts send it (a queue served at exactly its arrival rate never drains after a burst),
    # but no faster than the line less the ACKs its own cells call for
    rates = separately_paced_rates(line)
    assert rates[FEEDBACK_PRIORITY] == line
    assert data_rate(line) < rates[0] <= line * ACK_EVERY / (ACK_EVERY + 1)
    assert separately_paced_rates(0) == {0: 0, FEEDBACK_PRIORITY: 0}


def test_unlimited_stays_unlimited() -> None:
    assert queue_shares(0) == {0: 0, FEEDBACK_PRIORITY: 0}


def test_host_rate_is_the_data_share() -> None:
    topo = generate("leaf-spine:leaves=2,spines=2,hosts=1,rate=200")
    assert host_line_rate(topo, "h1") == data_rate(200) == 160


def _lines(target: str, priorities: int = 2) -> list[str]:
    sent: list[str] = []
    admin = SwitchAdmin("s1", target, 0)
    admin.run = sent.extend  # type: ignore[method-assign]
    admin.set_queue(3, 100, 64, priorities=priorities)
    return sent


def test_bmv2_cli_queue_is_the_p4_priority_from_1_15_1(monkeypatch) -> None:
    # BMv2 #1276 (1.15.1): set_queue_rate's priority argument is the P4 program's qid, so the
    # data share (P4 priority 0) goes to queue 0
    monkeypatch.setattr(admin_mod, "bmv2_version", lambda: (1, 15, 5))
    assert _lines("bmv2") == ["set_queue_rate 88 3 0", "set_queue_rate 100 3 1",
                              "set_queue_depth 64 3"]


def test_bmv2_before_1_15_1_inverts_the_queue_index(monkeypatch) -> None:
    # older simple_switch kept P4 priority p in queue (priorities - 1 - p), the CLI's index
    monkeypatch.setattr(admin_mod, "bmv2_version", lambda: (1, 15, 0))
    assert _lines("bmv2") == ["set_queue_rate 88 3 1", "set_queue_rate 100 3 0",
                              "set_queue_depth 64 3"]


def test_unknown_bmv2_version_is_taken_as_current() -> None:
    assert not admin_mod.bmv2_cli_inverts_priorities(None)
    assert admin_mod.bmv2_cli_inverts_priorities((1, 14, 9))
    assert not admin_mod.bmv2_cli_inverts_priorities((1, 15, 1))


def test_embedded_shares_one_line_rate() -> None:
    assert _lines("embedded") == ["set_queue_rate 100 3", "set_port_rate 100 3",
                                  "set_queue_depth 64 3"]


def test_a_control_queue_is_off_the_line_on_both_targets(monkeypatch) -> None:
    # a NOS's run: priority 2 carries the switch's own frames; p4sim's line covers 0 and 1
    # only and the control queue has no rate; BMv2 paces it at the line on its own
    assert _lines("embedded", 3) == ["set_queue_rate 100 3", "set_queue_rate 0 3 2",
                                     "set_port_rate 100 3 2", "set_queue_depth 64 3"]
    monkeypatch.setattr(admin_mod, "bmv2_version", lambda: (1, 15, 5))
    assert _lines("bmv2", 3) == ["set_queue_rate 88 3 0", "set_queue_rate 100 3 1",
                                 "set_queue_rate 100 3 2", "set_queue_depth 64 3"]
    monkeypatch.setattr(admin_mod, "bmv2_version", lambda: (1, 15, 0))
    assert _lines("bmv2", 3) == ["set_queue_rate 88 3 2", "set_queue_rate 100 3 1",
                                 "set_queue_rate 100 3 0", "set_queue_depth 64 3"]


def test_p4sim_takes_the_control_queue_lines() -> None:
    from p4sim.switch.admin import execute
    from p4sim.switch.dataplane import DataPlane

    dp = DataPlane(priorities=3, clock=lambda: 0)
    for line in _lines("embedded", 3):
        words = line.split()
        execute(dp, words[0], words[1:])
    data, feedback, control = (dp.tm.queue(3, prio) for prio in (0, FEEDBACK_PRIORITY, 2))
    assert data.link is feedback.link is not None and data.link.pps == 100
    assert (data.pps, feedback.pps, data.depth) == (100, 100, 64)
    assert control.link is None and control.pps == 0 and control.bypass


def test_p4sim_port_line_rate_is_shared_by_its_priority_queues() -> None:
    from collections import namedtuple

    from p4sim.switch.tm import TrafficManager

    Item = namedtuple("Item", "kind index length")  # the TM reads a queued packet's length
    tm = TrafficManager(priorities=2)
    tm.set_rate(100, 1)  # each queue alone could send 100/s (simple_switch's per-queue rate)
    tm.set_port_rate(100, 1)  # ... but the port's line carries 100/s in all
    start = 10**9  # ns on the TM's clock
    for i in range(50):
        tm.enqueue(1, 0, Item("data", i, 100), start)
        tm.enqueue(1, 1, Item("ack", i, 100), start)
    sent = []
    t = start
    while len(sent) < 100 and t < start + 10 * 10**9:
        out = tm.dequeue(t)
        if out is None:
            t = max(t + 1, tm.next_deadline() or t)
            continue
        sent.append((t, out[2][0]))
    assert len(sent) == 100
    # 100 packets at 100/s in all (each queue alone would have sent its 50 at 100/s)
    assert (sent[-1][0] - start) / 1e9 == pytest.approx(99 / 100, abs=2e-3)
    assert [kind for _, kind in sent[:50]] == ["ack"] * 50  # strict priority within the line
