"""The on-disk caches stay bounded: the least recently used entries beyond a cache's limit go
when a new one is stored, and a hit counts as a use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from p4sim import cache


def _entry(path: Path, used_at: int, folder: bool = False) -> Path:
    if folder:
        path.mkdir()
        (path / "x.json").write_text("{}")
    else:
        path.write_bytes(b"lib")
    os.utime(path, (used_at, used_at))
    return path


def test_prune_keeps_the_most_recently_used(tmp_path: Path) -> None:
    old = _entry(tmp_path / "p4sim-a.so", 1000)
    mid = _entry(tmp_path / "p4sim-b.so", 2000)
    new = _entry(tmp_path / "p4sim-c.so", 3000)
    other = _entry(tmp_path / "notes.txt", 10)  # not an entry of this cache
    cache.touch(old)  # used just now: the newest
    removed = cache.prune(tmp_path, "p4sim-*.so", 2)
    assert removed == [mid]
    assert old.exists() and new.exists() and other.exists() and not mid.exists()


def test_prune_removes_folders_too(tmp_path: Path) -> None:
    gone = _entry(tmp_path / "aa", 1000, folder=True)
    kept = _entry(tmp_path / "bb", 2000, folder=True)
    assert cache.prune(tmp_path, "*", 1) == [gone]
    assert kept.is_dir() and not gone.exists()


def test_native_library_cache_drops_the_least_recently_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from p4sim.switch.native import build

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setattr(build, "MAX_CACHED", 2)
    source = "int nat_nslots(void) { return %d; }\n"
    paths = []
    for i in range(3):
        build.build(f"k{i}", source % i)
        paths.append(build.library_path(f"k{i}"))
        os.utime(paths[-1], (1000 + i, 1000 + i))
    # three built, two kept: the first (least recently used) went when the third was stored
    assert [p.exists() for p in paths] == [False, True, True]
    monkeypatch.setattr(build, "_loaded", {})
    build.build("k1", source % 1)  # a hit: k1 is now the most recently used
    build.build("k3", source % 3)
    assert [p.exists() for p in paths] == [False, True, False]
    assert build.library_path("k3").exists()


def test_compile_cache_keeps_its_most_recently_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from netlab import targets

    store = tmp_path / "cache"
    monkeypatch.setenv(targets.COMPILE_CACHE_ENV, str(store))
    monkeypatch.setattr(targets, "MAX_COMPILES", 1)
    progs = []
    for i in range(2):
        d = tmp_path / f"p{i}"
        d.mkdir()
        prog = d / "t.p4"
        prog.write_text("#include <core.p4>\n#include <v1model.p4>\n"
                        f"header h_t {{ bit<8> f{i}; }}\n"
                        "struct hs { h_t h; } struct m {}\n"
                        "parser P(packet_in p, out hs h, inout m x, inout standard_metadata_t s)"
                        " { state start { p.extract(h.h); transition accept; } }\n"
                        "control V(inout hs h, inout m x) { apply {} }\n"
                        "control I(inout hs h, inout m x, inout standard_metadata_t s) "
                        "{ apply { s.egress_spec = 1; } }\n"
                        "control E(inout hs h, inout m x, inout standard_metadata_t s) "
                        "{ apply {} }\n"
                        "control C(inout hs h, inout m x) { apply {} }\n"
                        "control D(packet_out p, in hs h) { apply { p.emit(h.h); } }\n"
                        "V1Switch(P(), V(), I(), E(), C(), D()) main;\n")
        progs.append(prog)
    targets.compile_p4_cached(progs[0], tmp_path / "o0", "embedded")
    (first,) = list(store.iterdir())
    targets.compile_p4_cached(progs[1], tmp_path / "o1", "embedded")
    (second,) = list(store.iterdir())  # the limit is one: the older compile went
    assert second != first
