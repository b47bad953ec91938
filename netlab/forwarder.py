"""A trivial port-pair forwarder: frames in on port 2k leave on 2k+1 and vice versa.

It is the device under test for the harness's own PTF smoke test, independent of any P4
target, so the PTF plumbing (veths, namespaces, ptf's dataplane) is checked on its own.
Usage: python -m netlab.forwarder -i 0@ifA -i 1@ifB ...
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import sys

from p4sim.switch.main import parse_interfaces

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def _parse_ports(specs: list[str]) -> dict[int, str]:
    try:
        return parse_interfaces(specs)  # the switch's own -i syntax
    except ValueError as err:
        raise SystemExit(f"forwarder: error: {err}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netlab.forwarder")
    parser.add_argument("-i", "--interface", action="append", default=[])
    args = parser.parse_args(argv)
    ports = _parse_ports(args.interface)
    socks: dict[int, socket.socket] = {}
    for num, ifname in ports.items():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((ifname, 0))
        s.setblocking(False)
        socks[num] = s
    by_fd = {s.fileno(): num for num, s in socks.items()}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    forwarded = 0
    try:
        while True:
            ready, _, _ = select.select(list(socks.values()), [], [], 1.0)
            for s in ready:
                frame, addr = s.recvfrom(65535)
                if addr[2] == PACKET_OUTGOING:  # our own transmissions, seen again
                    continue
                peer = by_fd[s.fileno()] ^ 1
                if peer in socks:
                    socks[peer].send(frame)
                    forwarded += 1
    except KeyboardInterrupt:
        pass
    finally:
        print(f"forwarder: {forwarded} frames forwarded", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
