"""`cellfabric run leaf-spine --target bmv2 --fail l1-s1@T:T_UP` on real simple_switch_grpc:
the central controller reroutes around the failed link and back without a group modify real
BMv2's PI refuses (new groups, make-before-break), the link is cut without stalling the
switches at its ends (the kernel drops what they send into it; their ports stay up, so no
frame waits unread), and every message arrives.

Needs root (Mininet), Mininet, and the real toolchain on PATH (`make test-toolchain`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bmv2_under_mininet import NEEDS  # skips this module without Mininet

pytestmark = NEEDS


def test_link_failure_and_recovery_on_bmv2_deliver_every_message(tmp_path: Path) -> None:
    # 64 KiB per flow, two messages: traffic is in flight when the link fails and returns
    proc = subprocess.run(
        [sys.executable, "-m", "cellfabric.cli", "run", "leaf-spine", "--target", "bmv2",
         "--size", "65536", "--count", "2", "--fail", "l1-s1@0.2:0.6",
         "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=900)
    # 3: the run is marked invalid, which it is whenever a cell was resent: BMv2 counts no
    # queue drops, so the cells the failed link lost cannot be told from a switch that did
    # not keep up (cellfabric.core.validity.loss_problems); any other reason fails the test
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    reasons = metrics["run"]["invalid_reasons"]
    assert all("count no queue drops" in r for r in reasons), reasons
    events = [e["event"] for e in metrics["run"]["events"]]
    assert not [e for e in events if e.startswith("controller:")], events
    down, up = metrics["run"]["failures"]
    assert (down["what"], down["up"], up["up"]) == ("l1-s1", False, True)
    for record in (down, up):
        assert record["reroute_s"] is not None and record["writes"] > 0, record
    summary = metrics["summary"]
    assert summary["messages_completed"] == summary["messages_total"] == 8, summary
