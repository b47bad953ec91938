"""``cellfabric host``: argument errors are one line naming the culprit, never a traceback."""

from __future__ import annotations

import pytest

from hosts import cli
from hosts.cc import LineContext, controller_for


def test_parse_rate_units() -> None:
    assert cli.parse_rate("20M", 1000) == 20e6
    assert cli.parse_rate("500k", 1000) == 500e3
    assert cli.parse_rate("1.5G", 1000) == 1.5e9
    assert cli.parse_rate("3000pps", 1082) == 3000 * 1082 * 8
    with pytest.raises(ValueError, match="--rate 'fast'"):
        cli.parse_rate("fast", 1000)


@pytest.mark.parametrize(("argv", "message"), [
    (["send", "--iface", "nosuchif0", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2"], "interface 'nosuchif0': no such interface"),
    (["send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2", "--cc-param", "g"], "--cc-param 'g': expected NAME=VALUE"),
    (["send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2", "--start-psn", "16777216"], "--start-psn '16777216'"),
    (["send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2", "--cc", "warp"], "--cc 'warp': expected one of none, dcqcn"),
    (["send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2", "--rto", "soon"], "--rto 'soon': expected a number"),
    (["recv", "--iface", "lo", "--credit-window", "-1"], "--credit-window '-1'"),
    (["recv", "--iface", "lo", "--collector", "nohostport"], "--collector 'nohostport'"),
    (["host", "send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "10.0.0.1",
      "--dst-ip", "10.0.0.2", "--rate", "x"], "--rate 'x'"),
])
def test_bad_arguments_give_one_line(argv: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_time_scale_stretches_dcqcn_timers_and_shrinks_its_steps() -> None:
    line = LineContext(rate_bps=4e6, frame_bytes=1082, time_scale=1000.0)
    cc = controller_for("dcqcn", line, {"rai_bps": 7.0})
    assert cc.params.increase_timer_s == pytest.approx(55e-6 * 1000)
    assert cc.params.alpha_timer_s == pytest.approx(55e-6 * 1000)
    assert cc.params.rhai_bps == pytest.approx(400e6 / 1000)
    assert cc.params.rai_bps == 7.0  # what the user set stays


def test_hpcc_base_rtt_defaults_to_software_plus_ten_cell_times() -> None:
    line = LineContext(rate_bps=1082 * 8 * 1000, frame_bytes=1082)  # 1000 cells/s
    assert controller_for("hpcc", line, {}).params.base_rtt_s == pytest.approx(0.002 + 0.010)
    # the path's round trip, when the plan knows it, wins over that guess
    planned = LineContext(rate_bps=1082 * 8 * 1000, frame_bytes=1082, base_rtt_s=0.004)
    assert controller_for("hpcc", planned, {}).params.base_rtt_s == 0.004


def test_the_send_command_line_sets_every_knob_it_names() -> None:
    args = cli.parse_host_args([
        "send", "--iface", "a0", "--iface", "a1", "--dst-mac", "02:00:00:00:00:01",
        "--src-ip", "10.0.0.1", "--dst-ip", "10.0.0.2", "--rate", "200pps", "--int-source",
        "--cc", "hpcc", "--cc-param", "eta=0.9", "--cc-param", "max_stage=5", "--rto", "2ms",
        "--health-interval", "500us"])
    cfg = cli.sender_config(args)
    # 200 frames/s of 14 + 20 + 8 + 16 (INT shim) + 12 + 1024 + 4 bytes
    assert cfg.rate_bps == 200 * 1098 * 8
    assert cfg.ifaces == ["a0", "a1"] and cfg.cc == "hpcc"
    assert cfg.cc_params == {"eta": 0.9, "max_stage": 5}
    assert cfg.rto_s == pytest.approx(0.002) and cfg.health_interval_s == pytest.approx(5e-4)
    assert cfg.credit_initial_cells == 16 and cfg.link_bps == 0.0  # defaults


def test_a_gated_sender_says_it_is_ready_and_sends_nothing_until_told(tmp_path, monkeypatch) -> None:
    # The runner starts a step's 32 host processes, waits for every ready file, then creates
    # the go file: no flow may start while others are still starting.
    import threading

    from hosts.sender import Sender

    ready, go = tmp_path / "h1.ready", tmp_path / "step0.go"
    ran: list[bool] = []
    monkeypatch.setattr(Sender, "open", lambda self: None)
    monkeypatch.setattr(Sender, "close", lambda self: None)
    monkeypatch.setattr(Sender, "run", lambda self, stop: ran.append(go.exists()) or {})
    args = cli.parse_host_args(["send", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01",
                                "--src-ip", "127.0.0.1", "--dst-ip", "127.0.0.1",
                                "--ready-file", str(ready), "--start-when", str(go)])
    worker = threading.Thread(target=cli._run, args=(args, [False]))
    worker.start()
    for _ in range(500):
        if ready.exists():
            break
        threading.Event().wait(0.01)
    assert ready.exists()
    worker.join(0.3)
    assert worker.is_alive() and not ran  # ready, and held at the gate
    go.touch()
    worker.join(5)
    assert ran == [True]


def test_a_stop_at_the_gate_ends_the_host_without_sending(tmp_path) -> None:
    stop = [False]
    threading_stop = lambda: stop[0]  # noqa: E731
    stop[0] = True
    assert cli.wait_for_file(tmp_path / "never", threading_stop) is False
    (tmp_path / "now").touch()
    assert cli.wait_for_file(tmp_path / "now", lambda: False) is True
