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


@pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")
def test_secure_run_on_real_bmv2(tmp_path: Path) -> None:
    """`cellfabric run --secure --target bmv2`: simple_switch_grpc serves mutual TLS with the
    run's CA and the controller programs it (a plaintext switch would refuse its TLS client)."""
    import json
    import subprocess

    pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")
    proc = subprocess.run(
        [sys.executable, "-m", "cellfabric.cli", "run", "leaf-spine", "--target", "bmv2",
         "--secure", "--size", "8192", "--count", "1", "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["run"]["p4runtime"] == "mutual TLS"
    assert metrics["summary"]["messages_completed"] == metrics["summary"]["messages_total"] == 4
    assert (run_dir / "pki" / "controller.key").stat().st_mode & 0o077 == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")
def test_secure_bmv2_run_refuses_clients_without_a_certificate(tmp_path: Path) -> None:
    """On real simple_switch_grpc, as tests/e2e/test_secure_run.py on p4sim: every switch
    listens on 127.0.0.1 only, answers the run's certificate, refuses plaintext and
    certificate-less clients, and the workload completes."""
    pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    from secure_probe import assert_secured, secured_run

    run, metrics = secured_run("bmv2", tmp_path / "run")
    assert_secured(run, metrics)
