"""`p4sim switch`'s five TLS options combine as simple_switch_grpc 1.15.5's do: the exit codes
and start-up lines below were measured on the real switch (`simple_switch_grpc --no-p4 --
--grpc-server-ssl ...`), the messages are BMv2's own words."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from cellfabric.core.pki import CertificateAuthority
from p4sim.switch.main import main
from p4sim.switch.p4runtime.tls import ServerTls, server_tls


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create(folder)
    ca.issue("server")
    ca.issue("client")
    return folder


def _start(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--no-p4", "--thrift-port", "0", "--", "--grpc-server-addr",
                 "127.0.0.1:0", *argv])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("argv, line", [
    (["--grpc-server-ssl"], "When enabling SSL/TLS for gRPC server, --grpc-server-cert is required"),
    (["--grpc-server-ssl", "--grpc-server-key", "{d}/server.key"],
     "When enabling SSL/TLS for gRPC server, --grpc-server-cert is required"),
    (["--grpc-server-ssl", "--grpc-server-cert", "{d}/server.crt"],
     "When enabling SSL/TLS for gRPC server, --grpc-server-key is required"),
    (["--grpc-server-ssl", "--grpc-server-cert", "{d}/nope.crt", "--grpc-server-key",
      "{d}/server.key"], "Error when reading pem file '{d}/nope.crt': file cannot be opened"),
    (["--grpc-server-ssl", "--grpc-server-cacert", "{d}/nope.crt", "--grpc-server-cert",
      "{d}/server.crt", "--grpc-server-key", "{d}/server.key"],
     "Error when reading pem file '{d}/nope.crt': file cannot be opened"),
], ids=["ssl-no-cert", "ssl-key-only", "ssl-no-key", "missing-cert", "missing-ca"])
def test_refused_combinations_exit_1_with_bmv2s_line(pki: Path, argv: list[str], line: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _start([a.format(d=pki) for a in argv], capsys)
    assert code == 1
    assert err == f"p4sim switch: error: {line.format(d=pki)}"


def test_a_key_given_as_the_certificate_is_one_line(pki: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _start(["--grpc-server-ssl", "--grpc-server-cert", f"{pki}/server.key",
                        "--grpc-server-key", f"{pki}/server.crt"], capsys)
    assert code == 1 and len(err.splitlines()) == 1 and "server.key" in err


def test_pem_options_without_ssl_are_ignored_with_bmv2s_warnings(pki: Path) -> None:
    tls, warnings = server_tls(False, f"{pki}/ca.crt", f"{pki}/server.crt",
                               f"{pki}/server.key", True)
    assert tls is None
    assert warnings == [
        "SSL/TLS is disabled for gRPC server, so provided .pem files will be ignored",
        "SSL/TLS is disabled for gRPC server, so cannot request client auth"]


def test_client_auth_without_a_ca_starts_and_warns(pki: Path) -> None:
    tls, warnings = server_tls(True, None, f"{pki}/server.crt", f"{pki}/server.key", True)
    assert tls is not None and tls.client_auth and tls.cacert is None
    assert len(warnings) == 1 and "every client is refused" in warnings[0]


def _capabilities(port: int, pki: Path, with_cert: bool) -> str:
    def rd(name: str) -> bytes:
        return (pki / name).read_bytes()

    kw = {"private_key": rd("client.key"), "certificate_chain": rd("client.crt")} \
        if with_cert else {}
    creds = grpc.ssl_channel_credentials(rd("ca.crt"), **kw)
    with grpc.secure_channel(f"127.0.0.1:{port}", creds) as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        try:
            stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=5)
        except grpc.RpcError as err:
            return err.code().name
    return "OK"


def test_client_auth_without_a_ca_refuses_even_a_good_client(pki: Path) -> None:
    """BMv2 measured: with client auth and no --grpc-server-cacert, a client holding a
    certificate of the server's own CA is refused (UNAVAILABLE), as one without any."""
    from p4sim.switch.dataplane import DataPlane
    from p4sim.switch.p4runtime.server import serve

    tls = ServerTls((pki / "server.crt").read_bytes(), (pki / "server.key").read_bytes(),
                    None, client_auth=True)
    handle = serve(DataPlane(0, None, 1, None), "127.0.0.1:0", tls=tls)
    try:
        assert _capabilities(handle.port, pki, with_cert=True) == "UNAVAILABLE"
        assert _capabilities(handle.port, pki, with_cert=False) == "UNAVAILABLE"
    finally:
        handle.stop()
