"""Mininet smoke test: two hosts through one of the project's own switch node classes."""

from __future__ import annotations

import secrets

import pytest

from netlab.hosts import existing_links, wait_until

mininet_net = pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from mininet.net import Mininet  # noqa: E402

from cellfabric.emulation.nodes import ForwarderSwitch  # noqa: E402

pytestmark = pytest.mark.mininet


def _two_host_net(tag: str) -> Mininet:
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                  autoStaticArp=True, waitConnected=False)
    h1 = net.addHost(f"h1{tag}", ip="10.0.0.1/24")
    h2 = net.addHost(f"h2{tag}", ip="10.0.0.2/24")
    sw = net.addSwitch(f"s{tag}", cls=ForwarderSwitch)
    net.addLink(h1, sw, intfName1=f"h1{tag}-e0", intfName2=f"s{tag}-e1")
    net.addLink(h2, sw, intfName1=f"h2{tag}-e0", intfName2=f"s{tag}-e2")
    net.build()
    return net


def test_two_hosts_ping_through_forwarder_and_links_removed() -> None:
    tag = secrets.token_hex(2)
    net = _two_host_net(tag)
    try:
        net.start()
        h1, _h2 = net.get(f"h1{tag}", f"h2{tag}")
        sw = net.get(f"s{tag}")
        assert sw.running()
        # The forwarder is a fresh Python process: let it bind its sockets before counting.
        assert wait_until(lambda: " 0% packet loss" in h1.cmd("ping -c 1 -W 1 10.0.0.2"), 15)
        out = h1.cmd("ping -c 3 -W 1 -i 0.2 10.0.0.2")
        assert " 0% packet loss" in out, out
        # The path really goes through the switch process: without it, no reply.
        sw.stop(deleteIntfs=False)
        out = h1.cmd("ping -c 2 -W 1 -i 0.2 10.0.0.2")
        assert "100% packet loss" in out, out
        assert f"s{tag}-e1" in existing_links()
    finally:
        net.stop()
    left = {name for name in existing_links() if tag in name}
    assert not left, f"links left behind: {left}"
