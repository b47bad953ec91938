"""A rate-limited veth (Mininet's `tc htb`, as the tutorials' ecn and mri use) fills the send
buffer of p4sim's port: the port blocks in the traffic manager instead of losing frames, and
every frame leaves, in order, at the link's rate once the kernel takes more."""

from __future__ import annotations

import socket
import struct
import subprocess
import time

import pytest

from netlab.hosts import NetLab
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.ports import PortIO

pytestmark = pytest.mark.netns

FRAMES = 200
SIZE = 1000


def _frame(i: int) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5"
    return head + struct.pack("!I", i) + bytes(SIZE - 18)


def test_slow_link_blocks_the_port_and_loses_nothing() -> None:
    with NetLab() as lab:
        a, b = lab.veth("bpa", "bpb")
        for cmd in (["qdisc", "add", "dev", a, "root", "handle", "5:", "htb", "default", "1"],
                    ["class", "add", "dev", a, "parent", "5:", "classid", "5:1", "htb",
                     "rate", "4mbit", "burst", "15k"]):
            subprocess.run(["tc", *cmd], check=True)
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        rx.bind((b, 3))
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        dp = DataPlane()
        ports = PortIO({1: a})
        dp.set_transmit_fn(ports.tx)
        dp.set_wake_fn(ports.wake)
        ports.start(dp)
        try:
            blocked_seen = False
            for i in range(FRAMES):
                # as the traffic manager serves a port: nothing while it is blocked
                while 1 in dp.tm.blocked:
                    blocked_seen = True
                    time.sleep(0.001)
                with dp.lock:
                    ports.tx(1, _frame(i))
            got: list[int] = []
            rx.settimeout(5)
            end = time.monotonic() + 15
            while len(got) < FRAMES and time.monotonic() < end:
                data = rx.recv(2048)
                if data[12:14] == b"\x88\xb5":
                    got.append(struct.unpack("!I", data[14:18])[0])
            assert blocked_seen, "the kernel never refused a frame: no back-pressure tested"
            assert got == list(range(FRAMES))
            assert ports.tx_errors == 0
            time.sleep(0.3)
            assert 1 not in dp.tm.blocked and not ports.pending
        finally:
            ports.stop()
            rx.close()
