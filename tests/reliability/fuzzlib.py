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


# ---- forged frames from a tenant's host ---------------------------------------------------------
#
# A leaf with host a1 (tenant A) on port 0, a2 (tenant A) on port 1 and b1 (tenant B) on port 2,
# every port bound to its host as the control plane binds it. Host a1 sends frames built from a
# legal template (a cell, an ACK/NAK, a CNP, a host INT source's cell, VXLAN, plain UDP; to a2 or
# to b1) with random forgeries of the fields p4src/README.md's tenant isolation checks. The
# expected fate of each comes from that README's rule table, in its order: spoof_reason().

A1_MAC, A2_MAC, B1_MAC = (bytes.fromhex(m) for m in ("02cf00000a01", "02cf00000a02",
                                                     "02cf00000b01"))
A1_IP, A2_IP, B1_IP = bytes([10, 0, 1, 1]), bytes([10, 0, 1, 2]), bytes([10, 0, 2, 1])
TENANT_A, TENANT_B = 1, 2
SPOOF_PSN = 0x500000  # forged frames' PSNs (cells and feedback)
# drop_counter slots (p4src/include/defines.p4)
DROP_REASON = {"isolation": 2, "spoof_mac": 9, "spoof_ip": 10, "tenant_tag": 11,
               "forged_int": 12, "foreign_qp": 13, "foreign_feedback": 14}
KINDS = ("cell", "ack", "cnp", "int_cell", "vxlan", "udp")


def spoof_leaf_entities() -> list:
    """Routes to a2 (port 1) and b1 (port 2), each host port bound, the tenant map."""
    ing, egr = "MyIngress", "MyEgress"
    ents: list = [TableEntry(f"{ing}.forwarding.my_station",
                             {"hdr.ethernet.dst_addr": ROUTER_MAC.hex(":")}, "NoAction")]
    hosts = ((0, A1_MAC, A1_IP, TENANT_A), (1, A2_MAC, A2_IP, TENANT_A),
             (2, B1_MAC, B1_IP, TENANT_B))
    for port, mac, ip, tenant in hosts:
        dotted = ".".join(map(str, ip))
        ents += [
            TableEntry(f"{ing}.guard.host_port_binding", {"standard_metadata.ingress_port": port},
                       f"{ing}.guard.bind_host_port",
                       {"tenant": tenant, "mac": mac.hex(":"), "ip": dotted}),
            TableEntry(f"{ing}.isolation.host_tenant_src", {"hdr.ipv4.src_addr": dotted},
                       f"{ing}.isolation.set_src_tenant", {"tenant": tenant}),
            TableEntry(f"{ing}.isolation.host_tenant_dst", {"hdr.ipv4.dst_addr": dotted},
                       f"{ing}.isolation.set_dst_tenant", {"tenant": tenant}),
            TableEntry(f"{egr}.rewrite.egress_rewrite", {"standard_metadata.egress_port": port},
                       f"{egr}.rewrite.set_port_macs",
                       {"src_mac": ROUTER_MAC.hex(":"), "dst_mac": mac.hex(":")}),
        ]
        if port == 0:
            continue
        ents += [
            TableEntry(f"{ing}.forwarding.ipv4_lpm", {"hdr.ipv4.dst_addr": f"{dotted}/32"},
                       f"{ing}.forwarding.set_next_group", {"group_id": port}),
            ActionProfileMember(f"{ing}.spray.group_selector", port,
                                f"{ing}.spray.set_egress_port", {"port": port}),
            ActionProfileGroup(f"{ing}.spray.group_selector", port, [GroupMember(port, 1, port)]),
            TableEntry(f"{ing}.spray.group_select", {"meta.group_id": port}, group=port),
        ]
    return ents


