"""The tutorials' twelve solution programs through `p4sim compile` and real p4c-bm2-ss: the
P4Info files are identical byte for byte, and p4sim prints the warnings p4c prints."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tutorial_support import tutorials_tarball

EXERCISES = ("basic", "basic_tunnel", "calc", "ecn", "mri", "load_balance", "qos", "firewall",
             "link_monitor", "source_routing", "multicast", "p4runtime")


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tarball = tutorials_tarball()
    if tarball is None:
        pytest.skip("no ../shared/clients/p4lang-tutorials beside the repository")
    dest = tmp_path_factory.mktemp("tutorial-programs")
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    exercises = next(dest.glob("*/exercises"))
    out = {}
    for name in EXERCISES:
        sol = sorted((exercises / name / "solution").glob("*.p4"))
        out[name] = sol[0] if sol else next((exercises / name).glob("*.p4"))
    return out


def _compile(argv0: list[str], src: Path, out: Path, env: dict[str, str] | None
             ) -> tuple[str, str]:
    """(P4Info text, stderr) of one compile, as the tutorials' Makefile runs it."""
    out.mkdir(parents=True, exist_ok=True)
    p4info = out / f"{src.stem}.p4.p4info.txtpb"
    proc = subprocess.run([*argv0, "--p4v", "16", "--p4runtime-files", str(p4info), "-o",
                           str(out / f"{src.stem}.json"), src.name], cwd=src.parent, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{argv0[0]} {src}: {proc.stderr}"
    return p4info.read_text(), proc.stderr


@pytest.mark.parametrize("exercise", EXERCISES)
def test_p4info_as_p4c(programs: dict[str, Path], real_env: dict[str, str], exercise: str,
                       tmp_path: Path) -> None:
    src = programs[exercise]
    real_info, _ = _compile(["p4c-bm2-ss"], src, tmp_path / "real", real_env)
    sim_info, _ = _compile([sys.executable, "-m", "p4sim.cli", "compile"], src,
                           tmp_path / "sim", None)
    assert sim_info == real_info


@pytest.mark.parametrize("exercise", EXERCISES)
def test_warnings_as_p4c(programs: dict[str, Path], real_env: dict[str, str], exercise: str,
                         tmp_path: Path) -> None:
    """qos's unused constants and actions, p4runtime's read of hdr.myTunnel after its
    setInvalid(), ...: the same lines, word for word, in the same order."""
    src = programs[exercise]
    _, real_err = _compile(["p4c-bm2-ss"], src, tmp_path / "real", real_env)
    _, sim_err = _compile([sys.executable, "-m", "p4sim.cli", "compile"], src,
                          tmp_path / "sim", None)
    assert sim_err.splitlines() == real_err.splitlines()
