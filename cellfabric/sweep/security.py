"""The sweep client's side of a secured Dask cluster: TLS settings, the plaintext warning, the
cluster's certificates, and connection errors said in one line.

A Dask scheduler runs whatever pickled function a client that reaches it submits, so a cluster
on a shared network must only accept clients holding a certificate from its own CA. Dask does
that with mutual TLS (``tls://`` addresses): the scheduler and workers require a certificate
signed by the CA from every peer (``ssl.CERT_REQUIRED``) and check the chain, not the host name
(``check_hostname`` is off in ``distributed.security``: clusters are reached by IP address).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellfabric.core.pki import DEFAULT_DAYS, CertificateAuthority

# Dask's own configuration keys for a client's TLS files (also settable as environment
# variables, e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE); the options override them.
CONFIG_KEYS = {"ca_file": "distributed.comm.tls.ca-file",
               "cert": "distributed.comm.tls.client.cert",
               "key": "distributed.comm.tls.client.key"}
OPTION_NAMES = {"ca_file": "--tls-ca-file", "cert": "--tls-cert", "key": "--tls-key"}
CLUSTER_ROLES = ("scheduler", "worker", "client")


class SecurityError(ValueError):
    """A TLS setting that cannot work; the message is one line naming the option."""


@dataclass(frozen=True)
class ClientTls:
    ca_file: str
    cert: str
    key: str

    def security(self) -> Any:
        """Dask's Security for a client: these files, encryption required on every link."""
        from distributed.security import Security

        return Security(require_encryption=True, tls_ca_file=self.ca_file,
                        tls_client_cert=self.cert, tls_client_key=self.key)


