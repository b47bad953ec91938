"""The traffic manager's two port models, exactly, on an injected virtual clock.

Packet mode (simple_switch's set_queue_rate / set_queue_depth) and bit-rate mode (a serializer
per port at a link rate, buffers in bytes) are each offered twice the port's rate: the queue
must grow at exactly the rate difference until tail drop, departures stay exactly back to back,
and enq_qdepth / deq_timedelta come from the injected clock. The expected figures are worked
out by hand from the rates (see ``expected_overload``), not taken from the switch.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, f, hx, prim

from p4sim.switch.api import ActionCall, Exact, TableEntry
from p4sim.switch.dataplane import DataPlane

FIELDS = [("k1", 16), ("k2", 8), ("out", 32), ("qd", 32), ("td", 32)]
STD = "standard_metadata"
US = 1000  # ns


def prog(drop_k2: bool = False) -> Prog:
    """Ingress sends everything to port 1 at priority k2; egress reports enq_qdepth and
    deq_timedelta (and drops packets with k2 == 7 when ``drop_k2``)."""
    p = Prog(FIELDS)
    a = p.action("fwd", [], [assign(f(STD, "egress_spec"), hx(1)),
                             assign(f(STD, "priority"), f("probe", "k2"))])
    p.table("t", [], [a], default=(a, []))
    rep = p.action("report", [], [assign(f("probe", "qd"), f(STD, "enq_qdepth")),
                                  assign(f("probe", "td"), f(STD, "deq_timedelta"))])
    drop = p.action("drop", [], [prim("mark_to_drop", {"type": "header", "value": STD})])
    p.table("rep", [("exact", ["probe", "k2"])] if drop_k2 else [], [rep, drop],
            default=(rep, []), pipe="egress")
    return p


class Sim:
    """A minimal event driver: frames arrive at given times; the switch is polled at every
    deadline it returns; at equal times departures are served before arrivals."""

    def __init__(self, p: Prog, priorities: int = 1) -> None:
        self.p = p
        self.now = 0
        self.sent: list[tuple[int, dict[str, int], int]] = []  # (time, probe fields, length)
        self.dp = DataPlane(priorities=priorities, clock=lambda: self.now,
                            transmit=lambda port, fr: self.sent.append(
                                (self.now, p.fields(fr), len(fr))))
        self.dp.load_pipeline(p.json())

    def run(self, arrivals: list[tuple[int, bytes]]) -> None:
        pending = sorted(arrivals, key=lambda a: a[0])
        deadline = self.dp.poll()
        while pending or deadline is not None:
            if deadline is not None and (not pending or deadline <= pending[0][0]):
                self.now = deadline
                deadline = self.dp.poll()
                continue
            self.now, frame = pending.pop(0)
            self.dp.receive(0, frame)
            deadline = self.dp.poll()


def frame(p: Prog, k1: int, size: int, k2: int = 0) -> bytes:
    fr = p.frame(k1, k2)
    return fr + bytes(size - len(fr))


def expected_overload(n: int, capacity: int) -> tuple[list[int], list[int]]:
    """Packets k = 0..n-1 arrive every half service time at a port that serves one per service
    time and holds ``capacity`` waiting packets. Packet 0 finds the port idle; by the arrival of
    packet k, floor(k/2) + 1 service slots have started, so while nothing was dropped it finds
    k - floor(k/2) - 1 waiting: the queue grows by one packet per service time, the rate
    difference. Once it holds ``capacity`` every other arrival is tail-dropped. Returns the
    accepted packets' indices and the depths they found."""
    accepted, depths = [], []
    for k in range(n):
        started = k // 2 + 1 if k else 0
        waiting = len(accepted) - started
        if waiting >= capacity:
            continue
        accepted.append(k)
        depths.append(max(waiting, 0))
    return accepted, depths


