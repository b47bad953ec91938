"""The relay process (cellfabric.nos.relayd) on its own: a switch namespace with one TAP, a veth
standing in for the switch's CPU port. What the kernel of the namespace sends on the TAP comes
out of the veth behind a packet_out header naming the TAP's port; a punted frame for that port
reaches the TAP; one for a port without a TAP is counted and dropped. The relay ends with the
process that started it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cellfabric.nos.namespace import SwitchNamespace, TapPort
from netlab.hosts import NetLab

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
ROOT = Path(__file__).resolve().parents[2]
PORT = 3


def _header(port: int) -> bytes:
    return (port << 7).to_bytes(2, "big")  # 9 bits of port, 7 of padding


def _wait(check, what: str, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def test_the_relay_carries_both_ways_counts_what_it_drops_and_ends_with_its_parent(
        tmp_path: Path) -> None:
    ns = SwitchNamespace(f"cfr{os.getpid() % 100000}", "s1",
                         [TapPort(PORT, "port3", "172.16.9.0/31", "02:00:00:00:00:01")])
    ns.create()
    try:
        with NetLab(prefix="cfr") as lab:
            cpu, relay_end = lab.veth("c", "r", mtu=9000)
            stats = tmp_path / "stats.json"
            spec = tmp_path / "relay.json"
            spec.write_text(json.dumps({
                "netns": ns.name, "cpu_ifname": relay_end, "ports": {str(PORT): "port3"},
                "packet_in": [["ingress_port", 9], ["_pad", 7]],
                "packet_out": [["egress_port", 9], ["_pad", 7]], "stats": str(stats)}))
            # a parent that starts the relay, says its pid, and waits to be killed
            parent = subprocess.Popen(
                [sys.executable, "-c",
                 "import subprocess, sys, time\n"
                 "p = subprocess.Popen([sys.executable, '-m', 'cellfabric.nos.relayd', "
                 f"{str(spec)!r}], stdout=subprocess.PIPE, text=True)\n"
                 "print(p.stdout.readline().strip(), p.pid, flush=True)\n"
                 "time.sleep(600)\n"],
                stdout=subprocess.PIPE, text=True, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)})
            try:
                assert parent.stdout is not None
                ready, pid = parent.stdout.readline().split()
                assert ready == "ready"
                switch = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                switch.bind((cpu, 0))
                switch.settimeout(10)
                # the namespace's kernel asks for its peer: ARP out of the TAP, to the switch
                subprocess.run(["ip", "netns", "exec", ns.name, "ping", "-c", "1", "-W", "1",
                                "172.16.9.1"], capture_output=True)
                frame = switch.recv(65536)
                assert frame[:2] == _header(PORT)
                assert frame[2 + 12:2 + 14] == b"\x08\x06"  # an Ethernet ARP frame follows
                # punted frames: one for the TAP's port, one for a port without a TAP
                arp = frame[2:]
                switch.send(_header(PORT) + arp)
                switch.send(_header(7) + arp)

                def counted() -> bool:
                    try:
                        s = json.loads(stats.read_text())
                    except (OSError, ValueError):
                        return False
                    return (s["to_tap"].get(str(PORT)) == 1 and s["unknown_port"] == 1
                            and s["malformed"] == 0 and s["from_tap"].get(str(PORT), 0) >= 1)

                _wait(counted, "the relay's counters")
            finally:
                parent.kill()  # SIGKILL: the relay is told nothing
                parent.wait()
            _wait(lambda: not Path(f"/proc/{pid}").exists()
                  or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
                  "the relay ends with its parent")
    finally:
        ns.remove()
