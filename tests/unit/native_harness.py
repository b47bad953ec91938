"""Run one BMv2 JSON program on the native and the Python data plane side by side and compare
everything a user can see: frames out (port, bytes, order), packet-ins, counters, registers,
direct counters, parser errors and drops. Both get the same clock and the same seeded rng."""

from __future__ import annotations

import random
from typing import Any

from p4sim.switch.api import (
    ActionCall,
    Exact,
    GroupMember,
    GroupRef,
    Lpm,
    MemberRef,
    TableEntry,
    Ternary,
)
from p4sim.switch.dataplane import DataPlane


class Pair:
    """The same program loaded on both paths, driven by one call at a time."""

    def __init__(self, json_bytes: bytes, seed: int = 1, cpu_port: int | None = None) -> None:
        self.now = [1_000_000]
        self.out: dict[str, list] = {"native": [], "python": []}
        self.dps: dict[str, DataPlane] = {}
        for path in ("native", "python"):
            log = self.out[path]
            dp = DataPlane(cpu_port=cpu_port, clock=lambda: self.now[0],
                           rng=random.Random(seed), dataplane=path,
                           transmit=lambda port, frame, log=log: log.append((port, frame)))
            dp.set_packet_in_handler(lambda frame, log=log: log.append(("cpu", frame)))
            dp.load_pipeline(json_bytes)
            self.dps[path] = dp

    @property
    def native(self) -> DataPlane:
        return self.dps["native"]

    def both(self, method: str, *args: Any) -> Any:
        """Call ``method`` on both; both must give the same result or raise the same error."""
        results = []
        for dp in self.dps.values():
            try:
                results.append(("ok", getattr(dp, method)(*args)))
            except Exception as e:  # the error itself is compared
                results.append(("error", f"{type(e).__name__}: {e}"))
        assert results[0] == results[1], (method, args, results)
        return results[0]

    def receive(self, port: int, frame: bytes) -> None:
        for dp in self.dps.values():
            dp.receive(port, frame)

    def advance(self, ns: int) -> None:
        self.now[0] += ns
        for dp in self.dps.values():
            dp.poll()

    def state(self, dp: DataPlane) -> dict:
        cp = dp.cp
        assert cp is not None
        st = dp.stats()
        return {
            "counters": {n: [(c.packets[i], c.bytes[i]) for i in range(c.size)]
                         for n, c in cp.counters.items()},
            "registers": {n: [r.values[i] for i in range(r.size)]
                          for n, r in cp.registers.items()},
            "direct": {n: sorted((repr(e.key), e.counter) for e in dp.table_entries(n))
                       for n, t in cp.tables.items() if t.with_counters},
            "parser_errors": st.parser_errors, "drops": st.pipeline_drops,
            "ports": {p: (s.rx_packets, s.tx_packets) for p, s in st.ports.items()},
        }

    def check(self) -> None:
        a, b = self.out["native"], self.out["python"]
        assert len(a) == len(b), (len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            assert x == y, f"output {i} differs: native {x!r} python {y!r}"
        assert self.state(self.native) == self.state(self.dps["python"])


# -- random fabric.p4 state ----------------------------------------------------------------------

ROUTER = 0x02FA00000003
MACS = [ROUTER, 0x02CF00000001, 0x02CF00000002, 0xFFFFFFFFFFFF]
IPS = [0x0A000101, 0x0A000201, 0x0A000102, 0x0A000301]
POOLS: dict[str, list[int]] = {
    "ethernet.dst_addr": MACS, "arp.tpa": IPS, "ipv4.dst_addr": IPS, "ipv4.src_addr": IPS,
    "bth.opcode": [0x01, 0x04, 0x11, 0x81], "ethernet.ether_type": [0x0800, 0x0806],
    "scalars.userMetadata.l4_dst_port": [4791, 80, 50000], "scalars.userMetadata.ip_proto": [17, 6],
    "scalars.userMetadata.l4_src_port": [50000, 4791, 1234],
    "scalars.userMetadata.cell_payload_len": [1024, 256, 0],
    "scalars.userMetadata.group_id": [1, 2, 3], "int_shim.int_type": [1, 2],
}


def _param(rng: random.Random, width: int, name: str) -> int:
    if "port" in name and width == 9:
        return rng.choice([0, 1, 2, 3, 64, 511])
    if name in ("mode",):
        return rng.randrange(4)
    if name in ("kmin", "kmax"):
        return rng.choice([0, 1, 5, 20, 100])
    return rng.choice([0, 1, 2, 3, rng.getrandbits(width)])


def _action(rng: random.Random, dp: DataPlane, table: Any) -> ActionCall:
    adef = rng.choice(list(table.actions.values()))
    act = dp.cp.p.actions[adef.id]  # type: ignore[union-attr]
    args = tuple(_param(rng, int(r["bitwidth"]), r["name"]) for r in act["runtime_data"])
    return ActionCall(adef.name, args)


def _key(rng: random.Random, table: Any) -> tuple:
    key = []
    for kind, width, name in table.keys:
        pool = POOLS.get(name, [0, 1, 2, 3])
        value = rng.choice(pool) & ((1 << width) - 1)
        if kind == "lpm":
            plen = rng.choice([0, width // 2, width - 8, width])
            key.append(Lpm(value & ~((1 << (width - plen)) - 1), plen))
        elif kind == "ternary":
            mask = rng.choice([0, (1 << width) - 1, ((1 << width) - 1) ^ 0xFF])
            key.append(Ternary(value & mask, mask))
        else:
            key.append(Exact(value))
    return tuple(key)


ING, EGR = "MyIngress", "MyEgress"


def routed_fabric_state(pair: Pair, rng: random.Random) -> None:
    """What the controller gives a leaf: its router MAC, routes to two groups with random
    spray modes (ecmp, spray, round-robin, adaptive), members on ports 1-3, rewrites, ECN
    profiles, tenants, and INT source / transit on or off."""
    t = pair.both
    t("table_insert", f"{ING}.forwarding.my_station", TableEntry((Exact(ROUTER),),
                                                                 ActionCall("NoAction")))
    for gid, net in ((1, 0x0A000200), (2, 0x0A000300)):
        t("table_insert", f"{ING}.forwarding.ipv4_lpm", TableEntry(
            (Lpm(net, 24),), ActionCall(f"{ING}.forwarding.set_next_group", (gid,))))
        t("table_insert", f"{ING}.spray.group_mode", TableEntry(
            (Exact(gid),), ActionCall(f"{ING}.spray.set_group_mode",
                                      (rng.randrange(4), rng.getrandbits(32)))))
        for bucket in range(4):
            t("table_insert", f"{ING}.spray.adaptive_candidates", TableEntry(
                (Exact(gid), Exact(bucket)), ActionCall(f"{ING}.spray.set_candidates",
                                                        (rng.randrange(1, 4), rng.randrange(1, 4)))))
    t("table_insert", f"{ING}.forwarding.ipv4_lpm", TableEntry(
        (Lpm(0x0A000100, 24),), ActionCall(f"{ING}.forwarding.set_next_group", (1,))))
    t("table_insert", f"{ING}.spray.cell_length", TableEntry(
        (Exact(1024),), ActionCall(f"{ING}.spray.cell_length_ok")))
    sel = f"{ING}.spray.group_selector"
    for port in (1, 2, 3):
        t("member_add", sel, 100 + port, ActionCall(f"{ING}.spray.set_egress_port", (port,)))
    t("group_add", sel, 11, [GroupMember(101, 1, 1), GroupMember(102, 1, 2)])
    t("group_add", sel, 12, [GroupMember(101, 1, 1), GroupMember(102, 2, 2),
                             GroupMember(103, 1, 3)])
    t("table_insert", f"{ING}.spray.group_select", TableEntry((Exact(1),), GroupRef(11)))
    t("table_insert", f"{ING}.spray.group_select", TableEntry((Exact(2),), GroupRef(12)))
    for port in range(4):
        t("table_insert", f"{EGR}.rewrite.egress_rewrite", TableEntry(
            (Exact(port),), ActionCall(f"{EGR}.rewrite.set_port_macs",
                                       (ROUTER, 0x02CF00000000 + port))))
        t("table_insert", f"{EGR}.ecn.ecn_profile", TableEntry(
            (Exact(port),), ActionCall(f"{EGR}.ecn.set_ecn_profile", (1, 4, 1 << 30))))
    for ip in IPS:
        tenant = rng.choice([1, 1, 2])
        t("table_insert", f"{ING}.isolation.host_tenant_src", TableEntry(
            (Exact(ip),), ActionCall(f"{ING}.isolation.set_src_tenant", (tenant,))))
        t("table_insert", f"{ING}.isolation.host_tenant_dst", TableEntry(
            (Exact(ip),), ActionCall(f"{ING}.isolation.set_dst_tenant", (tenant,))))
    if rng.random() < 0.5:  # INT source on every flow
        t("table_insert", f"{ING}.int_ingress.int_watchlist", TableEntry(
            (Ternary(0, 0), Ternary(0, 0), Ternary(0, 0), Ternary(0, 0)),
            ActionCall(f"{ING}.int_ingress.int_source", (rng.getrandbits(16), 4)), 10))
    if rng.random() < 0.7:
        t("table_insert", f"{EGR}.int_egress.int_transit_config", TableEntry(
            (Exact(1),), ActionCall(f"{EGR}.int_egress.int_transit", (rng.getrandbits(32),))))


def random_fabric_state(pair: Pair, rng: random.Random) -> None:
    routed_fabric_state(pair, rng)
    dp = pair.native
    cp = dp.cp
    assert cp is not None
    for pname in cp.profiles:
        table = next(t for t in cp.tables.values() if t.profile and t.profile.name == pname)
        for mid in range(1, 5):
            pair.both("member_add", pname, mid, _action(rng, dp, table))
        for gid in range(1, 4):
            members = [GroupMember(m, rng.choice([1, 1, 2]), rng.choice([None, m % 4]))
                       for m in rng.sample(range(1, 5), rng.randrange(0, 5))]
            pair.both("group_add", pname, gid, members)
    for name, table in cp.tables.items():
        if not table.keys:
            continue
        for _ in range(rng.randrange(0, 3)):
            if table.profile is not None:
                action: Any = rng.choice([GroupRef(rng.randrange(1, 4)),
                                          MemberRef(rng.randrange(1, 5))])
            else:
                action = _action(rng, dp, table)
            prio = rng.randrange(1, 100) if table.mode == "priority" else 0
            pair.both("table_insert", name, TableEntry(_key(rng, table), action, prio))
        # (A random default of the ACL, or of the host-port binding, which would bind every
        # port to one made-up host, drops every packet: those keep the JSON's.)
        keeps_default = "acl" in name or name.endswith("host_port_binding")
        if table.profile is None and not table.default_const and not keeps_default \
                and rng.random() < 0.3:
            pair.both("table_set_default", name, _action(rng, dp, table))
    for name, reg in cp.registers.items():
        for i in rng.sample(range(reg.size), min(4, reg.size)):
            pair.both("register_write", name, i, rng.getrandbits(64) & reg.mask)


def fabric_frames(rng: random.Random) -> list[bytes]:
    """Cells with and without INT (of random hop counts and instructions), ARP, TCP."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import ARP, Ether
    from scapy.packet import Raw

    frames = []
    for dst in IPS:
        for mac in (ROUTER, ROUTER, MACS[1]):
            for opcode in (0x01, 0x04, 0x11, 0x81):
                with_int = rng.random() < 0.4
                dscp = 0x17 if with_int else 0
                bth = bytes(BTH(opcode=opcode, psn=rng.getrandbits(24), dqpn=1))
                body = bth + b"c" * rng.choice([1024, 1024, 256, 17]) + bytes(4)
                if with_int:
                    body = _int_block(rng) + body
                cell = (Ether(src="02:cf:00:00:00:01", dst=mac.to_bytes(6, "big").hex(":"))
                        / IP(src=_ip(rng.choice(IPS)), dst=_ip(dst),
                             tos=(dscp << 2) | rng.choice([0, 2, 3]))
                        / UDP(sport=rng.choice([50000, 1234]), dport=4791) / Raw(body))
                frames.append(bytes(cell))
    frames.append(bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:cf:00:00:00:01")
                        / ARP(op=1, psrc="10.0.1.1", pdst="10.0.2.1")))
    frames.append(bytes(Ether(dst="02:fa:00:00:00:03", src="02:cf:00:00:00:02")
                        / IP(src="10.0.1.2", dst="10.0.2.1") / TCP(sport=1, dport=80)))
    return frames


def _ip(value: int) -> str:
    return ".".join(str(b) for b in value.to_bytes(4, "big"))


def _int_block(rng: random.Random) -> bytes:
    """An INT shim, INT-MD header and a stack of 0-3 hops (random instructions)."""
    hops = rng.randrange(0, 4)
    hop_ml = rng.choice([1, 2, 3])
    words = 3 + hops * hop_ml
    shim = bytes([0x10, words, 0, 0])
    md = bytes([0x20, 0, hop_ml & 0x1F, rng.randrange(0, 8)]) + \
        rng.choice([0xFFFF, 0x8000, rng.getrandbits(16)]).to_bytes(2, "big") + bytes(6)
    return shim + md + bytes(rng.getrandbits(8) for _ in range(hops * hop_ml * 4))


def mutate(frame: bytes, rng: random.Random) -> bytes:
    choice = rng.random()
    if choice < 0.3:
        return frame[:rng.randrange(0, len(frame))]  # short
    b = bytearray(frame)
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(b))
        b[i] = rng.getrandbits(8)
    return bytes(b)
