"""TLS for the P4Runtime server, from simple_switch_grpc's five options, combined as BMv2 does.

Measured on simple_switch_grpc 1.15.5 (its start-up lines are quoted in the messages below):

- ``--grpc-server-ssl`` needs ``--grpc-server-cert`` and ``--grpc-server-key`` (exit 1 when
  either is missing, the cert checked first); a PEM file that cannot be read is exit 1.
- Without ``--grpc-server-ssl`` the PEM options and ``--grpc-server-with-client-auth`` are
  ignored with a warning and the server is plaintext.
- Without client auth the server does not ask for a client certificate at all (a client
  presenting one from another CA, or an expired one, is served); ``--grpc-server-cacert`` alone
  changes nothing.
- With client auth, a client must present a certificate that verifies against
  ``--grpc-server-cacert``; with client auth but no CA nothing verifies, so every client is
  refused (BMv2 says nothing at start; p4sim warns).

A refused TLS handshake is UNAVAILABLE on the client's first RPC, as with any gRPC server.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc


class TlsConfigError(Exception):
    """A TLS option that stops start-up (exit 1, as BMv2)."""


@dataclass(frozen=True)
class ServerTls:
    """PEM bytes of the server's certificate and key, the CA that client certificates must
    verify against (``None``: none given), and whether a client certificate is required."""

    cert: bytes
    key: bytes
    cacert: bytes | None = None
    client_auth: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        # gRPC Python refuses client auth without roots; empty roots verify nothing, which is
        # what BMv2's server does with --grpc-server-with-client-auth and no CA.
        roots = self.cacert if self.cacert is not None else (b"" if self.client_auth else None)
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=roots,
                                           require_client_auth=self.client_auth)


def _read_pem(path: str, marker: bytes, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        raise TlsConfigError(f"Error when reading pem file '{path}': file cannot be opened") \
            from None
    if marker not in data:
        raise TlsConfigError(f"pem file '{path}' holds no {what}")
    return data


def server_tls(ssl: bool, cacert: str | None, cert: str | None, key: str | None,
               client_auth: bool) -> tuple[ServerTls | None, list[str]]:
    """The server's TLS settings from the five options, and the warnings to print at start.
    Raises TlsConfigError for the combinations BMv2 refuses to start with."""
    if not ssl:
        warnings = []
        if cacert or cert or key:
            warnings.append("SSL/TLS is disabled for gRPC server, so provided .pem files "
                            "will be ignored")
        if client_auth:
            warnings.append("SSL/TLS is disabled for gRPC server, so cannot request "
                            "client auth")
        return None, warnings
    for flag, value in (("--grpc-server-cert", cert), ("--grpc-server-key", key)):
        if not value:
            raise TlsConfigError(f"When enabling SSL/TLS for gRPC server, {flag} is required")
    assert cert is not None and key is not None
    ca = _read_pem(cacert, b"-----BEGIN CERTIFICATE-----", "certificate") if cacert else None
    tls = ServerTls(_read_pem(cert, b"-----BEGIN CERTIFICATE-----", "certificate"),
                    _read_pem(key, b"PRIVATE KEY-----", "private key"), ca, client_auth)
    warnings = []
    if client_auth and ca is None:
        warnings.append("--grpc-server-with-client-auth without --grpc-server-cacert: no "
                        "client certificate can be verified, every client is refused")
    return tls, warnings
