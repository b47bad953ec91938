"""The admin channel's clients against one p4sim admin server: the project's client
(controlplane.admin, which topologies' SwitchAdmin uses) and p4sim's own side for `p4sim ctl`
(p4sim.switch.admin.request) must get the same replies, one request or many per connection."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cellfabric.emulation.admin import AdminError as SwitchAdminError
from cellfabric.emulation.admin import SwitchAdmin
from controlplane.admin import AdminChannel, AdminError, exchange
from p4sim.switch.admin import AdminServer, request
from p4sim.switch.ctl import main as ctl_main
from p4sim.switch.dataplane import DataPlane


@pytest.fixture
def server() -> Iterator[tuple[DataPlane, int]]:
    dp = DataPlane()
    admin = AdminServer(dp, 0)
    admin.start()
    try:
        yield dp, admin.port
    finally:
        admin.stop()


REQUESTS = [("set_queue_rate", ["300", "2"]), ("set_queue_depth", ["9", "2"]), ("stats", []),
            ("port_down", ["4"]), ("set_queue_rate", []), ("frobnicate", ["1"]),
            ("register_read", ["nope", "0"])]


def test_both_clients_get_the_same_replies(server: tuple[DataPlane, int]) -> None:
    dp, port = server
    addr = ("127.0.0.1", port)
    one_by_one = [request(addr, cmd, args) for cmd, args in REQUESTS]
    batched = exchange(addr, REQUESTS)
    assert batched == one_by_one
    assert [r["ok"] for r in batched] == [True, True, True, True, False, False, False]
    assert "usage: set_queue_rate" in batched[4]["error"]
    assert dp.tm.rate(2) == 300 and dp.tm.queue(2).depth == 9 and not dp.port_up(4)


def test_admin_channel_and_switch_admin_drive_p4sim(server: tuple[DataPlane, int]) -> None:
    dp, port = server
    channel = AdminChannel(f"127.0.0.1:{port}", "p4sim")
    channel.run_lines(["set_queue_rate 120 1", "", "set_queue_depth 5 1", "port_down 3"])
    assert dp.tm.rate(1) == 120 and dp.tm.queue(1).depth == 5 and not dp.port_up(3)
    channel.port_up(3)
    assert dp.port_up(3)
    assert channel.stats()["ports"] == json.loads(json.dumps(channel.run("stats")))["ports"]
    with pytest.raises(AdminError, match="set_queue_depth x: expected integers"):
        channel.run_lines(["set_queue_rate 1 1", "set_queue_depth x"])
    sw = SwitchAdmin("s1", "embedded", port)
    sw.set_queue(6, 77, 3)
    assert dp.tm.rate(6) == 77 and dp.tm.queue(6).depth == 3
    assert sw.stats() == channel.stats()
    with pytest.raises(SwitchAdminError, match="s1: port_down: usage"):
        sw.run(["port_down"])


def test_p4sim_ctl_prints_what_the_client_returns(server: tuple[DataPlane, int],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, port = server
    assert ctl_main(["--thrift-port", str(port), "stats"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == AdminChannel(f"127.0.0.1:{port}", "p4sim").stats()


def test_unreachable_switch_is_one_line_error() -> None:
    from netlab.hosts import free_port

    channel = AdminChannel(f"127.0.0.1:{free_port()}", "p4sim", timeout=2)
    with pytest.raises(AdminError, match="cannot reach the switch"):
        channel.stats()
