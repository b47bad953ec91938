"""The emulation's link window: a port kept busy from the first counted packet to the counter
read reads at most 100% of its rate once the window includes the slot the last packet counted
holds its line (linkload.last_slot_s), for p4sim's shared line and for BMv2's per-queue rates."""

from __future__ import annotations

from collections import namedtuple

import pytest

from cellfabric.core.linkload import last_slot_s
from cellfabric.core.report import link_accounting
from controlplane.fabric_plan import queue_shares
from p4sim.switch.tm import NS, TrafficManager
from topologies.generators import generate

Item = namedtuple("Item", "prio length")
RATE = 200  # packets per second, the topology's link rate


def _ports(target: str) -> list[TrafficManager]:
    """One port as SwitchAdmin.set_queue configures each target, its packets backlogged from
    t = 0. p4sim: both queues at the rate, one line shared; BMv2 paces each priority queue on
    its own at its share (QueueingLogicPriRL), modelled as one paced queue per share."""
    if target == "bmv2":
        tms = []
        for pps in queue_shares(RATE).values():
            tm = TrafficManager(priorities=1, depth=10**6)
            tm.set_rate(pps, 1)
            tms.append(tm)
    else:
        tm = TrafficManager(priorities=2, depth=10**6)
        tm.set_rate(RATE, 1)
        tm.set_port_rate(RATE, 1)
        tms = [tm]
    for tm in tms:
        for _ in range(2000):
            for prio in range(tm.priorities):
                tm.enqueue(1, prio, Item(prio, 100), 0)
    return tms


def _sent_until(tm: TrafficManager, read_ns: int) -> int:
    sent = 0
    while (t := tm.next_deadline()) is not None and t <= read_ns:
        while tm.dequeue(t) is not None:
            sent += 1
    return sent


@pytest.mark.parametrize(("target", "paced"), [("embedded", 1), ("bmv2", 2)])
def test_a_port_busy_until_the_read_reads_at_most_its_rate(target: str, paced: int) -> None:
    topo = generate(f"leaf-spine:leaves=2,spines=2,hosts=1,rate={RATE}")
    read_ns = 5 * NS  # the read lands on a departure instant: the worst case
    sent = sum(_sent_until(tm, read_ns) for tm in _ports(target))
    assert sent > 5 * RATE  # a window ending at the read would read over 100%
    window = read_ns / NS + last_slot_s(topo, paced)
    records = [{"link": "l1-s1", "tier": "leaf-spine", "capacity_pps": RATE,
                "directions": {"l1->s1": {"queue": "l1:1", "up": True, "cells": sent,
                                          "other": 0}}}]
    offered = link_accounting(records, window)["directions"]["l1->s1"]["offered"]
    assert 0.99 <= offered <= 1.0


def test_line_time_is_the_load_when_known() -> None:
    records = [{"link": "l1-s1", "tier": "leaf-spine", "capacity_pps": 100,
                "directions": {"l1->s1": {"queue": "l1:1", "up": True, "cells": 90,
                                          "other": 40, "line_s": 0.75}}}]
    acct = link_accounting(records, window_s=1.0)
    assert acct["directions"]["l1->s1"]["offered"] == 0.75
