"""`cellfabric run --secure` on p4sim: the fabric's P4Runtime under mutual TLS from the run's
own CA. The workload completes, every switch's gRPC server listens on loopback only (out of
reach of the hosts' namespaces), and a client without the run's certificate reaches none of
them (secure_probe.py; tests/toolchain/test_bmv2_tls.py runs the same on real BMv2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from secure_probe import assert_secured, secured_run

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]


def test_secure_run_completes_and_refuses_clients_without_a_certificate(tmp_path: Path) -> None:
    run, metrics = secured_run("embedded", tmp_path / "run")
    assert_secured(run, metrics)
