"""`cellfabric run --secure`: the fabric's P4Runtime under mutual TLS, from a CA made for the run.

The CA, one certificate per switch and the controller's client certificate live in
``RUN/pki`` (the folder 0700, keys 0600; cellfabric.core.pki). Each switch, of either target,
is started with simple_switch_grpc's TLS options and ``--grpc-server-with-client-auth``, so
only a client holding a certificate of this run's CA can open a channel to it, and the
controller connects with that certificate. Switch certificates name 127.0.0.1 and localhost:
the runner binds every switch's gRPC server to loopback (cellfabric.emulation.nodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cellfabric.core.pki import CertificateAuthority, Issued
from controlplane.tls import ClientTls

CONTROLLER = "controller"
SERVER_HOSTS = ["127.0.0.1", "localhost"]


@dataclass(frozen=True)
class RunPki:
    """The certificates of one secured run."""

    ca_cert: Path
    switches: dict[str, Issued]
    controller: Issued

    @classmethod
    def create(cls, folder: Path, switches: list[str]) -> RunPki:
        ca = CertificateAuthority.create(folder)
        issued = {name: ca.issue(f"switch-{name}", SERVER_HOSTS, client=False)
                  for name in switches}
        return cls(ca.cert_path, issued, ca.issue(CONTROLLER, SERVER_HOSTS, server=False))

    def switch_args(self, name: str) -> list[str]:
        """Switch ``name``'s target options (after ``--``): mutual TLS with this run's CA."""
        cert = self.switches[name]
        return ["--grpc-server-ssl", "--grpc-server-cacert", str(self.ca_cert),
                "--grpc-server-cert", str(cert.cert), "--grpc-server-key", str(cert.key),
                "--grpc-server-with-client-auth"]

    def client_tls(self) -> ClientTls:
        """The controller's (and fabricctl's) TLS: this run's CA and the controller's cert."""
        return ClientTls(self.ca_cert, self.controller.cert, self.controller.key)

    def fabricctl_args(self) -> str:
        """The fabricctl options that reach this run's switches."""
        return " ".join(self.client_tls().shell_args())
