"""The TLS rows (tls_battery.py) on p4sim and, when the p4lang toolchain is beside the
repository, on real simple_switch_grpc: the same code for every row on both targets, the
good client writes and reads, and no refused client takes a switch down."""

from __future__ import annotations

import pytest
from targets import compile_program, toolchain_env
from tls_battery import ROWS, TlsRow, TlsSwitches, arbitrate, good_client_writes_and_reads

TARGETS = ["embedded", "bmv2"]


@pytest.fixture(scope="module", params=TARGETS)
def switches(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    env = None
    if request.param == "bmv2":
        env = toolchain_env()
        if env is None:
            pytest.skip("real BMv2 TLS rows: no ../shared/toolchains beside the repository")
    work = tmp_path_factory.mktemp(f"tls-{request.param}")
    group = TlsSwitches(request.param, env, work)
    yield group
    group.close()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_tls_row(switches: TlsSwitches, row: TlsRow) -> None:
    got = arbitrate(switches.addr(row.server), row.client(switches.pki))
    assert got == row.expect, f"{row.name}: {row.why}"
    assert row.server in switches.alive(), "the switch died"


def test_good_mutual_tls_client_writes_and_reads(switches: TlsSwitches) -> None:
    p4info, json_path = compile_program(switches.target, switches.work / "build", switches.env)
    assert good_client_writes_and_reads(switches, p4info, json_path) == ["OK", "OK", "read back"]
    assert set(switches.alive()) == set(switches.switches), "a switch died"
