"""The run CA: its certificates verify in a real TLS handshake, a stranger's do not, an expired
one is refused, and keys are never readable by anyone but their owner."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest

from cellfabric.core.pki import CertificateAuthority, Issued


def _server_ctx(ca: CertificateAuthority, server: Issued) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(server.cert, server.key)
    ctx.load_verify_locations(ca.cert_path)
    ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS
    return ctx


def _client_ctx(trust: Path, client: Issued | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(trust)
    if client is not None:
        ctx.load_cert_chain(client.cert, client.key)
    return ctx


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext,
               host: str = "localhost") -> tuple[bool, bool]:
    """(client completed its handshake, server completed its) over a loopback socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server_ok: list[bool] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
                server_ok.append(True)
        except (ssl.SSLError, OSError):
            server_ok.append(False)

    thread = threading.Thread(target=serve)
    thread.start()
    client_ok = False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                client_ctx.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"x")  # TLS 1.3: a refused client cert shows up on first I/O
            client_ok = True
    except (ssl.SSLError, OSError):
        client_ok = False
    thread.join(5)
    listener.close()
    return client_ok, bool(server_ok and server_ok[0])


def test_mutual_tls_with_the_run_ca(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "pki")
    server = ca.issue("switch")
    client = ca.issue("controller", server=False)
    assert _handshake(_server_ctx(ca, server), _client_ctx(ca.cert_path, client)) == (True, True)
    # the SAN carries 127.0.0.1 too: a client that dials the address verifies it
    assert _handshake(_server_ctx(ca, server), _client_ctx(ca.cert_path, client),
                      host="127.0.0.1")[1]


def test_strangers_and_expired_certificates_are_refused(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "pki")
    other = CertificateAuthority.create(tmp_path / "other", name="someone else")
    server = ca.issue("switch")
    stranger = other.issue("intruder")
    # a client certificate from another CA: the server refuses it
    assert not _handshake(_server_ctx(ca, server), _client_ctx(ca.cert_path, stranger))[1]
    # a client that trusts another CA refuses the server
    assert not _handshake(_server_ctx(ca, server),
                          _client_ctx(other.cert_path, ca.issue("c1")))[0]
    # a server name the certificate does not carry
    assert not _handshake(_server_ctx(ca, server), _client_ctx(ca.cert_path, ca.issue("c2")),
                          host="switch.example")[0]
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    expired = ca.issue("old", not_before=past, not_after=past + dt.timedelta(days=1))
    assert not _handshake(_server_ctx(ca, server), _client_ctx(ca.cert_path, expired))[1]


def test_keys_are_owner_only_and_certificates_public(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "pki")
    issued = ca.issue("switch")
    for key in (tmp_path / "pki" / "ca.key", issued.key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    for cert in (ca.cert_path, issued.cert):
        assert stat.S_IMODE(cert.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "pki").stat().st_mode) == 0o700
    # re-issuing over a file someone loosened tightens it again
    issued.key.chmod(0o644)
    again = ca.issue("switch")
    assert stat.S_IMODE(again.key.stat().st_mode) == 0o600


@pytest.mark.parametrize("hosts", [["10.0.0.1", "sw1"], ["::1"]])
def test_alt_names_follow_the_hosts_given(tmp_path: Path, hosts: list[str]) -> None:
    from cryptography import x509

    ca = CertificateAuthority.create(tmp_path / "pki")
    cert = x509.load_pem_x509_certificate(ca.issue("n", hosts).cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    got = [str(v) for v in san.get_values_for_type(x509.IPAddress)] + \
        san.get_values_for_type(x509.DNSName)
    assert sorted(got) == sorted(hosts)
