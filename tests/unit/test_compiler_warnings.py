"""p4c's warnings from `p4sim compile`, in p4c's words and format. The expected text is what
real p4c-bm2-ss 1.2.5 prints for tests/unit/p4progs/warnings_probe.p4 (checked by hand against
it; tests/tutorials checks the tutorials' programs against the real compiler)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from p4sim.compile import main as compile_main

PROBE = Path(__file__).parent / "p4progs" / "warnings_probe.p4"

EXPECTED = """\
probe.p4(3): [--Wwarn=unused] warning: 'UNUSED_C' is unused
const bit<8> UNUSED_C = 1;
             ^^^^^^^^
probe.p4(5): [--Wwarn=unused] warning: 'unusedT' is unused
typedef bit<9> unusedT;
               ^^^^^^^
probe.p4(13): [--Wwarn=unused] warning: 'global_unused' is unused
action global_unused() { }
       ^^^^^^^^^^^^^
probe.p4(19): [--Wwarn=unused] warning: 'unused_ctr' is unused
    counter(8, CounterType.packets) unused_ctr;
                                    ^^^^^^^^^^
probe.p4(21): [--Wwarn=unused] warning: 'a_unused' is unused
    action a_unused() { meta.m = 1; }
           ^^^^^^^^
probe.p4(28): [--Wwarn=unused] warning: table 't_unused' is unused
    table t_unused { key = { hdr.h.a: exact; } actions = { a_used; } }
          ^^^^^^^^
probe.p4(31): [--Wwarn=unused] warning: 'unused_local' is unused
        bit<8> unused_local = 3;
               ^^^^^^^^^^^^
probe.p4(32): [--Wwarn=overflow] warning: 8w300: value does not fit in 8 bits
        bit<8> tr = 300;
                    ^^^
probe.p4(28): [--Winfo=removed] info: removing table 't_unused'
    table t_unused { key = { hdr.h.a: exact; } actions = { a_used; } }
          ^^^^^^^^
probe.p4(25): [--Wwarn=invalid-header] warning: accessing a field of an invalid header hdr.h
        meta.m = hdr.h.a;
                 ^^^^^
probe.p4(26): [--Wwarn=invalid-header] warning: accessing a field of an invalid header hdr.h
        used_ctr.count((bit<32>) hdr.h.b);
                                 ^^^^^
probe.p4(37): [--Wwarn=invalid-header] warning: accessing a field of an invalid header hdr.g
        if (hdr.g.a == 1) { meta.m = 2; }
            ^^^^^
"""


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The probe as `probe.p4` in the working directory (p4c names the file as it was given)."""
    shutil.copy(PROBE, tmp_path / "probe.p4")
    monkeypatch.chdir(tmp_path)
    return Path("probe.p4")


def test_warnings_in_p4c_words_and_order(probe: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_main([str(probe), "-o", str(tmp_path / "p.json")]) == 0
    assert capsys.readouterr().err == EXPECTED


def test_wdisable_silences_one_kind_or_all(probe: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "p.json")
    assert compile_main([str(probe), "-o", out, "--Wdisable=unused"]) == 0
    err = capsys.readouterr().err
    assert "is unused" not in err and "invalid header hdr.h" in err
    assert compile_main([str(probe), "-o", out, "--Wdisable"]) == 0
    assert capsys.readouterr().err == ""


def test_werror_fails_at_the_first_warning(probe: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_main([str(probe), "-o", str(tmp_path / "p.json"), "--Werror"]) == 1
    assert "'UNUSED_C' is unused" in capsys.readouterr().err


def test_warnings_do_not_change_the_output(probe: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert compile_main([str(probe), "-o", str(a)]) == 0
    assert compile_main([str(probe), "-o", str(b), "--Wdisable"]) == 0
    assert a.read_bytes() == b.read_bytes()
