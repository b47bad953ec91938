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

from hosts import wire
from hosts.config import ReceiverConfig, SenderConfig, bits_per_second
from hosts.knobs import add_knobs, config_from_args, to_argv
from hosts.nic import RocePortClaim


def parse_rate(text: str, frame_bytes: int) -> float:
    """'20M', '500k', '2.5G' (bits/s) or '3000pps' -> bits per second."""
    try:
        return bits_per_second(text, frame_bytes)
    except ValueError as exc:
        raise ValueError(f"--rate '{text}': {exc}") from None


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
    add_knobs(s, SenderConfig)
    s.add_argument("--metrics", type=Path)
    _gate_options(s, start_when=True)
    r = sub.add_parser("recv", help="receive cells, reorder, acknowledge")
    add_knobs(r, ReceiverConfig)
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
    """The SenderConfig of a parsed ``send`` command line."""
    return config_from_args(SenderConfig, args)


def receiver_config(args: argparse.Namespace) -> ReceiverConfig:
    """The ReceiverConfig of a parsed ``recv`` command line."""
    return config_from_args(ReceiverConfig, args)


def host_argv(cfg: SenderConfig | ReceiverConfig) -> list[str]:
    """The ``cellfabric host`` arguments (after ``host``) that run ``cfg``."""
    return ["send" if isinstance(cfg, SenderConfig) else "recv", *to_argv(cfg)]


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
