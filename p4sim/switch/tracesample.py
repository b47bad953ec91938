"""Which packets the structured trace (p4sim.switch.jsontrace) records.

``TraceSampler(every=N)`` keeps 1 packet in N by a hash of the packet's identity (IPv4
addresses, protocol, identification, L4 ports: the fields no hop rewrites), so every switch,
in one process or many, keeps the same packets and a journey can be joined across a fabric; a
filter (``src=``, ``dst=``, ``proto=``, ``sport=``, ``dport=``) keeps only the packets that
match it.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from typing import Any

FILTER_FIELDS = ("src", "dst", "proto", "sport", "dport")
ETHERTYPE_IPV4 = 0x0800


def packet_identity(frame: bytes | bytearray | memoryview) -> dict[str, Any] | None:
    """The fields of an IPv4 packet that no hop rewrites, or None for any other frame."""
    if len(frame) < 34 or frame[12] != 0x08 or frame[13] != 0x00 or frame[14] >> 4 != 4:
        return None
    l4 = 14 + (frame[14] & 0x0F) * 4
    proto = frame[23]
    sport = dport = 0
    if proto in (6, 17) and len(frame) >= l4 + 4:
        sport = int.from_bytes(frame[l4:l4 + 2], "big")
        dport = int.from_bytes(frame[l4 + 2:l4 + 4], "big")
    return {"src": ".".join(map(str, frame[26:30])),
            "dst": ".".join(map(str, frame[30:34])), "proto": proto,
            "ip_id": int.from_bytes(frame[18:20], "big"), "sport": sport, "dport": dport}


def ip_header(frame: bytes | bytearray | memoryview) -> dict[str, int] | None:
    """TTL, DSCP, ECN and total length of an IPv4 frame (the fields hops change)."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return None
    return {"ttl": frame[22], "dscp": frame[15] >> 2, "ecn": frame[15] & 3,
            "ip_len": int.from_bytes(frame[16:18], "big")}


_IP_IDENTITY = struct.Struct("!HxxxBxxII")  # identification, protocol, source, destination
_PORTS = struct.Struct("!I")


def identity_hash(frame: bytes | bytearray | memoryview) -> int | None:
    """A hash of the identity's fields: the same for one packet at every hop and in every
    process (no Python hash(): it is seeded per process). Runs on every packet: two unpacks
    and integer mixing, no slices."""
    if len(frame) < 38 or frame[12] != 0x08 or frame[13] != 0x00:
        return None
    ident, proto, src, dst = _IP_IDENTITY.unpack_from(frame, 18)
    ports = _PORTS.unpack_from(frame, 14 + (frame[14] & 0x0F) * 4)[0] if proto in (6, 17) else 0
    h = (src * 0x9E3779B1 ^ dst * 0x85EBCA77 ^ ports * 0xC2B2AE3D ^ ident * 0x27D4EB2F
         ^ proto) & 0xFFFFFFFFFFFFFFFF
    h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF  # splitmix64's finalizer
    return h ^ (h >> 32)


class TraceSampler:
    """Which packets get a record: 1 in ``every`` by identity hash, and those matching
    ``filters`` ({field: value}, every one must match)."""

    def __init__(self, every: int = 1, filters: dict[str, Any] | None = None) -> None:
        if every < 1:
            raise ValueError(f"trace sample must be at least 1, got {every}")
        self.every = every
        self.filters = filters or {}

    @classmethod
    def parse_filter(cls, spec: str) -> dict[str, Any]:
        """``src=10.0.0.1,dport=4791`` -> {"src": "10.0.0.1", "dport": 4791}."""
        out: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, eq, value = part.partition("=")
            if not eq or name not in FILTER_FIELDS:
                raise ValueError(f"trace filter '{part}': expected NAME=VALUE with NAME one of "
                                 f"{', '.join(FILTER_FIELDS)}")
            try:
                out[name] = str(ipaddress.IPv4Address(value)) if name in ("src", "dst") \
                    else int(value, 0)
            except ValueError:
                raise ValueError(f"trace filter '{part}': bad value '{value}'") from None
        return out

    def fast(self) -> Callable[[Any], bool]:
        """``wants`` as one function for the per-packet path: with no filter, the identity
        hash inlined (a call less on every packet, at every hop)."""
        if self.filters:
            return self.wants
        every = self.every
        if every == 1:
            return lambda frame: True
        unpack_ip, unpack_ports = _IP_IDENTITY.unpack_from, _PORTS.unpack_from

        def sampled(frame: Any) -> bool:
            if len(frame) < 38 or frame[12] != 0x08 or frame[13] != 0x00:
                return False
            ident, proto, src, dst = unpack_ip(frame, 18)
            ports = unpack_ports(frame, 14 + (frame[14] & 0x0F) * 4)[0] \
                if proto in (6, 17) else 0
            h = (src * 0x9E3779B1 ^ dst * 0x85EBCA77 ^ ports * 0xC2B2AE3D ^ ident * 0x27D4EB2F
                 ^ proto) & 0xFFFFFFFFFFFFFFFF
            h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
            return not (h ^ (h >> 32)) % every
        return sampled

    def wants(self, frame: bytes) -> bool:
        if self.every > 1:
            h = identity_hash(frame)
            if h is None or h % self.every:
                return False
        if self.filters:
            ident = packet_identity(frame)
            if ident is None or any(ident[k] != v for k, v in self.filters.items()):
                return False
        return True