def forged_frame(rng: random.Random, seq: int) -> tuple[bytes, dict]:
    """A frame from a1 (its fields in the returned dict, for spoof_reason) with random
    forgeries: source MAC or IP (b1's, a2's or random), a BTH P_Key, an INT shim of any type
    and length with that many metadata words, a queue pair, an opcode, an AETH syndrome."""
    f = {"kind": rng.choice(KINDS), "dst": rng.choice((A2_IP, B1_IP)), "src_mac": A1_MAC,
         "src_ip": A1_IP, "pkey": 0xFFFF, "int": None, "opcode": 0x04,
         "qpn": rng.randrange(1 << 24)}
    forgeries = rng.sample(("src_mac", "src_ip", "pkey", "int", "opcode"), rng.randrange(0, 3))
    if "src_mac" in forgeries:
        f["src_mac"] = rng.choice((B1_MAC, A2_MAC, rng.randbytes(6)))
    if "src_ip" in forgeries:
        f["src_ip"] = rng.choice((B1_IP, A2_IP, rng.randbytes(4)))
    if "pkey" in forgeries:
        f["pkey"] = rng.randrange(1 << 16)
    if f["kind"] == "int_cell":
        f["int"] = (1, 3)  # a host INT source: shim + INT-MD header, no metadata
    if "int" in forgeries:
        f["int"] = (rng.randrange(16), rng.randrange(0, 24))  # (shim type, shim length)
    if f["kind"] == "ack":
        f["opcode"] = 0x11
    elif f["kind"] == "cnp":
        f["opcode"] = 0x81
    if "opcode" in forgeries:
        f["opcode"] = rng.randrange(256)
    return _frame_bytes(f, SPOOF_PSN + seq, rng), f


def _frame_bytes(f: dict, psn: int, rng: random.Random) -> bytes:
    dport = 4789 if f["kind"] == "vxlan" else 7 if f["kind"] == "udp" else 4791
    if dport == 4791:
        bth = struct.pack("!BBHII", f["opcode"], 0, f["pkey"], f["qpn"], psn)
        if f["opcode"] == 0x11:
            # AETH (ACK or NAK-sequence syndrome) + SACK block + bitmap (hosts/wire.py)
            aeth = rng.choice((0x00, 0x60)) << 24 | 3
            l4_body = bth + struct.pack("!IBBHII", aeth, 1, 2, 32, psn, psn) + bytes(32)
        else:
            l4_body = bth + bytes(64) + bytes(4)  # payload + ICRC placeholder
    elif dport == 4789:
        inner = B1_MAC + A1_MAC + b"\x08\x00" + bytes(40)
        l4_body = struct.pack("!II", 0x08000000, TENANT_B << 8) + inner  # VXLAN, VNI of B
    else:
        l4_body = bytes(48)
    tos = 0x02
    if f["int"] is not None:
        int_type, length = f["int"]
        words = max(length - 3, 0)
        shim = struct.pack("!BBBB", int_type << 4, length, 0, 0)
        md = struct.pack("!IHHHH", (2 << 28) | (2 << 8) | 8, 0xC000, 0, 0, 0)
        l4_body = shim + md + rng.randbytes(4 * words) + l4_body
        tos = (0x17 << 2) | 0x02
    udp = struct.pack("!HHHH", 49152 + psn % 1000, dport, 8 + len(l4_body), 0) + l4_body
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(udp), psn & 0xFFFF,
                               0x4000, 64, 17, 0, f["src_ip"], f["dst"]))
    ip[10:12] = _csum(bytes(ip)).to_bytes(2, "big")
    return ROUTER_MAC + f["src_mac"] + b"\x08\x00" + bytes(ip) + udp


def spoof_reason(f: dict) -> str | None:
    """The drop reason p4src/README.md's tenant isolation gives the frame, None = forwarded
    (to a2: nothing reaches b1 from a1)."""
    if f["src_mac"] != A1_MAC:
        return "spoof_mac"
    if f["src_ip"] != A1_IP:
        return "spoof_ip"
    if f["kind"] == "vxlan":
        return "tenant_tag"
    if f["int"] is not None and f["int"] != (1, 3):
        return "forged_int"
    has_bth = f["kind"] in ("cell", "ack", "cnp", "int_cell")
    if has_bth and f["pkey"] != 0xFFFF:
        return "tenant_tag"
    if f["dst"] == A2_IP:
        return None
    opcode = f["opcode"]
    if has_bth and opcode >> 5 in (0, 1, 3) and opcode & 0x1F <= 0x0B:
        return "foreign_qp"
    return "foreign_feedback" if has_bth else "isolation"
