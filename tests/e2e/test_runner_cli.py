"""`cellfabric run` and `cellfabric cli` as a user runs them: Ctrl-C mid-run leaves nothing
behind, and the CLI brings up a fabric that forwards real traffic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

from netlab.hosts import existing_links, wait_until

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")]
CELLFABRIC = [sys.executable, "-m", "cellfabric.cli"]


def _procs_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


def test_ctrl_c_mid_run_stops_everything_it_started(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = subprocess.Popen([*CELLFABRIC, "run", "leaf-spine", "--size", str(1 << 20),
                             "--count", "4", "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if "sender(s) running" in line:
                break
        assert any("sender(s) running" in line for line in lines), "".join(lines)
        run_dir = next(results.iterdir())
        tag = next((run_dir / "logs").glob("s1*.log")).stem[2:]
        assert _procs_mentioning(str(run_dir)), "host programs should be running"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # the test failed before the run ended: end it, cleanly
            proc.terminate()
            proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "everything it started has been stopped" in rest
    assert wait_until(lambda: not _procs_mentioning(str(run_dir))
                      and not _procs_mentioning(f"{tag}l1e"), 10)
    assert not {n for n in existing_links() if n.startswith(tag)}


def test_cli_brings_up_a_fabric_that_forwards(tmp_path: Path) -> None:
    script = "py net.hosts[0].cmd('ping -c 2 -W 2 10.0.2.2')\nexit\n"
    proc = subprocess.run([*CELLFABRIC, "cli", "leaf-spine", "--results", str(tmp_path)],
                          input=script, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr  # Mininet's CLI prints command output on stderr
    assert "2 packets transmitted, 2 received" in out, out[-2000:]
