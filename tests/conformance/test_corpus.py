"""p4c's v1model STF corpus (../shared/conformance/p4c-stf) through `p4sim conformance`.

Each target has a checked-in list of known failures with their reasons
(``expected-TARGET.json``); a test failing that is not listed fails here, and a listed one that
now passes is reported as a warning (regenerate the list: ``make conformance-expected``).
Without ../shared (a user's machine) the corpus is absent and the tests skip; the real-BMv2 mix
runs only when the p4lang toolchain is on PATH. Time budget: embedded ~1-2 min, p4sim's JSON on
real BMv2 ~4-6 min (both measured on the 2-core CI machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CELLFABRIC_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "conformance" / "p4c-stf" / "p4_16_samples"
HERE = Path(__file__).parent


def _run(target: str, tmp_path: Path, dataplane: str | None = None) -> str:
    """Run the corpus on ``target`` (p4sim's data plane path forced to ``dataplane``, else
    auto); returns the runner's stderr."""
    if not CORPUS.is_dir():
        pytest.skip(f"conformance corpus not found at {CORPUS}: skipped")
    expected = HERE / f"expected-{target}.json"
    out_json = tmp_path / f"{target}.json"
    # Two tests at a time: a test mostly waits (a compiler or a switch starting), and make
    # test runs one test file at a time on a 2-core machine.
    argv = [sys.executable, "-m", "p4sim.cli", "conformance", str(CORPUS), "-q", "-j", "2",
            "--target", target, "--expected", str(expected), "--json", str(out_json)]
    env = dict(os.environ)
    if dataplane is not None:
        env["P4SIM_DATAPLANE"] = dataplane
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=REPO, env=env)
    lines = proc.stdout.splitlines()
    for line in lines:
        if line.startswith("now passing"):
            warnings.warn(f"{target}: {line}", stacklevel=1)
    summary = next((ln for ln in reversed(lines) if " tests: " in ln), proc.stdout[-500:])
    new = [ln for ln in lines if ln.startswith("NEW FAILURE")]
    assert proc.returncode == 0, (f"{target}: {summary}\n" + "\n".join(new)
                                  + ("" if new else proc.stdout[-3000:] + proc.stderr[-3000:]))
    counts = json.loads(out_json.read_text())["counts"]
    listed = json.loads(expected.read_text())["passed"]
    # The expected file's pass count is a floor: fewer passes is a regression even if every
    # failing test happens to be listed.
    assert counts["pass"] >= listed, f"{target}: {counts['pass']} pass, expected >= {listed}"
    return proc.stderr


# Programs of the corpus the native data plane does not cover (header unions, varbit fields,
# parser advance/lookahead, fields wider than 64 bits, ...): they run on the Python path, and
# the switch says so once per program. Measured 27 of 187 on 2026-12-02; a rise is a regression.
MAX_NATIVE_FALLBACKS = 27


def test_corpus_on_embedded(tmp_path: Path) -> None:
    """auto: every program the native path covers runs native, the rest on the Python path;
    the expected results are the Python path's."""
    stderr = _run("embedded", tmp_path)
    fallbacks = [ln for ln in stderr.splitlines() if "native data plane does not cover" in ln
                 or "native data plane could not" in ln]
    from p4sim.switch.native.build import available

    if available() is None:
        assert len(fallbacks) <= MAX_NATIVE_FALLBACKS, "\n".join(fallbacks)


def test_corpus_on_embedded_python_path(tmp_path: Path) -> None:
    """The reference: every program on the Python path."""
    _run("embedded", tmp_path, dataplane="python")


@pytest.mark.skipif(not (shutil.which("simple_switch_grpc") and os.geteuid() == 0),
                    reason="real BMv2 (simple_switch_grpc) not on PATH or not root")
def test_corpus_p4sim_json_on_real_bmv2(tmp_path: Path) -> None:
    _run("mixed-p4sim-on-bmv2", tmp_path)
