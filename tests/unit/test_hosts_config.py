"""Host settings are dataclasses whose fields describe their own flags: the command line the
emulation renders from a config parses back to exactly that config, for any config."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.cc import names
from hosts.cli import host_argv, parse_host_args, receiver_config, sender_config
from hosts.config import ReceiverConfig, SenderConfig
from hosts.knobs import to_argv
from hosts.wire import cell_frame_bytes

# names, addresses and MACs as hosts have them (none starts like an option)
text = st.from_regex(r"[a-z0-9][a-z0-9:.-]{0,11}", fullmatch=True)
seconds = st.floats(min_value=0.0, max_value=1e3, allow_nan=False)
cells = st.integers(min_value=1, max_value=1 << 20)
psn = st.integers(min_value=0, max_value=(1 << 24) - 1)
param = st.one_of(st.integers(-10**9, 10**9), st.floats(allow_nan=False, allow_infinity=False))
rate = st.floats(min_value=0.0, max_value=1e13, allow_nan=False)

senders = st.builds(
    SenderConfig, ifaces=st.lists(text, min_size=1, max_size=2),
    dst_macs=st.lists(text, min_size=1, max_size=2), src_ip=text, dst_ip=text,
    qpn=st.integers(0, 1 << 24), payload_len=st.integers(64, 4096), msg_size=cells,
    count=st.integers(0, 1000), duration_s=seconds, drain_s=seconds, mean_gap_s=seconds,
    arrival_seed=st.integers(0, 1 << 31), cc=st.sampled_from(names()), rate_bps=rate,
    cc_params=st.dictionaries(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), param,
                              max_size=3),
    int_source=st.booleans(), link_bps=rate, link_pps=rate, rto_s=seconds,
    sack_holdoff_s=seconds, max_inflight_cells=cells, port_timeout_s=seconds,
    port_retry_s=seconds, sport=st.integers(0, 65535), seed=st.integers(0, 1 << 31),
    src_macs=st.lists(text, max_size=2), start_psn=psn, credit_initial_cells=cells,
    credit_probe_s=seconds, health_interval_s=seconds, idle_poll_s=seconds,
    time_scale=st.floats(min_value=1e-6, max_value=1e6), base_rtt_s=seconds)

receivers = st.builds(
    ReceiverConfig, ifaces=st.lists(text, min_size=1, max_size=2),
    ack_every=st.integers(1, 64), ack_delay_s=seconds, nak_holdoff_s=seconds,
    cnp_interval_s=seconds, window=cells, credit_cells_per_s=rate, credit_initial_cells=cells,
    credit_window_cells=st.integers(0, 1 << 20), credit_idle_s=seconds, duration_s=seconds,
    expect_messages=st.integers(0, 10**6), linger_s=seconds,
    collector=st.one_of(st.none(), st.tuples(text, st.integers(0, 65535))),
    node_id=st.integers(0, 1 << 31), keep_records=cells, start_psn=psn)


@settings(max_examples=300, deadline=None)
@given(senders)
def test_a_sender_config_survives_its_command_line(cfg: SenderConfig) -> None:
    assert sender_config(parse_host_args(host_argv(cfg))) == cfg


@settings(max_examples=300, deadline=None)
@given(receivers)
def test_a_receiver_config_survives_its_command_line(cfg: ReceiverConfig) -> None:
    assert receiver_config(parse_host_args(host_argv(cfg))) == cfg


def test_only_what_differs_from_the_defaults_is_written() -> None:
    cfg = ReceiverConfig(ifaces=["h1-eth0"], linger_s=1.64)
    assert to_argv(cfg) == ["--iface", "h1-eth0", "--linger", "1.64"]


def test_a_rate_in_packets_counts_the_frame_the_config_describes() -> None:
    argv = ["send", "--iface", "x", "--dst-mac", "m", "--src-ip", "a", "--dst-ip", "b",
            "--rate", "100pps", "--cell-size", "256", "--int-source"]
    cfg = sender_config(parse_host_args(argv))
    assert cfg.rate_bps == 100 * 8 * (14 + 20 + 8 + 16 + 12 + 256 + 4)
    assert cell_frame_bytes(256, True) == 330
