"""The test-host library creates namespaces, veths and processes and removes exactly those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netlab.hosts import (
    NetLab,
    existing_links,
    existing_namespaces,
    reap_stale,
    wait_until,
)
from netlab.targets import switch_argv

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for netns/veth")


@needs_root
def test_lab_creates_and_removes_exactly_its_own() -> None:
    bystander = NetLab(prefix="cfby")
    bystander.__enter__()
    try:
        by_ns = bystander.netns("keep")
        with NetLab(prefix="cft") as lab:
            ns1, ns2 = lab.netns("a"), lab.netns("b")
            if1, if2 = lab.veth("x", "y", ns_a=ns1, ns_b=ns2)
            lab.addr(if1, "10.9.0.1/24", ns=ns1)
            lab.addr(if2, "10.9.0.2/24", ns=ns2)
            out = lab.run(ns1, ["ping", "-c", "1", "-W", "2", "10.9.0.2"], check=False)
            assert out.returncode == 0, out.stdout + out.stderr
            proc = lab.popen(ns1, ["sleep", "60"])
            assert {ns1, ns2} <= existing_namespaces()
            assert len(if1) <= 15 and len(if2) <= 15
        assert not ({ns1, ns2} & existing_namespaces())
        assert not proc.alive()
        # Someone else's namespace is untouched.
        assert by_ns in existing_namespaces()
    finally:
        bystander.close()
    assert by_ns not in existing_namespaces()


@needs_root
def test_root_namespace_veth_removed_on_exception() -> None:
    with pytest.raises(RuntimeError), NetLab(prefix="cfe") as lab:
        a, b = lab.veth("l", "r")
        assert {a, b} <= existing_links()
        raise RuntimeError("test failure inside the lab")
    assert not ({a, b} & existing_links())


@needs_root
def test_sigterm_to_owner_cleans_up(tmp_path) -> None:
    # A separate process owns a lab; SIGTERM must make it remove its namespace and child.
    script = tmp_path / "owner.py"
    script.write_text(
        "import sys, time\n"
        "from netlab.hosts import NetLab\n"
        "with NetLab(prefix='cfs') as lab:\n"
        "    ns = lab.netns('t')\n"
        "    p = lab.popen(ns, ['sleep', '60'])\n"
        "    print(ns, p.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    line = owner.stdout.readline().split()
    ns, child = line[0], int(line[1])
    assert ns in existing_namespaces()
    owner.send_signal(signal.SIGTERM)
    owner.wait(timeout=20)
    assert ns not in existing_namespaces()
    assert wait_until(lambda: not os.path.exists(f"/proc/{child}"), 5)


@needs_root
def test_reap_stale_removes_resources_of_a_killed_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NETLAB_LEDGER_DIR", str(tmp_path))
    script = tmp_path / "victim.py"
    script.write_text(
        "import time\n"
        "import netlab.hosts as h\n"
        "from pathlib import Path\n"
        f"h.LEDGER_DIR = Path({str(tmp_path)!r})\n"
        "lab = h.NetLab(prefix='cfk').__enter__()\n"
        "ns = lab.netns('v')\n"
        "print(ns, flush=True)\n"
        "time.sleep(60)\n"
    )
    victim = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    ns = victim.stdout.readline().strip()
    assert ns in existing_namespaces()
    victim.kill()  # SIGKILL: no chance to clean up
    victim.wait()
    import netlab.hosts as hosts_mod

    monkeypatch.setattr(hosts_mod, "LEDGER_DIR", tmp_path)
    removed = reap_stale()
    assert f"netns {ns}" in removed
    assert ns not in existing_namespaces()


def test_names_are_unique_per_run_and_fit_ifnamsiz() -> None:
    a, b = NetLab(prefix="cf", suffix="aaaa"), NetLab(prefix="cf", suffix="bbbb")
    assert a.name("sw0eth") == "cfsw0ethaaaa"
    assert a.name("sw0eth") != b.name("sw0eth")
    assert a.name("a-very-long-interface-base") == "cfa-very-loaaaa"


def test_switch_argv_same_flags_for_both_targets(monkeypatch) -> None:
    import netlab.targets as targets

    monkeypatch.setattr(targets, "bmv2_available", lambda: True)
    ports = {0: "veth0", 1: "veth2"}
    emb = switch_argv("embedded", ports, "127.0.0.1:9559", device_id=3, cpu_port=255)
    real = switch_argv("bmv2", ports, "127.0.0.1:9559", device_id=3, cpu_port=255)
    assert real[0] == "simple_switch_grpc"
    assert emb[emb.index("switch") + 1:] == real[1:]
    assert real[1:] == ["--device-id", "3", "-i", "0@veth0", "-i", "1@veth2", "--no-p4",
                        "--", "--grpc-server-addr", "127.0.0.1:9559", "--cpu-port", "255"]


def test_wait_until_times_out() -> None:
    start = time.monotonic()
    assert wait_until(lambda: False, 0.2, 0.05) is False
    assert time.monotonic() - start >= 0.2


def test_compile_cache_reuses_an_identical_compile_and_misses_on_any_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compile_p4_cached: the second compile of the same sources is the first one's files
    (the compiler does not run), and a changed include compiles again, to the compiler's
    own output."""
    import shutil as sh

    from netlab import targets

    root = Path(__file__).resolve().parents[2]
    src_dir = tmp_path / "p4src"
    sh.copytree(root / "p4src", src_dir)
    monkeypatch.setenv(targets.COMPILE_CACHE_ENV, str(tmp_path / "cache"))
    real = targets.compile_p4
    ran: list[Path] = []

    def counted(src: Path, outdir: Path, target: str | None = None) -> tuple[Path, Path]:
        ran.append(Path(outdir))
        return real(src, outdir, target)

    monkeypatch.setattr(targets, "compile_p4", counted)
    first = targets.compile_p4_cached(src_dir / "fabric.p4", tmp_path / "a", "embedded")
    again = targets.compile_p4_cached(src_dir / "fabric.p4", tmp_path / "b", "embedded")
    assert ran == [tmp_path / "a"]
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in first]
    assert again[0].parent == tmp_path / "b"
    defines = src_dir / "include" / "defines.p4"
    defines.write_text(defines.read_text() + "\n// any change, even a comment\n")
    changed = targets.compile_p4_cached(src_dir / "fabric.p4", tmp_path / "c", "embedded")
    assert ran == [tmp_path / "a", tmp_path / "c"]
    fresh = real(src_dir / "fabric.p4", tmp_path / "d", "embedded")
    assert [p.read_bytes() for p in changed] == [p.read_bytes() for p in fresh]
    # the JSON names the sources by the path the compiler was given: another path, another entry
    moved = tmp_path / "elsewhere"
    sh.copytree(src_dir, moved)
    other = targets.compile_p4_cached(moved / "fabric.p4", tmp_path / "f", "embedded")
    assert ran[-1] == tmp_path / "f" and str(moved) in other[0].read_text()
    monkeypatch.setenv(targets.COMPILE_CACHE_ENV, "off")
    targets.compile_p4_cached(src_dir / "fabric.p4", tmp_path / "e", "embedded")
    assert ran[-1] == tmp_path / "e"
