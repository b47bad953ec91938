"""The exhaustion storms of tests/reliability/test_exhaustion.py on real simple_switch_grpc
(1.15.5, PI 0.1.2) beside the same traffic check and memory bound: what BMv2 answers each
storm, and why p4sim answers otherwise where it does.

Needs root (veths and namespaces) and the real toolchain (on PATH, or beside the repository)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

from targets import toolchain_env
from test_exhaustion import EXPECTED, check_storm, storm_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veths and namespaces need root")

# BMv2's answers; WHY says why p4sim's (test_exhaustion.EXPECTED) differ. BMv2's memory is
# not held to p4sim's bound (measured here: the 100,000-update Write took its resident size
# from 36 to 126 MiB, the other storms added up to 18% each); the run prints what it grew by.
BMV2 = {**EXPECTED,
        "Write of 100,000 updates": "1023 OK, 98977 UNKNOWN",
        "Write of 64 MiB": "1 INVALID_ARGUMENT"}
WHY = {
    "Write of 100,000 updates": "PI applies a Write of any length (the 1,024-entry table "
    "fills, then each update fails as a target error, UNKNOWN); p4sim refuses more than "
    "10,000 updates in one Write whole, counted before parsing, with RESOURCE_EXHAUSTED",
    "Write of 64 MiB": "PI takes requests up to 256 MiB and refuses the 64 MiB action "
    "parameter (INVALID_ARGUMENT); p4sim takes requests up to 32 MiB, and gRPC refuses a "
    "longer one with RESOURCE_EXHAUSTED before it is read into memory",
}


def _env() -> dict[str, str] | None:
    if shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"):
        return dict(os.environ)
    return toolchain_env()


@pytest.fixture(scope="module")
def bmv2_storms(tmp_path_factory: pytest.TempPathFactory):
    env = _env()
    if env is None:
        pytest.skip("real BMv2 toolchain neither on PATH nor beside the repository")
    yield from storm_fixture("bmv2", env, tmp_path_factory.mktemp("exhaustion-bmv2"))


@pytest.mark.parametrize("name", list(BMV2))
def test_storm_on_bmv2(bmv2_storms, name: str) -> None:
    check_storm(bmv2_storms, name, BMV2[name], memory_bound=False)


def test_differences_are_explained() -> None:
    assert {n for n in BMV2 if BMV2[n] != EXPECTED[n]} == set(WHY)
