"""`p4sim switch` as a separate process on real veth pairs in a namespace, driven with Scapy
frames: forwarding, its own transmitted frames not re-read, frames beyond a jumbo processed as
BMv2 does,
runtime queue settings through `p4sim ctl`, pcap capture, clean exit on SIGTERM."""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from netlab.hosts import NetLab, wait_until

pytestmark = pytest.mark.netns

FIXTURES = Path(__file__).parent / "bmv2json"
CLONE_NEWNET = 0x40000000
PY = sys.executable


def ns_socket(ns: str, ifname: str) -> socket.socket:
    """An AF_PACKET socket on ``ifname`` inside namespace ``ns`` (opened from a helper thread
    that joins the namespace, so this process stays where it is)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    box: dict[str, object] = {}

    def work() -> None:
        try:
            fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns failed")
            finally:
                os.close(fd)
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            s.bind((ifname, 3))
            box["s"] = s
        except OSError as e:
            box["e"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]  # type: ignore[misc]
    return box["s"]  # type: ignore[return-value]


def recv_ip(s: socket.socket, timeout: float = 2.0) -> list[bytes]:
    """Frames received until ``timeout`` passes without one (IPv4 only, ignoring strays)."""
    out = []
    s.settimeout(timeout)
    try:
        while True:
            frame, addr = s.recvfrom(65536)
            if addr[2] != 4 and frame[12:14] == b"\x08\x00":
                out.append(frame)
            s.settimeout(0.3)
    except TimeoutError:
        pass
    return out


def ctl(lab: NetLab, ns: str, *args: str) -> str:
    return lab.run(ns, [PY, "-m", "p4sim.cli", "ctl", "--thrift-port", "9090", *args]).stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")
def test_switch_process_forwards_real_frames(tmp_path: Path) -> None:
    with NetLab(prefix="sw") as lab:
        ns = lab.netns("n")
        pairs = [lab.veth(f"s{i}", f"h{i}", ns, ns, mtu=65000) for i in range(3)]
        log = tmp_path / "switch.log"
        pcap = tmp_path / "pcap"
        argv = [PY, "-m", "p4sim.cli", "switch", "--device-id", "3"]
        for i, (sw, _) in enumerate(pairs):
            argv += ["-i", f"{i}@{sw}"]
        argv += ["--pcap", str(pcap), "--thrift-port", "9090",
                 str(FIXTURES / "basic_const.json")]
        proc = lab.popen(ns, argv, log=log)
        assert wait_until(lambda: "p4sim switch: device 3" in log.read_text(), 20), \
            log.read_text()
        h0, h1, h2 = (ns_socket(ns, h) for _, h in pairs)
        try:
            def pkt(dst: str) -> bytes:
                return bytes(Ether(src="02:00:00:00:00:09", dst="02:00:00:00:00:01")
                             / IP(src="10.9.0.1", dst=dst, ttl=9) / UDP() / (b"z" * 30))

            for i in range(5):
                h0.send(pkt(f"10.0.1.{i + 1}"))
            h0.send(pkt("10.0.2.1"))
            got1, got2 = recv_ip(h1), recv_ip(h2, timeout=0.5)
            assert len(got1) == 5 and len(got2) == 1
            f1 = Ether(got1[0])
            assert f1.dst == "00:00:00:00:01:11" and f1[IP].ttl == 8
            ref = f1[IP].copy()
            ref.chksum = None
            assert IP(bytes(ref)).chksum == f1[IP].chksum
            assert Ether(got2[0]).dst == "00:00:00:00:02:22"

            # Beyond a 9234-byte jumbo frame: BMv2 reads its ports with pcap's default snap
            # length (256 KiB) and processes such frames; so does p4sim, byte for byte.
            big = [pkt("10.0.1.1") + b"\x00" * 9400, pkt("10.0.1.1") + bytes(range(256)) * 234,
                   pkt("10.0.1.9")]
            for frame in big:
                h0.send(frame)
            got = recv_ip(h1)
            assert [len(g) for g in got] == [len(b) for b in big]
            assert all(g[34:] == b[34:] for g, b in zip(got, big))  # from the UDP header on
            stats = json.loads(ctl(lab, ns, "stats"))
            assert stats["ports"]["0"]["rx_packets"] == 9
            assert stats["ports"]["0"]["rx_dropped_malformed"] == 0
            # Frames the switch sent on port 1 are not read back as arrivals.
            assert stats["ports"]["1"]["tx_packets"] == 8
            assert stats["ports"]["1"]["rx_packets"] == 0

            # Runtime queue settings: 10 pps, depth 5 on port 1 -> a burst of 20 mostly drops.
            ctl(lab, ns, "set_queue_rate", "10", "1")
            ctl(lab, ns, "set_queue_depth", "5", "1")
            for _ in range(20):
                h0.send(pkt("10.0.1.2"))
            got = recv_ip(h1, timeout=1.0)
            stats = json.loads(ctl(lab, ns, "stats"))
            assert stats["ports"]["1"]["queue_drops"] == 20 - len(got)
            # One leaves at once and five queue; the burst takes far less than the 100 ms
            # between departures, so at most a couple more find room.
            assert 6 <= len(got) <= 9
            assert stats["ports"]["1"]["rate_pps"] == 10
            bad = lab.run(ns, [PY, "-m", "p4sim.cli", "ctl", "--thrift-port", "9090",
                               "set_queue_rate", "fast"], check=False)
            assert bad.returncode == 1 and "expected integers" in bad.stderr
        finally:
            for s in (h0, h1, h2):
                s.close()
        assert proc.stop() == 0  # SIGTERM: clean shutdown
        time.sleep(0.1)
        frames_in = rdpcap(str(pcap / f"{pairs[0][0]}_in.pcap"))
        assert sum(1 for fr in frames_in if IP in fr and fr[IP].dst == "10.0.2.1") == 1
        frames_out = rdpcap(str(pcap / f"{pairs[2][0]}_out.pcap"))
        assert [fr[IP].dst for fr in frames_out if IP in fr] == ["10.0.2.1"]


def test_switch_cli_errors_are_one_line(tmp_path: Path) -> None:
    from p4sim.switch.main import main

    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert main(["-i", "x@y", "--no-p4"]) == 2
    assert main([str(bad), "--thrift-port", "0"]) == 1
    assert main([str(tmp_path / "missing.json")]) == 1


def test_simple_switch_grpc_command_line_forms() -> None:
    from p4sim.switch.main import parse_args

    ns = parse_args(["--device-id", "2", "-i", "0@a", "-i", "1@b", "--log-level", "info",
                     "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:50001",
                     "--cpu-port", "64", "--priority-queues", "4"])
    assert (ns.device_id, ns.interface, ns.no_p4) == (2, ["0@a", "1@b"], True)
    assert (ns.grpc_server_addr, ns.cpu_port, ns.priority_queues) == ("127.0.0.1:50001", 64, 4)
    ns = parse_args(["-i", "3@x", "prog.json", "--pcap", "--thrift-port", "9999"])
    assert (ns.json, ns.pcap, ns.thrift_port) == ("prog.json", ".", 9999)


def test_ctl_drives_admin_channel(capsys: pytest.CaptureFixture[str]) -> None:
    from p4sim.switch.admin import AdminServer
    from p4sim.switch.ctl import main as ctl_main
    from p4sim.switch.dataplane import DataPlane

    dp = DataPlane()
    admin = AdminServer(dp, 0)
    admin.start()
    try:
        port = str(admin.port)
        assert ctl_main(["--thrift-port", port, "set_queue_rate", "250", "2"]) == 0
        assert ctl_main(["--thrift-port", port, "set_queue_depth", "7"]) == 0
        assert ctl_main(["--thrift-port", port, "port_down", "3"]) == 0
        assert dp.tm.rate(2) == 250 and dp.tm.rate(1) == 0
        assert dp.tm.queue(5).depth == 7
        assert dp.port_up(3) is False and dp.port_up(4) is True
        assert ctl_main(["--thrift-port", port, "port_up", "3"]) == 0
        assert dp.port_up(3) is True
        capsys.readouterr()
        assert ctl_main(["--thrift-port", port, "stats"]) == 0
        assert json.loads(capsys.readouterr().out)["pipeline_drops"] == 0
        assert ctl_main(["--thrift-port", port, "set_queue_rate"]) == 1
        assert "usage: set_queue_rate PPS" in capsys.readouterr().err
        assert ctl_main(["--thrift-port", port, "frobnicate"]) == 1
        assert "unknown command 'frobnicate'" in capsys.readouterr().err
    finally:
        admin.stop()
    assert ctl_main(["--thrift-port", port, "stats"]) == 1
    assert "cannot reach switch" in capsys.readouterr().err
