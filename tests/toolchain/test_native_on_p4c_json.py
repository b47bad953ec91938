"""Real p4c-bm2-ss's JSON of fabric.p4 on p4sim's native data plane: it runs native (the
generator reads p4c's JSON, not only p4sim's) and gives the Python path's results byte for
byte, over the same randomized differential as tests/unit/test_native_dataplane.py.

Runs when the p4lang toolchain is on PATH; skips otherwise. Time budget: ~15 s.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netlab.targets import p4c_env
from p4sim.switch.api import CloneSession, Replica
from p4sim.switch.native import build

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))

from native_harness import Pair, fabric_frames, mutate, random_fabric_state  # noqa: E402

pytestmark = [
    pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                       reason="real p4c-bm2-ss not on PATH (p4lang toolchain)"),
    pytest.mark.skipif(build.available() is not None, reason="no native data plane here"),
]


@pytest.fixture(scope="module")
def p4c_fabric_json(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("p4c")
    argv = ["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", "-I", str(REPO / "p4src"),
            str(REPO / "p4src" / "fabric.p4"), "-o", str(out / "fabric.json")]
    proc = subprocess.run(argv, capture_output=True, text=True, env=p4c_env(), cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (out / "fabric.json").read_bytes()


@pytest.mark.parametrize("seed", range(3))
def test_p4c_fabric_json_native_equals_python(p4c_fabric_json: bytes, seed: int) -> None:
    rng = random.Random(seed)
    pair = Pair(p4c_fabric_json, seed=seed, cpu_port=64)
    assert pair.native.dataplane == "native"
    random_fabric_state(pair, rng)
    pair.both("mcast_group_set", 1, [Replica(1, 1), Replica(2, 2)])
    for session in range(4):
        pair.both("clone_session_set", CloneSession(session, [Replica(3, 0)]))
    frames = fabric_frames(rng)
    for _ in range(400):
        frame = rng.choice(frames)
        if rng.random() < 0.2:
            frame = mutate(frame, rng)
        pair.receive(rng.randrange(0, 4), frame)
        pair.advance(rng.choice([0, 100, 10_000]))
    pair.advance(10**10)
    pair.check()
    assert len(pair.out["native"]) > 40
