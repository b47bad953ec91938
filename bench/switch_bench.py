"""p4sim switch throughput, measured side by side in one run.

1. in-process: DataPlane.receive() on a basic IPv4 program (hand-written BMv2 JSON), no I/O;
2. over veths: `p4sim switch` as a process between two veth pairs in a fresh namespace, fed by
   a paced AF_PACKET sender at rising offered rates, counting what arrives (kernel counters);
3. ceiling: the same veth set-up with a plain Python AF_PACKET forwarder (netlab.forwarder)
   in place of the switch;
4. fabric.p4 routed+sprayed in process on the Python and the native (C) path, alternating;
5. fabric.p4 routed+sprayed over veths: p4sim switch on each path and, when the p4lang toolchain
   is on PATH, real simple_switch_grpc with real p4c's JSON, the same entries over P4Runtime and
   the same cells (issue #23's goal: p4sim's lossless rate at least 5x BMv2's).

Prints the highest lossless rate (>= 99.5% delivered) and the peak delivered rate for each, and
the ratios (switch / ceiling, veth / in-process, native / python, p4sim / BMv2). No assertions.
Usage: python bench/switch_bench.py [--seconds 3] [--packets 50000] [--json PROG.json]
       [--only inproc]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from netlab.hosts import NetLab, free_port, tcp_accepts, wait_until  # noqa: E402
from p4sim.switch.api import ActionCall, Lpm, TableEntry  # noqa: E402
from p4sim.switch.dataplane import DataPlane  # noqa: E402

BASIC = ROOT / "tests" / "unit" / "bmv2json" / "basic_const.json"
BMV2_REFERENCE_KPPS = 40  # DESIGN.md: real simple_switch_grpc, basic IPv4, without loss


def frame() -> bytes:
    # Built once with Scapy; the hot loops only resend these bytes.
    return bytes(Ether(src="02:00:00:00:00:09", dst="02:00:00:00:00:01")
                 / IP(src="10.9.0.1", dst="10.0.1.5", ttl=64) / UDP(sport=1000, dport=2000)
                 / (b"b" * 64))


def in_process(json_path: Path, packets: int, pkt: bytes | None = None) -> float:
    dp = DataPlane()
    dp.load_pipeline(json_path.read_bytes())
    if dp.cp is not None and "MyIngress.ipv4_lpm" in dp.cp.tables and \
            "const" not in json_path.name:
        dp.table_insert("MyIngress.ipv4_lpm", TableEntry((Lpm(0x0A000100, 24),),
                        ActionCall("MyIngress.ipv4_forward", (0x111, 1))))
    sent = [0]
    dp.tx = lambda port, f: sent.__setitem__(0, sent[0] + 1)
    pkt = pkt or frame()
    batch = [pkt] * 64  # as the port loop hands them over
    for _ in range(20):  # warm-up
        dp.receive_batch(0, batch)
    rounds = max(1, packets // len(batch))
    t0 = time.perf_counter()
    for _ in range(rounds):
        dp.receive_batch(0, batch)
    dt = time.perf_counter() - t0
    return rounds * len(batch) / dt


def fabric_in_process(packets: int) -> float | None:
    """p4src/fabric.p4 compiled with `p4sim compile`, a RoCEv2 cell through default actions."""
    from netlab.targets import compile_p4

    src = ROOT / "p4src" / "fabric.p4"
    if not src.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            json_path, _ = compile_p4(src, tmp, target="embedded", includes=[src.parent / "include"])
        except Exception as e:
            print(f"fabric.p4: compile failed ({str(e).splitlines()[0] if str(e) else e})")
            return None
        cell = bytes(Ether(src="02:00:00:00:00:09", dst="02:00:00:00:00:01")
                     / IP(src="10.0.0.1", dst="10.0.1.5", tos=2) / UDP(sport=5000, dport=4791)
                     / (b"\x00" * 12 + b"c" * 1024))
        return in_process(json_path, packets, cell)


def ns_socket(ns: str, ifname: str) -> socket.socket:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    box: dict[str, socket.socket] = {}

    def work() -> None:
        fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
        libc.setns(fd, 0x40000000)
        os.close(fd)
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((ifname, 3))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        box["s"] = s

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["s"]


def link_packets(ns: str, ifname: str, direction: str) -> int:
    """The kernel's packet counter of an interface (no socket of ours needs to keep up)."""
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", ifname],
                         capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)[0]["stats64"][direction]["packets"])


