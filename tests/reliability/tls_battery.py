"""The TLS rows of the reliability battery: who may talk P4Runtime to a switch started with
simple_switch_grpc's TLS options, each row with the code real BMv2 (simple_switch_grpc 1.15.5)
gives, measured, not assumed: every refused handshake is UNAVAILABLE on the client's first RPC
(the stream's arbitration here), the switch keeps serving the clients it should.

One run of ``run_row`` on p4sim and on real BMv2 must give the same code; tests/reliability
runs both (BMv2 when the toolchain is beside the repository) and tests/toolchain the BMv2 half
with the toolchain on PATH.
"""

from __future__ import annotations

import datetime as dt
import queue
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from p4.v1 import p4runtime_pb2 as p4rt
from p4.v1 import p4runtime_pb2_grpc
from targets import SwitchProcess

from cellfabric.core.pki import CertificateAuthority

DEVICE_ID = 1


@dataclass(frozen=True)
class Pki:
    """The battery's certificates: the fabric's CA ``ca`` and another CA ``other``."""

    folder: Path

    @classmethod
    def create(cls, folder: Path) -> Pki:
        now = dt.datetime.now(dt.UTC)
        past = {"not_before": now - dt.timedelta(days=3), "not_after": now - dt.timedelta(days=1)}
        ca = CertificateAuthority.create(folder / "ca")
        ca.issue("switch", client=False)
        ca.issue("controller", server=False)
        ca.issue("expired-switch", client=False, **past)
        ca.issue("expired-controller", server=False, **past)
        other = CertificateAuthority.create(folder / "other", name="another CA")
        other.issue("switch", client=False)
        other.issue("controller", server=False)
        return cls(folder)

    def path(self, name: str) -> Path:
        return self.folder / name

    def read(self, name: str) -> bytes:
        return self.path(name).read_bytes()


# The switch's TLS options by name (after "--"); "plain" is a switch without TLS.
def server_args(pki: Pki, config: str) -> list[str]:
    if config == "plain":
        return []
    cert = "ca/expired-switch" if config == "expired-server" else "ca/switch"
    argv = ["--grpc-server-ssl", "--grpc-server-cert", str(pki.path(f"{cert}.crt")),
            "--grpc-server-key", str(pki.path(f"{cert}.key"))]
    if config != "client-auth-no-ca":
        argv += ["--grpc-server-cacert", str(pki.path("ca/ca.crt"))]
    if config != "server-only":
        argv.append("--grpc-server-with-client-auth")
    return argv


SERVER_CONFIGS = ("mtls", "server-only", "expired-server", "client-auth-no-ca", "plain")

Credentials = Callable[[Pki], grpc.ChannelCredentials | None]


def tls_client(ca: str, holder: str | None) -> Credentials:
    """A client trusting ``ca``'s certificate, presenting ``holder``'s (None: none)."""
    def make(pki: Pki) -> grpc.ChannelCredentials:
        if holder is None:
            return grpc.ssl_channel_credentials(pki.read(f"{ca}/ca.crt"))
        return grpc.ssl_channel_credentials(pki.read(f"{ca}/ca.crt"),
                                            pki.read(f"{holder}.key"), pki.read(f"{holder}.crt"))
    return make


def plaintext(_pki: Pki) -> None:
    return None


GOOD = tls_client("ca", "ca/controller")


@dataclass(frozen=True)
class TlsRow:
    name: str
    server: str  # one of SERVER_CONFIGS
    client: Credentials
    expect: str  # BMv2's code for the client's arbitration
    why: str


