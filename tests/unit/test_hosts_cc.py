"""DCQCN and HPCC updates against values worked out by hand from the papers' equations.

DCQCN (Zhu et al. 2015): cut Rt=Rc, Rc=Rc(1-a/2), a=(1-g)a+g; fast recovery Rc=(Rt+Rc)/2;
additive Rt+=R_AI; hyper Rt+=R_HAI; alpha decay a=(1-g)a per K without CNP.
HPCC (Li et al. 2019): u = min(qlen)/(B*T) + txRate/B; U = (1-tau/T)U + (tau/T)u;
W = Wc/(U/eta) + W_AI when U >= eta or incStage >= maxStage, else W = Wc + W_AI.
"""

from __future__ import annotations

import pytest

from hosts.cc import credit, dcqcn, hpcc, make_controller
from hosts.ratelimit import TokenBucket

G = 1 / 256
P = dcqcn.DcqcnParams(line_rate_bps=1e9, g=G, rai_bps=5e6, rhai_bps=50e6, byte_counter=10_000,
                      fast_recovery_steps=5, alpha_timer_s=55e-6, increase_timer_s=55e-6)


def test_dcqcn_cut_on_cnp() -> None:
    s = dcqcn.DcqcnState(rc=80e6, rt=90e6, alpha=0.5)
    s = dcqcn.on_cnp(s, P, now=1.0)
    assert s.rt == 80e6                      # Rt = Rc
    assert s.rc == pytest.approx(60e6)       # 80 * (1 - 0.5/2)
    assert s.alpha == pytest.approx(0.5 * 255 / 256 + 1 / 256)  # = 0.501953125
    assert s.alpha == pytest.approx(0.501953125)
    assert (s.timer_events, s.byte_events, s.bytes_since) == (0, 0, 0)


def test_dcqcn_fast_recovery_additive_and_hyper_increase() -> None:
    s = dcqcn.on_cnp(dcqcn.DcqcnState(rc=80e6, rt=90e6, alpha=0.5), P, now=0.0)
    # five timer events of fast recovery: Rc halves its distance to Rt = 80 each time
    for expected in (70e6, 75e6, 77.5e6, 78.75e6, 79.375e6):
        s = dcqcn.on_timer_event(s, P)
        assert s.rt == 80e6 and s.rc == pytest.approx(expected)
        assert dcqcn.stage(s, P) == "fast_recovery"
    # sixth timer event: additive increase, Rt = 85, Rc = (85 + 79.375) / 2
    s = dcqcn.on_timer_event(s, P)
    assert dcqcn.stage(s, P) == "additive_increase"
    assert s.rt == pytest.approx(85e6) and s.rc == pytest.approx(82.1875e6)
    # byte-counter events 1..5 while the timer count is 6: still additive
    rc_expected = [86.09375e6, 90.546875e6, 95.2734375e6, 100.13671875e6, 105.068359375e6]
    for i, rc in enumerate(rc_expected):
        s = dcqcn.on_bytes_sent(s, P, 10_000)
        assert s.rt == pytest.approx(85e6 + 5e6 * (i + 1)) and s.rc == pytest.approx(rc)
    # sixth byte event: both counters above F = 5 -> hyper increase, Rt = 110 + 50
    s = dcqcn.on_bytes_sent(s, P, 10_000)
    assert dcqcn.stage(s, P) == "hyper_increase"
    assert s.rt == pytest.approx(160e6) and s.rc == pytest.approx(132.5341796875e6)


def test_dcqcn_byte_counter_keeps_the_remainder() -> None:
    s = dcqcn.on_cnp(dcqcn.DcqcnState(rc=80e6, rt=90e6, alpha=0.5), P, now=0.0)
    s = dcqcn.on_bytes_sent(s, P, 25_000)  # two events, 5000 bytes carried over
    assert s.byte_events == 2 and s.bytes_since == 5_000
    assert s.rc == pytest.approx(75e6)  # 60 -> 70 -> 75


def test_dcqcn_timers_decay_alpha_and_raise_rate() -> None:
    s = dcqcn.on_cnp(dcqcn.DcqcnState(rc=80e6, rt=90e6, alpha=0.5), P, now=0.0)
    a0 = s.alpha
    s = dcqcn.advance(s, P, now=3 * 55e-6 + 1e-9)
    assert s.alpha == pytest.approx(a0 * (255 / 256) ** 3)
    assert s.timer_events == 3 and s.rc == pytest.approx(77.5e6)


def test_dcqcn_rates_stay_within_floor_and_line_rate() -> None:
    p = dcqcn.DcqcnParams(line_rate_bps=100e6, min_rate_bps=10e6)
    s = dcqcn.initial(p)
    for _ in range(20):
        s = dcqcn.on_cnp(s, p, 0.0)
    assert s.rc == 10e6
    for _ in range(200):
        s = dcqcn.on_timer_event(s, p)
    assert s.rc <= 100e6 and s.rt <= 100e6


