"""``cellfabric host``: argument errors are one line naming the culprit, never a traceback."""

from __future__ import annotations

import pytest

from hosts import cli


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
      "--dst-ip", "10.0.0.2", "--start-psn", "16777216"], "--start-psn 16777216"),
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
    params: dict[str, object] = {"rai_bps": 7.0}
    cli._default_cc_params("dcqcn", params, 4e6, 1082, 1000.0)
    assert params["increase_timer_s"] == pytest.approx(55e-6 * 1000)
    assert params["alpha_timer_s"] == pytest.approx(55e-6 * 1000)
    assert params["rhai_bps"] == pytest.approx(400e6 / 1000)
    assert params["rai_bps"] == 7.0  # what the user set stays


def test_hpcc_base_rtt_defaults_to_software_plus_ten_cell_times() -> None:
    params: dict[str, object] = {}
    cli._default_cc_params("hpcc", params, 1082 * 8 * 1000, 1082, 1.0)  # 1000 cells/s
    assert params["base_rtt_s"] == pytest.approx(0.002 + 0.010)


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
