"""simple_switch's v1model flow: clones (I2E, E2E) with preserved field lists, multicast through
the replication engine, resubmit, recirculate, digests, CPU port, and the traffic manager
(queue build-up, rate pacing, tail drop, strict priority)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx, prim, rd

from p4sim.switch.api import (
    ActionCall,
    CloneSession,
    Digest,
    Exact,
    Replica,
    TableEntry,
)
from p4sim.switch.dataplane import DataPlane

FIELDS = [("k1", 16), ("k2", 8), ("out", 32), ("qd", 32), ("td", 32)]
STD = "standard_metadata"
NORMAL, I2E, E2E, RECIRC, REPL, RESUB = 0, 1, 2, 4, 5, 6


def report_egress(p: Prog) -> None:
    """Egress writes instance_type, enq_qdepth and deq_timedelta into the probe header."""
    a = p.action("report", [], [assign(f("probe", "out"), f(STD, "instance_type")),
                                assign(f("probe", "qd"), f(STD, "enq_qdepth")),
                                assign(f("probe", "td"), f(STD, "deq_timedelta"))])
    p.table("rep", [], [a], default=(a, []), pipe="egress")


def make(p: Prog, clock: Callable[[], int] | None = None,
         **kw: int) -> tuple[DataPlane, list[tuple[int, dict[str, int]]]]:
    out: list[tuple[int, dict[str, int]]] = []
    dp = DataPlane(**kw, clock=clock,
                   transmit=lambda port, frame: out.append((port, p.fields(frame))))
    dp.load_pipeline(p.json())
    return dp, out


def test_ingress_clone_gets_original_packet_and_preserved_fields() -> None:
    p = Prog(FIELDS)
    p.field_lists.append({"id": 1, "name": "fl", "elements": [f("scalars", "meta_a")]})
    a = p.action("fwd_and_clone", [], [
        assign(f(STD, "egress_spec"), hx(1)),
        assign(f("scalars", "meta_a"), hx(0x77)),
        assign(f("probe", "k1"), hx(0xFFFF)),
        prim("clone_ingress_pkt_to_egress", hx(5), hx(1)),
    ])
    p.table("t", [], [a], default=(a, []))
    b = p.action("meta_out", [], [assign(f("probe", "k2"), f("scalars", "meta_a"))])
    p.table("m", [], [b], default=(b, []), pipe="egress")
    report_egress(p)
    dp, out = make(p)
    dp.clone_session_set(CloneSession(5, [Replica(3, 0)]))
    dp.receive(0, p.frame(0x1234, 0))
    by_port = dict(out)
    assert set(by_port) == {1, 3}
    assert (by_port[1]["out"], by_port[1]["k1"], by_port[1]["k2"]) == (NORMAL, 0xFFFF, 0x77)
    # The clone is the packet as ingress began (k1 unmodified), re-parsed, with the field
    # list's final ingress value of meta_a.
    assert (by_port[3]["out"], by_port[3]["k1"], by_port[3]["k2"]) == (I2E, 0x1234, 0x77)


def clone_prog() -> Prog:
    """Ingress sends every packet to port 1 and clones it (I2E) to session 5 preserving
    meta_a; egress reports what it sees of the copy's metadata."""
    p = Prog([("it", 8), ("igts", 32), ("port", 8), ("perr", 8), ("len", 16), ("kept", 8)])
    p.field_lists.append({"id": 1, "name": "fl", "elements": [f("scalars", "meta_a")]})
    a = p.action("fwd_and_clone", [], [assign(f(STD, "egress_spec"), hx(1)),
                                       assign(f("scalars", "meta_a"), hx(0x55)),
                                       prim("clone_ingress_pkt_to_egress", hx(5), hx(1))])
    p.table("t", [], [a], default=(a, []))
    r = p.action("report", [], [assign(f("probe", "it"), f(STD, "instance_type")),
                                assign(f("probe", "igts"), f(STD, "ingress_global_timestamp")),
                                assign(f("probe", "port"), f(STD, "ingress_port")),
                                assign(f("probe", "perr"), f(STD, "parser_error")),
                                assign(f("probe", "len"), f(STD, "packet_length")),
                                assign(f("probe", "kept"), f("scalars", "meta_a"))])
    p.table("rep", [], [r], default=(r, []), pipe="egress")
    return p


