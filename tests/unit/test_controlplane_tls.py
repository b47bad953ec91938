"""The control plane over TLS against a `p4sim switch` serving mutual TLS: fabricctl with
p4runtime-shell's options (--ssl, --cacert, --cert, --private-key), a SwitchConnection with a
ClientTls, and p4runtime-shell's own client with its own TLS options."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cellfabric.core.pki import CertificateAuthority
from controlplane.cli import main
from controlplane.connection import SwitchConnection
from controlplane.errors import SwitchUnavailableError
from controlplane.tls import ClientTls

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch, compile_test_program


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority.create(work / "pki")
    ca.issue("switch")
    ca.issue("controller", server=False)
    CertificateAuthority.create(work / "other").issue("controller", server=False)
    json_path, p4info = compile_test_program(work / "build")
    pki = work / "pki"
    flags = ["--grpc-server-ssl", "--grpc-server-cacert", str(pki / "ca.crt"),
             "--grpc-server-cert", str(pki / "switch.crt"), "--grpc-server-key",
             str(pki / "switch.key"), "--grpc-server-with-client-auth"]
    with P4simSwitch(log=work / "switch.log", target_args=flags) as server:
        yield server, work, p4info, json_path


def _client_flags(work: Path, who: str = "pki") -> list[str]:
    return ["--ssl", "--cacert", str(work / "pki" / "ca.crt"), "--cert",
            str(work / who / "controller.crt"), "--private-key", str(work / who / "controller.key")]


def test_fabricctl_pushes_and_reads_over_mutual_tls(secure, capsys) -> None:
    server, work, p4info, json_path = secure
    tls = _client_flags(work)
    assert main(["--switch", server.addr, *tls, "pipeline", "push", str(p4info),
                 str(json_path)]) == 0
    assert main(["--switch", server.addr, *tls, "table", "add", "ipv4_lpm",
                 "hdr.ipv4.dstAddr=10.1.0.0/16", "action=set_nhop",
                 "dmac=00:00:00:00:00:0a", "port=3"]) == 0
    capsys.readouterr()
    assert main(["--switch", server.addr, *tls, "--json", "table", "dump", "ipv4_lpm"]) == 0
    assert "10.1.0.0/16" in capsys.readouterr().out


@pytest.mark.parametrize("flags, hint", [
    (["--ssl", "--cacert", "{w}/pki/ca.crt"], "wants a client certificate of its CA"),
    (["--ssl", "--cacert", "{w}/pki/ca.crt", "--cert", "{w}/other/controller.crt",
      "--private-key", "{w}/other/controller.key"], "wants a client certificate of its CA"),
    (["--ssl", "--cacert", "{w}/other/ca.crt", "--cert", "{w}/pki/controller.crt",
      "--private-key", "{w}/pki/controller.key"], "does not verify against --cacert"),
    ([], "may serve TLS only: try --ssl"),
], ids=["no-client-cert", "other-ca-cert", "wrong-ca", "plaintext"])
def test_fabricctl_refused_without_a_good_certificate(secure, capsys, flags, hint) -> None:
    server, work, _, _ = secure
    rc = main(["--switch", server.addr, "--timeout", "1",
               *[f.format(w=work) for f in flags], "tables"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "cannot connect" in err, err
    assert hint in err, err


def test_connection_names_the_refused_handshake(secure) -> None:
    server, work, _, _ = secure
    tls = ClientTls(work / "pki" / "ca.crt")
    with pytest.raises(SwitchUnavailableError, match="over TLS \\(Socket closed"):
        SwitchConnection(server.addr, timeout=1, reconnect=False, tls=tls).connect()


@pytest.mark.parametrize("flags, message", [
    (["--cacert", "ca.crt"], "--cacert makes no sense if SSL/TLS is disabled"),
    (["--ssl", "--cert", "c.crt"], "give both --cert and --private-key"),
    (["--ssl", "--cacert", "/nonexistent/ca.crt"], "--cacert /nonexistent/ca.crt: cannot read"),
])
def test_bad_tls_options_are_one_line(flags, message, capsys) -> None:
    assert main(["--switch", "127.0.0.1:1", "--timeout", "0.5", *flags, "tables"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_fabricctl_shell_hands_its_tls_options_to_p4runtime_shell(secure, monkeypatch) -> None:
    server, work, _, _ = secure
    seen: list[list[str]] = []
    monkeypatch.setattr("os.execv", lambda exe, argv: seen.append(argv))
    main(["--switch", server.addr, *_client_flags(work), "shell"])
    from p4runtime_sh.shell import get_arg_parser

    args = get_arg_parser().parse_args(seen[0][3:])
    assert args.ssl and args.cacert == str(work / "pki" / "ca.crt")
    assert args.cert == str(work / "pki" / "controller.crt")
    assert args.private_key == str(work / "pki" / "controller.key")


def test_p4runtime_shell_own_tls_options_work_against_p4sim(secure) -> None:
    """p4runtime-shell's client, with the options its command line takes, pushes the pipeline
    and writes and reads an entry on a p4sim switch that requires client certificates."""
    from p4runtime_sh import shell
    from p4runtime_sh.p4runtime import SSLOptions

    server, work, p4info, json_path = secure
    args = shell.get_arg_parser().parse_args(
        ["--grpc-addr", server.addr, "--device-id", "0", "--election-id", "0,5",
         "--config", f"{p4info},{json_path}", *_client_flags(work)])
    shell.setup(args.device_id, args.grpc_addr, args.election_id, args.role_name,
                args.config, SSLOptions(not args.ssl, args.cacert, args.cert, args.private_key),
                verbose=False)
    try:
        entry = shell.TableEntry("ipv4_lpm")(action="set_nhop")
        entry.match["hdr.ipv4.dstAddr"] = "10.7.0.0/16"
        entry.action["dmac"] = "00:00:00:00:00:07"
        entry.action["port"] = "7"
        entry.insert()
        found = [(m.lpm.value, m.lpm.prefix_len) for m in
                 (e.match["hdr.ipv4.dstAddr"] for e in shell.TableEntry("ipv4_lpm").read())]
    finally:
        shell.teardown()
    assert (bytes([10, 7, 0, 0]), 16) in found, found


def test_fabricctl_process_prints_one_line_for_a_refused_handshake(secure) -> None:
    """The whole stderr of the command, gRPC's own logging included (it writes to fd 2)."""
    import subprocess

    server, work, _, _ = secure
    proc = subprocess.run(
        [sys.executable, "-m", "controlplane.cli", "--switch", server.addr, "--timeout", "1",
         "--ssl", "--cacert", str(work / "other" / "ca.crt"), "--cert",
         str(work / "pki" / "controller.crt"), "--private-key",
         str(work / "pki" / "controller.key"), "tables"],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "does not verify against --cacert" in proc.stderr
