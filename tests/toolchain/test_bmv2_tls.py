"""The reliability battery's TLS rows (tests/reliability/tls_battery.py) on real
simple_switch_grpc with the toolchain on PATH (`make test-toolchain`): BMv2 gives every row the
code the battery states, which is the code p4sim is held to in tests/reliability."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not (shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss")),
    reason="real BMv2 toolchain not on PATH")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from targets import compile_program  # noqa: E402
from tls_battery import (  # noqa: E402
    ROWS,
    TlsRow,
    TlsSwitches,
    arbitrate,
    good_client_writes_and_reads,
)


@pytest.fixture(scope="module")
def bmv2(tmp_path_factory: pytest.TempPathFactory):
    group = TlsSwitches("bmv2", dict(os.environ), tmp_path_factory.mktemp("bmv2-tls"))
    yield group
    group.close()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_bmv2_tls_row(bmv2: TlsSwitches, row: TlsRow) -> None:
    assert arbitrate(bmv2.addr(row.server), row.client(bmv2.pki)) == row.expect, row.why
    assert row.server in bmv2.alive(), "simple_switch_grpc died"


def test_bmv2_good_mutual_tls_client_writes_and_reads(bmv2: TlsSwitches) -> None:
    p4info, json_path = compile_program("bmv2", bmv2.work / "build", bmv2.env)
    assert good_client_writes_and_reads(bmv2, p4info, json_path) == ["OK", "OK", "read back"]