def test_dcqcn_controller_reduces_rate_on_cnp() -> None:
    cc = make_controller("dcqcn", 100e6)
    cc.tick(0.0)
    cc.on_cnp(0.0)
    assert cc.rate_bps() == pytest.approx(50e6)  # alpha starts at 1: Rc * (1 - 1/2)


# -- HPCC ---------------------------------------------------------------------------------------
T = 1e-3
B = 12.5e6  # bytes/s (100 Mb/s)
HP = hpcc.HpccParams(base_rtt_s=T, nic_bytes_per_s=B, eta=0.95, max_stage=5, flows=1)


def hop(q: float, tx: int, ts: float) -> hpcc.HopSample:
    return hpcc.HopSample(key=(1, 2), qlen_bytes=q, tx_bytes=tx, ts_s=ts, link_bytes_per_s=B)


def test_hpcc_parameters() -> None:
    assert HP.w_init == pytest.approx(12_500)  # B * T
    assert HP.w_ai == pytest.approx(625)  # W_init * (1 - eta) / N


def test_hpcc_window_updates_match_hand_computation() -> None:
    s = hpcc.initial(HP)
    s = hpcc.on_ack(s, HP, [hop(5000, 0, 0.0)], ack_seq=0, snd_nxt=10)
    assert s.window == HP.w_init  # first record: nothing to compare with yet
    # txRate = 12500 B / 1 ms = B -> 1.0; qlen term = min(10000, 5000) / (B*T) = 0.4; U = 1.4
    s = hpcc.on_ack(s, HP, [hop(10000, 12500, 0.001)], ack_seq=1, snd_nxt=20)
    assert s.u == pytest.approx(1.4)
    w1 = 12500 / (1.4 / 0.95) + 625  # = 9107.142857...
    assert s.window == pytest.approx(w1) and s.wc == pytest.approx(w1)
    assert s.last_update_seq == 20 and s.inc_stage == 0
    # same RTT (ack 5 <= 20): tau = 0.5 ms, u = 0 + 0.4; U = 0.5*1.4 + 0.5*0.4 = 0.9 < eta
    s = hpcc.on_ack(s, HP, [hop(0, 15000, 0.0015)], ack_seq=5, snd_nxt=30)
    assert s.u == pytest.approx(0.9)
    assert s.window == pytest.approx(w1 + 625) and s.wc == pytest.approx(w1)  # Wc unchanged
    assert s.inc_stage == 0
    # next RTT (ack 21 > 20): u = 6250 B per 1 ms / B = 0.5, tau = T -> U = 0.5: additive,
    # and this time the reference window moves and incStage counts
    s = hpcc.on_ack(s, HP, [hop(0, 21250, 0.0025)], ack_seq=21, snd_nxt=40)
    assert s.u == pytest.approx(0.5)
    assert s.window == pytest.approx(w1 + 625) and s.wc == pytest.approx(w1 + 625)
    assert s.inc_stage == 1


def test_hpcc_max_stage_forces_multiplicative_update() -> None:
    s = hpcc.HpccState(window=5000, wc=5000, u=0.5, inc_stage=5,
                       prev={(1, 2): hop(0, 0, 0.0)})
    s = hpcc.on_ack(s, HP, [hop(0, 6250, 0.001)], ack_seq=1, snd_nxt=2)  # U = 0.5 < eta
    assert s.window == pytest.approx(5000 / (0.5 / 0.95) + 625)  # = 10125
    assert s.inc_stage == 0


def test_hpcc_window_never_exceeds_w_init() -> None:
    s = hpcc.HpccState(window=12000, wc=12000, prev={(1, 2): hop(0, 0, 0.0)})
    s = hpcc.on_ack(s, HP, [hop(0, 1250, 0.001)], ack_seq=1, snd_nxt=2)  # U = 0.1: grow
    assert s.window == HP.w_init


def test_hpcc_tx_counter_wraps() -> None:
    s = hpcc.HpccState(window=12500, wc=12500, prev={(1, 2): hop(0, (1 << 32) - 1000, 0.0)})
    s = hpcc.on_ack(s, HP, [hop(0, 11500, 0.001)], ack_seq=1, snd_nxt=2)
    assert s.u == pytest.approx(1.0)  # 12500 bytes in 1 ms across the 2**32 wrap


def test_hpcc_ignores_records_of_other_hops() -> None:
    s = hpcc.HpccState(window=12500, wc=12500, prev={(1, 2): hop(0, 0, 0.0)})
    other = hpcc.HopSample(key=(9, 9), qlen_bytes=1e9, tx_bytes=10**9, ts_s=0.001,
                           link_bytes_per_s=B)
    s2 = hpcc.on_ack(s, HP, [other], ack_seq=1, snd_nxt=2)
    assert s2.window == s.window and (9, 9) in s2.prev


