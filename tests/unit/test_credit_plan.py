"""`--credit-unscheduled`: what the plan gives both ends (as objects, and through the command
lines the emulation renders from them), and that `auto` leaves credit's defaults untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellfabric.core.hostplan import plan_step
from cellfabric.core.workloads import make_workload
from cellfabric.run_cli import parse_credit_unscheduled
from hosts.cli import host_argv, parse_host_args, receiver_config, sender_config
from topologies.model import load_topology

ROOT = Path(__file__).resolve().parents[2]
LEAF = {"h1": "l1", "h2": "l1", "h3": "l2", "h4": "l2"}


def _configs(tmp_path: Path, unscheduled: int | None):
    topo = load_topology(ROOT / "topologies" / "leaf-spine.yaml")
    wl = make_workload("incast", sorted(topo.hosts), 65536, 1, senders=3, leaf_of=LEAF)
    plan = plan_step(topo, wl.steps[0], 0, tmp_path, lambda h, i: f"{h}-eth{i}", "credit", 1,
                     credit_unscheduled=unscheduled)
    senders = [hp.config for hp in plan.senders]
    (recv,) = [hp.config for hp in plan.receivers]
    # the emulation's hosts get the same settings from their command lines
    assert [sender_config(parse_host_args(host_argv(c))) for c in senders] == senders
    assert receiver_config(parse_host_args(host_argv(recv))) == recv
    return senders, recv


def test_a_number_reaches_both_ends_and_turns_the_receivers_window_on(tmp_path: Path) -> None:
    senders, recv = _configs(tmp_path, 1)
    assert len(senders) == 3 and all(s.credit_initial_cells == 1 for s in senders)
    assert recv.credit_initial_cells == 1
    # leaf-spine-leaf: 3 switches, a round trip of 8 cell times, plus two batches of 8
    assert recv.credit_window_cells == 8 + 2 * 8


def test_auto_keeps_credits_defaults(tmp_path: Path) -> None:
    senders, recv = _configs(tmp_path, None)
    assert all(s.credit_initial_cells == 16 for s in senders)
    assert recv.credit_initial_cells == 16 and recv.credit_window_cells == 0


@pytest.mark.parametrize("text", ["0", "-1", "x", "1.5"])
def test_bad_values_are_one_line_errors(text: str) -> None:
    with pytest.raises(ValueError, match="--credit-unscheduled"):
        parse_credit_unscheduled(text)
    assert parse_credit_unscheduled("auto") is None and parse_credit_unscheduled("4") == 4
