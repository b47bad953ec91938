"""A run is invalid when a link carried more than its configured line rate over the window."""

from __future__ import annotations

from cellfabric.core.report import link_accounting
from cellfabric.core.validity import over_rate_problems


def test_a_link_that_carried_more_than_its_line_invalidates_the_run() -> None:
    # 2 s at 100 pps: 200 packets fill the line; 230 (data at its share plus feedback at the
    # line, as separately paced BMv2 queues allow) exceed it, 199 do not
    records = [{"link": "l1-s1", "a": "l1", "b": "s1", "tier": "leaf-spine",
                "capacity_pps": 100, "directions": {
                    "l1->s1": {"queue": "l1:3", "up": True, "cells": 160, "other": 70},
                    "s1->l1": {"queue": "s1:1", "up": False, "cells": 160, "other": 39}}}]
    acct = link_accounting(records, 2.0)
    (reason,) = over_rate_problems(acct["directions"])
    assert reason.startswith("l1->s1: carried 115.0% of its line rate")
    assert over_rate_problems({"a->b": {"offered": 1.0}, "b->a": {"offered": None}}) == []


def test_a_p4sim_switch_no_flow_crossed_dropped_nothing_measured() -> None:
    # p4sim lists only the ports it saw traffic on. An incast leaves some switches of a
    # fat-tree idle; their drop figure is 0, measured, not unknown (unknown would make every
    # retransmission of the run look like a switch that did not keep up).
    from cellfabric.core.validity import loss_problems, switch_drops

    idle = switch_drops({"ecn_marks": 0}, {"ports": {}})
    busy = switch_drops({"ecn_marks": 3}, {"ports": {"1": {"queue_drops": 5,
                                                           "rx_dropped_malformed": 1}}})
    assert idle["queue_drops"] == 0 and idle["malformed"] == 0
    assert busy["queue_drops"] == 5 and busy["malformed"] == 1 and busy["ecn_marks"] == 3
    flows = {"h2->h1": {"retransmits": 7, "cells_sent": 100}}
    assert loss_problems("embedded", {"e11": busy, "e42": idle}, flows) == []
    # BMv2 counts no queue drops at all: unmeasured, and resends then make the run invalid
    bmv2 = switch_drops({"ecn_marks": 0}, None)
    assert "queue_drops" not in bmv2
    assert loss_problems("bmv2", {"e11": bmv2}, flows)