def test_an_ingress_clone_reaches_egress_with_its_metadata_reset() -> None:
    """As simple_switch 1.15.5 does (an STF run on it): the clone is parsed again, then its
    metadata reset but for the field list, instance_type and packet_length."""
    now = [1_000_000]
    p = clone_prog()
    dp, out = make(p, clock=lambda: now[0])
    dp.clone_session_set(CloneSession(5, [Replica(3, 0)]))
    now[0] += 7_000  # 7 us after the switch started
    frame = p.frame()
    dp.receive(2, frame)
    by_port = dict(out)
    original = {"it": NORMAL, "igts": 7, "port": 2, "perr": 0, "len": len(frame), "kept": 0x55}
    assert by_port[1] == original
    assert by_port[3] == {**original, "it": I2E, "igts": 0, "port": 0}


def test_a_parser_error_of_an_ingress_clone_is_counted() -> None:
    p = clone_prog()
    dp, out = make(p)
    dp.clone_session_set(CloneSession(5, [Replica(3, 0)]))
    dp.receive(0, p.frame()[:16])  # the probe header cut short: PacketTooShort
    assert sorted(port for port, _ in out) == [1, 3]  # v1model goes on into ingress
    assert dp.stats().parser_errors == 2  # the original's parse and the clone's


def test_egress_clone_and_truncation() -> None:
    p = Prog(FIELDS)
    a = p.action("fwd", [], [assign(f(STD, "egress_spec"), hx(1))])
    p.table("t", [], [a], default=(a, []))
    c = p.action("clone_e2e", [], [prim("clone_egress_pkt_to_egress", hx(6), hx(0))])
    p.table("c", [("exact", [STD, "instance_type"])], [c, 0], default=(0, []), pipe="egress")
    report_egress(p)
    dp, _ = make(p)
    frames: list[tuple[int, bytes]] = []
    dp.set_transmit_fn(lambda port, frame: frames.append((port, frame)))
    dp.table_insert("c", TableEntry((Exact(NORMAL),), ActionCall("clone_e2e")))
    dp.clone_session_set(CloneSession(6, [Replica(2, 0)], packet_length_bytes=20))
    dp.receive(0, p.frame(1, 2))
    by_port = dict(frames)
    assert p.fields(by_port[1])["out"] == NORMAL
    assert len(by_port[2]) == 20  # the session truncates its copies
    assert by_port[2][14] == 0 and by_port[2][:14] == by_port[1][:14]


def test_multicast_replicas_carry_egress_rid() -> None:
    p = Prog(FIELDS)
    a = p.action("mc", [("grp", 16)], [assign(f(STD, "mcast_grp"), rd(0))])
    p.table("t", [], [a], default=(a, [9]))
    r = p.action("rid", [], [assign(f("probe", "k1"), f(STD, "egress_rid")),
                             assign(f("probe", "k2"), f(STD, "egress_port"))])
    p.table("r", [], [r], default=(r, []), pipe="egress")
    report_egress(p)
    dp, out = make(p)
    dp.mcast_group_set(9, [Replica(1, 10), Replica(2, 20), Replica(4, 40)])
    dp.receive(0, p.frame(0, 0))
    assert sorted((port, o["k1"], o["k2"], o["out"]) for port, o in out) == [
        (1, 10, 1, REPL), (2, 20, 2, REPL), (4, 40, 4, REPL)]
    out.clear()
    dp.mcast_group_delete(9)
    dp.receive(0, p.frame(0, 0))
    assert out == []


def test_resubmit_preserves_field_list_and_sets_instance_type() -> None:
    p = Prog(FIELDS)
    p.field_lists.append({"id": 1, "name": "fl", "elements": [f("scalars", "meta_a")]})
    resub = p.action("resub", [], [assign(f("scalars", "meta_a"), hx(5)),
                                   assign(f("probe", "k1"), hx(0xDEAD)),
                                   prim("resubmit", hx(1))])
    fin = p.action("fin", [], [assign(f(STD, "egress_spec"), hx(2)),
                               assign(f("probe", "k2"), f("scalars", "meta_a")),
                               assign(f("probe", "out"), f(STD, "instance_type"))])
    p.table("t", [("exact", [STD, "instance_type"])], [resub, fin], default=(fin, []))
    dp, out = make(p)
    dp.table_insert("t", TableEntry((Exact(NORMAL),), ActionCall("resub")))
    dp.receive(0, p.frame(0x0101, 0))
    assert len(out) == 1
    port, o = out[0]
    # Resubmitted: the original packet (k1 unchanged) with meta_a preserved.
    assert (port, o["k1"], o["k2"], o["out"]) == (2, 0x0101, 5, RESUB)


