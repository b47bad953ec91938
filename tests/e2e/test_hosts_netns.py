"""End hosts in network namespaces, through a Python AF_PACKET forwarder written for these tests.

Real processes (``cellfabric host`` send/recv/collect via hosts.cli), real veths, real frames.
The forwarder (run from this file: ``python test_hosts_netns.py forwarder ...``) sits in its own
namespace between the sender side ("west", one or two ports) and the receiver ("east"). It can
spray cells over two paths of different delay (reordering), drop chosen PSNs once, queue cells
toward the east at a fixed rate (optionally paused until N cells wait, so congestion does not
depend on how fast a busy machine lets the sender run) and mark CE above a threshold, push an
INT-MD hop record onto INT cells, take one of its west ports down or silently drop what arrives
on it after N cells. Assertions are on counts, order,
content (CRC) and rate decreases, never on timings.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pytest

from hosts import wire
from hosts.cells import ip_checksum, message_bytes, message_crc
from hosts.layers import HopRecord, encode_hop

PY = sys.executable
HERE = Path(__file__).resolve()
ETH_P_IP = 0x0800
NODE_ID = 11


# ----------------------------------------------------------------------------------------------
# the forwarder process
def _ip_checksum(buf: bytearray, ip: int) -> None:
    struct.pack_into("!H", buf, ip + 10, 0)
    struct.pack_into("!H", buf, ip + 10, ip_checksum(buf[ip:ip + 20]))


def _roce_offsets(buf: bytearray) -> tuple[int, int] | None:
    """(IP offset, BTH offset) of a RoCEv2 frame, else None."""
    if len(buf) < 60 or buf[12:14] != b"\x08\x00" or buf[23] != 17:
        return None
    udp = 14 + (buf[14] & 0x0F) * 4
    if struct.unpack_from("!H", buf, udp + 2)[0] != wire.ROCE_UDP_PORT:
        return None
    bth = udp + 8
    if buf[15] >> 2 == wire.INT_DSCP:
        bth += 4 + buf[bth + 1] * 4
    return 14, bth


class Forwarder:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.west = [self._sock(i) for i in a.west]
        self.east = self._sock(a.east)
        self.drop = set(a.drop_psn)
        self.delay_line: list[tuple[float, int, bytes]] = []
        self.queue: deque[tuple[float, bytearray]] = deque()
        self.next_departure = 0.0
        self.tx_bytes = 0
        self.stats = {"data_cells": 0, "forwarded_east": 0, "forwarded_west": 0, "dropped": 0,
                      "tail_dropped": 0, "ce_marked": 0, "int_pushed": 0, "delayed": 0,
                      "max_queue": 0, "port_down": None, "icmp": 0}
        self._rr = 0
        self._seq = 0
        self.holding = a.hold > 0

    @staticmethod
    def _sock(ifname: str) -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        s.bind((ifname, ETH_P_IP))
        s.setblocking(False)
        return s

    def run(self, stop: list[bool]) -> None:
        socks = [*self.west, self.east]
        while not stop[0]:
            now = time.monotonic()
            self._service(now)
            timeout = 0.001
            if self.queue:
                timeout = max(0.0, min(timeout, self.next_departure - now))
            if self.delay_line:
                timeout = max(0.0, min(timeout, self.delay_line[0][0] - now))
            ready, _, _ = select.select(socks, [], [], timeout)
            for s in ready:
                try:
                    frame = bytearray(s.recv(9216))
                except OSError:
                    continue
                if len(frame) > 23 and frame[12:14] == b"\x08\x00" and frame[23] == 1:
                    self.stats["icmp"] += 1
                if s is self.east:
                    self._to_west(frame)
                else:
                    self._from_west(frame, time.monotonic(), self.west.index(s))

    def _to_west(self, frame: bytes) -> None:
        for _ in range(len(self.west)):
            s = self.west[self._rr % len(self.west)]
            self._rr += 1
            try:
                s.send(frame)
                self.stats["forwarded_west"] += 1
                return
            except OSError:
                continue  # that port is down: try the other

    def _from_west(self, buf: bytearray, now: float, port: int) -> None:
        offs = _roce_offsets(buf)
        if offs is not None and buf[offs[1]] in wire.DATA_OPCODES:
            self.stats["data_cells"] += 1
            psn = struct.unpack_from("!I", buf, offs[1] + 8)[0] & 0xFFFFFF
            if psn in self.drop:
                self.drop.discard(psn)
                self.stats["dropped"] += 1
                return
            if self.a.down_after and self.stats["data_cells"] == self.a.down_after:
                subprocess.run(["ip", "link", "set", self.a.down_iface, "down"], check=True)
                self.stats["port_down"] = self.a.down_iface
            if self.a.blackhole_after and self.stats["data_cells"] >= self.a.blackhole_after \
                    and port == len(self.west) - 1:
                self.stats["blackholed"] = self.stats.get("blackholed", 0) + 1
                return  # the link stays up but this port silently eats cells
            if self.a.spray_delay_ms and self.stats["data_cells"] % 2:
                self._seq += 1
                heapq.heappush(self.delay_line,
                               (now + self.a.spray_delay_ms / 1000, self._seq, bytes(buf)))
                self.stats["delayed"] += 1
                return
        self._enqueue(buf, now)

    def _enqueue(self, buf: bytearray, now: float) -> None:
        if not self.a.queue_pps:
            self._send_east(buf, now, now, 0)
            return
        if len(self.queue) >= self.a.queue_depth:
            self.stats["tail_dropped"] += 1
            return
        if len(self.queue) >= self.a.ce_threshold and buf[15] & 3:
            buf[15] |= 3  # ECN-capable and above the threshold: mark CE
            _ip_checksum(buf, 14)
            self.stats["ce_marked"] += 1
        if not self.queue and not self.holding:
            self.next_departure = max(self.next_departure, now)
        self.queue.append((now, buf))
        self.stats["max_queue"] = max(self.stats["max_queue"], len(self.queue))

    def _service(self, now: float) -> None:
        while self.delay_line and self.delay_line[0][0] <= now:
            _, _, frame = heapq.heappop(self.delay_line)
            self._enqueue(bytearray(frame), now)
        if self.holding:
            # The queue starts paused until it holds --hold cells (or --hold-max-s passed), so
            # it fills however fast the sender happens to run on a busy machine.
            if self.queue and (len(self.queue) >= self.a.hold
                               or now - self.queue[0][0] >= self.a.hold_max_s):
                self.holding = False
                self.next_departure = now
            else:
                return
        while self.queue and now >= self.next_departure:
            enq, buf = self.queue.popleft()
            self._send_east(buf, now, enq, len(self.queue))
            self.next_departure += 1.0 / self.a.queue_pps

    def _send_east(self, buf: bytearray, now: float, enq: float, qlen: int) -> None:
        if self.a.int_node_id and buf[15] >> 2 == wire.INT_DSCP:
            buf = self._push_int(buf, now, enq, qlen)
        self.tx_bytes = (self.tx_bytes + len(buf)) % (1 << 32)
        try:
            self.east.send(buf)
            self.stats["forwarded_east"] += 1
        except OSError:
            pass

    def _push_int(self, buf: bytearray, now: float, enq: float, qlen: int) -> bytearray:
        ip = 14
        shim = ip + (buf[ip] & 0x0F) * 4 + 8
        md = shim + 4
        hop_ml, remaining = buf[md + 2] & 0x1F, buf[md + 3]
        if remaining == 0:
            buf[md] |= 0x04  # E: max hop count exceeded
            return buf
        bitmap = struct.unpack_from("!H", buf, md + 4)[0]
        us = int(now * 1e6)
        hop = encode_hop(bitmap, HopRecord(
            node_id=self.a.int_node_id, ingress_port=1, egress_port=2,
            hop_latency=int((now - enq) * 1e6), queue_id=0, queue_occupancy=qlen,
            ingress_ts=int(enq * 1e6), egress_ts=us, tx_bytes=self.tx_bytes))
        assert len(hop) == hop_ml * 4
        out = buf[:md + 12] + hop + buf[md + 12:]
        out[shim + 1] += hop_ml
        out[md + 3] = remaining - 1
        struct.pack_into("!H", out, ip + 2, struct.unpack_from("!H", out, ip + 2)[0] + len(hop))
        udp = shim - 8
        struct.pack_into("!H", out, udp + 4, struct.unpack_from("!H", out, udp + 4)[0] + len(hop))
        _ip_checksum(out, ip)
        self.stats["int_pushed"] += 1
        return out


def forwarder_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="hosts test forwarder")
    ap.add_argument("--west", action="append", required=True)
    ap.add_argument("--east", required=True)
    ap.add_argument("--spray-delay-ms", type=float, default=0.0)
    ap.add_argument("--drop-psn", type=int, action="append", default=[])
    ap.add_argument("--queue-pps", type=float, default=0.0)
    ap.add_argument("--queue-depth", type=int, default=1000)
    ap.add_argument("--ce-threshold", type=int, default=1 << 30)
    ap.add_argument("--int-node-id", type=int, default=0)
    ap.add_argument("--hold", type=int, default=0, help="queue paused until it holds N cells")
    ap.add_argument("--hold-max-s", type=float, default=float("inf"))
    ap.add_argument("--down-after", type=int, default=0)
    ap.add_argument("--down-iface", default="")
    ap.add_argument("--blackhole-after", type=int, default=0,
                    help="after N data cells, drop everything arriving on the last west port")
    ap.add_argument("--stats", type=Path, required=True)
    a = ap.parse_args(argv)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    fwd = Forwarder(a)
    try:
        fwd.run(stop)
    finally:
        a.stats.write_text(json.dumps(fwd.stats))
    return 0


# ----------------------------------------------------------------------------------------------
# the tests
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and veths"),
]


def _mac(lab, ns: str, ifname: str) -> str:
    return lab.run(ns, ["cat", f"/sys/class/net/{ifname}/address"]).stdout.strip()


def _run_scenario(tmp: Path, *, dual: bool = False, senders: int = 1,
                  fwd_args: tuple[str, ...] = (), send_args: tuple[str, ...] = (),
                  count: int = 4, size: int = 20000, collector: bool = False,
                  recv_args: tuple[str, ...] = (), ip_stack: bool = False) -> dict:
    """Sender namespace(s) -> forwarder namespace -> receiver namespace; returns the metrics
    (``send`` is the first sender's; ``sends`` all of them). ``ip_stack``: the first sender's
    port holds its address, with the receiver's as a permanent neighbour, so that host's
    kernel sees the ACKs addressed to it and could answer them (as a fabric host's does)."""
    from netlab.hosts import NetLab, wait_until

    tmp.mkdir(parents=True, exist_ok=True)
    with NetLab(prefix="hst") as lab:
        f_ns, r_ns = lab.netns("f"), lab.netns("r")
        hosts: list[tuple[str, list[str], list[str]]] = []  # (ns, its ports, forwarder ports)
        for i in range(senders):
            s_ns = lab.netns(f"s{i}")
            ports = [lab.veth(f"s{i}p{k}", f"f{i}p{k}", ns_a=s_ns, ns_b=f_ns)
                     for k in range(2 if dual else 1)]
            hosts.append((s_ns, [a for a, _ in ports], [b for _, b in ports]))
        west_f = [b for _, _, fports in hosts for b in fports]
        if ip_stack:
            s_ns, ports, fports = hosts[0]
            lab.run(s_ns, ["ip", "addr", "add", "10.0.0.1/24", "dev", ports[0]])
            lab.run(s_ns, ["ip", "neigh", "add", "10.0.0.100", "lladdr",
                           _mac(lab, f_ns, fports[0]), "dev", ports[0], "nud", "permanent"])
        f_east, r0 = lab.veth("fe", "r0", ns_a=f_ns, ns_b=r_ns)
        fwd_argv = [PY, str(HERE), "forwarder", "--east", f_east,
                    "--stats", str(tmp / "fwd.json")]
        for w in west_f:
            fwd_argv += ["--west", w]
        fwd_argv += [a.replace("{f1}", west_f[-1]) for a in fwd_args]
        fwd = lab.popen(f_ns, fwd_argv, name="forwarder", log=tmp / "fwd.log")
        coll = None
        if collector:
            coll = lab.popen(r_ns, [PY, "-m", "hosts.cli", "collect", "--bind", "127.0.0.1",
                                    "--port", "32766", "--records", str(tmp / "int.jsonl"),
                                    "--metrics", str(tmp / "collect.json")],
                             name="collector", log=tmp / "collect.log")
            recv_args = (*recv_args, "--collector", "127.0.0.1:32766", "--node-id", "99")
        recv = lab.popen(r_ns, [PY, "-m", "hosts.cli", "recv", "--iface", r0,
                                "--expect-messages", str(count * senders), "--linger", "1.0",
                                "--duration", "60", "--metrics", str(tmp / "recv.json"),
                                *recv_args], name="receiver", log=tmp / "recv.log")
        time.sleep(1.0)  # let the processes open their sockets
        procs = []
        for i, (s_ns, ports, fports) in enumerate(hosts):
            argv = [PY, "-m", "hosts.cli", "send", "--src-ip", f"10.0.0.{i + 1}",
                    "--dst-ip", "10.0.0.100", "--qp", str(i + 1), "--msg-size", str(size),
                    "--count", str(count), "--duration", "40", "--drain", "10",
                    "--metrics", str(tmp / f"send{i}.json"), *send_args]
            for port in ports:
                argv += ["--iface", port, "--dst-mac", _mac(lab, f_ns, fports[0])]
            procs.append(lab.popen(s_ns, argv, name=f"sender{i}", log=tmp / f"send{i}.log"))
        for proc in procs:
            assert wait_until(lambda p=proc: not p.alive(), timeout=90), "sender did not finish"
            assert proc.popen.returncode == 0, (tmp / f"send{procs.index(proc)}.log").read_text()
        wait_until(lambda: not recv.alive(), timeout=15)
        for proc in (recv, fwd, coll):
            if proc is not None:
                proc.stop()
        out = {name: json.loads((tmp / f"{name}.json").read_text()) for name in ("recv", "fwd")}
        out["sends"] = [json.loads((tmp / f"send{i}.json").read_text()) for i in range(senders)]
        out["send"] = out["sends"][0]
        if collector:
            out["collect"] = json.loads((tmp / "collect.json").read_text())
        return out


def _check_delivery(out: dict, count: int, size: int) -> dict:
    flows = out["recv"]["flows"]
    assert len(flows) == 1
    flow = flows[0]
    crcs = [m["crc32"] for m in flow["message_log"]]
    assert crcs == [message_crc(message_bytes(i, size)) for i in range(count)]
    assert [m["index"] for m in flow["message_log"]] == list(range(count))
    assert flow["malformed_messages"] == 0
    assert out["send"]["messages_completed"] == count
    return flow


def test_sprayed_paths_with_drops_deliver_every_message_in_order(tmp_path: Path) -> None:
    drops = [3, 40, 41, 77]
    out = _run_scenario(tmp_path, fwd_args=("--spray-delay-ms", "3",
                                            *[x for d in drops for x in ("--drop-psn", str(d))]),
                        send_args=("--rate", "3000pps"), count=4, size=30000)
    flow = _check_delivery(out, 4, 30000)
    assert out["fwd"]["dropped"] == len(drops) and out["fwd"]["delayed"] > 0
    reorder = flow["reorder"]
    assert reorder["out_of_order"] > 0 and reorder["max_depth"] > 1
    cells = out["send"]["cells"]
    assert cells["retx_sack"] + cells["retx_nak"] + cells["retx_timeout"] >= len(drops)


def test_dcqcn_cuts_rate_on_cnps_from_a_congested_port(tmp_path: Path) -> None:
    out = _run_scenario(
        tmp_path,
        fwd_args=("--queue-pps", "1500", "--ce-threshold", "4", "--queue-depth", "400",
                  "--hold", "12"),
        send_args=("--rate", "4000pps", "--cc", "dcqcn", "--cc-param", "rai_bps=200000",
                   "--cc-param", "rhai_bps=1000000", "--cc-param", "byte_counter=200000",
                   "--cc-param", "increase_timer_s=0.005"),
        count=3, size=60000)
    _check_delivery(out, 3, 60000)
    line = 4000 * (14 + 20 + 8 + 12 + 1024 + 4) * 8
    assert out["fwd"]["ce_marked"] > 0
    assert out["recv"]["flows"][0]["cnps_sent"] > 0 and out["send"]["cnps_received"] > 0
    rc = out["send"]["rate_control"]
    assert rc["cc"] == "dcqcn" and rc["cnps"] > 0
    assert rc["rate_bps_min"] < 0.6 * line  # the rate was cut


def test_hpcc_cuts_window_from_int_and_collector_summarizes(tmp_path: Path) -> None:
    out = _run_scenario(
        tmp_path,
        fwd_args=("--queue-pps", "1500", "--queue-depth", "400", "--hold", "12",
                  "--int-node-id", str(NODE_ID)),
        send_args=("--rate", "4000pps", "--cc", "hpcc", "--int-source",
                   "--link-rate", "1500pps", "--link-pps", "1500",
                   "--cc-param", "base_rtt_s=0.004"),
        count=3, size=60000, collector=True)
    _check_delivery(out, 3, 60000)
    assert out["fwd"]["int_pushed"] > 0
    rc = out["send"]["rate_control"]
    line = 4000 * (14 + 20 + 8 + 16 + 12 + 1024 + 4) * 8
    assert rc["cc"] == "hpcc" and rc["acks_with_int"] > 0
    assert rc["rate_bps_min"] < 0.5 * line  # INT showed the 1500 pps bottleneck
    coll = out["collect"]
    assert coll["reports"] > 0 and coll["malformed_reports"] == 0
    link = coll["links"][f"{NODE_ID}:2"]
    assert link["records"] > 0 and link["queue_occupancy_max"] > 0
    assert link["tx_bps"] > 0


def test_dual_port_failover_loses_no_message(tmp_path: Path) -> None:
    out = _run_scenario(tmp_path, dual=True,
                        fwd_args=("--down-after", "60", "--down-iface", "{f1}"),
                        send_args=("--rate", "3000pps"), count=4, size=40000)
    _check_delivery(out, 4, 40000)
    assert out["fwd"]["port_down"]
    fails = out["send"]["failovers"]
    assert len(fails) == 1 and fails[0]["reason"] in ("link down", "no ACK progress")
    assert "recovered_s" in fails[0]
    ports = out["send"]["ports"]
    assert ports[0]["up"] and not ports[1]["up"]
    assert ports[0]["sent"] > 0 and ports[1]["sent"] > 0  # sprayed across both before


def test_port_that_stops_acking_is_abandoned_without_loss(tmp_path: Path) -> None:
    out = _run_scenario(tmp_path, dual=True, fwd_args=("--blackhole-after", "50"),
                        send_args=("--rate", "3000pps", "--port-timeout", "0.1"),
                        count=6, size=100000)
    _check_delivery(out, 6, 100000)
    assert out["fwd"].get("blackholed", 0) > 0
    fails = out["send"]["failovers"]
    # (retried after --port-retry; on a slow machine it may fail again, for the same reason)
    assert fails and {f["reason"] for f in fails} == {"no ACK progress"}
    assert fails[0]["port"] == out["send"]["ports"][1]["iface"]
    assert fails[0]["cells_moved"] > 0 and "recovered_s" in fails[0]


def test_credit_grants_share_one_downlink_between_two_senders(tmp_path: Path) -> None:
    out = _run_scenario(tmp_path, senders=2, fwd_args=("--queue-pps", "1000",
                                                       "--queue-depth", "2000"),
                        send_args=("--rate", "4000pps", "--cc", "credit"),
                        recv_args=("--credit-rate", "900"), count=2, size=60000)
    flows = sorted(out["recv"]["flows"], key=lambda f: f["qpn"])
    assert [f["qpn"] for f in flows] == [1, 2] and [f["messages"] for f in flows] == [2, 2]
    for flow in flows:
        assert [m["crc32"] for m in flow["message_log"]] == \
            [message_crc(message_bytes(i, 60000)) for i in range(2)]
        assert flow["grants"] > 0
    # two senders at 4000 cells/s each into a 1000 cells/s port: credits keep its queue short
    assert out["fwd"]["max_queue"] <= 2 * 16 + 8 and out["fwd"]["tail_dropped"] == 0


def test_credit_mode_keeps_the_bottleneck_queue_short(tmp_path: Path) -> None:
    fwd = ("--queue-pps", "500", "--queue-depth", "2000")
    free = _run_scenario(tmp_path / "none", fwd_args=fwd, send_args=("--rate", "4000pps"),
                         count=2, size=80000)
    granted = _run_scenario(tmp_path / "credit", fwd_args=fwd,
                            send_args=("--rate", "4000pps", "--cc", "credit"),
                            recv_args=("--credit-rate", "450"), count=2, size=80000)
    _check_delivery(granted, 2, 80000)
    assert granted["recv"]["flows"][0]["grants"] > 0
    # unscheduled cells (16) plus a small grant burst, against a queue that grows without credit
    assert granted["fwd"]["max_queue"] <= 24 < free["fwd"]["max_queue"]


def test_host_kernel_does_not_answer_roce_with_icmp(tmp_path: Path) -> None:
    # The sender's own IP stack receives every ACK addressed to it (beside the AF_PACKET tap).
    # Without a socket on UDP 4791 it would answer each with an ICMP port unreachable (rate
    # limited, so a few per second), traffic that then crosses the fabric: on the k=4
    # fat-tree it was a third of all non-data packets on the core links.
    out = _run_scenario(tmp_path, ip_stack=True, send_args=("--rate", "2000pps"), count=4,
                        size=40000)
    _check_delivery(out, 4, 40000)
    assert out["fwd"]["forwarded_west"] > 0  # the ACKs did reach the sender
    assert out["fwd"]["icmp"] == 0, out["fwd"]


def test_sigterm_still_writes_metrics(tmp_path: Path) -> None:
    from netlab.hosts import NetLab

    with NetLab(prefix="hst") as lab:
        ns = lab.netns("t")
        metrics = tmp_path / "recv.json"
        proc = lab.popen(ns, [PY, "-m", "hosts.cli", "recv", "--iface", "lo",
                              "--metrics", str(metrics)], name="receiver",
                         log=tmp_path / "recv.log")
        time.sleep(1.5)  # past start-up, inside the receive loop
        assert proc.alive()
        assert proc.stop() == 0
    data = json.loads(metrics.read_text())
    assert data["role"] == "recv" and data["messages_total"] == 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["forwarder"]:
        sys.exit(forwarder_main(sys.argv[2:]))
    sys.exit(f"usage: {sys.argv[0]} forwarder ...")
