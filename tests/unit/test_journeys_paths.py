"""cellfabric.core.journeys without host records (an emulated run): a cell sent twice has the
same identity at every hop; its records split into one journey per transmission by link and
time, even when the two copies overlap in the fabric."""

from __future__ import annotations

from typing import Any

from cellfabric.core.journeys import Traces, id_key, journeys

IDENT = {"src": "10.0.1.1", "dst": "10.0.2.1", "proto": 17, "ip_id": 7, "sport": 1000,
         "dport": 4791}
LINKS = {"l1:1": "s1:1", "l1:2": "s2:1", "s1:2": "l2:1", "s2:2": "l2:2", "l2:3": "h3:1"}


def _rec(switch: str, in_port: int, t_in: int, out_port: int, t_out: int) -> dict[str, Any]:
    return {"switch": switch, "in_port": in_port, "t_in": t_in, "id": IDENT, "ingress": [],
            "copies": [{"port": out_port, "t_out": t_out, "wait_ns": 0, "depth": 0,
                        "egress": []}]}


def test_a_resent_cell_has_one_journey_per_transmission() -> None:
    first = [_rec("l1", 3, 0, 2, 10), _rec("s2", 1, 20, 2, 30), _rec("l2", 2, 40, 3, 50)]
    again = [_rec("l1", 3, 15, 1, 25), _rec("s1", 1, 35, 2, 45), _rec("l2", 1, 55, 3, 65)]
    recs = sorted(first + again, key=lambda r: r["t_in"])
    tr = Traces({"hosts": {"h1": "10.0.1.1", "h3": "10.0.2.1"},
                 "links": LINKS | {v: k for k, v in LINKS.items()}}, [], {},
                {id_key(IDENT): recs})
    found = journeys(tr, "h1", "h3")
    assert [[(h["switch"], h["in_port"]) for h in j["hops"]] for j in found] == [
        [("l1", 3), ("s2", 1), ("l2", 2)], [("l1", 3), ("s1", 1), ("l2", 1)]]
    assert [j["span_ns"] for j in found] == [50, 50]


def test_hops_tied_to_the_millisecond_still_start_at_the_first_switch() -> None:
    # Real BMv2 logs time to the millisecond: all three hops of one cell carry one time, and
    # the files are read destination leaf first (l2 sorts before s1 and after l1 alike).
    ms = 22_726_499_000_000
    recs = [_rec("l2", 1, ms, 3, ms), _rec("s1", 1, ms, 2, ms), _rec("l1", 3, ms, 1, ms)]
    tr = Traces({"hosts": {"h1": "10.0.1.1", "h3": "10.0.2.1"},
                 "links": LINKS | {v: k for k, v in LINKS.items()}}, [], {},
                {id_key(IDENT): recs})
    (only,) = journeys(tr, "h1", "h3")
    assert [h["switch"] for h in only["hops"]] == ["l1", "s1", "l2"]
    assert "dropped" not in only
