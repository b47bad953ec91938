"""Queues of the p4sim switch (tests/ptf/p4/switch_queues.p4): with a port's queue rate set low
(the admin channel: `p4sim ctl` / simple_switch_CLI ``set_queue_rate``/``set_queue_depth``) a
burst builds the queue up, ``enq_qdepth`` copied into each frame grows, and everything beyond
the queue depth is tail-dropped.

Tolerance, from simple_switch's rate-limited queue (each frame's departure time is fixed when it
is enqueued: max(now, previous departure + 1/rate)): of a burst of BURST frames into a queue of
DEPTH at RATE pps, the first frame leaves at once, the next DEPTH wait, and one more slot frees
per 1/RATE seconds the burst lasts. So received = DEPTH + in_service, with
1 <= in_service <= 2 + RATE * (seconds from first to last send). in_service is 0..1 too if a
target counts the frame in service as queued, so the bound checked is
DEPTH <= received <= DEPTH + 2 + RATE * burst_seconds, and dropped = BURST - received.
(Measured time only widens the tolerance; nothing asserts on speed.)

Times are checked for their unit (microseconds, as simple_switch): the departures the switch
reports (enq_timestamp + deq_timedelta) of the queued frames are at least 1/RATE apart (less
half a slot for the first frame's own lateness), and their span is no longer than the
wall-clock time the test itself saw pass: a switch clock cannot run ahead of real time.

The admin channel is the base class's ``self.admin`` (test param ``thrift_port``, default 9090
on the gRPC host: inside the runner's namespace that is the switch).

    python -m netlab.ptf_runner --ports 4 test_switch_queues
"""

from __future__ import annotations

import itertools
import logging
import math
import time

from ptf import testutils
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from switch_lib import Probe, SwitchTest, program

ING = "SwIngress"
T_FWD = f"{ING}.fwd"
HOST_MAC = "02:00:00:00:0a:01"
IN_PORT, OUT_PORT = 0, 1
DEPTH = 6
RATE = 2  # packets per second on OUT_PORT during the burst
BURST = 30
UNLIMITED_PPS = 1_000_000  # restore: far above anything this harness can send
DEFAULT_DEPTH = 64  # simple_switch's default queue depth
US = 1_000_000


def probe(seq: int, enq: int = 0, deq: int = 0, port: int = 0, enq_ts: int = 0,
          deq_td: int = 0) -> Packet:
    return (Ether(src=HOST_MAC, dst="02:00:00:00:0f:01")
            / Probe(seq=seq, enq_qdepth=enq, deq_qdepth=deq, egress_port=port,
                    enq_timestamp=enq_ts, deq_timedelta=deq_td)
            / Raw(bytes(40)))


def as_egress_wrote(p: Probe) -> bytes:
    """The frame the program must emit for probe ``p``: what was sent plus the fields egress
    writes (the two times are taken from ``p``: they are the only values not known up front)."""
    return bytes(probe(p.seq, p.enq_qdepth, p.deq_qdepth, OUT_PORT, p.enq_timestamp,
                       p.deq_timedelta))


def departure_us(p: Probe) -> int:
    return (p.enq_timestamp + p.deq_timedelta) & 0xFFFFFFFF


class QueueTest(SwitchTest):
    P4_PROGRAM = program("switch_queues.p4")

    def setUp(self) -> None:
        super().setUp()
        self.table_add(T_FWD, {"smeta.ingress_port": IN_PORT}, f"{ING}.forward", port=OUT_PORT)

    def tearDown(self) -> None:
        # the switch outlives the test: give the port its default queue back
        try:
            self.admin.set_queue_rate(UNLIMITED_PPS, OUT_PORT)
            self.admin.set_queue_depth(DEFAULT_DEPTH, OUT_PORT)
        finally:
            super().tearDown()


