"""How fast the route agent reprograms a switch when a next hop is withdrawn from every route,
with the group shrunk in place (p4sim) beside a new group per changed set (what real BMv2
needs, modify_groups=False), measured side by side in one run against one `p4sim switch`.

    sudo .venv/bin/python bench/route_agent_bench.py [--routes 200] [--ports 4]

A namespace gets ``--ports`` veths standing in for the switch's TAPs and ``--routes`` /24
routes, each over every port (ECMP, as a leaf's routes to other leaves are). The agent follows
the namespace; then one `ip -batch` replaces every route without its last port (what zebra does
when BGP withdraws a spine: one route message per prefix) and the bench waits until the agent's
table and entries hold the shrunk set everywhere. Printed per mode: the initial sync, and for
the withdrawal the write batches, the updates written and the time from the first kernel change
to the last write, with the ratio between the modes. No assertions.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cellfabric.nos.route_agent import RouteAgent
from controlplane.connection import SwitchConnection, wait_until
from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config
from netlab.hosts import NetLab, free_port, tcp_accepts
from netlab.targets import compile_p4, switch_argv

REPO = Path(__file__).resolve().parents[1]


def routes_batch(ns_ports: dict[str, int], count: int, ports: list[int], verb: str) -> str:
    by_port = {p: n for n, p in ns_ports.items()}
    hops = " ".join(f"nexthop via 10.77.{p}.2 dev {by_port[p]}" for p in ports)
    return "".join(f"route {verb} 10.{100 + i // 250}.{i % 250}.0/24 proto bgp {hops}\n"
                   for i in range(count))


def ip_batch(ns: str, text: str) -> None:
    subprocess.run(["ip", "-n", ns, "-batch", "-"], input=text, text=True, check=True)


def one_mode(addr: str, lab: NetLab, args: argparse.Namespace, modify: bool) -> dict:
    ns = lab.netns("rb" + ("m" if modify else "n"))
    port_of: dict[str, int] = {}
    for p in range(1, args.ports + 1):
        inside, _ = lab.veth(f"p{p}{'m' if modify else 'n'}", f"q{p}{'m' if modify else 'n'}",
                             ns_a=ns, ns_b=ns)
        lab.addr(inside, f"10.77.{p}.1/24", ns=ns)
        port_of[inside] = p
    all_ports = list(range(1, args.ports + 1))
    ip_batch(ns, routes_batch(port_of, args.routes, all_ports, "add"))
    conn = SwitchConnection(addr, 1, (0, 2), reconnect=False, role=ROUTE_AGENT_ROLE,
                            role_config=route_agent_role_config()).connect()
    agent = RouteAgent(ns, "l1", port_of, conn, True, modify_groups=modify,
                       log=lambda _line: None)
    try:
        t0 = time.monotonic()
        agent.sync()
        sync_s = time.monotonic() - t0
        stop = threading.Event()
        thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        thread.start()
        wait_until(lambda: len(agent.writes) >= 1 and len(agent.table) >= args.routes, 60)
        before = len(agent.writes)
        shrunk = tuple(all_ports[:-1])
        start = time.monotonic()
        ip_batch(ns, routes_batch(port_of, args.routes, list(shrunk), "replace"))
        wait_until(lambda: set(agent.entries.groups) == {shrunk}, 120, interval=0.01)
        stop.set()
        thread.join(timeout=30)
        batches = agent.writes[before:]
        updates = sum(b.inserts + b.modifies + b.deletes for b in batches)
        # clear the switch for the other mode: delete every route, one pass
        ip_batch(ns, "".join(f"route del 10.{100 + i // 250}.{i % 250}.0/24\n"
                             for i in range(args.routes)))
        agent.sync()
        return {"sync_s": sync_s, "batches": len(batches), "updates": updates,
                "reprogram_s": batches[-1].monotonic - start if batches else float("nan"),
                "seen_s": batches[0].seen - start if batches and batches[0].seen else 0.0}
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=200)
    ap.add_argument("--ports", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, NetLab(prefix="cfrb") as lab:
        json_path, p4info = compile_p4(REPO / "p4src" / "fabric.p4", Path(tmp), "embedded")
        port = free_port()
        addr = f"127.0.0.1:{port}"
        proc = subprocess.Popen(switch_argv("embedded", {}, addr, device_id=1, cpu_port=510,
                                            thrift_port=free_port()),
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            if not wait_until(lambda: tcp_accepts(port), 30):
                print("p4sim switch did not start", file=sys.stderr)
                return 1
            with SwitchConnection(addr, 1, (0, 1), reconnect=False) as ctl:
                ctl.set_pipeline(p4info, json_path)
            results = {m: one_mode(addr, lab, args, m == "in place")
                       for m in ("in place", "new group")}
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"{args.routes} routes over {args.ports} ports; one port withdrawn from every route")
    for mode, r in results.items():
        print(f"  {mode:9}: sync {r['sync_s'] * 1e3:7.1f} ms; withdrawal: {r['batches']} "
              f"batches, {r['updates']} updates, last write {r['reprogram_s'] * 1e3:7.1f} ms "
              f"after the first kernel change (first notification seen at "
              f"{r['seen_s'] * 1e3:.1f} ms)")
    a, b = results["in place"], results["new group"]
    print(f"  new group / in place: updates x{b['updates'] / max(1, a['updates']):.1f}, "
          f"reprogramming time x{b['reprogram_s'] / a['reprogram_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
