"""`cellfabric sweep --scheduler tls://...` on a real Dask cluster started here with mutual TLS
(a scheduler and a worker process on 127.0.0.1, stopped by PID), from certificates made by
`cellfabric sweep --make-certs`: a sweep runs to the results a local run gives; a client without
a certificate, with one from another CA, or speaking plain TCP is refused with one line and
nothing runs; a plain tcp:// scheduler beyond loopback gets a one-line warning."""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID
from sweep_helpers import CELLFABRIC, records, run_sweep, summaries, write_spec

from cellfabric.core.pki import CertificateAuthority
from cellfabric.sweep import cli as sweep_cli
from cellfabric.sweep.executors import ExecutorError
from netlab.daskcluster import LocalDaskCluster

pytestmark = pytest.mark.timeout(240)
ROLES = ("scheduler", "worker", "client")


def make_certs(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CELLFABRIC), "sweep", "--make-certs", str(folder)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tls") / "cluster"
    made = make_certs(folder)
    assert made.returncode == 0, made.stderr
    return folder


@pytest.fixture(scope="module")
def other_certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tls") / "other"
    assert make_certs(folder).returncode == 0
    return folder


@pytest.fixture(scope="module")
def cluster(certs):
    with LocalDaskCluster(workers=1, tls_dir=certs) as c:
        yield c


def tls_options(ca_dir: Path, cert_dir: Path, role: str = "client") -> list[str]:
    return ["--tls-ca-file", str(ca_dir / "ca.crt"), "--tls-cert", str(cert_dir / f"{role}.crt"),
            "--tls-key", str(cert_dir / f"{role}.key")]


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("cellfabric sweep: error: "), stderr
    return lines[0]


def test_make_certs_writes_a_ca_and_a_certificate_per_role_signed_by_it(certs, other_certs):
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    other_ca = x509.load_pem_x509_certificate((other_certs / "ca.crt").read_bytes())
    assert (certs.stat().st_mode & 0o777) == 0o700
    for role in ROLES:
        cert = x509.load_pem_x509_certificate((certs / f"{role}.crt").read_bytes())
        cert.verify_directly_issued_by(ca)
        with pytest.raises((ValueError, InvalidSignature)):  # the other CA did not sign it
            cert.verify_directly_issued_by(other_ca)
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        # a worker both serves (scheduler and peers connect to it) and connects as a client
        assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= usages
        assert (certs / f"{role}.key").stat().st_mode & 0o777 == 0o600
    assert (certs / "ca.key").stat().st_mode & 0o777 == 0o600
    again = make_certs(certs)  # would replace the CA the running cluster trusts
    assert again.returncode == 2
    assert "already holds a CA" in one_error_line(again.stderr)
    assert x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes()) == ca


def test_sweep_through_the_tls_cluster_gives_the_local_results(tmp_path, certs, cluster):
    assert cluster.address.startswith("tls://127.0.0.1:")
    spec = write_spec(tmp_path / "grid.yaml", {
        "name": "grid", "options": {"topology": "leaf-spine", "fail-on": "spray=bad",
                                    "sleep": 0.1},
        "axes": {"spray": ["ecmp", "bad"], "seed": [1, 2]}})
    local = run_sweep(spec, tmp_path / "local", "--workers", "2")
    remote = run_sweep(spec, tmp_path / "tls", "--scheduler", cluster.address,
                       *tls_options(certs, certs))
    assert local.returncode == remote.returncode == 1, remote.stdout + remote.stderr
    assert "warning" not in remote.stderr
    assert f"Dask scheduler {cluster.address}: 1 workers" in remote.stdout
    on_cluster = summaries(tmp_path / "tls")
    assert len(on_cluster) == 4 and on_cluster == summaries(tmp_path / "local")
    assert sorted(status for status, _ in on_cluster.values()) == ["failed", "failed", "ok", "ok"]
    recs = records(tmp_path / "tls").values()
    assert {r["executor"] for r in recs} == {"dask"}
    assert all(r["worker"].startswith("tls://127.0.0.1:") for r in recs)  # the worker too


