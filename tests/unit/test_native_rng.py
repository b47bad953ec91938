"""crandom.SharedRandom is random.Random draw for draw, and the generated C draws from the same
stream: a switch's random() on the native path and its Python-side draws (the Python path, the
"random" hash) interleave as one random.Random would give them."""

from __future__ import annotations

import copy
import pickle
import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, f, hx, prim

from p4sim.switch.dataplane import DataPlane
from p4sim.switch.native import build, crandom

pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native data plane unavailable: {build.available()}")

SEEDS: list[Any] = [0, 1, 42, 2**32, 2**32 + 1, -5, 2**200 + 17, "42:leaf1", "0:spine3",
                    b"bytes", bytearray(b"ba"), 3.5]
# (lo, hi): 1-wide, powers of two (half the draws rejected), 2**32 and 2**32 + 1 values,
# several words, the whole int64 range, and the odd sizes in between
RANGES = [(5, 5), (0, 1), (0, 2), (-7, 3), (0, 4), (0, 255), (0, 256), (1, 65536),
          (0, 2**31), (0, 2**32 - 2), (0, 2**32 - 1), (0, 2**32), (-(2**31), 2**31 + 1),
          (0, 2**33 + 12345), (10, 2**40), (-(2**62), 2**62 - 1), (-(2**62), 2**62),
          (-(2**63), 2**63 - 1), (-(2**63), 0), (0, 2**63 - 1), (2**63 - 3, 2**63 - 1)]


def _draw(rng: random.Random, op: int, arg: int) -> Any:
    """One of the draws a switch or a test makes, chosen by ``op``."""
    if op == 0:
        lo, hi = RANGES[arg % len(RANGES)]
        return rng.randint(lo, hi)
    if op == 1:
        return rng.getrandbits(arg % 131)  # 0..130: no word, one, several, partial top words
    if op == 2:
        return rng.random()
    if op == 3:
        return rng.choice("abcdefghijk"[: 1 + arg % 11])
    if op == 4:
        items = list(range(arg % 40))
        rng.shuffle(items)
        return items
    if op == 5:
        return rng.randrange(-(2**70), 2**70 + arg, 3)  # wider than C: Random's own code
    if op == 6:
        return (rng.gauss(0.0, 1.0), rng.uniform(2.0, 3.0), rng.sample(range(1000), 5))
    return rng.randbytes(arg % 20)


@pytest.mark.parametrize("seed", SEEDS, ids=repr)
def test_the_same_draws_as_random_random(seed: Any) -> None:
    ours, ref = crandom.SharedRandom(seed), random.Random(seed)
    assert ours.getstate() == ref.getstate()
    plan = random.Random(repr(seed))  # which draws, in which order
    for i in range(1500):  # some 3000 words: the state is refilled several times
        op, arg = plan.randrange(8) if i % 2 else 0, plan.randrange(1000)
        assert _draw(ours, op, arg) == _draw(ref, op, arg), (i, op, arg)
    assert ours.getstate() == ref.getstate()


def test_every_range_and_bit_count_in_c() -> None:
    """randint's C shortcut on every range many times, and getrandbits for 0..130 bits."""
    ours, ref = crandom.SharedRandom(7), random.Random(7)
    for _ in range(60):
        for lo, hi in RANGES:
            assert ours.randint(lo, hi) == ref.randint(lo, hi), (lo, hi)
    for k in range(131):
        for _ in range(3):
            assert ours.getrandbits(k) == ref.getrandbits(k), k
    assert ours.getstate() == ref.getstate()


def test_state_moves_between_the_two_classes_both_ways() -> None:
    ours, ref = crandom.SharedRandom(3), random.Random(99)
    for _ in range(700):  # past a refill, the position somewhere in the middle
        ours.random()
    ref.setstate(ours.getstate())
    ref.gauss(0.0, 1.0)  # one gaussian kept back (gauss_next) travels with the state
    ours.setstate(ref.getstate())
    assert [ours.randint(0, 999) for _ in range(800)] == [ref.randint(0, 999) for _ in range(800)]
    assert ours.gauss(0.0, 1.0) == ref.gauss(0.0, 1.0)
    assert ours.getstate() == ref.getstate()
    back = random.Random()
    back.setstate(ours.getstate())
    assert back.getrandbits(100) == ours.getrandbits(100)
    for clone in (copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))):
        twin = clone(ours)
        assert type(twin) is crandom.SharedRandom and twin.address != ours.address
        assert twin.getstate() == ours.getstate()
        assert twin.random() == ours.random()
    ours.seed("again")
    assert ours.getstate() == random.Random("again").getstate()


