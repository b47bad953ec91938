"""A port whose transmit cannot take more (the kernel's buffer is full) holds its packets in the
traffic manager, as BMv2's blocking send stalls its egress: nothing of the port leaves, its
queue grows to its depth and tail-drops, other ports keep sending, and it resumes in order."""

from __future__ import annotations

from p4sim.switch.tm import TrafficManager


class Pkt:
    def __init__(self, n: int) -> None:
        self.n, self.length = n, 100


def test_blocked_port_holds_its_queue_and_resumes_in_order() -> None:
    tm = TrafficManager(depth=4)
    assert tm.may_pass(1, 0, 0)  # an idle, unlimited port passes packets straight through
    tm.block(1)
    assert not tm.may_pass(1, 0, 0) and not tm.queue(1).bypass
    depths = [tm.enqueue(1, 0, Pkt(i), 0) for i in range(6)]
    assert depths == [0, 1, 2, 3, -1, -1]  # enq_qdepth grows, then tail drop at depth 4
    assert tm.drops[1] == 2
    tm.enqueue(2, 0, Pkt(100), 0)
    assert tm.dequeue(0)[2].n == 100  # another port is not held up
    assert tm.dequeue(0) is None and tm.next_deadline() is None
    tm.unblock(1)
    assert [tm.dequeue(0)[2].n for _ in range(4)] == [0, 1, 2, 3]
    assert tm.dequeue(0) is None and tm.queue(1).bypass


def test_settings_changed_while_blocked_keep_the_port_blocked() -> None:
    tm = TrafficManager()
    tm.queue(3)
    tm.block(3)
    tm.set_rate(0, 3)
    tm.set_depth(10, 3)
    assert not tm.queue(3).bypass and not tm.may_pass(3, 0, 0)
    tm.block(5)  # a queue created while its port is blocked starts blocked
    assert tm.queue(5).blocked and not tm.may_pass(5, 0, 0)
