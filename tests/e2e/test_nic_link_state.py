"""A host port's link state (hosts.nic.PacketSocketPort.oper_up) on a real veth: one port
object, asked again after each change, follows the peer going down and up, reads down once the
interface is deleted and up again once an interface of that name is back (the sysfs file it
keeps open is then a new one)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import pytest

from hosts.nic import PacketSocketPort
from netlab.hosts import NetLab

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veths need root")


def _until(check: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    # the kernel moves a veth's operstate asynchronously (linkwatch): wait for it, bounded
    end = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def test_one_port_object_follows_its_link_down_up_gone_and_back() -> None:
    with NetLab(prefix="nls") as lab:
        a, b = lab.veth("a", "b")
        port = PacketSocketPort(index=0, ifname=a).open()
        try:
            _until(port.oper_up, "the veth reads up")
            lab.set_link(b, up=False)
            _until(lambda: not port.oper_up(), "the peer's link down reads down")
            lab.set_link(b, up=True)
            _until(port.oper_up, "the peer back up reads up")
            _ip("link", "del", a)
            assert not port.oper_up()  # no such interface: down, not an error
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            for name in (a, b):
                _ip("link", "set", name, "up")
            _until(port.oper_up, "an interface of the same name, back, reads up")
            lab.set_link(b, up=False)
            _until(lambda: not port.oper_up(), "the new interface's state, not the old one's")
        finally:
            port.close()