def paced_send(tx: socket.socket, pkt: bytes, rate: int, seconds: float) -> int:
    """Send at ``rate`` pps for ``seconds`` in 1 ms ticks; returns frames handed to the kernel."""
    sent = 0
    t0 = time.perf_counter()
    tick = 0.001
    per_tick = rate * tick
    owed = 0.0
    next_t = t0
    while next_t - t0 < seconds:
        owed += per_tick
        while owed >= 1:
            with contextlib.suppress(OSError):  # a full socket buffer: that frame is lost
                tx.send(pkt)
                sent += 1
            owed -= 1
        next_t += tick
        delay = next_t - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return sent


def over_veth(kind: str, json_path: Path, seconds: float, rates: list[int]
              ) -> list[tuple[int, float, float]]:
    """For each offered rate: (rate, delivered fraction, delivered pps) through ``kind``."""
    with NetLab(prefix="sb") as lab:
        ns = lab.netns("n")
        (s0, h0), (s1, h1) = lab.veth("s0", "h0", ns, ns), lab.veth("s1", "h1", ns, ns)
        log = Path(f"/tmp/switch_bench_{os.getpid()}_{kind}.log")
        if kind == "switch":
            argv = [sys.executable, "-m", "p4sim.cli", "switch", "-i", f"0@{s0}", "-i",
                    f"1@{s1}", "--thrift-port", "9090", str(json_path)]
        else:
            argv = [sys.executable, "-m", "netlab.forwarder", "-i", f"0@{s0}", "-i", f"1@{s1}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
        lab.popen(ns, argv, log=log, env=env)
        if kind == "switch":
            wait_until(lambda: "p4sim switch:" in log.read_text(), 20)
        else:
            time.sleep(1.0)
        tx = ns_socket(ns, h0)
        pkt = frame()
        results = []
        for rate in rates:
            before = link_packets(ns, h1, "rx")
            sent = paced_send(tx, pkt, rate, seconds)
            time.sleep(0.3)  # let queues drain
            got = link_packets(ns, h1, "rx") - before
            results.append((rate, got / sent if sent else 0.0, got / seconds))
            if got < 0.5 * sent:
                break  # saturated: higher rates only lose more
        tx.close()
        log.unlink(missing_ok=True)
        return results


ROUTER_MAC = "02:fa:00:00:00:03"


def _fabric_cell() -> bytes:
    from scapy.contrib.roce import BTH

    return bytes(Ether(src="02:cf:00:00:00:01", dst=ROUTER_MAC)
                 / IP(src="10.0.1.1", dst="10.0.2.1", tos=2) / UDP(sport=50000, dport=4791)
                 / BTH(opcode=1, psn=7, dqpn=1) / (b"c" * 1024) / b"\0\0\0\0")


def _fabric_entities():
    """A leaf's forwarding state for one sprayed route: every table a data cell meets."""
    from controlplane.entities import (
        ActionProfileGroup,
        ActionProfileMember,
        GroupMember,
        TableEntry,
    )

    ing, egr = "MyIngress", "MyEgress"
    ents = [
        TableEntry(f"{ing}.forwarding.my_station", {"hdr.ethernet.dst_addr": ROUTER_MAC},
                   "NoAction"),
        TableEntry(f"{ing}.forwarding.ipv4_lpm", {"hdr.ipv4.dst_addr": "10.0.2.0/24"},
                   f"{ing}.forwarding.set_next_group", {"group_id": 1}),
        TableEntry(f"{ing}.spray.group_mode", {"meta.group_id": 1},
                   f"{ing}.spray.set_group_mode", {"mode": 1, "salt": 0x10000}),
        TableEntry(f"{ing}.spray.cell_length", {"meta.cell_payload_len": 1024},
                   f"{ing}.spray.cell_length_ok"),
    ]
    for port in (1, 2):
        ents.append(ActionProfileMember(f"{ing}.spray.group_selector", port,
                                        f"{ing}.spray.set_egress_port", {"port": port}))
    ents.append(ActionProfileGroup(f"{ing}.spray.group_selector", 1,
                                   [GroupMember(1, 1, 1), GroupMember(2, 1, 2)]))
    ents.append(TableEntry(f"{ing}.spray.group_select", {"meta.group_id": 1}, group=1))
    for port in (1, 2):
        ents.append(TableEntry(f"{egr}.rewrite.egress_rewrite",
                               {"standard_metadata.egress_port": port},
                               f"{egr}.rewrite.set_port_macs",
                               {"src_mac": ROUTER_MAC, "dst_mac": "02:fa:00:00:00:01"}))
        ents.append(TableEntry(f"{egr}.ecn.ecn_profile", {"standard_metadata.egress_port": port},
                               f"{egr}.ecn.set_ecn_profile", {"kmin": 5, "kmax": 20, "step": 873}))
    return ents


def fabric_routed(seconds: float, rates: list[int], packets: int, dataplane: str = "auto"
                  ) -> tuple[float, list[tuple[int, float, float]]] | None:
    """fabric.p4 as a leaf spraying RoCEv2 cells over two ports, its tables written over
    P4Runtime: in-process pps, then over veths (p4sim switch as a process, its data plane
    path ``dataplane``; ``bmv2``: real simple_switch_grpc running real p4c's JSON, with the
    same entries and cells, when the p4lang toolchain is on PATH)."""
    from controlplane.connection import SwitchConnection
    from netlab.capture import size_capture_ring_for_mtu
    from netlab.targets import compile_p4, switch_argv

    src = ROOT / "p4src" / "fabric.p4"
    target = "bmv2" if dataplane == "bmv2" else "embedded"
    with tempfile.TemporaryDirectory() as tmp:
        json_path, p4info = compile_p4(src, tmp, target=target)
        with NetLab(prefix="sf") as lab:
            pairs = [lab.veth(f"s{i}", f"h{i}") for i in range(3)]
            port = free_port()
            ports = {i: sw_if for i, (sw_if, _) in enumerate(pairs)}
            if target == "bmv2":
                # as the harness runs BMv2: libpcap sizes its ring by the offloads
                for sw_if in ports.values():
                    size_capture_ring_for_mtu(sw_if)
                argv = switch_argv("bmv2", ports, f"127.0.0.1:{port}", device_id=1,
                                   thrift_port=port + 1, extra=["--log-level", "off"])
            else:
                argv = switch_argv("embedded", ports, f"127.0.0.1:{port}", device_id=1,
                                   thrift_port=port + 1, extra=["--dataplane", dataplane])
            lab.popen(None, argv)
            conn = SwitchConnection(f"127.0.0.1:{port}", 1, reconnect=False, timeout=20)
            wait_until(lambda: tcp_accepts(port), 20)
            conn.connect()
            conn.set_pipeline(p4info, json_path)
            conn.insert(*_fabric_entities())
            # In-process figure from the same JSON and entries, for the ratio (BMv2 has none).
            inproc = 0.0 if target == "bmv2" else _fabric_inproc(
                json_path, packets, None if dataplane == "auto" else dataplane)
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((pairs[0][1], 0))
            pkt = _fabric_cell()
            results = []
            for rate in rates:
                before = sum(_root_rx(h) for _, h in pairs[1:])
                sent = paced_send(tx, pkt, rate, seconds)
                time.sleep(0.3)
                got = sum(_root_rx(h) for _, h in pairs[1:]) - before
                results.append((rate, got / sent if sent else 0.0, got / seconds))
                if got < 0.5 * sent:
                    break
            tx.close()
            conn.close()
            return inproc, results


def _fabric_inproc(json_path: Path, packets: int, dataplane: str | None = None) -> float:
    """The entries of ``_fabric_entities`` written straight into an in-process DataPlane (its
    own API, not P4Runtime), and the same cell pushed through it (on ``dataplane``'s path)."""
    from p4sim.switch.api import Exact, GroupMember, GroupRef

    dp = DataPlane(dataplane=dataplane)
    dp.load_pipeline(json_path.read_bytes())
    if dataplane is not None and dp.dataplane != dataplane:
        raise RuntimeError(f"fabric.p4 runs on the {dp.dataplane} path, not {dataplane}")
    ing, egr = "MyIngress", "MyEgress"
    mac = int(ROUTER_MAC.replace(":", ""), 16)
    dp.table_insert(f"{ing}.forwarding.my_station", TableEntry((Exact(mac),), ActionCall("NoAction")))
    dp.table_insert(f"{ing}.forwarding.ipv4_lpm", TableEntry(
        (Lpm(0x0A000200, 24),), ActionCall(f"{ing}.forwarding.set_next_group", (1,))))
    dp.table_insert(f"{ing}.spray.group_mode", TableEntry(
        (Exact(1),), ActionCall(f"{ing}.spray.set_group_mode", (1, 0x10000))))
    dp.table_insert(f"{ing}.spray.cell_length", TableEntry(
        (Exact(1024),), ActionCall(f"{ing}.spray.cell_length_ok")))
    for p in (1, 2):
        dp.member_add(f"{ing}.spray.group_selector", p,
                      ActionCall(f"{ing}.spray.set_egress_port", (p,)))
        dp.table_insert(f"{egr}.rewrite.egress_rewrite", TableEntry(
            (Exact(p),), ActionCall(f"{egr}.rewrite.set_port_macs", (mac, 0x02FA00000001))))
        dp.table_insert(f"{egr}.ecn.ecn_profile", TableEntry(
            (Exact(p),), ActionCall(f"{egr}.ecn.set_ecn_profile", (5, 20, 873))))
    dp.group_add(f"{ing}.spray.group_selector", 1, [GroupMember(1, 1, 1), GroupMember(2, 1, 2)])
    dp.table_insert(f"{ing}.spray.group_select", TableEntry((Exact(1),), GroupRef(1)))
    out = [0]
    dp.tx = lambda port, f: out.__setitem__(0, out[0] + 1)
    pkt = _fabric_cell()
    for _ in range(200):
        dp.receive(0, pkt)
    t0 = time.perf_counter()
    for _ in range(packets):
        dp.receive(0, pkt)
    dp.drain(5.0)
    return packets / (time.perf_counter() - t0)


def fabric_paths(packets: int, rounds: int = 3) -> tuple[float, float] | None:
    """fabric.p4 routed+sprayed in process on the Python and the native path, alternating
    (best of ``rounds`` each), so both see the same machine load: (python pps, native pps)."""
    from netlab.targets import compile_p4
    from p4sim.switch.native.build import available

    why = available()
    if why is not None:
        print(f"fabric.p4 native path: skipped ({why})")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        json_path, _ = compile_p4(ROOT / "p4src" / "fabric.p4", tmp, target="embedded")
        best = {"python": 0.0, "native": 0.0}
        for _ in range(rounds):
            for path in best:
                count = packets if path == "native" else max(1000, packets // 10)
                best[path] = max(best[path], _fabric_inproc(json_path, count, path))
    return best["python"], best["native"]


def _root_rx(ifname: str) -> int:
    return int(Path(f"/sys/class/net/{ifname}/statistics/rx_packets").read_text())


def summarize(name: str, results: list[tuple[int, float, float]]) -> tuple[float, float]:
    lossless = max((r for r, frac, _ in results if frac >= 0.995), default=0)
    peak = max((pps for _, _, pps in results), default=0.0)
    steps = "  ".join(f"{r // 1000}k:{frac * 100:.0f}%" for r, frac, _ in results)
    print(f"{name:28s}: lossless {lossless / 1000:6.1f} kpps, peak {peak / 1000:6.1f} kpps"
          f"   [{steps}]", flush=True)
    return lossless, peak


FABRIC_RATES = [1000, 2000, 4000, 6000, 8000, 12000, 16000, 24000, 32000, 48000, 64000, 96000,
                128000, 192000]


def bmv2_on_path() -> bool:
    import shutil

    return all(shutil.which(tool) for tool in ("simple_switch_grpc", "p4c-bm2-ss"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="per offered rate")
    ap.add_argument("--packets", type=int, default=50000)
    ap.add_argument("--json", type=Path, default=BASIC)
    ap.add_argument("--only", choices=("inproc",), default=None,
                    help="inproc: the in-process figures only (no root, no veths)")
    ns = ap.parse_args(argv)
    inproc = in_process(ns.json, ns.packets)
    print(f"in-process (no I/O)        : {inproc / 1000:8.1f} kpps", flush=True)
    fabric = fabric_in_process(ns.packets // 5)
    if fabric is not None:
        print(f"fabric.p4 in-process       : {fabric / 1000:8.1f} kpps  (no entries: default "
              "actions only)", flush=True)
    paths = fabric_paths(ns.packets)
    if paths is not None:
        py, nat = paths
        print(f"fabric.p4 routed+sprayed in-process, python path : {py / 1000:8.1f} kpps\n"
              f"fabric.p4 routed+sprayed in-process, native path : {nat / 1000:8.1f} kpps\n"
              f"ratio native/python (same run, best of 3 each)   : {nat / py if py else 0:8.2f}",
              flush=True)
    if ns.only == "inproc":
        return 0
    if os.geteuid() != 0:
        print("over veths: skipped (needs root for namespaces)")
        return 0
    rates = [5000, 10000, 20000, 30000, 40000, 50000, 60000, 80000, 100000, 150000]
    sw_lossless, sw_peak = summarize("p4sim switch over veths",
                                     over_veth("switch", ns.json, ns.seconds, rates))
    fw_lossless, fw_peak = summarize("raw AF_PACKET forwarder",
                                     over_veth("forwarder", ns.json, ns.seconds, rates))
    print(f"ratio switch/forwarder (peak)    : {sw_peak / fw_peak if fw_peak else 0:6.2f}")
    print(f"ratio switch/forwarder (lossless): "
          f"{sw_lossless / fw_lossless if fw_lossless else 0:6.2f}")
    print(f"ratio veth peak/in-process       : {sw_peak / inproc if inproc else 0:6.2f}")
    peaks: dict[str, float] = {}
    lossless: dict[str, float] = {}
    paths = ["python", "native"] + (["bmv2"] if bmv2_on_path() else [])
    for path in paths:
        routed = fabric_routed(ns.seconds, FABRIC_RATES, ns.packets // 10, path)
        if routed is None:
            continue
        f_inproc, f_results = routed
        if path != "bmv2":
            print(f"fabric.p4 routed+sprayed in-process ({path}) : {f_inproc / 1000:6.1f} kpps "
                  "(leaf entries, RoCEv2 cells)")
        lossless[path], peaks[path] = summarize(f"fabric.p4 over veths ({path})", f_results)
        print(f"ratio fabric.p4/basic over veths (peak, {path}): "
              f"{peaks[path] / sw_peak if sw_peak else 0:6.2f}")
        print(f"ratio fabric.p4 over veths/forwarder (peak, {path}): "
              f"{peaks[path] / fw_peak if fw_peak else 0:6.2f}")
    if peaks.get("python"):
        print(f"ratio fabric.p4 over veths native/python (peak): "
              f"{peaks.get('native', 0) / peaks['python']:6.2f}")
    if lossless.get("bmv2"):
        # issue #23's goal: p4sim switch >= 5x real simple_switch_grpc's lossless rate
        print(f"ratio fabric.p4 over veths p4sim native/BMv2 (lossless): "
              f"{lossless.get('native', 0) / lossless['bmv2']:6.2f}  "
              f"(peak {peaks.get('native', 0) / peaks['bmv2']:.2f})")
    elif "bmv2" not in paths:
        print("fabric.p4 over veths on BMv2: skipped (simple_switch_grpc and p4c-bm2-ss not "
              "on PATH)")
    print(f"ratio switch peak/BMv2 ~{BMV2_REFERENCE_KPPS} kpps  : "
          f"{sw_peak / (BMV2_REFERENCE_KPPS * 1000):6.2f}  (reference figure from DESIGN.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