class NoCongestion(QueueTest):
    """Frames sent one at a time find an empty queue: enq_qdepth 0 (the baseline that shows
    the congestion test's depths come from the queue)."""

    def runTest(self) -> None:
        for seq in range(5):
            self.send(IN_PORT, probe(seq))
            res = testutils.dp_poll(self, port_number=OUT_PORT, timeout=2)
            self.assertIsInstance(res, self.dataplane.PollSuccess, f"probe {seq} arrives")
            got = Ether(bytes(res.packet))[Probe]
            self.assertEqual((got.seq, got.enq_qdepth, got.deq_qdepth), (seq, 0, 0))
            self.assertEqual(bytes(res.packet), as_egress_wrote(got))
        testutils.verify_no_other_packets(self)


class BuildUpAndTailDrop(QueueTest):
    """A burst into a slow port: the queue fills to DEPTH, enq_qdepth grows frame by frame up
    to DEPTH - 1, frames leave in order, and the rest are tail-dropped."""

    def runTest(self) -> None:
        self.admin.set_queue_depth(DEPTH, OUT_PORT)
        self.admin.set_queue_rate(RATE, OUT_PORT)
        frames = [bytes(probe(seq)) for seq in range(BURST)]
        start = wall_start = time.monotonic()
        for raw in frames:
            testutils.send_packet(self, IN_PORT, raw)
        burst_seconds = time.monotonic() - start
        max_extra = 2 + math.ceil(RATE * burst_seconds)

        got = self.receive_all(expect=DEPTH + max_extra, settle=3.0 / RATE,
                               limit=(DEPTH + max_extra) / RATE + 5)
        wall_us = (time.monotonic() - wall_start) * US
        ports = {port for port, _ in got}
        self.assertLessEqual(ports, {OUT_PORT})
        received = [Ether(raw)[Probe] for _, raw in got]
        n = len(received)
        self.assertGreaterEqual(n, DEPTH, f"at least the queue's depth gets through ({n})")
        self.assertLessEqual(n, DEPTH + max_extra,
                             f"tail drop: {n} of {BURST} received, depth {DEPTH}, "
                             f"burst {burst_seconds:.3f}s at {RATE} pps")
        self.assertGreaterEqual(BURST - n, BURST - DEPTH - max_extra)

        seqs = [p.seq for p in received]
        logging.info("queue burst: %d/%d received, sent in %.3fs; seqs %s; enq_qdepth %s; "
                     "deq_qdepth %s; deq_timedelta %s", n, BURST, burst_seconds, seqs,
                     [p.enq_qdepth for p in received], [p.deq_qdepth for p in received],
                     [p.deq_timedelta for p in received])
        self.assertEqual(seqs, sorted(seqs), "FIFO order")
        self.assertEqual(seqs[:DEPTH], list(range(DEPTH)), "the head of the burst is kept")
        depths = [p.enq_qdepth for p in received]
        self.assertEqual(depths[0], 0, "the first frame finds the queue empty")
        self.assertEqual(depths[:DEPTH], sorted(depths[:DEPTH]), "the queue grows")
        self.assertGreaterEqual(max(depths), DEPTH - max_extra)
        self.assertLessEqual(max(depths), DEPTH - 1, "no frame is queued beyond the depth")
        for p in received:
            self.assertEqual(p.egress_port, OUT_PORT)
            self.assertLessEqual(p.deq_qdepth, DEPTH)
        # each frame is exactly the one sent, with the fields egress wrote
        for (_, raw), p in zip(got, received, strict=True):
            self.assertEqual(raw, as_egress_wrote(p))

        # Times, in microseconds: the queue kept the head of the burst back, each frame at
        # least 1/RATE after the one before (the rate fixes departure times at enqueue; only the
        # first frame's own lateness, below half a slot, can shorten the span), and the span
        # the switch measured cannot exceed the wall-clock time this test saw.
        slot_us = US // RATE
        first = departure_us(received[0])
        for i, p in enumerate(received[:DEPTH]):
            span = (departure_us(p) - first) & 0xFFFFFFFF
            self.assertGreaterEqual(span, i * slot_us - slot_us // 2, f"frame {i}: {span} us")
            self.assertLessEqual(span, wall_us, f"frame {i}: {span} us > {wall_us:.0f} us")
        self.assertGreaterEqual(received[DEPTH - 1].deq_timedelta,
                                (DEPTH - 2) * slot_us - slot_us // 2, "it waited in the queue")

        # once drained and back to full speed, the queue is empty again
        self.admin.set_queue_rate(UNLIMITED_PPS, OUT_PORT)
        self.send(IN_PORT, probe(99))
        res = testutils.dp_poll(self, port_number=OUT_PORT, timeout=2)
        self.assertIsInstance(res, self.dataplane.PollSuccess)
        last = Ether(bytes(res.packet))[Probe]
        self.assertEqual((last.seq, last.enq_qdepth, last.deq_qdepth), (99, 0, 0))
        testutils.verify_no_other_packets(self)


FEEDBACK_IN_PORT = 2  # frames from here go to OUT_PORT's feedback priority queue
FEEDBACK_PPS = 4  # the feedback queue's rate in this test; data's stays unlimited
PACED = 4  # feedback frames in the burst


class FeedbackQueueAddressedByItsPriority(QueueTest):
    """The runner's queue addressing (cellfabric.emulation.admin.SwitchAdmin.queue_index: the priority
    argument `cellfabric run` gives simple_switch_CLI's ``set_queue_rate`` per priority) reaches
    the queue that holds that P4 priority. The feedback queue is set to FEEDBACK_PPS through
    it and the data queue left unlimited: frames of the feedback priority must leave at least
    one feedback slot apart. Addressed to the wrong queue (BMv2's CLI numbering before 1.15.1,
    sent to a later BMv2, which paced data at the feedback share in every fabric run), they
    would leave at the data queue's unlimited rate. Departures are the switch's own times; a
    slow machine only spaces them further, so nothing asserts on speed."""

    def runTest(self) -> None:
        from cellfabric.emulation.admin import SwitchAdmin
        from controlplane.fabric_plan import FEEDBACK_PRIORITY

        params = testutils.test_params_get()
        queues = int(params.get("priority_queues", 0) or 0)
        if queues < 2:
            self.skipTest("the switch runs without priority queues")
        self.table_add(T_FWD, {"smeta.ingress_port": FEEDBACK_IN_PORT},
                       f"{ING}.forward_priority", port=OUT_PORT, prio=FEEDBACK_PRIORITY)
        target = "bmv2" if self.target == "bmv2" else "embedded"
        admin = SwitchAdmin("dut", target, int(self.admin_addr.rpartition(":")[2]))
        rates = {0: UNLIMITED_PPS, FEEDBACK_PRIORITY: FEEDBACK_PPS}
        admin.run([f"set_queue_rate {pps} {OUT_PORT} {admin.queue_index(prio, queues)}"
                   for prio, pps in sorted(rates.items())])
        try:
            for seq in range(PACED):
                testutils.send_packet(self, FEEDBACK_IN_PORT, bytes(probe(seq)))
            got = self.receive_all(expect=PACED, settle=0.5, limit=PACED * 2 + 5)
        finally:
            admin.set_queue(OUT_PORT, UNLIMITED_PPS, DEFAULT_DEPTH, priorities=queues)
        received = [Ether(raw)[Probe] for _, raw in got]
        self.assertEqual([p.seq for p in received], list(range(PACED)), "every frame, in order")
        slot_us = US // FEEDBACK_PPS
        times = [departure_us(p) for p in received]
        for i, (a, b) in enumerate(itertools.pairwise(times)):
            gap = (b - a) & 0xFFFFFFFF
            self.assertGreaterEqual(gap, slot_us - slot_us // 2,
                                    f"feedback frames {i}, {i + 1} left {gap} us apart; the "
                                    f"feedback queue's slot is {slot_us} us")
