"""netlab.ptf_runner's log folder: without --log-dir a passing run leaves nothing behind and a
failing one keeps its logs where it says."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from netlab import ptf_runner


def _body_writing_log(rc: int, seen: list[Path]):
    def body(args: argparse.Namespace) -> int:
        folder = Path(args.log_dir)
        (folder / "ptf.log").write_text("log\n")
        seen.append(folder)
        return rc
    return body


def test_scratch_logs_removed_after_a_pass(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ptf_runner.tempfile, "tempdir", str(tmp_path))
    seen: list[Path] = []
    rc = ptf_runner._with_scratch_logs(argparse.Namespace(log_dir=None), "cf-ptf-",
                                       _body_writing_log(0, seen))
    assert rc == 0 and len(seen) == 1
    assert not seen[0].exists()
    assert list(tmp_path.iterdir()) == []


def test_scratch_logs_kept_and_named_after_a_failure(tmp_path: Path, monkeypatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(ptf_runner.tempfile, "tempdir", str(tmp_path))
    seen: list[Path] = []
    rc = ptf_runner._with_scratch_logs(argparse.Namespace(log_dir=None), "cf-ptf-",
                                       _body_writing_log(1, seen))
    assert rc == 1
    assert (seen[0] / "ptf.log").read_text() == "log\n"
    assert str(seen[0]) in capsys.readouterr().err


def test_given_log_dir_is_never_removed(tmp_path: Path) -> None:
    seen: list[Path] = []
    rc = ptf_runner._with_scratch_logs(argparse.Namespace(log_dir=str(tmp_path)), "cf-ptf-",
                                       _body_writing_log(0, seen))
    assert rc == 0 and seen == [tmp_path]
    assert (tmp_path / "ptf.log").exists()
