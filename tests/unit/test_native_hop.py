"""The C hop's traffic manager (p4sim/switch/native/hop.c) against tm.TrafficManager: two
switches on the native data plane with the same fabric.p4 state, one driven the plain way
(DataPlane.receive / poll, the Python TM), one through NativeHop, get the same random
arrivals at random times, random services (before, at and after deadlines), random bit
rates, buffers and packet depths per port (tail drops both ways), ACKs in the high-priority
queue, and INT that egress adds (the serializer is settled for the frame that leaves). After
every step: the same frames in the same order and the same next deadline; now and then the
C side hands everything back and both Python TMs must hold the same queues and figures."""

from __future__ import annotations

import random
from typing import Any

import pytest
from native_harness import ING, fabric_frames, mutate, routed_fabric_state

from p4sim.switch.api import ActionCall, Exact, TableEntry
from p4sim.switch.dataplane import DataPlane
from p4sim.switch.native import build
from p4sim.switch.native import hop as native_hop

pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")


@pytest.fixture(scope="module")
def fabric_json() -> bytes:
    import json
    from pathlib import Path

    from p4sim.compile import compile_program, parse_args

    root = Path(__file__).resolve().parents[2]
    opts = parse_args([str(root / "p4src" / "fabric.p4"), "-o", "unused.json",
                       "-I", str(root / "p4src")])
    return json.dumps(compile_program(opts, warnings=[])[0]).encode()


class Twins:
    """What native_harness.Pair is, for a plain and a C-hop switch (both native)."""

    def __init__(self, json_bytes: bytes, seed: int) -> None:
        self.now = [1_000_000]
        self.out: dict[str, list] = {"plain": [], "hop": []}
        self.dps: dict[str, DataPlane] = {}
        for name in ("plain", "hop"):
            log = self.out[name]
            dp = DataPlane(priorities=2, clock=lambda: self.now[0], rng=random.Random(seed),
                           dataplane="native",
                           transmit=lambda port, frame, log=log: log.append((port, frame)))
            dp.load_pipeline(json_bytes)
            self.dps[name] = dp
        self.native = self.dps["plain"]
        self.peak: dict[int, int] = {}

    def both(self, method: str, *args: Any) -> None:
        for dp in self.dps.values():
            getattr(dp, method)(*args)


def _tm_state(dp: DataPlane) -> dict:
    tm, now = dp.tm, dp.clock()
    ports = sorted(set(tm.port_backlog) | set(tm.drops) | set(tm.busy_tx))
    return {
        "ports": tm.ports, "rr": tm.rr, "backlog": tm.backlog,
        "queues": {key: [(bytes(P.data), P.pos, P.ingress_port, list(P.F)) for P in q.items]
                   for key, q in tm.queues.items() if q.items},
        "links": {p: (link.bps, link.buffer_bytes, link.free_num, link.queued_bytes)
                  for p, link in tm.links.items()},
        "per_port": {p: (tm.port_backlog.get(p, 0), tm.drops.get(p, 0), tm.busy_tx.get(p, 0),
                         tm.busy_seconds(p, now)) for p in ports},
        "stats": dp.stats(),
    }


class HopDriver:
    """NativeHop driven as cellfabric.sim.hop drives it (no packet leaves it here)."""

    def __init__(self, dp: DataPlane, log: list) -> None:
        assert native_hop.refusal(dp) is None
        self.dp, self.log = dp, log
        self.hop = native_hop.NativeHop(dp)
        self.peak: dict[int, int] = {}

    def start(self) -> None:
        assert native_hop.refusal(self.dp) is None
        self.hop.adopt(self.peak)

    def stop(self) -> None:
        self.hop.handback(self.peak)

    def _call(self, rc: int) -> int | None:
        hop = self.hop
        assert rc == 0, "a packet left the C hop"
        self.log.extend(hop.frames(hop.res[0]))
        return None if hop.res[1] < 0 else hop.res[1]

    def receive(self, port: int, frame: bytes, now: int) -> int | None:
        hop = self.hop
        if hop.native.dirty:
            hop.native.sync()
        return self._call(hop.lib.hop_arrive(hop.T, frame, len(frame), port, now, hop.F,
                                             hop.out, hop.res))

    def service(self, now: int) -> int | None:
        hop = self.hop
        return self._call(hop.lib.hop_service(hop.T, now, hop.out, hop.res))


