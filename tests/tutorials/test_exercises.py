"""p4lang/tutorials' twelve exercises, unchanged, on p4sim and on real BMv2 in the same run.

Each exercise (its solution in place of the skeleton) is built by the tutorials' Makefile and run
by their `utils/run_exercise.py` in Mininet, with the toolchain under test first on PATH as
`p4c-bm2-ss` and `simple_switch_grpc`: p4sim through `p4sim dropin`, or the real p4lang toolchain
(../shared/toolchains). The checks are the exercises' READMEs' (exercise_driver.py). The
tutorials come from ../shared/clients/p4lang-tutorials, unpacked into a temporary folder; without
them (a user's machine) the tier skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tutorial_support import toolchain_env, tutorials_tarball

from p4sim.dropin import dropin_env

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "exercise_driver.py"
EXERCISES = ("basic", "basic_tunnel", "calc", "ecn", "mri", "load_balance", "qos", "firewall",
             "link_monitor", "source_routing", "multicast", "p4runtime")
TARGETS = ("p4sim", "bmv2")


def _why_not_runnable() -> str | None:
    if tutorials_tarball() is None:
        return "no ../shared/clients/p4lang-tutorials beside the repository"
    if os.geteuid() != 0:
        return "Mininet needs root"
    if shutil.which("mnexec") is None:
        return "Mininet is not installed (mnexec not on PATH)"
    for tool in ("make", "iperf"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@pytest.fixture(scope="module")
def tutorials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """Per target: a fresh unpacked copy of the tutorials and the environment to run it in."""
    why = _why_not_runnable()
    if why:
        pytest.skip(why)
    tarball = tutorials_tarball()
    assert tarball is not None
    base = tmp_path_factory.mktemp("tutorials")
    venv_bin = str(Path(sys.executable).parent)
    out: dict[str, tuple[Path, dict]] = {}
    for target in TARGETS:
        dest = base / target
        with tarfile.open(tarball) as tar:
            tar.extractall(dest, filter="data")
        root = next(p for p in dest.iterdir() if (p / "exercises").is_dir())
        if target == "p4sim":
            env = dropin_env(base / "dropin")
        else:
            real = toolchain_env()
            if real is None:
                continue
            # The real tools on PATH; only the client's p4.tmp module from the drop-in.
            env = dict(real)
            env["PYTHONPATH"] = str(base / "dropin" / "python")
        # The tutorials' `python3` must be this venv's (grpc, p4runtime, scapy, mininet).
        env["PATH"] = venv_bin + ":" + env["PATH"] if target == "bmv2" else \
            env["PATH"].replace(":", f":{venv_bin}:", 1)
        out[target] = (root, env)
    return out


@pytest.mark.mininet
@pytest.mark.timeout(400)
@pytest.mark.parametrize("exercise", EXERCISES)
@pytest.mark.parametrize("target", TARGETS)
def test_exercise(tutorials: dict[str, tuple[Path, dict]], target: str, exercise: str) -> None:
    if target not in tutorials:
        pytest.skip("real BMv2: no ../shared/toolchains beside the repository")
    root, env = tutorials[target]
    proc = subprocess.run([sys.executable, str(DRIVER), str(root), exercise], env=env,
                          capture_output=True, text=True, timeout=360)
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    try:
        verdict = json.loads(last[0])
    except ValueError:
        pytest.fail(f"{exercise} on {target}: no verdict (exit {proc.returncode})\n"
                    f"{proc.stderr[-3000:]}")
    failed = {k: v for k, v in verdict.get("checks", {}).items() if not v[0]}
    print(f"{target} {exercise}: ready in {verdict.get('ready_s', 0):.1f} s; "
          f"{json.dumps(verdict.get('checks'))}")
    assert verdict["ok"] and not failed, \
        f"{exercise} on {target}: {failed}\n--- driver output ---\n{proc.stderr[-4000:]}"
