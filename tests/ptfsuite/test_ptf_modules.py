"""Each PTF module in tests/ptf, run by real PTF through netlab.ptf_runner, as one pytest test.

A module declares its device under test with a module-level ``DUT = "forwarder"``; the default
is the P4 switch of the selected target (``CELLFABRIC_TARGET``, else embedded unless real BMv2
is installed). PTF's own output is shown when a module fails.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PTF_DIR = Path(__file__).resolve().parents[1] / "ptf"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="PTF over veths needs root")


def _module_dut(path: Path) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "DUT" for t in node.targets
        ) and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    return "switch"


def _ptf_ports(path: Path) -> int:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "PTF_PORTS" for t in node.targets
        ) and isinstance(node.value, ast.Constant):
            return int(node.value.value)
    return 4


MODULES = sorted(PTF_DIR.glob("test_*.py"))


@pytest.mark.parametrize("module", MODULES, ids=[m.stem for m in MODULES])
def test_ptf_module(module: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "netlab.ptf_runner", "--dut", _module_dut(module),
            "--ports", str(_ptf_ports(module)), "--log-dir", str(tmp_path), module.stem]
    target = os.environ.get("CELLFABRIC_TARGET")
    if target and _module_dut(module) == "switch":
        argv[3:3] = ["--target", target]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"PTF module {module.stem} failed:\n{out[-6000:]}"
    assert "\nOK" in out or out.rstrip().endswith("OK"), out[-3000:]