def test_dask_config_keys_stand_in_for_the_options(tmp_path, certs, cluster):
    spec = write_spec(tmp_path / "one.yaml", {"name": "one", "tasks": [{"seed": 7}]})
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(certs / "ca.crt"),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(certs / "client.crt"),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(certs / "client.key")}
    done = subprocess.run([str(CELLFABRIC), "sweep", str(spec), "--results", str(tmp_path / "r"),
                           "--scheduler", cluster.address], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["status"] for r in records(tmp_path / "r").values()] == ["ok"]


def _first_bytes(address: str, ca: Path, cert: tuple[Path, Path] | None) -> bytes:
    """Open a TLS connection to a Dask address and read what it sends first (a Dask server
    writes its handshake as soon as a connection is accepted)."""
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(*map(str, cert))
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            ctx.wrap_socket(raw) as conn:
        return conn.recv(64)


def test_the_scheduler_refuses_a_client_without_a_certificate(certs, cluster):
    with_cert = _first_bytes(cluster.address, certs / "ca.crt",
                             (certs / "client.crt", certs / "client.key"))
    assert with_cert  # the scheduler talks to a client holding a certificate from its CA
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"):
        _first_bytes(cluster.address, certs / "ca.crt", None)


def test_sweep_without_a_client_certificate_is_one_line_and_runs_nothing(tmp_path, certs,
                                                                         cluster):
    spec = write_spec(tmp_path / "s.yaml", {"options": {"log": str(tmp_path / "ran.log")},
                                            "tasks": [{"seed": 1}]})
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    done = subprocess.run([str(CELLFABRIC), "sweep", str(spec), "--results", str(tmp_path / "r"),
                           "--scheduler", cluster.address, "--tls-ca-file",
                           str(certs / "ca.crt")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert "missing --tls-cert" in line and "--tls-key" in line
    assert not (tmp_path / "ran.log").exists()


def _refused(tmp_path: Path, address: str, options: list[str]) -> str:
    """Run a one-task sweep that must be refused at once; its one error line."""
    spec = write_spec(tmp_path / "s.yaml", {"options": {"log": str(tmp_path / "ran.log")},
                                            "tasks": [{"seed": 1}]})
    # A connect timeout far beyond the subprocess's own: a refusal left to run out the
    # timeout would be killed (TimeoutExpired) rather than come back as an error.
    done = run_sweep(spec, tmp_path / "r", "--scheduler", address, "--connect-timeout", "3600",
                     *options, timeout=120)
    assert done.returncode == 2
    assert not (tmp_path / "ran.log").exists()  # nothing ran
    line = one_error_line(done.stderr)
    assert "timed out" not in line.lower()
    return line


@pytest.mark.parametrize(("ca_of", "expected"), [
    # the scheduler rejects our certificate (its alert may be lost to the close that follows)
    ("cluster", "refused this client's certificate --tls-cert {cert} ("),
    # ...and we reject the scheduler's, whose CA we were not given
    ("other", "presented a certificate that --tls-ca-file {ca} does not vouch for ("),
])
def test_a_certificate_from_another_ca_is_refused(tmp_path, certs, other_certs, cluster,
                                                  ca_of, expected):
    ca_dir = certs if ca_of == "cluster" else other_certs
    line = _refused(tmp_path, cluster.address, tls_options(ca_dir, other_certs))
    assert expected.format(cert=other_certs / "client.crt", ca=ca_dir / "ca.crt") in line


def test_an_expired_client_certificate_is_refused(tmp_path, certs, cluster):
    ca = CertificateAuthority(
        tmp_path, load_pem_private_key((certs / "ca.key").read_bytes(), None),
        x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes()))
    now = dt.datetime.now(dt.UTC)
    old = ca.issue("client", not_before=now - dt.timedelta(days=9),
                   not_after=now - dt.timedelta(days=2))
    line = _refused(tmp_path, cluster.address, ["--tls-ca-file", str(certs / "ca.crt"),
                                                "--tls-cert", str(old.cert),
                                                "--tls-key", str(old.key)])
    assert f"refused this client's certificate --tls-cert {old.cert} (expired)" in line


def test_a_plain_tcp_client_on_the_tls_port_is_refused(tmp_path, cluster):
    line = _refused(tmp_path, cluster.address.replace("tls://", "tcp://"), [])
    assert "closed the connection: is it a tls:// scheduler?" in line  # and no warning


def _stderr_before_connecting(monkeypatch, capsys, tmp_path, *args: str) -> str:
    """sweep_main's stderr up to the point where it would connect (the executor is a stub
    that fails, so no packet leaves this machine)."""
    def no_cluster(address: str, **_: object) -> None:
        raise ExecutorError(f"stub: not connecting to {address}")

    monkeypatch.setattr(sweep_cli, "DaskExecutor", no_cluster)
    spec = write_spec(tmp_path / "s.yaml", {"tasks": [{"seed": 1}]})
    assert sweep_cli.sweep_main([str(spec), "--results", str(tmp_path / "r"), *args]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "10.0.0.5:8786",
                                     "tcp://[2001:db8::5]:8786"])