def _plain_receive(dp: DataPlane, peak: dict[int, int], port: int, frame: bytes) -> int | None:
    dp.receive(port, frame)
    tm = dp.tm
    if not tm.backlog:
        return None
    for p, waiting in tm.port_backlog.items():  # SimSwitch's plain peak check: every port
        if waiting > peak.get(p, 0):
            peak[p] = waiting
    return tm.next_deadline()


def _configure(tw: Twins, rng: random.Random, opcodes: list[int]) -> None:
    for port in range(4):
        tw.both("set_queue_rate", 0, port)
        # port 1: a slow link with a small byte buffer, port 2 a short packet depth (tail
        # drops both ways); the others at random
        tw.both("set_queue_depth", 3 if port == 2 else rng.choice([1 << 30, 1 << 30, 6]), port)
        tw.both("set_link_rate", 10**10 if port in (1, 2) else rng.choice([10**10, 10**11,
                                                                           4 * 10**11]),
                4000 if port == 1 else rng.choice([0, 8000, 1 << 20]), port)
    table = next(n for n in tw.native.cp.tables if n.endswith("feedback_priority"))
    action = next(a for a in tw.native.cp.tables[table].actions if a.endswith("set_priority"))
    for opcode in opcodes:  # the frames' first opcode (what they carry) to the high queue
        tw.both("table_insert", table, TableEntry((Exact(opcode),), ActionCall(action, (1,))))


@pytest.mark.parametrize("seed", [0, 1, 2, 4, 6])
def test_c_hop_traffic_manager_is_the_python_one(fabric_json: bytes, seed: int) -> None:
    rng = random.Random(seed)
    tw = Twins(fabric_json, seed)
    routed_fabric_state(tw, rng)
    assert ING  # (the harness's control names)
    frames = fabric_frames(rng)
    from scapy.contrib.roce import BTH
    from scapy.layers.l2 import Ether

    opcodes = sorted({Ether(f)[BTH].opcode for f in frames if BTH in Ether(f)})
    _configure(tw, rng, opcodes[:1])
    plain, hdp = tw.dps["plain"], tw.dps["hop"]
    drv = HopDriver(hdp, tw.out["hop"])
    drv.start()
    served = 0
    for i in range(1500):
        now = tw.now[0]
        if rng.random() < 0.6:
            frame = rng.choice(frames)
            if rng.random() < 0.1:
                frame = mutate(frame, rng)
            port = rng.randrange(0, 4)
            a = _plain_receive(plain, tw.peak, port, frame)
            b = drv.receive(port, frame, now)
        else:
            a, b = plain.poll(), drv.service(now)
        assert a == b, (i, a, b)
        assert tw.out["plain"] == tw.out["hop"], i
        served = len(tw.out["plain"])
        tw.now[0] += rng.choice([0, 0, 1, 7, 40, 82, 300, 900])
        if i % 300 == 299:  # everything back to Python, compared, and taken again
            drv.stop()
            assert _tm_state(plain) == _tm_state(hdp), i
            assert tw.peak == drv.peak
            drv.start()
    drv.stop()
    tw.now[0] += 10**9
    assert plain.poll() is None and hdp.poll() is None  # (the C side has handed back)
    assert tw.out["plain"] == tw.out["hop"]
    assert _tm_state(plain) == _tm_state(hdp)
    st = plain.stats()
    assert served > 100  # traffic went through
    assert sum(p.queue_drops for p in st.ports.values()) > 0  # tail drops happened
    assert max(tw.peak.values()) > 2  # queues built
    assert any(prio == 1 for _, prio in plain.tm.queues)  # the high queue was used


def test_a_link_that_leaves_priorities_out_stays_on_the_python_path(fabric_json: bytes) -> None:
    # hop.c's serializer serves every queue of a port: a set_port_rate bound (priorities off
    # the line) is the Python TM's alone, so the C hop must refuse such a switch
    dp = DataPlane(priorities=3, clock=lambda: 0, dataplane="native")
    dp.load_pipeline(fabric_json)
    dp.set_link_rate(10**10, 0)
    dp.tm.queue(1, 0)
    assert native_hop.refusal(dp) is None
    dp.set_port_rate(0, 1, 2)  # no line rate, only the bound
    assert native_hop.refusal(dp) == "a link that leaves some priorities out"
