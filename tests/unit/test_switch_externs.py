"""Hash algorithms, counters (indirect and direct), two-rate three-color meters, registers,
and action selectors (hash-based member choice, watch_port failover)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from scapy.utils import checksum

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx, prim, rd

from p4sim.switch import externs
from p4sim.switch.api import (
    ActionCall,
    ApiError,
    Code,
    Exact,
    GroupMember,
    GroupRef,
    MemberRef,
    MeterConfig,
    TableEntry,
)
from p4sim.switch.dataplane import DataPlane

FIELDS = [("k1", 16), ("k2", 8), ("out", 32), ("color", 8)]
CHECK = b"123456789"  # the customary CRC check input


def test_hash_algorithms_match_published_check_values() -> None:
    assert externs.crc16(CHECK) == 0xBB3D  # CRC-16/ARC
    assert externs.crc32(CHECK) == 0xCBF43926  # CRC-32 (zlib)
    assert externs.crc_ccitt(CHECK) == 0x29B1  # CRC-16/CCITT-FALSE
    data = bytes(range(1, 22))
    assert externs.csum16(data) == checksum(data)  # Internet checksum, odd length padded
    assert externs.hash_algorithm("xor16")(b"\x12\x34\x56") == 0x1234 ^ 0x5600
    assert externs.identity(b"\x01\x02\x03") == 0x010203
    assert externs.identity(bytes(range(10))) == int.from_bytes(bytes(range(8)), "big")


def test_meter_two_rate_three_color() -> None:
    now = [0]  # the meter's injected clock, nanoseconds
    m = externs.Meter(lambda: now[0])
    assert m.execute(1) == externs.GREEN  # unconfigured meters mark green
    m.configure(MeterConfig(cir=10, cburst=2, pir=20, pburst=4))
    colors = [m.execute(1) for _ in range(5)]
    assert colors == [externs.GREEN, externs.GREEN, externs.YELLOW, externs.YELLOW, externs.RED]
    # 0.1 s later: committed bucket +1 token, peak bucket +2 tokens.
    now[0] = 100_000_000
    assert m.execute(1) == externs.GREEN
    assert m.execute(1) == externs.YELLOW
    assert m.execute(1) == externs.RED


def counters_prog() -> Prog:
    p = Prog(FIELDS)
    p.counters.append({"name": "pkts", "id": 0, "size": 8, "is_direct": False})
    p.counters.append({"name": "t_counter", "id": 1, "is_direct": True, "binding": "t"})
    p.registers.append({"name": "reg", "id": 0, "size": 4, "bitwidth": 16})
    p.meters.append({"name": "mtr", "id": 0, "type": "packets", "rate_count": 2, "size": 2,
                     "is_direct": False})
    a = p.action("work", [("idx", 3)], [
        prim("count", {"type": "counter_array", "value": "pkts"}, rd(0)),
        # reg[k2] = reg[k2] + 1; out = old value
        prim("register_read", f("probe", "out"), {"type": "register_array", "value": "reg"},
             f("probe", "k2")),
        prim("register_write", {"type": "register_array", "value": "reg"}, f("probe", "k2"),
             ex("+", f("probe", "out"), hx(1))),
        prim("execute_meter", {"type": "meter_array", "value": "mtr"}, hx(1),
             f("probe", "color")),
    ])
    p.table("t", [("exact", ["probe", "k1"])], [a, 0], default=(0, []), with_counters=True)
    return p


def test_counters_registers_meters_through_the_pipeline() -> None:
    p = counters_prog()
    dp = DataPlane()
    dp.load_pipeline(p.json())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.table_insert("t", TableEntry((Exact(1),), ActionCall("work", (5,))))
    frame = p.frame(1, 2)
    for _ in range(3):
        dp.receive(0, frame)
    dp.receive(0, p.frame(2, 2))  # miss: NoAction
    assert dp.counter_read("pkts", 5) == (3, 3 * len(frame))
    assert dp.counter_read("pkts", 4) == (0, 0)
    # a sampler's read of many indices is counter_read's, and its errors are too
    assert dp.counter_packets("pkts", [5, 4, 5]) == [3, 0, 3]
    for bad in ([5, 8], [-1]):
        with pytest.raises(ApiError) as many:
            dp.counter_packets("pkts", bad)
        assert many.value.code == Code.OUT_OF_RANGE and str(bad[-1]) in many.value.message
    [e] = dp.table_entries("t")
    assert e.counter == (3, 3 * len(frame))
    dp.direct_counter_write("t", (Exact(1),), 0, 0, 0)
    assert dp.table_entries("t")[0].counter == (0, 0)
    assert [o["out"] for o in out[:3]] == [0, 1, 2]  # register incremented per packet
    assert dp.register_read("reg", 2) == 3
    assert all(o["color"] == externs.GREEN for o in out[:3])
    dp.meter_set("mtr", 1, MeterConfig(cir=1, cburst=1, pir=1, pburst=2))
    for _ in range(3):
        dp.receive(0, frame)
    assert [o["color"] for o in out[4:]] == [externs.GREEN, externs.YELLOW, externs.RED]
    dp.register_write("reg", 2, 100)
    dp.receive(0, frame)
    assert out[-1]["out"] == 100
    with pytest.raises(ApiError) as e1:
        dp.register_write("reg", 0, 1 << 16)
    assert e1.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ApiError) as e2:
        dp.counter_read("pkts", 8)
    assert e2.value.code == Code.OUT_OF_RANGE
    with pytest.raises(ApiError) as e3:
        dp.register_read("nope", 0)
    assert e3.value.code == Code.NOT_FOUND


def selector_prog(algo: str = "crc16") -> tuple[bytes, Prog]:
    p = Prog(FIELDS)
    fwd = p.action("fwd", [("port", 9)], [assign(f("standard_metadata", "egress_spec"), rd(0))])
    p.profiles.append({"name": "sel", "id": 0, "max_size": 64,
                       "selector": {"algo": algo, "input": [f("probe", "k1")]}})
    p.table("ecmp", [("exact", ["probe", "k2"])], [fwd], type="indirect_ws",
            action_profile="sel")
    return p.json(), p


def test_selector_hashes_the_selector_input_and_skips_down_watch_ports() -> None:
    data, p = selector_prog()
    dp = DataPlane()
    dp.load_pipeline(data)
    out: list[int] = []
    dp.set_transmit_fn(lambda port, frame: out.append(port))
    for mid, port in ((1, 1), (2, 2), (3, 3)):
        dp.member_add("sel", mid, ActionCall("fwd", (port,)))
    dp.group_add("sel", 7, [GroupMember(m, watch_port=m) for m in (1, 2, 3)])
    dp.table_insert("ecmp", TableEntry((Exact(0),), GroupRef(7)))
    keys = range(60)
    for k in keys:
        dp.receive(0, p.frame(k, 0))
    # BMv2: member = live_members[hash(input) % len(live_members)], the input packed big-endian.
    assert out == [[1, 2, 3][externs.crc16(k.to_bytes(2, "big")) % 3] for k in keys]
    assert set(out) == {1, 2, 3}
    out.clear()
    dp.set_port_up(2, False)
    for k in keys:
        dp.receive(0, p.frame(k, 0))
    assert out == [[1, 3][externs.crc16(k.to_bytes(2, "big")) % 2] for k in keys]
    out.clear()
    dp.set_link_up(1, False)  # link status (from the port layer) counts too
    dp.set_port_up(3, False)
    dp.receive(0, p.frame(1, 0))
    # No live member: a miss; the indirect table has no default action, so egress_spec stays 0.
    assert out == [0]
    dp.set_port_up(3, True)
    dp.receive(0, p.frame(1, 0))
    assert out == [0, 3]


def test_selector_api_errors() -> None:
    data, _ = selector_prog()
    dp = DataPlane()
    dp.load_pipeline(data)
    dp.member_add("sel", 1, ActionCall("fwd", (1,)))
    with pytest.raises(ApiError) as e:
        dp.member_add("sel", 1, ActionCall("fwd", (2,)))
    assert e.value.code == Code.ALREADY_EXISTS
    with pytest.raises(ApiError) as e:
        dp.group_add("sel", 1, [GroupMember(9)])
    assert e.value.code == Code.NOT_FOUND
    dp.group_add("sel", 1, [GroupMember(1)])
    dp.table_insert("ecmp", TableEntry((Exact(0),), MemberRef(1)))
    with pytest.raises(ApiError) as e:
        dp.member_delete("sel", 1)
    assert e.value.code == Code.FAILED_PRECONDITION
    with pytest.raises(ApiError) as e:
        dp.table_insert("ecmp", TableEntry((Exact(1),), ActionCall("fwd", (1,))))
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ApiError) as e:
        dp.table_insert("ecmp", TableEntry((Exact(1),), GroupRef(99)))
    assert e.value.code == Code.NOT_FOUND
    assert dp.groups("sel") == {1: [GroupMember(1)]}
    assert dp.members("sel") == {1: ActionCall("fwd", (1,))}


def test_hash_primitive_modify_field_with_hash_based_offset() -> None:
    p = Prog(FIELDS)
    p.calculations.append({"name": "h", "id": 0, "algo": "crc32",
                           "input": [f("probe", "k1"), f("probe", "k2")]})
    a = p.action("hash", [], [prim("modify_field_with_hash_based_offset", f("probe", "out"),
                                   hx(10), {"type": "calculation", "value": "h"}, hx(1000))])
    p.table("t", [], [a], default=(a, []))
    dp = DataPlane()
    dp.load_pipeline(p.json())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.receive(0, p.frame(0xBEEF, 0x42))
    assert out[0]["out"] == 10 + externs.crc32(bytes.fromhex("beef42")) % 1000


def test_unsupported_hash_algorithm_rejected() -> None:
    data, _ = selector_prog("nonesuch")
    with pytest.raises(ApiError) as e:
        DataPlane().load_pipeline(data)
    assert "unsupported hash algorithm 'nonesuch'" in e.value.message
    json.loads(data)  # the fixture itself is valid JSON


def test_direct_meter_colors_hits_only() -> None:
    p = Prog(FIELDS)
    p.meters.append({"name": "dm", "id": 0, "type": "packets", "rate_count": 2, "size": 1024,
                     "is_direct": True, "binding": "t", "result_target": ["probe", "color"]})
    a = p.action("fwd", [], [assign(f("standard_metadata", "egress_spec"), hx(1))])
    p.table("t", [("exact", ["probe", "k1"])], [a, 0], default=(0, []), direct_meters="dm")
    dp = DataPlane()
    dp.load_pipeline(p.json())
    out: list[dict[str, int]] = []
    dp.set_transmit_fn(lambda port, frame: out.append(p.fields(frame)))
    dp.table_insert("t", TableEntry((Exact(1),), ActionCall("fwd"),
                                    meter=MeterConfig(cir=1, cburst=1, pir=1, pburst=2)))
    dp.table_insert("t", TableEntry((Exact(2),), ActionCall("fwd")))  # unconfigured: green
    for _ in range(3):
        dp.receive(0, p.frame(1, 0, 0, 0x77))
    dp.receive(0, p.frame(2, 0, 0, 0x77))
    dp.receive(0, p.frame(3, 0, 0, 0x77))  # miss: result field untouched
    assert [o["color"] for o in out] == [externs.GREEN, externs.YELLOW, externs.RED,
                                         externs.GREEN, 0x77]
    assert dp.table_entries("t")[0].meter == MeterConfig(1, 1, 1, 2)
    dp.direct_meter_set("t", (Exact(1),), 0, None)  # unconfigure: green again
    dp.receive(0, p.frame(1, 0, 0, 0x77))
    assert out[-1]["color"] == externs.GREEN


def test_checksum_with_payload_covers_later_headers_and_payload() -> None:
    p = Prog([("k1", 16), ("k2", 16), ("out", 16)])
    # Checksum over ethernet.etherType and the payload: the probe header comes after
    # ethernet in the deparser, so BMv2 includes it (as emitted), then the unparsed bytes.
    p.calculations.append({"name": "c", "id": 0, "algo": "csum16",
                           "input": [f("ethernet", "etherType"), {"type": "payload"}]})
    p.checksums.append({"name": "ck", "id": 0, "target": ["probe", "out"], "type": "generic",
                        "calculation": "c", "verify": False, "update": True, "if_cond": None})
    dp = DataPlane()
    dp.load_pipeline(p.json())
    out: list[bytes] = []
    dp.set_transmit_fn(lambda port, frame: out.append(frame))
    dp.receive(0, p.frame(0x1111, 0x2222, 0) + b"\x05\x06\x07")
    frame = out[0]
    probe_emitted = frame[14:18] + b"\x00\x00"  # 'out' reads 0 while the sum is computed
    expected = checksum(frame[12:14] + probe_emitted + frame[20:])
    assert int.from_bytes(frame[18:20], "big") == expected
