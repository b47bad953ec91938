"""A burst through the PTF runner's ports arrives whole at a libpcap reader opened the way BMv2
opens its ports (netlab/capture.py): no BMv2 needed, only libpcap.

The reader opens the switch end with pcap_create, promiscuous, 1 ms timeout and immediate mode
(BMv2's bmi_interface), then does not read while the burst is sent (a switch busy elsewhere),
and drains afterwards: what it gets is what its ring held.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

BURST = 300  # frames back to back; more than 32 (the ring with offloads on), under 1310
FRAME = 1082  # a data cell's frame (1024 B payload)
MARK = b"\x02\xcf\xbb\x00\x00\x02"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and veths need root")
LIBPCAP = ctypes.util.find_library("pcap")


class _Stat(ctypes.Structure):
    _fields_ = [("ps_recv", ctypes.c_uint), ("ps_drop", ctypes.c_uint),
                ("ps_ifdrop", ctypes.c_uint)]


def _open_like_bmv2(lib: ctypes.CDLL, ifname: str) -> ctypes.c_void_p:
    errbuf = ctypes.create_string_buffer(256)
    lib.pcap_create.restype = ctypes.c_void_p
    handle = ctypes.c_void_p(lib.pcap_create(ifname.encode(), errbuf))
    assert handle.value, errbuf.value
    for call in (lib.pcap_set_promisc, lib.pcap_set_timeout, lib.pcap_set_immediate_mode):
        assert call(handle, 1) == 0
    assert lib.pcap_activate(handle) == 0, f"pcap_activate {ifname} failed"
    return handle


def burst_into_pcap(rx_if: str, tx_if: str, count: int) -> dict[str, int]:
    """In the namespace of both interfaces: ``count`` frames sent on ``tx_if``; how many a
    libpcap reader of ``rx_if`` that only reads afterwards gets, and libpcap's own counts."""
    assert LIBPCAP, "libpcap not found: `make setup` installs Debian's libpcap0.8"
    lib = ctypes.CDLL(LIBPCAP)
    handle = _open_like_bmv2(lib, rx_if)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((tx_if, 0))
    for i in range(count):
        tx.send(MARK + b"\x02\xcf\xbb\x00\x00\x01" + struct.pack("!HI", 0x88B5, i)
                + bytes(FRAME - 18))
    time.sleep(0.3)  # every frame has crossed the wire into the ring (or been dropped)
    errbuf = ctypes.create_string_buffer(256)
    lib.pcap_setnonblock(handle, 1, errbuf)
    header, data = ctypes.c_void_p(), ctypes.POINTER(ctypes.c_ubyte)()
    seen: set[int] = set()
    while lib.pcap_next_ex(handle, ctypes.byref(header), ctypes.byref(data)) == 1:
        frame = bytes(data[:18])
        if frame[:6] == MARK:
            seen.add(struct.unpack("!I", frame[14:18])[0])
    stat = _Stat()
    lib.pcap_stats(handle, ctypes.byref(stat))
    lib.pcap_close(handle)
    return {"sent": count, "received": len(seen), "pcap_drops": stat.ps_drop}


def _run_in_ns(ns: str, rx_if: str, tx_if: str, pre: list[str] | None = None) -> dict:
    if pre:
        subprocess.run(["ip", "netns", "exec", ns, *pre], check=True, capture_output=True)
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, rx_if, tx_if,
                          str(BURST)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@needs_root
def test_burst_arrives_whole_at_a_bmv2_style_pcap_reader_of_a_ptf_port() -> None:
    from netlab.hosts import NetLab
    from netlab.ptf_runner import make_ports

    with NetLab(prefix="cfc") as lab:
        ns = lab.netns("ns")
        switch_ports, ptf_ports, _ = make_ports(lab, ns, 1)
        got = _run_in_ns(ns, switch_ports[0], ptf_ports[0])
    assert got == {"sent": BURST, "received": BURST, "pcap_drops": 0}, got


@needs_root
def test_with_offloads_on_the_ring_cuts_the_burst_short() -> None:
    """The control: the same burst with TSO/GSO back on (a plain veth) loses frames in the
    ring, so the test above would catch the setting going missing."""
    assert LIBPCAP, "libpcap not found: `make setup` installs Debian's libpcap0.8"
    lib = ctypes.CDLL(LIBPCAP)
    lib.pcap_lib_version.restype = ctypes.c_char_p
    if b"1.10" not in lib.pcap_lib_version():
        pytest.skip(f"ring sizing measured on libpcap 1.10, this is {lib.pcap_lib_version()}")
    from netlab.hosts import NetLab
    from netlab.ptf_runner import make_ports

    with NetLab(prefix="cfc") as lab:
        ns = lab.netns("ns")
        switch_ports, ptf_ports, _ = make_ports(lab, ns, 1)
        sw = switch_ports[0]
        got = _run_in_ns(ns, sw, ptf_ports[0], pre=["ethtool", "-K", sw, "tso", "on", "gso", "on"])
    assert got["received"] < BURST // 2, got
    assert got["pcap_drops"] == BURST - got["received"], got


if __name__ == "__main__":
    print(json.dumps(burst_into_pcap(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
