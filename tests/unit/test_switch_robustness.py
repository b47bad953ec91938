"""Bad input never breaks the data plane: random frames are parsed, counted, forwarded or
dropped; mangled BMv2 JSON is rejected with ApiError(INVALID_ARGUMENT) and changes nothing."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4sim.switch.api import ActionCall, ApiError, Code, Lpm, TableEntry
from p4sim.switch.dataplane import DataPlane

BASIC = (Path(__file__).parent / "bmv2json" / "basic.json").read_bytes()


def dataplane() -> tuple[DataPlane, list[int]]:
    dp = DataPlane()
    dp.load_pipeline(BASIC)
    dp.table_insert("MyIngress.ipv4_lpm", TableEntry((Lpm(0, 0),), ActionCall(
        "MyIngress.ipv4_forward", (0x020000000001, 1))))
    out: list[int] = []
    dp.set_transmit_fn(lambda port, frame: out.append(len(frame)))
    return dp, out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=20))
def test_random_frames_never_break_the_switch(frames: list[bytes]) -> None:
    dp, out = dataplane()
    for fr in frames:
        # Half of them pretend to be IPv4 so the IPv4 parser sees garbage too.
        dp.receive(0, fr[:12] + b"\x08\x00" + fr[14:] if len(fr) > 14 and fr[0] & 1 else fr)
    st0 = dp.stats()
    assert st0.ports[0].rx_packets == len(frames)
    # As on BMv2, frames of any length are parsed (shorter than Ethernet: PacketTooShort), so
    # every frame leaves exactly once (to port 1 if IPv4 parsed, else port 0) or is dropped.
    assert st0.ports[0].rx_dropped_malformed == 0
    assert st0.parser_errors >= sum(1 for fr in frames if len(fr) < 14)
    assert len(out) + st0.pipeline_drops == len(frames)
    assert dp.flow is not None and dp.flow.counters.aborted == 0


def _mutate(doc: object, rng: random.Random) -> object:
    """Replace one random node of the JSON tree with a random wrong value."""
    paths: list[tuple[object, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                paths.append((node, i))
                walk(v)

    walk(doc)
    parent, key = rng.choice(paths)
    parent[key] = rng.choice([None, -1, 7, "bogus", [], {}, [1, 2], {"op": "?"}, True])  # type: ignore[index]
    return doc


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_mangled_json_is_rejected_cleanly_or_runs(seed: int) -> None:
    rng = random.Random(seed)
    doc = _mutate(copy.deepcopy(json.loads(BASIC)), rng)
    dp, _ = dataplane()
    try:
        dp.load_pipeline(json.dumps(doc).encode())
    except ApiError as e:
        assert e.code == Code.INVALID_ARGUMENT and "\n" not in e.message
        # A rejected pipeline changes nothing: the old one still forwards.
        dp.receive(0, bytes.fromhex("ffffffffffff0000000000010800") + bytes(20))
        assert dp.pipeline_json() == BASIC
        return
    # Accepted (the mutation hit something BMv2 ignores too): packets must still not crash it.
    dp.receive(0, bytes.fromhex("ffffffffffff0000000000010800") + bytes(40))
    assert dp.stats().ports[0].rx_packets == 1


@pytest.mark.parametrize("op", ["frobnicate", 7])
def test_an_unknown_primitive_is_refused_naming_it_and_its_action(op: object) -> None:
    doc = json.loads(BASIC)
    action = next(a for a in doc["actions"] if a["name"] == "MyIngress.ipv4_forward")
    action["primitives"][0]["op"] = op
    dp, _ = dataplane()
    with pytest.raises(ApiError) as info:
        dp.load_pipeline(json.dumps(doc).encode())
    assert info.value.code == Code.INVALID_ARGUMENT
    assert info.value.message == ("bad BMv2 JSON: action 'MyIngress.ipv4_forward' primitive[0] "
                                  f"{op!r}: unsupported primitive {op!r}")
    assert dp.pipeline_json() == BASIC
