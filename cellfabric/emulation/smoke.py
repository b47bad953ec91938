"""The smoke fabric: two Mininet hosts through one project switch node, measured with ping.

This is what `cellfabric run` does until the full fabric runner exists: it exercises the whole
bring-up/teardown path (Mininet hosts in namespaces, a switch process on veths, cleanup) and
writes a report in the same place the fabric runs will.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
import time
from pathlib import Path

from netlab.hosts import wait_until


def _ping_stats(output: str) -> dict[str, float]:
    sent = re.search(r"(\d+) packets transmitted, (\d+) received", output)
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", output)
    stats = {"sent": 0.0, "received": 0.0}
    if sent:
        stats["sent"], stats["received"] = float(sent.group(1)), float(sent.group(2))
    if rtt:
        stats.update(rtt_min_ms=float(rtt.group(1)), rtt_avg_ms=float(rtt.group(2)),
                     rtt_max_ms=float(rtt.group(3)))
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellfabric run")
    parser.add_argument("--count", type=int, default=50, help="ping probes (default 50)")
    parser.add_argument("--results", default="results", help="results folder")
    args = parser.parse_args(argv)

    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from cellfabric.emulation.nodes import ForwarderSwitch

    setLogLevel("warning")
    tag = secrets.token_hex(2)
    run_dir = Path(args.results) / time.strftime(f"smoke-%Y%m%d-%H%M%S-{tag}")
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                  autoStaticArp=True, waitConnected=False)
    h1 = net.addHost(f"h1{tag}", ip="10.0.0.1/24")
    h2 = net.addHost(f"h2{tag}", ip="10.0.0.2/24")
    sw = net.addSwitch(f"s{tag}", cls=ForwarderSwitch, log_dir=str(run_dir / "logs"))
    net.addLink(h1, sw, intfName1=f"h1{tag}-e0", intfName2=f"s{tag}-e1")
    net.addLink(h2, sw, intfName1=f"h2{tag}-e0", intfName2=f"s{tag}-e2")
    try:
        print(f"[1/3] starting 2 hosts and switch s{tag} (forwarder)")
        net.build()
        net.start()
        if not wait_until(lambda: " 0% packet loss" in h1.cmd("ping -c 1 -W 1 10.0.0.2"), 15):
            print("cellfabric run: error: the switch never forwarded a packet", file=sys.stderr)
            return 1
        print(f"[2/3] {args.count} ping probes h1 -> h2")
        stats = _ping_stats(h1.cmd(f"ping -c {args.count} -i 0.05 -W 1 10.0.0.2"))
    finally:
        print("[3/3] tearing down")
        net.stop()
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {"run": run_dir.name, "topology": "smoke (2 hosts, 1 forwarder switch)", **stats}
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    loss = 100.0 * (1 - stats["received"] / stats["sent"]) if stats["sent"] else 100.0
    print("\nsummary")
    print(f"  probes sent/received : {stats['sent']:.0f}/{stats['received']:.0f}"
          f"  (loss {loss:.1f}%)")
    if "rtt_avg_ms" in stats:
        print(f"  rtt min/avg/max (ms) : {stats['rtt_min_ms']:.3f}/{stats['rtt_avg_ms']:.3f}"
              f"/{stats['rtt_max_ms']:.3f}")
    print(f"  metrics              : {run_dir / 'metrics.json'}")
    return 0 if stats["received"] else 1
