"""Switch-port settings so a switch that reads its ports with libpcap (BMv2) can take a burst.

simple_switch opens each port with libpcap in immediate mode (pcap_create, promiscuous,
timeout 1 ms, pcap_set_immediate_mode), which on Linux is a TPACKET_V2 receive ring of fixed
slots in libpcap's default 2 MiB buffer. libpcap sizes a slot from the interface: MTU + 18
bytes, unless the interface has segmentation or receive offload on (TSO, GSO, GRO, LRO), in
which case a slot must hold a 64 KiB aggregate. A veth has TSO and GSO on by default, so
libpcap 1.10 makes 32 slots of 65,632 bytes: BMv2 then holds at most 32 frames a port between
two reads, and the kernel drops the rest of a burst without a trace in ``ip -s link`` (the
ring's tp_drops are visible only to the socket's owner). Measured through netlab's PTF ports:
100 frames sent back to back, 100 reached the switch's veth, 32-33 reached BMv2 (its debug
log) and came out. With the offloads off the slots are 1,600 bytes and the ring holds 1,310
frames; the same burst arrives whole.

Frames on these veths never exceed the MTU (hosts and PTF send single frames), so turning the
offloads off changes no bytes on the wire; it only lets capture rings be sized for real frames.
Both targets get the same setting, so p4sim and BMv2 see the same ports.
"""

from __future__ import annotations

import shutil
import subprocess

# The offloads libpcap checks (pcap-linux.c, iface_get_offload) before sizing ring slots for
# 64 KiB aggregates. LRO is fixed off on veths; asking for it off is harmless.
RING_SIZING_OFFLOADS = ("tso", "gso", "gro", "lro")


def offloads_argv(ifname: str, ns: str | None = None) -> list[str]:
    """The ethtool command that turns the ring-sizing offloads off on ``ifname``."""
    argv = ["ethtool", "-K", ifname]
    for feature in RING_SIZING_OFFLOADS:
        argv += [feature, "off"]
    return argv if ns is None else ["ip", "netns", "exec", ns, *argv]


def size_capture_ring_for_mtu(ifname: str, ns: str | None = None) -> str | None:
    """Turn off the offloads that make libpcap give ``ifname`` a ring of 32 slots.

    Returns None on success, else a one-line reason (ethtool missing or refused); the caller
    warns, since the port still works, only with a 32-frame ring for libpcap readers."""
    if shutil.which("ethtool") is None:
        return "ethtool not found (Debian package ethtool): libpcap readers get a 32-frame ring"
    proc = subprocess.run(offloads_argv(ifname, ns), capture_output=True, text=True)
    if proc.returncode != 0:
        return f"ethtool -K {ifname} failed: {(proc.stderr or proc.stdout).strip()[-200:]}"
    return None