def test_hpcc_controller_rate_is_window_over_rtt() -> None:
    cc = make_controller("hpcc", 100e6, base_rtt_s=T, nic_bytes_per_s=B)
    cc.on_ack(0.0, 0, 1, [hop(5000, 0, 0.0)])
    cc.on_ack(0.001, 1, 2, [hop(10000, 12500, 0.001)])
    assert cc.rate_bps() == pytest.approx((12500 / (1.4 / 0.95) + 625) / T * 8)


# -- credits and pacing -----------------------------------------------------------------------
def test_credit_granter_shares_the_downlink_rate() -> None:
    g = credit.CreditGranter(credit.CreditParams(downlink_cells_per_s=1000, initial_cells=4,
                                                 burst_cells=1000))
    g.on_cell("a", 0, 0.0)
    g.on_cell("b", 0, 0.0)
    g.tick(0.0)
    g.on_cell("a", 1, 0.01)
    g.on_cell("b", 1, 0.01)
    g.tick(0.01)  # 10 ms at 1000 cells/s: 10 cells, 5 each
    assert g.flows["a"].granted == 4 + 5 and g.flows["b"].granted == 4 + 5


def _windowed(window: int, batch: int = 1) -> credit.CreditGranter:
    return credit.CreditGranter(credit.CreditParams(
        downlink_cells_per_s=1000, initial_cells=1, burst_cells=1000, window_cells=window,
        batch_cells=batch, idle_s=1.0))


def test_credit_window_caps_granted_cells_not_yet_arrived() -> None:
    g = _windowed(window=6)
    for key in "abc":
        g.on_cell(key, 0, 0.0)  # each flow's request: nothing more is on its way
    g.tick(0.0)
    g.tick(0.1)  # 100 tokens earned, but only 6 cells may be on their way
    assert sum(f.granted - 1 for f in g.flows.values()) == 6
    assert not g.window_open()
    g.on_cell("a", 1, 0.1)  # one granted cell arrives: one more grant, no more
    g.tick(0.1005)
    assert sum(f.granted - 1 for f in g.flows.values()) == 7


def test_credit_window_hands_out_whole_batches_and_forgets_finished_flows() -> None:
    g = _windowed(window=8, batch=4)
    g.on_cell("a", 0, 0.0)
    g.on_cell("b", 0, 0.0)
    g.tick(0.0)
    g.tick(0.1)
    # 4 + 4, not 8 part batches of 1 that no ACK would carry
    assert (g.flows["a"].granted, g.flows["b"].granted) == (5, 5)
    g.on_message_done("a", 0)  # a's message was its one cell: its 4 grants go back
    assert g.flows["a"].granted == 2 and g.window_open()
    g.tick(0.2)
    assert g.flows["a"].granted == 2 and g.flows["b"].granted == 9  # only b still wants cells


def test_token_bucket_paces_to_rate() -> None:
    tb = TokenBucket(rate_bps=8000, burst_bytes=1000)  # 1000 bytes/s
    assert tb.wait_time(0.0, 1000) == 0.0
    tb.consume(0.0, 1000)
    assert tb.wait_time(0.0, 500) == pytest.approx(0.5)
    assert tb.wait_time(0.5, 500) == pytest.approx(0.0)


def test_hpcc_keeps_a_hops_record_until_its_clock_moves() -> None:
    # INT timestamps are microseconds: at 100 Gb/s several ACKs echo the same one. The link
    # sends at exactly B; the record at the repeated timestamp must not become the reference,
    # or the next sample divides half the bytes by the whole interval (U = 0.5, not 1).
    s = hpcc.HpccState(window=12500, wc=12500, prev={(1, 2): hop(0, 0, 0.0)})
    s = hpcc.on_ack(s, HP, [hop(0, int(B * 0.0005), 0.0)], ack_seq=1, snd_nxt=2)
    assert s.prev[(1, 2)].tx_bytes == 0  # same timestamp: no sample, the old record stays
    s = hpcc.on_ack(s, HP, [hop(0, int(B * 0.001), 0.001)], ack_seq=2, snd_nxt=3)
    assert s.u == pytest.approx(1.0)  # tau = T: U is this sample's tx rate / B


def test_the_registry_is_what_every_mode_list_reads() -> None:
    from hosts.cc import NAMES, CcAlgorithm, RateController, algorithm, register, unregister
    from topologies.model import CC_MODES

    with pytest.raises(ValueError, match="registered already"):
        register(CcAlgorithm("dcqcn", lambda rate, _: RateController(rate)))
    with pytest.raises(ValueError, match="unknown rate control 'slowstart'"):
        algorithm("slowstart")
    register(CcAlgorithm("slowstart", lambda rate, _: RateController(rate)))
    try:
        # read when used, so a late registration is a valid choice for topologies and CLIs
        assert "slowstart" in CC_MODES and "slowstart" in NAMES
    finally:
        unregister("slowstart")
    assert "slowstart" not in CC_MODES
    assert algorithm("hpcc").int_source and algorithm("credit").grants