def test_plain_tcp_beyond_loopback_warns_once(monkeypatch, capsys, tmp_path, address):
    err = _stderr_before_connecting(monkeypatch, capsys, tmp_path, "--scheduler", address)
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(f"cellfabric sweep: warning: {address} is plain tcp")
    assert "tls://" in warnings[0]


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://127.0.1.1:8786",
                                     "localhost:8786", "tcp://[::1]:8786"])
def test_plain_tcp_on_loopback_stays_quiet(monkeypatch, capsys, tmp_path, address):
    err = _stderr_before_connecting(monkeypatch, capsys, tmp_path, "--scheduler", address)
    assert "warning" not in err and "stub: not connecting" in err


def test_tls_beyond_loopback_stays_quiet(monkeypatch, capsys, tmp_path, certs):
    err = _stderr_before_connecting(monkeypatch, capsys, tmp_path, "--scheduler",
                                    "tls://10.0.0.5:8786", *tls_options(certs, certs))
    assert "warning" not in err and "stub: not connecting to tls://10.0.0.5:8786" in err


@pytest.mark.parametrize(("args", "expected"), [
    (["--scheduler", "tcp://10.0.0.5:8786", "--tls-cert", "c.crt"],
     "--tls-cert: only for a tls:// scheduler (got tcp://10.0.0.5:8786)"),
    (["--tls-ca-file", "ca.crt"], "--tls-ca-file: only with --scheduler tls://"),
    (["--scheduler", "tls://10.0.0.5:8786", "--tls-ca-file", "CA", "--tls-cert", "CERT",
      "--tls-key", "/nonexistent/client.key"], "--tls-key /nonexistent/client.key: no such file"),
    (["--scheduler", "tls://10.0.0.5:8786", "--tls-ca-file", "CA", "--tls-cert", "CERT",
      "--tls-key", "CA"], "cannot be loaded as a certificate and its key"),
    (["--scheduler", "tls://10.0.0.5:8786", "--tls-ca-file", "KEY", "--tls-cert", "CERT",
      "--tls-key", "KEY"], "not a PEM CA certificate"),
])
def test_tls_settings_that_cannot_work_are_one_line(monkeypatch, capsys, tmp_path, certs, args,
                                                    expected):
    names = {"CA": certs / "ca.crt", "CERT": certs / "client.crt", "KEY": certs / "client.key"}
    args = [str(names.get(a, a)) for a in args]
    err = _stderr_before_connecting(monkeypatch, capsys, tmp_path, *args)
    assert "stub" not in err and "warning" not in err  # refused before any connection
    assert expected in one_error_line(err)


def test_a_tls_client_to_a_plain_tcp_scheduler_is_one_line(tmp_path, certs):
    with LocalDaskCluster(workers=0) as plain:
        line = _refused(tmp_path, plain.address.replace("tcp://", "tls://"),
                        tls_options(certs, certs))
    assert "does not answer in TLS: is it a tcp:// scheduler?" in line


def test_cert_days_sets_the_validity_and_must_be_positive(tmp_path, capsys):
    assert sweep_cli.sweep_main(["--make-certs", str(tmp_path / "no"), "--cert-days", "0"]) == 2
    assert "--cert-days 0: expected a positive number" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "no").exists()
    assert sweep_cli.sweep_main(["--make-certs", str(tmp_path / "c"), "--cert-days", "30"]) == 0
    out = capsys.readouterr().out
    assert f"--tls-cert {tmp_path / 'c'}/worker.crt" in out  # the recipe names these files
    for name in ("ca", *ROLES):
        cert = x509.load_pem_x509_certificate((tmp_path / "c" / f"{name}.crt").read_bytes())
        left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
        assert dt.timedelta(days=29, hours=23) < left <= dt.timedelta(days=30)