def test_recirculate_feeds_deparsed_packet_back_with_preserved_fields() -> None:
    p = Prog(FIELDS)
    p.field_lists.append({"id": 1, "name": "fl", "elements": [f("scalars", "meta_a")]})
    first = p.action("first", [], [assign(f(STD, "egress_spec"), hx(1))])
    again = p.action("again", [], [assign(f(STD, "egress_spec"), hx(2)),
                                   assign(f("probe", "out"),
                                          ex("+", f("scalars", "meta_a"),
                                             f(STD, "instance_type")))])
    p.table("t", [("exact", [STD, "instance_type"])], [first, again], default=(first, []))
    rec = p.action("rec", [], [assign(f("scalars", "meta_a"), hx(0x30)),
                               assign(f("probe", "k2"), hx(0x44)),
                               prim("recirculate", hx(1))])
    p.table("e", [("exact", [STD, "instance_type"])], [rec, 0], default=(0, []), pipe="egress")
    dp, out = make(p)
    dp.table_insert("t", TableEntry((Exact(RECIRC),), ActionCall("again")))
    dp.table_insert("e", TableEntry((Exact(NORMAL),), ActionCall("rec")))
    dp.receive(0, p.frame(7, 0))
    assert out == [(2, {"k1": 7, "k2": 0x44, "out": 0x30 + RECIRC, "qd": 0, "td": 0})]


def test_digest_carries_learn_list_values() -> None:
    p = Prog(FIELDS)
    p.learn_lists.append({"id": 1, "name": "MyIngress.learn_t",
                          "elements": [f("probe", "k1"), f("probe", "k2")]})
    a = p.action("learn", [], [prim("generate_digest", hx(0), hx(1))])
    p.table("t", [], [a], default=(a, []))
    dp, out = make(p)
    got: list[Digest] = []
    dp.set_digest_handler(got.append)
    dp.receive(0, p.frame(0xABCD, 0x12))
    assert got == [Digest("MyIngress.learn_t", [(0xABCD, 0x12)], 1)]
    assert len(out) == 1


def test_cpu_port_packet_out_and_packet_in() -> None:
    p = Prog(FIELDS)
    to_cpu = p.action("to_cpu", [], [assign(f(STD, "egress_spec"), hx(64))])
    out_port = p.action("out_port", [], [assign(f(STD, "egress_spec"), f("probe", "k2"))])
    p.table("t", [("exact", [STD, "ingress_port"])], [to_cpu, out_port], default=(to_cpu, []))
    dp, out = make(p, cpu_port=64)
    dp.table_insert("t", TableEntry((Exact(64),), ActionCall("out_port")))
    pkt_in: list[bytes] = []
    dp.set_packet_in_handler(pkt_in.append)
    frame = p.frame(1, 3)
    dp.receive(2, frame)
    assert pkt_in == [frame] and out == []
    dp.packet_out(frame)
    assert [port for port, _ in out] == [3]


def queue_prog() -> Prog:
    p = Prog(FIELDS)
    a = p.action("fwd", [], [assign(f(STD, "egress_spec"), hx(1)),
                             assign(f(STD, "priority"), f("probe", "k2"))])
    p.table("t", [], [a], default=(a, []))
    report_egress(p)
    return p