def split_address(address: str) -> tuple[str, str]:
    """(scheme, host) of a Dask address; a bare HOST:PORT takes Dask's default scheme."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            return scheme, location
        host, _port = parse_host_port(location, 8786)
    except ValueError as exc:
        raise SecurityError(f"--scheduler {address}: not a Dask address ({exc})") from None
    return scheme, str(host)


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address (127/8, ::1)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False  # Dask will say it cannot resolve it; until then, assume it is remote
    addresses = {info[4][0].split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def plaintext_warning(address: str) -> str | None:
    """The one-line warning for a scheduler reached without TLS beyond this machine."""
    scheme, host = split_address(address)
    if scheme in ("tls", "inproc") or is_loopback(host):
        return None
    return (f"{address} is plain {scheme}: anyone who reaches the scheduler can run code on "
            f"its workers; start the cluster with TLS and use tls:// (README, Sweeps)")


def client_tls(address: str, ca_file: str | None, cert: str | None,
               key: str | None) -> ClientTls | None:
    """The client's TLS files for ``address``: the options, else Dask's config keys. None for a
    scheduler that is not tls://. Every file is checked here (present, readable, key matches
    certificate), so a mistake is one line before any connection is tried."""
    given = {"ca_file": ca_file, "cert": cert, "key": key}
    scheme, _ = split_address(address)
    if scheme != "tls":
        named = [OPTION_NAMES[k] for k, v in given.items() if v]
        if named:
            raise SecurityError(f"{', '.join(named)}: only for a tls:// scheduler "
                                f"(got {address})")
        return None
    import dask

    files = {k: v or dask.config.get(CONFIG_KEYS[k], None) for k, v in given.items()}
    missing = [f"{OPTION_NAMES[k]} (or Dask config {CONFIG_KEYS[k]})"
               for k, v in files.items() if not v]
    if missing:
        raise SecurityError(f"{address} needs the cluster's CA, a client certificate from it and "
                            f"its key: missing {', '.join(missing)}")
    # Dask's config may hold a PEM itself rather than a path (as Security.temporary does).
    in_memory = any("-----BEGIN" in str(v) for v in files.values())
    for k, path in files.items():
        if "-----BEGIN" not in str(path) and not Path(path).is_file():
            raise SecurityError(f"{OPTION_NAMES[k]} {path}: no such file")
    tls = ClientTls(str(files["ca_file"]), str(files["cert"]), str(files["key"]))
    if not in_memory:
        client_context(tls)
    return tls


def client_context(tls: ClientTls) -> ssl.SSLContext:
    """The SSL context Dask's client makes from these files: this CA only, this certificate,
    the chain checked and not the host name."""
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise SecurityError(f"--tls-ca-file {tls.ca_file}: not a PEM CA certificate "
                            f"({_reason(exc)})") from None
    try:
        ctx.load_cert_chain(tls.cert, tls.key)
    except (ssl.SSLError, OSError) as exc:
        raise SecurityError(f"--tls-cert {tls.cert} with --tls-key {tls.key}: cannot be "
                            f"loaded as a certificate and its key ({_reason(exc)})") from None
    ctx.check_hostname = False
    return ctx


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc)
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    return str(exc)


def probe_tls(address: str, tls: ClientTls, timeout_s: float) -> None:
    """Open one TLS connection to the scheduler as Dask would (this CA, this certificate, the
    chain checked and not the host name) and read its first bytes: a refused certificate, an
    untrusted scheduler or a plaintext one is then said in one line. Dask's own connect races
    on a plaintext server (tornado's "IOStream is not idle") and can then hang closing the
    client. A scheduler not reachable yet is left to Dask, which retries until its timeout."""
    if any("-----BEGIN" in f for f in (tls.ca_file, tls.cert, tls.key)):
        return
    _, location = address.split("://", 1)
    from distributed.comm.addressing import parse_host_port

    host, port = parse_host_port(location, 8786)
    ctx = client_context(tls)
    try:
        raw = socket.create_connection((host, port), timeout=timeout_s)
    except OSError:
        return
    with raw:
        try:
            with ctx.wrap_socket(raw) as conn:
                # TLS 1.3 finishes the client's handshake before the server judges its
                # certificate: a refusal arrives as an alert on the first read, or, when
                # the close that follows the alert overtakes it, as a reset or an end of
                # stream (a scheduler that accepts us speaks first).
                first = conn.recv(1)
        except ssl.SSLCertVerificationError as exc:
            raise SecurityError(f"the Dask scheduler at {address} presented a certificate "
                                f"that --tls-ca-file {tls.ca_file} does not vouch for "
                                f"({exc.verify_message}): refusing it") from None
        except ssl.SSLError as exc:
            raise SecurityError(_tls_refusal(address, tls, str(exc))) from None
        except (ConnectionResetError, BrokenPipeError):
            first = b""
        except OSError:
            return
    if not first:
        raise SecurityError(_tls_refusal(address, tls, "EOF after the handshake"))


# The server's TLS alerts about our certificate, in words.
_ALERTS = {"UNKNOWN_CA": "not signed by the cluster's CA",
           "CERTIFICATE_EXPIRED": "expired",
           "CERTIFICATE_REQUIRED": "the scheduler requires one",
           "BAD_CERTIFICATE": "not accepted",
           "UNSUPPORTED_CERTIFICATE": "not for this use"}


def _tls_refusal(address: str, tls: ClientTls, text: str) -> str:
    if any(t in text for t in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "not idle")):
        return (f"the Dask scheduler at {address} does not answer in TLS: is it a tcp:// "
                f"scheduler? (the cluster must be started with TLS, README, Sweeps)")
    if "ALERT" in text.upper() or "EOF" in text.upper():
        why = next((words for alert, words in _ALERTS.items() if alert in text),
                   "is it from the cluster's CA?")
        return (f"the Dask scheduler at {address} refused this client's certificate "
                f"--tls-cert {tls.cert} ({why})")
    return f"TLS to the Dask scheduler at {address} failed: {' '.join(text.split())}"


def connect_error(address: str, exc: BaseException, tls: ClientTls | None) -> str:
    """One line for a failed connection, with the likely cause for the TLS failures."""
    text = str(exc) or str(exc.__cause__ or exc.__context__ or "") or type(exc).__name__
    if tls is not None and "TLS certificate does not match" in text:
        return (f"the Dask scheduler at {address} presented a certificate not signed by "
                f"--tls-ca-file {tls.ca_file}: refusing it")
    if tls is not None and ("SSL" in text or "not idle" in text):
        return _tls_refusal(address, tls, text)
    if tls is None and "reset by peer" in text:
        return (f"the Dask scheduler at {address} closed the connection: is it a tls:// "
                f"scheduler? ({text.rsplit(': ', 1)[-1]})")
    return f"cannot reach the Dask scheduler at {address}: {' '.join(text.split())}"


def make_cluster_certs(folder: Path, days: int = DEFAULT_DAYS) -> dict[str, tuple[Path, Path]]:
    """A new CA in ``folder`` and a certificate and key for each role of the cluster. One
    worker certificate serves every worker. Refuses a folder that already holds a CA: the
    running cluster's certificates would stop matching it."""
    folder = Path(folder)
    if (folder / "ca.key").exists():
        raise SecurityError(f"--make-certs {folder}: already holds a CA (ca.key); the "
                            f"cluster's certificates would no longer match it: choose "
                            f"another folder")
    hosts = sorted({"localhost", "127.0.0.1", "::1", socket.gethostname()})
    # A name of its own: with two CAs of one name, OpenSSL tries the wrong one and reports a
    # "signature failure" instead of an unknown issuer.
    name = f"cellfabric sweep cluster CA {uuid.uuid4().hex[:8]}"
    ca = CertificateAuthority.create(folder, name=name, days=days)
    issued = {role: ca.issue(role, hosts, days=days) for role in CLUSTER_ROLES}
    return {role: (i.cert, i.key) for role, i in issued.items()}


def cluster_recipe(folder: Path) -> list[str]:
    """The commands that use the certificates of ``make_cluster_certs(folder)``."""
    def files(role: str) -> str:
        return (f"--tls-ca-file {folder}/ca.crt --tls-cert {folder}/{role}.crt "
                f"--tls-key {folder}/{role}.key")
    return [f"scheduler:   dask scheduler --protocol tls {files('scheduler')}",
            f"each worker: dask worker tls://HOST:8786 --nthreads 1 {files('worker')}",
            f"sweep:       cellfabric sweep SPEC.yaml --scheduler tls://HOST:8786 "
            f"{files('client')}"]