def check_overload(sim: Sim, n: int, capacity: int, service_ns: int, arrive_ns: int) -> None:
    accepted, depths = expected_overload(n, capacity)
    assert accepted[:21] == list(range(21)) and 21 not in accepted and 22 in accepted
    assert [o["k1"] for _, o, _ in sim.sent] == accepted
    assert [o["qd"] for _, o, _ in sim.sent] == depths
    # Back to back from the first arrival on: departure j starts at j service times.
    assert [t for t, _, _ in sim.sent] == [j * service_ns for j in range(len(accepted))]
    # deq_timedelta = start of service - arrival, both as v1model's microsecond timestamps.
    assert [o["td"] for _, o, _ in sim.sent] == [
        j * service_ns // US - k * arrive_ns // US for j, k in enumerate(accepted)]
    assert sim.dp.stats().ports[1].queue_drops == n - len(accepted)


def test_packet_mode_offered_twice_its_rate_grows_at_the_difference_until_tail_drop() -> None:
    p = prog()
    sim = Sim(p)
    sim.dp.set_queue_rate(1000, 1)  # one packet per ms
    sim.dp.set_queue_depth(10, 1)
    n = 40
    sim.run([(k * 500 * US, frame(p, k, 64)) for k in range(n)])  # 2000 packets/s
    check_overload(sim, n, 10, 1000 * US, 500 * US)


def test_bit_rate_mode_offered_twice_its_rate_grows_at_the_difference_until_tail_drop() -> None:
    p = prog()
    sim = Sim(p)
    # 8 Mb/s: a 125-byte frame takes exactly 125 us; arrivals every 62.5 us are 16 Mb/s.
    sim.dp.set_queue_depth(10_000, 1)  # no packet limit: the byte buffer decides
    sim.dp.set_link_rate(8_000_000, 10 * 125, 1)
    n = 40
    sim.run([(k * 62_500, frame(p, k, 125)) for k in range(n)])
    check_overload(sim, n, 10, 125 * US, 62_500)
    assert all(size == 125 for _, _, size in sim.sent)


def test_bit_rate_serializer_is_shared_by_priorities_and_follows_frame_sizes() -> None:
    p = prog()
    sim = Sim(p, priorities=2)
    sim.dp.set_link_rate(8_000_000_000, 0, 1)  # 1 byte per ns
    # At t=0: a 1000-byte low-priority frame takes the idle port, two more low ones and then
    # a 200-byte high-priority frame queue behind it.
    sim.run([(0, frame(p, 0, 1000)), (1, frame(p, 1, 1000)), (2, frame(p, 2, 500)),
             (3, frame(p, 3, 200, k2=1))])
    # Strict priority once the wire is free; each frame holds the wire for its own length.
    assert [(t, o["k1"]) for t, o, _ in sim.sent] == [(0, 0), (1000, 3), (1200, 1), (2200, 2)]


def test_bit_rate_buffer_counts_bytes_over_all_priority_queues() -> None:
    p = prog()
    sim = Sim(p, priorities=2)
    sim.dp.set_link_rate(8_000_000, 600, 1)
    # One frame on the wire; then 300 + 300 bytes fill the 600-byte buffer (one per priority),
    # so the next one (either priority) is dropped.
    sim.run([(0, frame(p, 0, 300)), (1, frame(p, 1, 300)), (2, frame(p, 2, 300, k2=1)),
             (3, frame(p, 3, 100, k2=1)), (4, frame(p, 4, 100))])
    assert [o["k1"] for _, o, _ in sim.sent] == [0, 2, 1]
    assert sim.dp.stats().ports[1].queue_drops == 2


def test_bit_rate_packet_dropped_in_egress_never_holds_the_wire() -> None:
    p = prog(drop_k2=True)
    sim = Sim(p, priorities=8)
    sim.dp.table_insert("rep", TableEntry((Exact(7),), ActionCall("drop")))
    sim.dp.set_link_rate(8_000_000_000, 0, 1)
    sim.run([(0, frame(p, 0, 1000)), (1, frame(p, 1, 1000, k2=7)), (2, frame(p, 2, 1000))])
    assert [(t, o["k1"]) for t, o, _ in sim.sent] == [(0, 0), (1000, 2)]


def test_returning_to_packet_mode_and_the_deadline_is_exact() -> None:
    p = prog()
    sim = Sim(p)
    sim.dp.set_link_rate(3_000_000_000, 0, 1)  # 3 Gb/s: 100 bytes take 266.67 ns
    sim.dp.receive(0, frame(p, 0, 100))
    sim.dp.receive(0, frame(p, 1, 100))
    assert sim.dp.poll() == 267  # 800 bits / 3 Gb/s, rounded up to the next nanosecond
    sim.dp.set_link_rate(0, 0, 1)
    assert sim.dp.poll() is None and len(sim.sent) == 2


def test_port_line_rate_is_shared_by_the_priority_queues() -> None:
    p = prog()
    sim = Sim(p, priorities=2)
    sim.dp.set_queue_rate(1000, 1)  # each queue alone may send 1000/s (simple_switch's rate)
    sim.dp.set_queue_depth(100, 1)
    sim.dp.tm.set_port_rate(1000, 1)  # ... but the port carries 1000/s in all
    sim.run([(k, frame(p, k, 64, k2=k % 2)) for k in range(20)])  # 10 each, within 20 ns
    # Packet 0 (low) found the port idle; then the ten high ones, then the other nine low,
    # one every millisecond: together at the line's rate, never each queue at its own.
    assert [o["k1"] for _, o, _ in sim.sent] == [0, *range(1, 20, 2), *range(2, 20, 2)]
    assert [t for t, _, _ in sim.sent] == [j * 1000 * US for j in range(20)]


def test_deadline_follows_strict_priority() -> None:
    """A low-priority packet that could leave now but waits behind a paced high-priority
    queue is no deadline: the next one is the high queue's (found by the simulator, whose
    virtual clock otherwise polled forever at one instant)."""
    p = prog()
    sim = Sim(p, priorities=2)
    sim.dp.set_queue_rate(1000, 1, 1)  # high: one per ms
    sim.dp.set_queue_rate(1_000_000, 1, 0)  # low: one per us
    for k, prio in enumerate((1, 1, 0)):
        sim.dp.receive(0, frame(p, k, 64, k2=prio))
    assert [o["k1"] for _, o, _ in sim.sent] == [0]
    assert sim.dp.poll() == 1000 * US
    sim.now = 1000 * US
    assert sim.dp.poll() is None
    assert [(t, o["k1"]) for t, o, _ in sim.sent] == [(0, 0), (1000 * US, 1), (1000 * US, 2)]


def test_priorities_left_out_of_the_line_take_no_line_time() -> None:
    """set_port_rate's bound: priority 2 is off the line (an emulated fabric's control
    frames) and has no rate of its own. The line carries 1000/s of priorities 0 and 1: ten data
    packets leave one per ms and the ten control packets between them at once, where a shared
    line would space all twenty a ms apart."""
    p = prog()
    sim = Sim(p, priorities=3)
    sim.dp.set_queue_rate(1000, 1)
    sim.dp.set_queue_rate(0, 1, 2)
    sim.dp.set_queue_depth(100, 1)
    sim.dp.set_port_rate(1000, 1, 2)
    sim.run([(k, frame(p, k, 64, k2=2 * (k % 2))) for k in range(20)])  # data, control, ...
    ms = 1000 * US
    control = [(k, k) for k in range(1, 20, 2)]
    data = [(k // 2 * ms, k) for k in range(0, 20, 2)]
    assert [(t, o["k1"]) for t, o, _ in sim.sent] == sorted(data[:1] + control + data[1:])


def test_the_line_starts_with_its_own_first_packet() -> None:
    """A port whose backlog is only a paced control packet (off the line) has an idle line:
    the data packet arriving then starts it, and the data after it leaves a line slot apart,
    not back to back on credit the line earned while idle."""
    p = prog()
    sim = Sim(p, priorities=3)
    sim.dp.set_queue_rate(1_000_000, 1, 0)  # data alone could leave one per us
    sim.dp.set_queue_rate(1000, 1, 2)  # control: one per ms
    sim.dp.set_queue_depth(100, 1)
    sim.dp.set_port_rate(1000, 1, 2)
    ms = 1000 * US
    sim.run([(0, frame(p, 0, 64)), (5 * ms, frame(p, 1, 64, k2=2)),
             (5 * ms + 1, frame(p, 2, 64, k2=2)),
             *((5 * ms + k, frame(p, k, 64)) for k in (3, 4, 5))])
    # Control 2 waits for its queue's rate (6 ms) and, strict priority, data 3 with it. The
    # line started at data 3's arrival (5 ms + 3 ns), so data 4 and 5 take the next two line
    # slots from there.
    assert [(t, o["k1"]) for t, o, _ in sim.sent] == [
        (0, 0), (5 * ms, 1), (6 * ms, 2), (6 * ms, 3), (6 * ms + 3, 4), (7 * ms + 3, 5)]
