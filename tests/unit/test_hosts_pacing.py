"""A sender never runs ahead of its pace: from the start of a busy period one frame may leave
at once and each further one a frame time later, so no message beats the ideal time the report
counts at the hosts' rate (a run with the bucket starting full read 100.2% goodput)."""

from __future__ import annotations

import pytest

from hosts.nic import PortState
from hosts.sender import Sender, SenderConfig

RATE_PPS = 100.0


class _Port(PortState):
    """A NIC port (``hosts.nic.NicPort``) that records when each frame went; always up."""

    sock = None

    def __init__(self, clock: list[float]) -> None:
        super().__init__(0, "x", mac="02:00:00:00:00:09")
        self.clock = clock
        self.times: list[float] = []

    def open(self) -> _Port:
        return self

    def send(self, frame: bytes | bytearray) -> bool:
        self.times.append(self.clock[0])
        self.sent += 1
        return True

    def recv_into(self, buf: bytearray) -> int:
        return 0

    def oper_up(self) -> bool:
        return True

    def close(self) -> None:
        pass


def _send_times(second_message_at: float | None = None) -> list[float]:
    """Send times of the cells of one 8 KiB message (and of a second one queued after the
    sender has been idle), polled every half millisecond, no ACKs (the run is too short for
    a retransmission timeout)."""
    now = [0.0]
    cfg = SenderConfig(ifaces=["x"], dst_macs=["00:00:00:00:00:01"], src_ip="10.0.0.1",
                       dst_ip="10.0.0.2", payload_len=1024, msg_size=8 * 1024, count=1,
                       rate_bps=RATE_PPS * 1082 * 8, max_inflight_cells=10_000)
    port = _Port(now)
    s = Sender(cfg, clock=lambda: now[0], ports=[port])
    s.open()
    assert s.frame_len == 1082
    s.begin()
    end = (second_message_at or 0.0) + 0.3
    while now[0] < end:
        if second_message_at is not None and abs(now[0] - second_message_at) < 1e-9:
            s.transport.add_message(bytes(8 * 1024), now[0])
        s._send_burst(now[0])
        now[0] = round(now[0] + 0.0005, 6)
    return port.times


def _assert_paced(times: list[float]) -> None:
    gap = 1 / RATE_PPS
    for k, t in enumerate(times):
        assert t >= times[0] + k * gap - 0.001, (k, t - times[0])


def test_first_cells_leave_at_the_pace_not_in_a_burst() -> None:
    times = _send_times()
    assert len(times) >= 8  # 8 KiB of 1 KiB cells (the first also carries the RETH)
    _assert_paced(times)


def test_a_bucket_left_idle_does_not_let_a_burst_out() -> None:
    times = _send_times(second_message_at=0.2)
    first = [t for t in times if t < 0.2]
    second = [t for t in times if t >= 0.2]
    assert len(first) == len(second) >= 8
    _assert_paced(first)
    _assert_paced(second)


def test_poll_returns_the_absolute_time_of_the_next_cell_and_none_when_done() -> None:
    now = [5.0]  # a clock far from zero: a relative wait would read as a time long past
    cfg = SenderConfig(ifaces=["x"], dst_macs=["00:00:00:00:00:01"], src_ip="10.0.0.1",
                       dst_ip="10.0.0.2", payload_len=1024, msg_size=4 * 1024, count=1,
                       rate_bps=RATE_PPS * 1082 * 8, duration_s=1.0, drain_s=0.0)
    port = _Port(now)
    s = Sender(cfg, clock=lambda: now[0], ports=[port])
    s.open()
    s.begin()
    due = s.poll(5.0)
    assert port.times == [5.0]  # the first cell at once, the next one frame time later
    assert due == 5.0 + 1 / RATE_PPS
    while len(port.times) < 2:  # driven as a simulator drives it: at each deadline
        now[0] = due
        due = s.poll(due)
    assert port.times[1] == pytest.approx(5.0 + 1 / RATE_PPS, abs=1e-9)
    assert s.poll(6.5) is None  # its duration (and drain) is over
