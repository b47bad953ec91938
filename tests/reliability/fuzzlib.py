"""Frames for the fuzzer and the fabric.p4 leaf state they run against.

Valid frames are RoCEv2 data cells of the configured length to a routed prefix, each with its
own PSN (and payload) so every one can be told apart at the egress. Malformed frames come in
kinds, each marked where a mark survives (a PSN range) so one coming out can be recognised:
random garbage, every truncation of a cell, jumbo frames, bad IPv4 checksums.
"""

from __future__ import annotations

import ctypes
import os
import random
import socket
import struct
import threading
import time

from controlplane.entities import (
    ActionProfileGroup,
    ActionProfileMember,
    GroupMember,
    TableEntry,
)

ROUTER_MAC = bytes.fromhex("02fa00000003")
HOST_MAC = bytes.fromhex("02cf00000001")
NEXT_HOP_MAC = "02:fa:00:00:00:01"
CELL_PAYLOAD = 1024
VALID_PSN = 0x000000  # valid cells: PSN = sequence number
TRUNC_PSN = 0x800000  # truncated cells (their headers may survive)
BADSUM_PSN = 0x700000  # cells with a bad IPv4 checksum (must never come out)
JUMBO_PSN = 0x600000  # jumbo RoCEv2 frames of another length (flow-hashed, not sprayed)


def _csum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def cell(psn: int, payload_len: int = CELL_PAYLOAD, dst: bytes = bytes([10, 0, 2, 1]),
         bad_checksum: bool = False) -> bytes:
    """Ethernet / IPv4 / UDP 4791 / BTH (RC SEND ONLY) / payload / ICRC placeholder."""
    payload = (psn.to_bytes(4, "big") * (payload_len // 4 + 1))[:payload_len]
    bth = bytes([0x04, 0, 0xFF, 0xFF]) + (1).to_bytes(4, "big") + psn.to_bytes(4, "big")
    udp_len = 8 + len(bth) + payload_len + 4
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0x02, 20 + udp_len, psn & 0xFFFF, 0, 64,
                               17, 0, bytes([10, 0, 1, 1]), dst))
    ip[10:12] = _csum(bytes(ip)).to_bytes(2, "big")
    if bad_checksum:
        ip[10:12] = (int.from_bytes(ip[10:12], "big") ^ 0x5A5A).to_bytes(2, "big")
    udp = struct.pack("!HHHH", 50000 + psn % 1000, 4791, udp_len, 0)
    return ROUTER_MAC + HOST_MAC + b"\x08\x00" + bytes(ip) + udp + bth + payload + bytes(4)


def psn_of(frame: bytes) -> int | None:
    """The BTH PSN of an Ethernet/IPv4/UDP-4791 frame (no INT), else None."""
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 17 or \
            frame[36:38] != b"\x12\xb7":
        return None
    return int.from_bytes(frame[51:54], "big")


def garbage(rng: random.Random, count: int) -> list[bytes]:
    """Random bytes; half of them start like a frame to this switch (so they reach deeper
    into the parser than a MAC miss)."""
    out = []
    for i in range(count):
        body = rng.randbytes(rng.randrange(1, 1500))
        if i % 2:
            ethertype = rng.choice([b"\x08\x00", b"\x08\x06", b"\x86\xdd", b"\x88\x08"])
            out.append(ROUTER_MAC + HOST_MAC + ethertype + body)
        else:
            out.append(rng.randbytes(14) + body)
    return out


def truncations() -> list[bytes]:
    """Every prefix of a cell that a packet socket can send (an Ethernet header at least)."""
    whole = cell(TRUNC_PSN)
    return [whole[:n] for n in range(14, len(whole))]


def jumbos(count: int) -> list[bytes]:
    return [cell(JUMBO_PSN + i, payload_len=8900) for i in range(count)]


def bad_checksums(count: int) -> list[bytes]:
    return [cell(BADSUM_PSN + i, bad_checksum=True) for i in range(count)]


def leaf_entities(out_port: int) -> list:
    """A leaf with one sprayed route (10.0.2.0/24) out of ``out_port``: every table a cell
    meets, one group member so the valid cells leave in order on one port."""
    ing, egr = "MyIngress", "MyEgress"
    return [
        TableEntry(f"{ing}.forwarding.my_station", {"hdr.ethernet.dst_addr": ROUTER_MAC.hex(":")},
                   "NoAction"),
        TableEntry(f"{ing}.forwarding.ipv4_lpm", {"hdr.ipv4.dst_addr": "10.0.2.0/24"},
                   f"{ing}.forwarding.set_next_group", {"group_id": 1}),
        TableEntry(f"{ing}.spray.group_mode", {"meta.group_id": 1},
                   f"{ing}.spray.set_group_mode", {"mode": 1, "salt": 0x10000}),
        TableEntry(f"{ing}.spray.cell_length", {"meta.cell_payload_len": CELL_PAYLOAD},
                   f"{ing}.spray.cell_length_ok"),
        ActionProfileMember(f"{ing}.spray.group_selector", 1, f"{ing}.spray.set_egress_port",
                            {"port": out_port}),
        ActionProfileGroup(f"{ing}.spray.group_selector", 1, [GroupMember(1, 1, out_port)]),
        TableEntry(f"{ing}.spray.group_select", {"meta.group_id": 1}, group=1),
        TableEntry(f"{egr}.rewrite.egress_rewrite", {"standard_metadata.egress_port": out_port},
                   f"{egr}.rewrite.set_port_macs",
                   {"src_mac": ROUTER_MAC.hex(":"), "dst_mac": NEXT_HOP_MAC}),
        TableEntry(f"{egr}.ecn.ecn_profile", {"standard_metadata.egress_port": out_port},
                   f"{egr}.ecn.set_ecn_profile", {"kmin": 50, "kmax": 200, "step": 873}),
    ]


# ---- sockets inside a namespace ----------------------------------------------------------------


def ns_socket(ns: str, ifname: str) -> socket.socket:
    """An AF_PACKET socket on ``ifname`` inside namespace ``ns`` (opened by a thread that
    entered the namespace, so this process stays where it is)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    box: dict[str, socket.socket | BaseException] = {}

    def work() -> None:
        try:
            fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
            try:
                if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), f"setns {ns}")
            finally:
                os.close(fd)
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            s.bind((ifname, 3))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            box["s"] = s
        except BaseException as err:
            box["err"] = err

    t = threading.Thread(target=work)
    t.start()
    t.join()
    if "err" in box:
        raise box["err"]  # type: ignore[misc]
    return box["s"]  # type: ignore[return-value]


class Collector:
    """Every frame received on a socket, on a thread, until ``stop()``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames: list[bytes] = []
        self._stop = threading.Event()
        sock.settimeout(0.1)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr[2] != socket.PACKET_OUTGOING:
                self.frames.append(data)

    def wait_quiet(self, quiet: float = 1.0, timeout: float = 30.0) -> None:
        """Until nothing has arrived for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        seen, since = len(self.frames), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if len(self.frames) != seen:
                seen, since = len(self.frames), time.monotonic()
            elif time.monotonic() - since >= quiet:
                return

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=2)


def paced(sock: socket.socket, frames: list[bytes], pps: int) -> None:
    """Send ``frames`` at ``pps`` (the switch shares two cores with everything else)."""
    t0 = time.perf_counter()
    for i, f in enumerate(frames):
        sock.send(f)
        delay = t0 + (i + 1) / pps - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")
