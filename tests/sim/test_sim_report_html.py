"""The run's HTML page in a real browser: headless Chromium (Debian's ``chromium``, installed
by `make setup`) loads report.html from a file, its script runs, the summary figures and a
sampled journey are on the page, and the console stays silent."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cellfabric.sim.cli import sim_main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed "
                                    "(make setup installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? (.*)")


def load_in_chromium(page: Path) -> tuple[str, list[str]]:
    """(the DOM after the page's scripts ran, every console message) for ``page``."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                               page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [m.group(1) for line in done.stderr.splitlines()
               if (m := CONSOLE.search(line)) is not None]
    return done.stdout, console


@needs_chromium
def test_the_console_check_catches_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    _, console = load_in_chromium(page)
    assert any("notDefined" in msg for msg in console)


@needs_chromium
def test_a_traced_fat_tree_run_page_opens_with_its_figures_and_journeys(
        tmp_path: Path, capsys) -> None:
    assert sim_main(["fat-tree", "--workload", "permutation", "--size", "32768",
                     "--trace-sample", "10", "--fail", "e11-a11@0.000005",
                     "--results", str(tmp_path), "--quiet"]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    page = run_dir / "report.html"
    text = page.read_text()
    # Self-contained: no address to fetch anything from.
    assert not re.search(r"(src|href)=\"(https?:)?//", text)
    dom, console = load_in_chromium(page)
    assert console == []
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    summary = re.search(r'<table id="summary">.*?</table>', dom, re.S)
    assert summary is not None
    for figure in ("messages_completed", "fct_p99_s", "goodput_fraction"):
        assert f'data-figure="{figure}"' in summary.group(0)
    assert dom.count("<img ") >= 4 and "data:image/png;base64," in dom
    journeys = re.findall(r'<details class="journey"[^>]*>(.*?)</details>', dom, re.S)
    assert journeys and "one-way" in journeys[0] and "e11" in dom
    assert re.search(r"\d+ sampled journeys", dom)
    # The injected failure is on the timeline.
    assert "e11-a11 down" in dom