ROWS = [
    TlsRow("good mutual-TLS client", "mtls", GOOD, "OK",
           "a certificate of the switch's CA, and the switch's certificate verifies"),
    TlsRow("wrong CA (client trusts another CA)", "mtls", tls_client("other", "ca/controller"),
           "UNAVAILABLE", "the client cannot verify the switch's certificate"),
    TlsRow("client certificate of another CA", "mtls", tls_client("ca", "other/controller"),
           "UNAVAILABLE", "the switch cannot verify the client's certificate"),
    TlsRow("no client certificate with client auth", "mtls", tls_client("ca", None),
           "UNAVAILABLE", "--grpc-server-with-client-auth requires one"),
    TlsRow("expired client certificate", "mtls", tls_client("ca", "ca/expired-controller"),
           "UNAVAILABLE", "the switch refuses a certificate past its notAfter"),
    TlsRow("expired server certificate", "expired-server", GOOD, "UNAVAILABLE",
           "the client refuses the switch's certificate past its notAfter"),
    TlsRow("plaintext client on a TLS port", "mtls", plaintext, "UNAVAILABLE",
           "the switch reads a TLS record where HTTP/2 starts"),
    TlsRow("TLS client on a plaintext port", "plain", GOOD, "UNAVAILABLE",
           "the switch answers a ClientHello with HTTP/2"),
    TlsRow("no client certificate, no client auth", "server-only", tls_client("ca", None), "OK",
           "without --grpc-server-with-client-auth BMv2 asks for no certificate"),
    TlsRow("expired client certificate, no client auth", "server-only",
           tls_client("ca", "ca/expired-controller"), "OK",
           "a certificate the switch does not ask for is not checked"),
    TlsRow("client auth without --grpc-server-cacert", "client-auth-no-ca", GOOD,
           "UNAVAILABLE", "with no CA to verify against, BMv2 refuses every client"),
]


def arbitrate(addr: str, credentials: grpc.ChannelCredentials | None,
              timeout: float = 10.0) -> str:
    """Open a StreamChannel and ask to be primary: "OK" once the switch answers, else the
    stream's gRPC code."""
    channel = grpc.insecure_channel(addr) if credentials is None else \
        grpc.secure_channel(addr, credentials)
    requests: queue.Queue[p4rt.StreamMessageRequest | None] = queue.Queue()
    req = p4rt.StreamMessageRequest()
    req.arbitration.device_id = DEVICE_ID
    req.arbitration.election_id.low = 1
    requests.put(req)
    call = p4runtime_pb2_grpc.P4RuntimeStub(channel).StreamChannel(
        iter(requests.get, None), timeout=timeout)
    try:
        first = next(call)
        return "OK" if first.WhichOneof("update") == "arbitration" else "UNKNOWN"
    except grpc.RpcError as err:
        return err.code().name
    finally:
        requests.put(None)
        call.cancel()
        channel.close()


class TlsSwitches:
    """One switch per server configuration, of one target, started when first asked for."""

    def __init__(self, target: str, env: dict[str, str] | None, work: Path) -> None:
        self.target, self.env, self.work = target, env, work
        self.pki = Pki.create(work / "pki")
        self.switches: dict[str, SwitchProcess] = {}

    def addr(self, config: str) -> str:
        if config not in self.switches:
            sw = SwitchProcess(self.target, self.env, self.work / f"switch-{config}.log",
                               device_id=DEVICE_ID, target_args=server_args(self.pki, config))
            self.switches[config] = sw.start()
        return self.switches[config].addr

    def alive(self) -> list[str]:
        """The configurations whose switch process is still running."""
        return [c for c, sw in self.switches.items() if sw.proc and sw.proc.poll() is None]

    def close(self) -> None:
        for sw in self.switches.values():
            sw.stop()


def good_client_writes_and_reads(switches: TlsSwitches, p4info: Path, json_path: Path) -> list[str]:
    """The positive row in full: a mutual-TLS client pushes the pipeline, writes an entry and
    reads it back; the codes of the three steps and whether the entry came back."""
    from battery import lpm
    from p4rt_client import Client, Update

    client = Client(switches.addr("mtls"), DEVICE_ID, p4info, json_path,
                    credentials=GOOD(switches.pki))
    try:
        pushed = client.set_pipeline()
        entry = lpm(client, 42)
        wrote = client.write(Update(type=Update.INSERT, entity=entry))
        wildcard = p4rt.Entity()
        wildcard.table_entry.table_id = entry.table_entry.table_id
        found = [e.table_entry.match for e in client.read_entities(wildcard)]
    finally:
        client.close()
    return [pushed, wrote, "read back" if list(entry.table_entry.match) in
            [list(m) for m in found] else f"not read back: {found}"]
