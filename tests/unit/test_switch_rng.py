"""Each data plane draws its random numbers from the generator it was given (as it is given
its clock): equal seeds give equal draws, and a packet leaves the process-wide ``random``
module's state alone."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, f, hx, prim

from p4sim.switch.dataplane import DataPlane
from p4sim.switch.externs import hash_algorithm

STD = "standard_metadata"


def draw_prog() -> Prog:
    """Every packet leaves on port 1 with probe.r = random(0, 65535)."""
    p = Prog([("r", 16)])
    draw = p.action("draw", [], [
        prim("assign", f(STD, "egress_spec"), hx(1)),
        prim("modify_field_rng_uniform", f("probe", "r"), hx(0), hx(65535)),
    ])
    p.table("t", [], [draw], default=(draw, []))
    return p


def draws(rng: random.Random | None, packets: int = 20) -> list[int]:
    p = draw_prog()
    out: list[bytes] = []
    dp = DataPlane(transmit=lambda port, frame: out.append(frame), rng=rng)
    dp.load_pipeline(p.json())
    for _ in range(packets):
        dp.receive(0, p.frame(0))
    return [p.fields(frame)["r"] for frame in out]


def test_equal_seeds_draw_equal_sequences_and_different_seeds_differ() -> None:
    first = draws(random.Random("42:leaf1"))
    assert first == draws(random.Random("42:leaf1"))
    reference = random.Random("42:leaf1")
    assert first == [reference.randint(0, 65535) for _ in range(20)]
    assert draws(random.Random("42:leaf2")) != first
    assert len(set(first)) > 10  # really drawn, not a constant


def test_a_packet_leaves_the_module_random_state_untouched() -> None:
    random.seed(5)
    before = random.getstate()
    draws(random.Random(1))
    draws(None)  # the default generator (OS entropy) is the data plane's own too
    assert random.getstate() == before


def test_the_random_hash_draws_from_the_generator_it_is_given() -> None:
    hash_random = hash_algorithm("random", random.Random(3))
    assert hash_random is not None
    reference = random.Random(3)
    assert [hash_random(b"x") for _ in range(5)] == [reference.getrandbits(32) for _ in range(5)]