class FakeClock:
    """The switch's injected clock under test control (seconds here, nanoseconds to the
    switch), so queueing results do not depend on machine load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> int:
        return round(self.now * 1e9)

    def run(self, dp: DataPlane, step: float, steps: int) -> None:
        for _ in range(steps):
            self.now += step
            dp.poll()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_queue_builds_up_paces_and_tail_drops(clock: FakeClock) -> None:
    p = queue_prog()
    dp, out = make(p, clock)
    dp.set_queue_rate(200, 1)
    dp.set_queue_depth(10, 1)
    for i in range(15):
        dp.receive(0, p.frame(i, 0))
    # The first packet leaves at once; ten wait (depths 0..9 when they arrived); four overflow.
    assert [o["k1"] for _, o in out] == [0]
    assert dp.stats().ports[1].queue_drops == 4
    clock.run(dp, 0.001, 100)  # 100 ms at 200 pps: one departure every 5 ms
    assert [o["k1"] for _, o in out] == list(range(11))
    assert [o["qd"] for _, o in out] == [0, *range(10)]
    # Packet k waited k * 5 ms in the queue (deq_timedelta in microseconds), to within the
    # 1 ms service steps of this test.
    for k, (_, o) in enumerate(out):
        assert o["td"] == pytest.approx(k * 5000, abs=1001)
    st_ = dp.stats().ports[1]
    assert (st_.rate_pps, st_.busy_tx_packets) == (200, 11)
    assert st_.busy_seconds == pytest.approx(0.050, abs=0.0011)


def test_high_rate_pacing_keeps_its_average_rate(clock: FakeClock) -> None:
    # 5000 pps is finer than the 1 ms steps the queue is serviced at here (as with a coarse
    # timer): departures must catch up within a busy period, not leave one per wake-up.
    p = queue_prog()
    dp, out = make(p, clock)
    dp.set_queue_rate(5000, 1)
    dp.set_queue_depth(1000, 1)
    for i in range(400):
        dp.receive(0, p.frame(i, 0))
    clock.run(dp, 0.001, 40)
    assert len(out) == 1 + 200  # the first at once, then 5 per millisecond
    clock.run(dp, 0.001, 40)
    assert len(out) == 400
    assert out[-1][1]["td"] == pytest.approx(399 / 5000 * 1e6, abs=1000)


def test_unlimited_rate_has_no_queueing() -> None:
    p = queue_prog()
    dp, out = make(p)
    for i in range(100):
        dp.receive(0, p.frame(i, 0))
    assert [o["k1"] for _, o in out] == list(range(100))
    assert all(o["qd"] == 0 for _, o in out)
    assert dp.stats().ports.get(1) is not None and dp.stats().ports[1].queue_drops == 0


def test_strict_priority_between_queues(clock: FakeClock) -> None:
    p = queue_prog()
    dp, out = make(p, clock, priorities=2)
    dp.set_queue_rate(100, 1)
    for i in range(4):
        dp.receive(0, p.frame(i, 0))  # low priority
    for i in range(4, 7):
        dp.receive(0, p.frame(i, 1))  # high priority, arriving later
    clock.run(dp, 0.01, 10)
    order = [o["k1"] for _, o in out]
    # Packet 0 left before the others arrived; then the high queue empties before the low one.
    assert order == [0, 4, 5, 6, 1, 2, 3]
    dp.receive(0, p.frame(9, 5))  # priority beyond --priority-queues: dropped
    clock.run(dp, 0.01, 5)
    assert len(out) == 7


def test_egress_clone_of_a_dropped_packet_with_reset_metadata() -> None:
    p = Prog(FIELDS)
    p.field_lists.append({"id": 2, "name": "fl", "elements": [f("scalars", "meta_b")]})
    a = p.action("fwd", [], [assign(f(STD, "egress_spec"), hx(1))])
    p.table("t", [], [a], default=(a, []))
    c = p.action("clone_and_drop", [], [
        assign(f("scalars", "meta_a"), hx(0x11)), assign(f("scalars", "meta_b"), hx(0x22)),
        assign(f("probe", "k1"), hx(0xCAFE)),
        prim("clone_egress_pkt_to_egress", hx(6), hx(2)),
        prim("mark_to_drop", {"type": "header", "value": STD})])
    mark = p.action("mark", [], [assign(f("probe", "out"), f(STD, "instance_type")),
                                 assign(f("probe", "qd"), f("scalars", "meta_a")),
                                 assign(f("probe", "td"), f("scalars", "meta_b"))])
    p.table("c", [("exact", [STD, "instance_type"])], [c, mark], default=(mark, []),
            pipe="egress")
    dp, out = make(p)
    dp.table_insert("c", TableEntry((Exact(NORMAL),), ActionCall("clone_and_drop")))
    dp.clone_session_set(CloneSession(6, [Replica(2, 0)]))
    dp.receive(0, p.frame(1, 2))
    # The original was dropped; the clone carries the end-of-egress headers (k1), meta_b from
    # the field list, and meta_a reset to 0.
    assert out == [(2, {"k1": 0xCAFE, "k2": 2, "out": E2E, "qd": 0, "td": 0x22})]
