"""Every P4 program of the project compiles with real p4c-bm2-ss, and its P4Info equals p4sim's;
fabric.p4 compiles without warnings that could change its behaviour.

Runs when the p4lang toolchain is on PATH (CI activates ../shared/toolchains); skips otherwise.
P4Info is compared as a set of entities per kind (p4c and p4sim may list them in a different
order, which P4Runtime does not care about). Time budget: ~1 s per program (~25 s).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from netlab.targets import p4c_env

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p for p in [*REPO.glob("p4src/*.p4"), *REPO.glob("tests/**/*.p4")]
                  if "V1Switch(" in p.read_text(errors="replace"))
pytestmark = pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                                reason="real p4c-bm2-ss not on PATH (p4lang toolchain)")
# p4c's warnings that do not change what the program does on BMv2.
HARMLESS = ("[--Wwarn=unused]",
            # fabric.p4's `const default_action = NoAction()` on an action-selector table: BMv2
            # ignores it, and a miss without a default runs no action, which is what NoAction does.
            "does not support default_action for MyIngress.spray.group_select")


def _normalized(path: Path) -> dict[str, list[str]]:
    info = p4info_pb2.P4Info()
    text_format.Parse(path.read_text(), info)
    out: dict[str, list[str]] = {}
    for fd, value in info.ListFields():
        if fd.name == "pkg_info":
            continue
        items = value if fd.label == fd.LABEL_REPEATED else [value]
        out[fd.name] = sorted(text_format.MessageToString(v) for v in items)
    return {k: v for k, v in out.items() if v != [""]}


@pytest.mark.parametrize("program", PROGRAMS, ids=[str(p.relative_to(REPO)) for p in PROGRAMS])
def test_real_p4c_compiles_with_the_same_p4info(program: Path, tmp_path: Path) -> None:
    argv = ["p4c-bm2-ss", "--arch", "v1model", "--std", "p4-16", str(program),
            "-o", str(tmp_path / "p4c.json"), "--p4runtime-files", str(tmp_path / "p4c.txtpb")]
    proc = subprocess.run(argv, capture_output=True, text=True, env=p4c_env(), cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if program.parent.name == "p4src":  # the project's program; test programs may be odd
        warnings = [ln for ln in proc.stderr.splitlines()
                    if "warning" in ln and not any(h in ln for h in HARMLESS)]
        assert not warnings, "p4c warnings that may change behaviour:\n" + "\n".join(warnings)
    own = [sys.executable, "-m", "p4sim.cli", "compile", str(program), "-o",
           str(tmp_path / "p4sim.json"), "--p4runtime-files", str(tmp_path / "p4sim.txtpb")]
    proc = subprocess.run(own, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours, theirs = _normalized(tmp_path / "p4sim.txtpb"), _normalized(tmp_path / "p4c.txtpb")
    for kind in sorted(set(ours) | set(theirs)):
        assert ours.get(kind) == theirs.get(kind), f"P4Info '{kind}' differs from p4c's"