def test_errors_are_random_randoms() -> None:
    ours, ref = crandom.SharedRandom(1), random.Random(1)
    for call in (lambda r: r.randint(5, 4), lambda r: r.getrandbits(-1),
                 lambda r: r.setstate((3, (0,) * 624 + (625,), None)),
                 lambda r: r.setstate((9, (), None)), lambda r: r.choice([])):
        with pytest.raises((ValueError, IndexError)) as mine:
            call(ours)
        with pytest.raises((ValueError, IndexError)) as theirs:
            call(ref)
        assert (type(mine.value), str(mine.value)) == (type(theirs.value), str(theirs.value))
    assert ours.getstate() == ref.getstate()


def test_without_a_compiler_the_factory_gives_random_random(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crandom, "_lib", None)
    monkeypatch.setattr(crandom, "_why_not", "no C compiler on PATH")
    rng = crandom.new(5)
    assert type(rng) is random.Random and rng.random() == random.Random(5).random()
    assert type(DataPlane(dataplane="auto").rng) is random.Random


# -- the generated C ----------------------------------------------------------------------------

W = 63  # the widest field the native path holds


def _signed(v: int) -> int:
    return v - (1 << W) if v >> (W - 1) else v


def rng_prog() -> Prog:
    """Every packet leaves on port 1 with probe.r = random(probe.lo, probe.hi)."""
    p = Prog([("lo", W, True), ("hi", W, True), ("r", W, True), ("pad", 3)])
    draw = p.action("draw", [], [
        prim("assign", f("standard_metadata", "egress_spec"), hx(1)),
        prim("modify_field_rng_uniform", f("probe", "r"), f("probe", "lo"), f("probe", "hi")),
    ])
    p.table("t", [], [draw], default=(draw, []))
    return p


@pytest.mark.parametrize("path", ["native", "python"])
def test_c_and_python_draws_interleave_as_one_stream(path: str) -> None:
    """Packets drawing random(lo, hi) (in C on the native path) between the switch's Python
    draws, over ranges the field widths allow: exactly a random.Random's sequence. A C draw too
    many or too few shifts every later value; another rejection rule changes values at once."""
    p = rng_prog()
    out: list[bytes] = []
    rng = crandom.SharedRandom("7:leaf1")
    dp = DataPlane(transmit=lambda port, frame: out.append(frame), rng=rng, dataplane=path)
    dp.load_pipeline(p.json())
    assert dp.dataplane == path
    if path == "native":  # drawn in C from the shared state, not called back
        assert dp._native._randint == dp._native.ffi.NULL
    ref = random.Random("7:leaf1")
    lim = 1 << (W - 1)
    ranges = [(lo, hi) for lo, hi in RANGES if -lim <= lo <= hi < lim]
    assert len(ranges) >= 15
    expected: list[int] = []
    for i in range(600):
        lo, hi = ranges[i % len(ranges)]
        dp.receive(0, p.frame(lo, hi))
        expected.append(ref.randint(lo, hi))
        if i % 3 == 0:  # the switch's Python side draws from the same state in between
            assert rng.randint(0, 1000) == ref.randint(0, 1000)
        if i % 7 == 0:
            assert rng.getrandbits(40) == ref.getrandbits(40)
    got = [_signed(p.fields(frame)["r"]) for frame in out]
    assert got == expected
    assert rng.getstate() == ref.getstate()


def test_a_plain_random_random_is_still_called_back() -> None:
    p = rng_prog()
    out: list[bytes] = []
    dp = DataPlane(transmit=lambda port, frame: out.append(frame), rng=random.Random(4),
                   dataplane="native")
    dp.load_pipeline(p.json())
    assert dp.dataplane == "native" and dp._native._randint != dp._native.ffi.NULL
    for lo, hi in RANGES[:12]:
        dp.receive(0, p.frame(lo, hi))
    ref = random.Random(4)
    assert [_signed(p.fields(fr)["r"]) for fr in out] == [ref.randint(lo, hi)
                                                          for lo, hi in RANGES[:12]]
