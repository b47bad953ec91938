"""`cellfabric run --secure`'s certificates (cellfabric.emulation.secure) against a real
`p4sim switch` started with the options the runner gives each switch: the controller's
certificate gets in, a client without one does not, and a switch's own certificate (server
use only) cannot stand in for the controller's."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from cellfabric.emulation.secure import RunPki
from controlplane.connection import SwitchConnection
from controlplane.errors import SwitchUnavailableError
from controlplane.tls import ClientTls

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch


@pytest.fixture(scope="module")
def run_pki(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("run")
    pki = RunPki.create(work / "pki", ["s1", "l1"])
    with P4simSwitch(log=work / "s1.log", target_args=pki.switch_args("s1")) as s1:
        yield pki, s1


def test_the_controller_certificate_connects(run_pki) -> None:
    pki, s1 = run_pki
    with SwitchConnection(s1.addr, timeout=5, reconnect=False, tls=pki.client_tls()) as conn:
        assert conn.connected and conn.is_primary


@pytest.mark.parametrize("who", ["none", "switch l1", "switch s1 itself"])
def test_no_other_certificate_connects(run_pki, who: str) -> None:
    pki, s1 = run_pki
    issued = {"switch l1": pki.switches["l1"], "switch s1 itself": pki.switches["s1"]}.get(who)
    tls = ClientTls(pki.ca_cert, issued.cert, issued.key) if issued else ClientTls(pki.ca_cert)
    with pytest.raises(SwitchUnavailableError):
        SwitchConnection(s1.addr, timeout=1, reconnect=False, tls=tls).connect()


def test_run_pki_files(run_pki) -> None:
    pki, _ = run_pki
    folder = pki.ca_cert.parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    keys = sorted(p.name for p in folder.glob("*.key"))
    assert keys == ["ca.key", "controller.key", "switch-l1.key", "switch-s1.key"]
    assert all(stat.S_IMODE((folder / k).stat().st_mode) == 0o600 for k in keys)
    args = pki.switch_args("l1")
    assert args[args.index("--grpc-server-cert") + 1] == str(folder / "switch-l1.crt")
    assert "--grpc-server-with-client-auth" in args


@pytest.mark.parametrize("argv, secure", [(["--secure"], True), ([], False)])
def test_run_secure_flag_reaches_the_run_config(monkeypatch, tmp_path: Path, argv: list[str],
                                               secure: bool) -> None:
    pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")
    import cellfabric.emulation.runner as runner
    from cellfabric.run_cli import run_main

    seen = []

    def fake_execute(cfg: runner.RunConfig):
        seen.append(cfg)
        raise runner.RunError("stopped by the test")

    monkeypatch.setattr(runner, "execute", fake_execute)
    assert run_main(["leaf-spine", "--target", "embedded", "--results", str(tmp_path),
                     *argv]) == 2
    assert [cfg.secure for cfg in seen] == [secure]
