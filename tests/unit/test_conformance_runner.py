"""The STF conformance runner (`p4sim conformance`) on a small program written for it.

The expectations in tests/unit/stf/*.stf are derived by hand from the P4 program and the
STF rules of p4c's BMv2 driver (priorities, lpm digits, multicast node handles, runt frames);
the real-BMv2 case runs when the p4lang toolchain is on PATH and the machine allows TUN ports.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from p4sim.conformance.main import main as conformance_main
from p4sim.conformance.runner import run_test
from p4sim.conformance.stf import Add, Expect, Packet, StfError, parse_stf

STF_DIR = Path(__file__).parent / "stf"
PROG = STF_DIR / "forward.p4"

TARGETS = ["embedded"]
if shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss") and os.geteuid() == 0 \
        and os.path.exists("/dev/net/tun"):
    TARGETS += ["bmv2", "mixed-p4c-on-p4sim", "mixed-p4sim-on-bmv2"]


def test_stf_parsing_priorities_wildcards_and_exact_length() -> None:
    stf = parse_stf(STF_DIR / "forward.stf")
    adds = [c for c in stf.commands if isinstance(c, Add)]
    assert (adds[0].table, adds[0].priority, adds[0].keys) == ("classify", 10,
                                                                (("h.body.key", "0x12**"),))
    assert adds[0].args == (("port", "1"), ("val", "0x0a"))
    assert adds[2].priority is None
    assert stf.ports() == [0, 1, 2, 3]
    assert [c.data for c in stf.commands if isinstance(c, Packet)][3] == b"\x02"
    exact = Expect(1, 0, "01**", exact_length=True)
    assert exact.matches(b"\x01\xff") and not exact.matches(b"\x01\xff\x00")
    assert Expect(1, 0, "01**").matches(b"\x01\xff\x00")
    assert not Expect(1, 0, "01**").matches(b"\x02\xff")
    assert not Expect(1, 0, "0100").matches(b"\x01")


def test_stf_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.stf"
    bad.write_text("packet 0 0102\nfrobnicate 3\n")
    with pytest.raises(StfError, match=r"bad\.stf:2: unknown STF command 'frobnicate'"):
        parse_stf(bad)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("name", "frames"), [("forward", 6), ("varbit", 5)])
def test_runner_passes_the_hand_checked_programs(name: str, frames: int, target: str) -> None:
    """forward: priorities, lpm digits, multicast, runts; varbit: BMv2's extract errors in
    order (ParserInvalidArgument for lengths not whole bytes, PacketTooShort, HeaderTooShort)."""
    res = run_test(STF_DIR / f"{name}.p4", STF_DIR / f"{name}.stf", target)
    assert (res.status, res.details) == ("pass", [])
    assert res.frames_sent == frames


@pytest.mark.parametrize("target", TARGETS[:2])
def test_runner_reports_a_wrong_expectation(target: str) -> None:
    res = run_test(PROG, STF_DIR / "forward-wrong.stf", target)
    assert res.status == "fail"
    assert res.reason.startswith("port 3, frame 1 (expect line 4): byte 3 differs: "
                                 "expected 15, got 14")


def test_unknown_table_and_bad_value_are_errors_with_line(tmp_path: Path) -> None:
    stf = tmp_path / "t.stf"
    stf.write_text("add nosuch h.body.key:1 drop()\n")
    res = run_test(PROG, stf, "embedded")
    assert (res.status, res.reason) == ("error", "line 1: no table 'nosuch' in the program")
    stf.write_text("\n\nadd route h.body.key:0x1/8 to_port(port:1, val:0x100)\n")
    res = run_test(PROG, stf, "embedded")
    assert res.status == "error"
    assert res.reason == "line 3: action parameter val: value 0x100 does not fit in 8 bits"


def test_cli_expected_file_flags_only_new_failures(tmp_path: Path, capsys) -> None:
    for name in ("forward", "forward-wrong"):
        (tmp_path / f"{name}.p4").symlink_to(PROG)
        (tmp_path / f"{name}.stf").symlink_to(STF_DIR / f"{name}.stf")
    expected = tmp_path / "expected.json"
    assert conformance_main([str(tmp_path), "-q", "--write-expected", str(expected)]) == 1
    assert conformance_main([str(tmp_path), "-q", "--expected", str(expected)]) == 0
    (tmp_path / "forward.stf").unlink()
    (tmp_path / "forward.stf").write_text("packet 0 01 9999 00\nexpect 0 01\n")
    assert conformance_main([str(tmp_path), "-q", "--expected", str(expected)]) == 1
    assert "NEW FAILURE forward: fail: port 0: expected 1 frames, got 0" in capsys.readouterr().out


def _meet_sibling(p4: Path, stf: Path, target: str, conn) -> None:
    """A stand-in test child: marks that it runs, then passes only if the other test's child
    runs at the same time (its mark appears within 10 s); ``hang`` never answers."""
    from p4sim.conformance.runner import Result

    if p4.stem == "hang":
        time.sleep(60)
    mine, other = (p4.parent / f"{p4.stem}.running"), p4.parent / (
        "b.running" if p4.stem == "a" else "a.running")
    mine.write_text("1")
    deadline = time.monotonic() + 10
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    conn.send(Result(p4.stem, "pass" if other.exists() else "fail", "alone"))
    conn.close()


@pytest.mark.parametrize(("jobs", "statuses"), [(2, ["pass", "pass"]), (1, ["fail", "pass"])])
def test_jobs_run_tests_side_by_side(tmp_path: Path, monkeypatch, jobs: int,
                                     statuses: list[str]) -> None:
    """-j 2: both children run at once (each sees the other's mark); -j 1: one at a time (the
    first waits for a sibling that never comes). Results are listed in test order."""
    from p4sim.conformance import main as conformance

    monkeypatch.setattr(conformance, "_child", _meet_sibling)
    tests = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.p4").write_text("")
        (tmp_path / f"{name}.stf").write_text("")
        tests.append((tmp_path / f"{name}.p4", tmp_path / f"{name}.stf"))
    results = conformance.run_pool(tests, "embedded", 30.0, jobs)
    assert [r.name for r in results] == ["a", "b"]
    assert [r.status for r in results] == statuses


def test_a_hung_child_times_out_while_the_others_finish(tmp_path: Path, monkeypatch) -> None:
    from p4sim.conformance import main as conformance

    monkeypatch.setattr(conformance, "_child", _meet_sibling)
    tests = []
    for name in ("hang", "a", "b"):
        (tmp_path / f"{name}.p4").write_text("")
        tests.append((tmp_path / f"{name}.p4", tmp_path / f"{name}.stf"))
    results = conformance.run_pool(tests, "embedded", 2.0, 3)
    assert [(r.name, r.status) for r in results] == [("hang", "timeout"), ("a", "pass"),
                                                     ("b", "pass")]
    assert results[0].reason == "no result within 2 s"


def test_jobs_must_be_a_positive_count(capsys) -> None:
    with pytest.raises(SystemExit):
        conformance_main([str(STF_DIR), "-j", "0"])
    assert "--jobs '0': a whole number of tests, 1 or more" in capsys.readouterr().err
