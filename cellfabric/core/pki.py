"""A run's own certificate authority: a CA, and server and client certificates it signs.

``cellfabric run --secure`` and the secured sweep cluster create one per run, in the run's
folder, so that nothing but the processes of that run hold a key the fabric trusts. Keys are
written with mode 0600 before any byte of them is, so no other user can read them even for an
instant; certificates are public and 0644.

Keys are ECDSA P-256 (what gRPC's BoringSSL and Dask's OpenSSL both accept, and fast to make:
a whole run's worth of certificates takes milliseconds). Every certificate carries the names
its holder answers to as subjectAltNames (DNS names and IP addresses), because gRPC and Python's
ssl module check the SAN, not the common name.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 7  # a run's certificates outlive the run, not the week


@dataclass(frozen=True)
class Issued:
    """The files of one certificate: its PEM certificate and its PEM private key."""

    cert: Path
    key: Path


@dataclass
class CertificateAuthority:
    """A CA whose key and certificate are in ``folder`` (``ca.crt``, ``ca.key``)."""

    folder: Path
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_path(self) -> Path:
        return self.folder / "ca.crt"

    @classmethod
    def create(cls, folder: Path, name: str = "cellfabric run CA",
               days: int = DEFAULT_DAYS) -> CertificateAuthority:
        """A new CA in ``folder`` (created 0700 if missing)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        start, end = _validity(days)
        cert = (x509.CertificateBuilder()
                .subject_name(subject).issuer_name(subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False),
                    critical=True)
                .sign(key, hashes.SHA256()))
        ca = cls(folder, key, cert)
        write_private_key(folder / "ca.key", key)
        write_public(folder / "ca.crt", cert.public_bytes(serialization.Encoding.PEM))
        return ca

    def issue(self, name: str, hosts: list[str] | None = None, *, server: bool = True,
              client: bool = True, days: int = DEFAULT_DAYS,
              not_before: dt.datetime | None = None,
              not_after: dt.datetime | None = None) -> Issued:
        """A certificate for ``name`` signed by this CA, written as ``<name>.crt`` and
        ``<name>.key`` in the CA's folder. ``hosts``: the DNS names and IP addresses it is
        valid for (default: localhost and 127.0.0.1). ``not_before``/``not_after`` override
        the validity window (tests use them to make an expired certificate)."""
        key = ec.generate_private_key(ec.SECP256R1())
        start, end = _validity(days)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(self.cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(not_before or start).not_valid_after(not_after or end)
                .add_extension(x509.SubjectAlternativeName(
                    _alt_names(hosts or ["localhost", "127.0.0.1"])), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                               critical=True)
                .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .sign(self.key, hashes.SHA256()))
        issued = Issued(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        write_private_key(issued.key, key)
        write_public(issued.cert, cert.public_bytes(serialization.Encoding.PEM))
        return issued


def _validity(days: int) -> tuple[dt.datetime, dt.datetime]:
    # A minute of slack before now: a peer whose clock is a little behind still accepts it.
    now = dt.datetime.now(dt.UTC)
    return now - dt.timedelta(minutes=1), now + dt.timedelta(days=days)


def _alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def write_private_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """Write ``key`` as unencrypted PKCS#8 PEM, the file 0600 from the moment it exists."""
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: set it
        os.write(fd, data)
    finally:
        os.close(fd)


def write_public(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o644)
