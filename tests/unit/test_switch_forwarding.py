"""p4sim data plane on a basic IPv4 program (hand-written BMv2 JSON): LPM forwarding, default
action, checksum update, parser round trip, parser errors, bad frames and bad API input."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.switch.api import ActionCall, ApiError, Code, Exact, Lpm, TableEntry, Ternary
from p4sim.switch.dataplane import DataPlane

FIXTURES = Path(__file__).parent / "bmv2json"
LPM = "MyIngress.ipv4_lpm"
FWD = "MyIngress.ipv4_forward"


@pytest.fixture
def dp() -> DataPlane:
    d = DataPlane()
    d.load_pipeline((FIXTURES / "basic.json").read_bytes())
    d.out = []  # type: ignore[attr-defined]
    d.set_transmit_fn(lambda port, frame: d.out.append((port, frame)))  # type: ignore[attr-defined]
    return d


def ipv4(dst: str, ttl: int = 64) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09")
                 / IP(src="192.168.0.1", dst=dst, ttl=ttl) / UDP(sport=1, dport=2) / (b"p" * 16))


def route(dp: DataPlane, prefix: int, plen: int, mac: int, port: int) -> None:
    dp.table_insert(LPM, TableEntry((Lpm(prefix, plen),), ActionCall(FWD, (mac, port))))


def test_longest_prefix_wins_and_rewrites(dp: DataPlane) -> None:
    route(dp, 0x0A000000, 8, 0x0200000000AA, 1)
    route(dp, 0x0A010000, 16, 0x0200000000BB, 2)
    route(dp, 0x0A010200, 24, 0x0200000000CC, 3)
    for dst, port, mac in (("10.1.2.9", 3, "02:00:00:00:00:cc"), ("10.1.3.9", 2,
                           "02:00:00:00:00:bb"), ("10.7.7.7", 1, "02:00:00:00:00:aa")):
        dp.out.clear()
        dp.receive(0, ipv4(dst, ttl=64))
        assert [p for p, _ in dp.out] == [port]
        got = Ether(dp.out[0][1])
        assert got.dst == mac
        assert got.src == "00:00:00:00:00:01"  # old destination MAC moved to source
        assert got[IP].ttl == 63
        # The deparser's checksum update must produce what an independent builder computes.
        ref = got[IP].copy()
        ref.chksum = None
        assert got[IP].chksum == IP(bytes(ref)).chksum
        assert bytes(got[UDP].payload) == b"p" * 16


def test_default_action_drops_and_can_be_changed(dp: DataPlane) -> None:
    dp.receive(0, ipv4("10.0.0.1"))
    assert dp.out == []
    assert dp.stats().pipeline_drops == 1
    assert dp.table_get_default(LPM) == ActionCall("MyIngress.drop", ())
    dp.table_set_default(LPM, ActionCall(FWD, (0x02000000000F, 5)))
    dp.receive(0, ipv4("10.0.0.1"))
    assert [p for p, _ in dp.out] == [5]
    dp.table_set_default(LPM, None)  # back to the JSON's default
    assert dp.table_get_default(LPM) == ActionCall("MyIngress.drop", ())


def test_non_ipv4_round_trips_unchanged_to_port_0(dp: DataPlane) -> None:
    frame = bytes(Ether(dst="00:00:00:00:00:01", type=0x88CC) / (b"\x01\x02\x03" * 20))
    dp.receive(3, frame)
    # egress_spec is never written: simple_switch sends the packet to port 0 unmodified.
    assert dp.out == [(0, frame)]


def test_truncated_ipv4_sets_parser_error_and_continues(dp: DataPlane) -> None:
    frame = ipv4("10.0.0.1")[:14 + 10]  # IPv4 header cut short
    dp.receive(2, frame)
    assert dp.stats().parser_errors == 1
    # ipv4 is not valid, so the table is skipped and the packet leaves, as on BMv2, on port 0
    # with the unparsed bytes intact.
    assert dp.out == [(0, frame)]


def test_runts_are_counted_and_dropped_and_frames_beyond_jumbo_processed(dp: DataPlane) -> None:
    route(dp, 0x0A000000, 8, 0x0200000000AA, 1)
    dp.receive(0, b"\x00" * 5)
    big = ipv4("10.0.0.1") + b"\x00" * 10000  # beyond 9234 bytes: BMv2 processes it
    dp.receive(0, big)
    dp.receive(0, ipv4("10.0.0.1"))
    st = dp.stats().ports[0]
    assert st.rx_packets == 3
    assert st.rx_dropped_malformed == 1
    assert [p for p, _ in dp.out] == [1, 1]
    assert len(dp.out[0][1]) == len(big) and dp.out[0][1][34:] == big[34:]


def test_api_errors_change_nothing(dp: DataPlane) -> None:
    route(dp, 0x0A000000, 8, 0x0200000000AA, 1)
    with pytest.raises(ApiError) as e:
        route(dp, 0x0A000000, 8, 0x0200000000BB, 2)
    assert e.value.code == Code.ALREADY_EXISTS
    with pytest.raises(ApiError) as e:
        dp.table_insert(LPM, TableEntry((Lpm(1 << 32, 8),), ActionCall(FWD, (1, 1))))
    assert e.value.code == Code.INVALID_ARGUMENT and "does not fit" in e.value.message
    with pytest.raises(ApiError) as e:
        dp.table_insert(LPM, TableEntry((Lpm(0, 8),), ActionCall(FWD, (1, 512))))
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ApiError) as e:
        dp.table_insert(LPM, TableEntry((Exact(5),), ActionCall(FWD, (1, 1))))
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ApiError) as e:
        dp.table_insert(LPM, TableEntry((Lpm(0, 8),), ActionCall("nope", ())))
    assert e.value.code == Code.INVALID_ARGUMENT
    with pytest.raises(ApiError) as e:
        dp.table_delete(LPM, (Lpm(0x0B000000, 8),), 0)
    assert e.value.code == Code.NOT_FOUND
    with pytest.raises(ApiError) as e:
        dp.table_insert("nope", TableEntry((Ternary(0, 0),), ActionCall(FWD, (1, 1))))
    assert e.value.code == Code.NOT_FOUND
    entries = dp.table_entries(LPM)
    assert len(entries) == 1 and entries[0].action == ActionCall(FWD, (0x0200000000AA, 1))
    dp.table_modify(LPM, TableEntry((Lpm(0x0A000000, 8),), ActionCall(FWD, (0x0200000000AA, 4))))
    dp.receive(0, ipv4("10.9.9.9"))
    assert [p for p, _ in dp.out] == [4]
    dp.table_delete(LPM, (Lpm(0x0A000000, 8),), 0)
    dp.receive(0, ipv4("10.9.9.9"))
    assert [p for p, _ in dp.out] == [4]


def test_const_entries_from_json_and_immutability() -> None:
    d = DataPlane()
    d.load_pipeline((FIXTURES / "basic_const.json").read_bytes())
    out: list[tuple[int, bytes]] = []
    d.set_transmit_fn(lambda port, frame: out.append((port, frame)))
    d.receive(0, ipv4("10.0.1.7"))
    d.receive(0, ipv4("10.0.2.7"))
    assert [p for p, _ in out] == [1, 2]
    with pytest.raises(ApiError) as e:
        route(d, 0x0B000000, 8, 1, 1)
    assert e.value.code == Code.PERMISSION_DENIED


@pytest.mark.parametrize("text,needle", [
    (b"{not json", "invalid JSON at line 1 column 2"),
    (b'{"__meta__": {"version": [3, 0]}}', "unsupported major version 3"),
    (b'{"header_types": [], "headers": [{"name": "h", "id": 0, "header_type": "nope"}]}',
     "header 'h': unknown header_type 'nope'"),
    (b"[]", "expected a JSON object"),
])
def test_bad_json_gives_one_line_invalid_argument(text: bytes, needle: str) -> None:
    d = DataPlane()
    with pytest.raises(ApiError) as e:
        d.load_pipeline(text)
    assert e.value.code == Code.INVALID_ARGUMENT
    assert needle in e.value.message and "\n" not in e.value.message
    assert d.pipeline_json() is None


def test_unsupported_primitive_is_rejected_with_location() -> None:
    import json

    doc = json.loads((FIXTURES / "basic.json").read_text())
    doc["actions"][1]["primitives"].append({"op": "frobnicate", "parameters": []})
    with pytest.raises(ApiError) as e:
        DataPlane().load_pipeline(json.dumps(doc).encode())
    assert "action 'MyIngress.drop'" in e.value.message and "frobnicate" in e.value.message


def test_receive_batch_matches_one_by_one(dp: DataPlane) -> None:
    route(dp, 0x0A000000, 8, 0x0200000000AA, 1)
    frames = [ipv4("10.0.0.1"), b"\x00" * 3, ipv4("11.0.0.1"), ipv4("10.2.0.1", ttl=2)]
    for fr in frames:
        dp.receive(0, fr)
    one_by_one, stats1 = list(dp.out), dp.stats()
    dp.out.clear()
    dp.receive_batch(0, frames)
    assert dp.out == one_by_one and len(one_by_one) == 2
    stats2 = dp.stats()
    assert stats2.ports[0].rx_packets == 2 * stats1.ports[0].rx_packets == 8
    assert stats2.ports[0].rx_dropped_malformed == 2
    assert stats2.pipeline_drops == 2 * stats1.pipeline_drops == 2
