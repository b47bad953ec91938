"""A run is invalid when a link carried more than its configured line rate over the window."""

from __future__ import annotations

from topologies.report import link_accounting
from topologies.validity import over_rate_problems


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
