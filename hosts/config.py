"""The settings of the host programs: one field per knob, with its flag, help and text form
(``hosts.knobs``). ``cellfabric host send|recv`` parses into these, the harness builds them
directly, and the emulation's command lines are rendered from them.

Kept free of Scapy (unlike ``hosts.sender`` / ``hosts.receiver``) so that planning a run and
parsing a command line load nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hosts import wire
from hosts.cc import names as cc_names
from hosts.knobs import (
    MANY,
    PAIRS,
    SWITCH,
    int_or_float,
    integer,
    knob,
    number,
    render_number,
    seconds,
)

HEALTH_INTERVAL_S = 0.01
CREDIT_PROBE_S = 0.1  # grant starvation after which one probe cell goes (hosts.cc.credit)

_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}


def bits_per_second(text: str, frame_bytes: int) -> float:
    """'20M', '500k', '2.5G' (bits/s) or '3000pps' (frames of ``frame_bytes``) -> bits/s."""
    value = text.strip()
    try:
        if value.endswith("pps"):
            return float(value[:-3]) * frame_bytes * 8
        unit = value[-1] if value and value[-1] in _SUFFIX and not value[-1].isdigit() else ""
        amount = value[: len(value) - len(unit)] if unit else value
        return float(amount.removesuffix("bps")) * _SUFFIX[unit]
    except (ValueError, KeyError):
        raise ValueError("expected bits/s like 20M or packets/s like 3000pps") from None


def _cell_rate(text: str, cfg: Mapping[str, Any]) -> float:
    return bits_per_second(text, wire.cell_frame_bytes(cfg["payload_len"], cfg["int_source"]))


def _psn(text: str) -> int:
    value = integer(text)
    if not 0 <= value < wire.PSN_MOD:
        raise ValueError(f"a PSN is 24 bits (0..{wire.PSN_MOD - 1})")
    return value


def _cells_at_least(low: int):
    def parse(text: str) -> int:
        value = integer(text)
        if value < low:
            raise ValueError(f"expected cells >= {low}")
        return value
    return parse


def _positive(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise ValueError("must be positive")
    return value


def _cc_name(text: str) -> str:
    if text not in cc_names():
        raise ValueError(f"expected one of {', '.join(cc_names())}")
    return text


def _per_second(text: str) -> float:
    return number(text.strip().removesuffix("pps"))


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("expected HOST:PORT")
    return host, int(port)


_SECONDS = {"parse": seconds, "render": render_number, "metavar": "SECONDS"}
_NUMBER = {"parse": number, "render": render_number}
_INT = {"parse": integer}


@dataclass
class SenderConfig:
    ifaces: list[str] = knob(  # noqa: RUF009 (knob makes a dataclasses.field)
        "--iface", "NIC port (twice: dual-port)", shape=MANY)
    dst_macs: list[str] = knob(  # noqa: RUF009
        "--dst-mac", "next-hop MAC (one for all ports, or per port)", shape=MANY)
    src_ip: str = knob("--src-ip", "this host's IPv4 address")
    dst_ip: str = knob("--dst-ip", "the receiver's IPv4 address")
    qpn: int = knob("--qp", "queue pair number (both ends use it)", 1, **_INT)
    payload_len: int = knob("--cell-size", "cell payload bytes", wire.CELL_PAYLOAD_DEFAULT,
                            **_INT)
    msg_size: int = knob("--msg-size", "message bytes", 64 * 1024, **_INT)
    count: int = knob("--count", "messages; 0 = as many as fit in --duration", 1, **_INT)
    duration_s: float = knob("--duration", "seconds to send for; 0 = until --count are done",
                             0.0, **_SECONDS)
    drain_s: float = knob("--drain", "after --duration, how long outstanding messages may take",
                          5.0, **_SECONDS)
    # Offered load: messages arrive as a Poisson process of this mean gap (hosts.arrivals),
    # each timed from its arrival; 0 = back to back, each timed from its first cell.
    mean_gap_s: float = knob("--mean-gap", "offered load: Poisson message arrivals of this mean "
                             "gap (0 = back to back)", 0.0, **_SECONDS)
    arrival_seed: int = knob("--arrival-seed", "seed of the arrival process", 0, **_INT)
    cc: str = knob("--cc", lambda: f"rate control: {', '.join(cc_names())}", "none",
                   parse=_cc_name)
    rate_bps: float = knob("--rate", "line rate: 20M (bits/s) or 3000pps; 0 = unpaced", 0.0,
                           render=render_number, parse_with=_cell_rate, metavar="RATE")
    cc_params: dict[str, object] = knob(  # noqa: RUF009
        "--cc-param", "rate-control parameter NAME=VALUE (see hosts/cc/dcqcn.py, hpcc.py)",
        default_factory=dict, shape=PAIRS, parse=int_or_float, render=repr)
    int_source: bool = knob("--int-source", "add an INT-MD header to cells", False,
                            shape=SWITCH)
    link_bps: float = knob("--link-rate", "HPCC's per-hop bandwidth B (0 = --rate)", 0.0,
                           render=render_number, parse_with=_cell_rate, metavar="RATE")
    # > 0: the links' rate counts packets (emulated links), see Sender._int_hops
    link_pps: float = knob("--link-pps", "links that count packets: their rate in packets/s "
                           "(HPCC's B per hop then grows with the INT records)", 0.0, **_NUMBER)
    rto_s: float = knob("--rto", "retransmission timeout", 0.05, **_SECONDS)
    sack_holdoff_s: float = knob("--sack-holdoff", "age of a SACK hole before it is resent",
                                 0.005, **_SECONDS)
    max_inflight_cells: int = knob("--max-inflight", "cells in flight at most", 1024, **_INT)
    port_timeout_s: float = knob("--port-timeout", "a port whose cells see no ACK this long "
                                 "fails over", 0.2, **_SECONDS)
    port_retry_s: float = knob("--port-retry", "a port failed for lack of ACKs is tried again "
                               "after this", 1.0, **_SECONDS)
    sport: int = knob("--sport", "UDP source port (ECMP entropy)", 49152, **_INT)
    seed: int = knob("--seed", "seed of the message contents", 0, **_INT)
    src_macs: list[str] = knob(  # noqa: RUF009
        "--src-mac", "this port's MAC (per port; default the NIC's)", default_factory=list,
        shape=MANY)
    start_psn: int = knob("--start-psn", "first PSN (both ends must agree)", 0, parse=_psn)
    credit_initial_cells: int = knob(
        "--credit-initial", "credit mode: unscheduled cells a flow sends before its first grant "
        "(1 = the first cell is only a request to send); the receiver must be given the same",
        16, parse=_cells_at_least(1), metavar="CELLS")
    # credit mode: grant starvation after which one probe cell goes. It must exceed the time
    # between two grants of this flow (flows sharing the receiver x its cell time), or probes
    # become unscheduled traffic of their own.
    credit_probe_s: float = knob("--credit-probe", "credit mode: time without a grant before "
                                 "one probe cell goes", CREDIT_PROBE_S, **_SECONDS)
    # How often timeouts and port health are checked, and how long to wait when there is
    # nothing to send (a new frame ends the wait early: the socket wakes the loop, and what
    # pacing holds back is waited for exactly). A finer idle poll only burns CPU: 16 senders
    # polling every 0.5 ms took a fat-tree emulation's cores from its switches.
    health_interval_s: float = knob("--health-interval", "how often timeouts and port health "
                                    "are checked", HEALTH_INTERVAL_S, **_SECONDS)
    idle_poll_s: float = knob("--idle-poll", "wait with nothing to send", HEALTH_INTERVAL_S,
                              **_SECONDS)
    time_scale: float = knob("--time-scale", "how much slower this fabric's clock runs than the "
                             "rate controls' papers assume: their timers stretch by it, their "
                             "rate steps shrink by it", 1.0, parse=_positive,
                             render=render_number)
    base_rtt_s: float = knob("--base-rtt", "the path's round trip when idle (0 = unknown: each "
                             "rate control's own default)", 0.0, **_SECONDS)

    @property
    def frame_bytes(self) -> int:
        return wire.cell_frame_bytes(self.payload_len, self.int_source)


@dataclass
class ReceiverConfig:
    ifaces: list[str] = knob(  # noqa: RUF009 (knob makes a dataclasses.field)
        "--iface", "NIC port (twice: dual-port)", shape=MANY)
    ack_every: int = knob("--ack-every", "ACK every this many cells", 4, **_INT)
    ack_delay_s: float = knob("--ack-delay", "how long a partial ACK batch may wait", 0.0005,
                              **_SECONDS)
    nak_holdoff_s: float = knob("--nak-holdoff", "how long a gap must last before a NAK, and "
                                "between NAKs", 0.003, **_SECONDS)
    cnp_interval_s: float = knob("--cnp-interval", "at most one CNP per flow per this",
                                 wire.CNP_INTERVAL_US * 1e-6, **_SECONDS)
    window: int = knob("--window", "reorder window in cells", 4096, **_INT)
    credit_cells_per_s: float = knob("--credit-rate", "> 0: grant credits at this downlink "
                                     "rate (cells/s)", 0.0, parse=_per_second,
                                     render=render_number)
    credit_initial_cells: int = knob("--credit-initial", "unscheduled cells each sender starts "
                                     "with (as the senders')", 16, parse=_cells_at_least(1),
                                     metavar="CELLS")
    credit_window_cells: int = knob("--credit-window", "at most this many granted cells on "
                                    "their way to this host, all flows together (0 = no cap)",
                                    0, parse=_cells_at_least(0), metavar="CELLS")
    credit_idle_s: float = knob("--credit-idle", "a flow silent this long gets no more grants",
                                0.05, **_SECONDS)
    duration_s: float = knob("--duration", "seconds to run; 0 = until done", 0.0, **_SECONDS)
    expect_messages: int = knob("--expect-messages", "stop once this many messages arrived "
                                "(all flows together)", 0, **_INT)
    linger_s: float = knob("--linger", "keep answering retransmissions this long after that",
                           0.5, **_SECONDS)
    collector: tuple[str, int] | None = knob(
        "--collector", "HOST:PORT for host-sink INT reports", None, parse=_host_port,
        render=lambda hp: f"{hp[0]}:{hp[1]}", metavar="HOST:PORT")
    node_id: int = knob("--node-id", "INT node id of this host", 0, **_INT)
    keep_records: int = knob("--keep-records", "per-message records kept for the metrics",
                             10000, **_INT)
    start_psn: int = knob("--start-psn", "first PSN (both ends must agree)", 0, parse=_psn)
