"""``cellfabric host send|recv|collect``: run one end host, write its metrics as JSON at exit.

Errors in arguments are one line on stderr and exit status 2; SIGTERM ends a run cleanly and
still writes the metrics file.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hosts import wire
from hosts.cc import NAMES
from hosts.cc.dcqcn import DcqcnParams
from hosts.nic import RocePortClaim

if TYPE_CHECKING:  # the host programs import Scapy; the collector does not need it
    from hosts.receiver import ReceiverConfig
    from hosts.sender import SenderConfig

_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}


def parse_rate(text: str, frame_bytes: int) -> float:
    """'20M', '500k', '2.5G' (bits/s) or '3000pps' -> bits per second."""
    value = text.strip()
    try:
        if value.endswith("pps"):
            return float(value[:-3]) * frame_bytes * 8
        unit = value[-1] if value and value[-1] in _SUFFIX and not value[-1].isdigit() else ""
        number = value[: len(value) - len(unit)] if unit else value
        if number.endswith("bps"):
            number = number[:-3]
        return float(number) * _SUFFIX[unit]
    except (ValueError, KeyError):
        raise ValueError(f"--rate '{text}': expected bits/s like 20M or packets/s like 3000pps")\
            from None


def _cell_frame_bytes(payload: int, int_source: bool) -> int:
    return 14 + 20 + 8 + (16 if int_source else 0) + wire.BTH_LEN + payload + wire.ICRC_LEN


def _pps(rate: str) -> float:
    """The packets per second of a rate given as ``NNNpps`` (0 for one in bits per second)."""
    text = rate.strip().lower()
    return float(text[:-3]) if text.endswith("pps") else 0.0


def _kv_params(items: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--cc-param '{item}': expected NAME=VALUE")
        try:
            out[key] = int(value) if value.lstrip("-").isdigit() else float(value)
        except ValueError:
            raise ValueError(f"--cc-param '{item}': value is not a number") from None
    return out


def _psn(value: int) -> int:
    if not 0 <= value < wire.PSN_MOD:
        raise ValueError(f"--start-psn {value}: a PSN is 24 bits (0..{wire.PSN_MOD - 1})")
    return value


def _default_cc_params(cc: str, params: dict[str, object], rate_bps: float, frame: int,
                       time_scale: float) -> None:
    """Fill in what the user did not set. HPCC's base RTT T defaults to 2 ms of software
    latency plus ten cell times at the line rate (a few hops of serialization each way)."""
    if time_scale <= 0:
        raise ValueError(f"--time-scale {time_scale}: must be positive")
    if cc == "hpcc":
        cell_time = frame * 8 / rate_bps if rate_bps > 0 else 0.0
        params.setdefault("base_rtt_s", 0.002 + 10 * cell_time)
        params.setdefault("nic_bytes_per_s", rate_bps / 8)
    elif cc == "dcqcn" and time_scale != 1.0:
        paper = DcqcnParams(line_rate_bps=rate_bps)
        for name in ("alpha_timer_s", "increase_timer_s"):
            params.setdefault(name, getattr(paper, name) * time_scale)
        for name in ("rai_bps", "rhai_bps"):
            params.setdefault(name, getattr(paper, name) / time_scale)


def _gate_options(sub: argparse.ArgumentParser, start_when: bool) -> None:
    """A start barrier for a harness that starts many hosts: each says when it is ready, and
    senders hold their first cell until told to go, so no flow runs while the others are
    still starting (16 Python processes take seconds of CPU to start on a small machine)."""
    sub.add_argument("--ready-file", type=Path, metavar="PATH",
                     help="create PATH once the ports are open")
    if start_when:
        sub.add_argument("--start-when", type=Path, metavar="PATH",
                         help="send nothing until PATH exists")


def wait_for_file(path: Path, should_stop: Callable[[], bool], poll_s: float = 0.005) -> bool:
    """Block until ``path`` exists (True) or a stop is requested (False)."""
    while not path.exists():
        if should_stop():
            return False
        time.sleep(poll_s)
    return True


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cellfabric host")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send", help="send messages as cells")
    s.add_argument("--iface", action="append", required=True, help="NIC port (twice: dual-port)")
    s.add_argument("--dst-mac", action="append", required=True, help="next-hop MAC (per port)")
    s.add_argument("--src-mac", action="append", default=[])
    s.add_argument("--src-ip", required=True)
    s.add_argument("--dst-ip", required=True)
    s.add_argument("--qp", type=int, default=1)
    s.add_argument("--msg-size", type=int, default=64 * 1024)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--duration", type=float, default=0.0)
    s.add_argument("--drain", type=float, default=5.0)
    s.add_argument("--mean-gap", type=float, default=0.0,
                   help="offered load: Poisson message arrivals of this mean gap in seconds "
                        "(0 = back to back)")
    s.add_argument("--arrival-seed", type=int, default=0, help="seed of the arrival process")
    s.add_argument("--cell-size", type=int, default=wire.CELL_PAYLOAD_DEFAULT)
    s.add_argument("--cc", choices=NAMES, default="none")
    s.add_argument("--rate", default="0", help="line rate: 20M (bits/s) or 3000pps; 0 = unpaced")
    s.add_argument("--link-rate", default="", help="HPCC per-hop bandwidth B (default --rate)")
    s.add_argument("--cc-param", action="append", default=[],
                   help="rate-control parameter NAME=VALUE (see hosts/cc/dcqcn.py, hpcc.py)")
    s.add_argument("--time-scale", type=float, default=1.0,
                   help="dcqcn: stretch the paper's timers by this factor and divide its rate "
                        "steps by it (for fabrics far slower than the paper's 40 Gb/s)")
    s.add_argument("--int-source", action="store_true", help="add an INT-MD header to cells")
    s.add_argument("--rto", type=float, default=0.05)
    s.add_argument("--sack-holdoff", type=float, default=0.005)
    s.add_argument("--port-timeout", type=float, default=0.2)
    s.add_argument("--port-retry", type=float, default=1.0)
    s.add_argument("--max-inflight", type=int, default=1024)
    s.add_argument("--credit-probe", type=float, default=0.1,
                   help="credit mode: seconds without a grant before one probe cell goes")
    s.add_argument("--credit-initial", type=int, default=None, metavar="CELLS",
                   help="credit mode: unscheduled cells a flow sends before its first grant "
                        "(default 16; 1 = the first cell is only a request to send); the "
                        "receiver must be given the same")
    s.add_argument("--sport", type=int, default=49152)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--start-psn", type=int, default=0, help="first PSN (both ends must agree)")
    s.add_argument("--metrics", type=Path)
    _gate_options(s, start_when=True)
    r = sub.add_parser("recv", help="receive cells, reorder, acknowledge")
    r.add_argument("--iface", action="append", required=True)
    r.add_argument("--ack-every", type=int, default=4)
    r.add_argument("--ack-delay", type=float, default=0.0005,
                   help="seconds a partial ACK batch may wait (default 0.5 ms)")
    r.add_argument("--nak-holdoff", type=float, default=0.003,
                   help="seconds a gap must last before a NAK, and between NAKs (default 3 ms)")
    r.add_argument("--cnp-interval-us", type=float, default=wire.CNP_INTERVAL_US)
    r.add_argument("--window", type=int, default=4096)
    r.add_argument("--credit-rate", default="0", help="grant cells at this rate (cells/s); 0=off")
    r.add_argument("--credit-initial", type=int, default=None, metavar="CELLS",
                   help="unscheduled cells each sender starts with (default 16; as the senders')")
    r.add_argument("--credit-window", type=int, default=0, metavar="CELLS",
                   help="at most this many granted cells on their way to this host, all flows "
                        "together (0 = no cap)")
    r.add_argument("--duration", type=float, default=0.0)
    r.add_argument("--expect-messages", type=int, default=0)
    r.add_argument("--linger", type=float, default=0.5)
    r.add_argument("--collector", default="", help="HOST:PORT for host-sink INT reports")
    r.add_argument("--node-id", type=int, default=0)
    r.add_argument("--start-psn", type=int, default=0, help="first PSN (both ends must agree)")
    r.add_argument("--metrics", type=Path)
    _gate_options(r, start_when=False)
    c = sub.add_parser("collect", help="INT collector for Telemetry Reports")
    c.add_argument("--bind", default="0.0.0.0")
    c.add_argument("--port", type=int, default=wire.TELEMETRY_REPORT_PORT)
    c.add_argument("--records", type=Path, required=True, help="JSON lines output")
    c.add_argument("--duration", type=float, default=0.0)
    c.add_argument("--link-rate", default="0", help="link bits/s, for utilization fractions")
    c.add_argument("--metrics", type=Path, help="summary JSON")
    return ap


def sender_config(args: argparse.Namespace) -> SenderConfig:
    """The SenderConfig of a parsed ``send`` command line (also what a simulator runs)."""
    from hosts.sender import SenderConfig

    frame = _cell_frame_bytes(args.cell_size, args.int_source)
    cfg = SenderConfig(
        ifaces=args.iface, dst_macs=args.dst_mac, src_macs=args.src_mac,
        src_ip=args.src_ip, dst_ip=args.dst_ip, qpn=args.qp, payload_len=args.cell_size,
        msg_size=args.msg_size, count=args.count, duration_s=args.duration,
        drain_s=args.drain, mean_gap_s=args.mean_gap, arrival_seed=args.arrival_seed,
        cc=args.cc, rate_bps=parse_rate(args.rate, frame),
        link_bps=parse_rate(args.link_rate, frame) if args.link_rate else 0.0,
        link_pps=_pps(args.link_rate),
        cc_params=_kv_params(args.cc_param), int_source=args.int_source, rto_s=args.rto,
        sack_holdoff_s=args.sack_holdoff, port_timeout_s=args.port_timeout,
        port_retry_s=args.port_retry,
        max_inflight_cells=args.max_inflight, sport=args.sport, seed=args.seed,
        credit_probe_s=args.credit_probe,
        start_psn=_psn(args.start_psn))
    if args.credit_initial is not None:
        cfg.credit_initial_cells = _credit_initial(args.credit_initial)
    _default_cc_params(cfg.cc, cfg.cc_params, cfg.rate_bps, frame, args.time_scale)
    return cfg


def receiver_config(args: argparse.Namespace) -> ReceiverConfig:
    """The ReceiverConfig of a parsed ``recv`` command line."""
    from hosts.receiver import ReceiverConfig

    collector = None
    if args.collector:
        host, _, port = args.collector.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--collector '{args.collector}': expected HOST:PORT")
        collector = (host, int(port))
    credit = float(args.credit_rate.removesuffix("pps") or 0)
    if args.credit_window < 0:
        raise ValueError(f"--credit-window {args.credit_window}: expected cells >= 0")
    cfg = ReceiverConfig(
        ifaces=args.iface, ack_every=args.ack_every, ack_delay_s=args.ack_delay,
        nak_holdoff_s=args.nak_holdoff,
        cnp_interval_s=args.cnp_interval_us * 1e-6, window=args.window,
        credit_cells_per_s=credit, duration_s=args.duration,
        expect_messages=args.expect_messages, linger_s=args.linger, collector=collector,
        node_id=args.node_id, start_psn=_psn(args.start_psn),
        credit_window_cells=args.credit_window)
    if args.credit_initial is not None:
        cfg.credit_initial_cells = _credit_initial(args.credit_initial)
    return cfg


def _credit_initial(cells: int) -> int:
    if cells < 1:  # a receiver learns of a flow from its first cell
        raise ValueError(f"--credit-initial {cells}: expected cells >= 1")
    return cells


def parse_host_args(argv: list[str]) -> argparse.Namespace:
    """Parse a ``cellfabric host`` command line (without the leading ``host``)."""
    return _parser().parse_args(argv)


def _run(args: argparse.Namespace, stop: list[bool]) -> dict[str, object]:
    should_stop = lambda: stop[0]  # noqa: E731
    if args.cmd == "send":
        from hosts.sender import Sender

        node = Sender(sender_config(args))
    elif args.cmd == "recv":
        from hosts.receiver import Receiver

        node = Receiver(receiver_config(args))
    else:
        from hosts.collector import Collector

        node = Collector(args.bind, args.port, args.records,
                         link_bps=parse_rate(args.link_rate, 0), duration_s=args.duration)
    claim = RocePortClaim()
    if args.cmd in ("send", "recv"):
        claim.open(wire.ROCE_UDP_PORT)
        if claim.error:
            print(f"cellfabric host {args.cmd}: warning: {claim.error}: this host's kernel "
                  "will answer cells with ICMP port unreachable", file=sys.stderr)
    node.open()
    try:
        if getattr(args, "ready_file", None):
            args.ready_file.parent.mkdir(parents=True, exist_ok=True)
            args.ready_file.touch()
        gate = getattr(args, "start_when", None)
        if gate is not None:
            wait_for_file(gate, should_stop)  # stopped meanwhile: run returns at once
        return node.run(should_stop)
    finally:
        node.close()
        claim.close()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["host"]:
        argv = argv[1:]
    args = _parser().parse_args(argv)
    stop = [False]

    def on_term(signum: int, frame: object) -> None:
        stop[0] = True

    # SIGTERM (the runner) and SIGINT (Ctrl-C) both end the run cleanly, metrics written.
    old = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        metrics = _run(args, stop)
    except (ValueError, OSError) as exc:
        print(f"cellfabric host {args.cmd}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    text = json.dumps(metrics, indent=1, default=str)
    if args.metrics:
        args.metrics.parent.mkdir(parents=True, exist_ok=True)
        args.metrics.write_text(text + "\n")
    summary = {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}
    print(f"cellfabric host {args.cmd}: " + json.dumps(summary, default=str), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
