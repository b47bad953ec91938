"""A failure's timing under --routing bgp comes from FRR's own logs (cellfabric.nos.frrlog):
BFD's detection is the first state change to down of a session on the failed link (either end,
no other session), convergence the last route a bgpd handed its zebra, to the millisecond.
The logs here are written as FRR 8.4 writes them (``log timestamp precision 3``, bfdd's
``debug bfd peer``, bgpd's ``debug bgp zebra``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cellfabric.nos import fabric_nos
from cellfabric.nos.fabric_nos import FabricNos, SwitchNos
from cellfabric.nos.frr_config import routing_plan
from cellfabric.nos.frrlog import LogTail, bfd_changes, route_updates, stamp_of
from topologies.catalog import resolve_topology


def _stamp(t: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _bfd(t: float, peer: str, local: str, old: str, new: str) -> str:
    return (f"{_stamp(t)} BFD: [SEY1D-NT8EQ] state-change: [mhop:no peer:{peer} local:{local} "
            f"vrf:default ifname:port3] {old} -> {new} reason:control-expired\n")


def _route(t: float, what: str, prefix: str) -> str:
    tail = " metric 0 tag 0 count 2 nhg 0" if what == "add" else ""
    return f"{_stamp(t)} BGP: [V15FP-4CPVK] Tx route {what} VRF 0 {prefix}{tail}\n"


def test_log_lines_parse_to_their_millisecond() -> None:
    t = 1796610000.25  # a whole second and a quarter
    (change,) = bfd_changes([_bfd(t, "172.16.0.33", "172.16.0.32", "up", "down"),
                             f"{_stamp(t)} BFD: [PSB4R-8T1TJ] session-new: mhop:no peer:1.2.3.4"])
    assert (change.peer, change.old, change.new) == ("172.16.0.33", "up", "down")
    assert change.t == pytest.approx(t, abs=1e-6)
    assert route_updates([_route(t + 1, "delete", "10.0.1.1/32"),
                          _route(t + 2, "add", "10.0.2.1/32"),
                          f"{_stamp(t)} BGP: [JQXM8-V0CKB]   nhop [1]: 172.16.0.0 if 0"]) == [
        (pytest.approx(t + 1, abs=1e-6), "delete", "10.0.1.1/32"),
        (pytest.approx(t + 2, abs=1e-6), "add", "10.0.2.1/32")]
    assert stamp_of("bgpd 8.4.4 starting") is None


def test_a_tail_returns_whole_lines_once(tmp_path: Path) -> None:
    log = tmp_path / "bgpd.log"
    log.write_text("one\ntw")
    tail = LogTail(log)
    assert tail.new_lines() == ["one"]
    with log.open("a") as f:
        f.write("o\nthree\n")
    assert tail.new_lines() == ["two", "three"]
    assert tail.new_lines() == []


class _Frr:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def log_path(self, daemon: str) -> Path:
        return self.folder / f"{daemon}.log"


def test_detection_is_the_failed_links_first_down_and_convergence_the_last_route(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = resolve_topology("fat-tree")
    plan = routing_plan(topo)
    nos = FabricNos(topo, "t", tmp_path, {})
    t_inject = time.time() - 20  # everything below has happened; QUIET_S has passed since
    (a11_c1,) = [s for s in plan["a11"].sessions if s.peer == "c1"]
    (c1_a11,) = [s for s in plan["c1"].sessions if s.peer == "a11"]
    other = plan["a11"].sessions[0]
    logs = {
        # another session of a11 went down first, and before the failure: neither counts
        "a11": [_bfd(t_inject - 5, a11_c1.peer_ip, a11_c1.local_ip, "up", "down"),
                _bfd(t_inject + 0.2, other.peer_ip, other.local_ip, "up", "down"),
                _bfd(t_inject + 0.95, a11_c1.peer_ip, a11_c1.local_ip, "up", "down")],
        "c1": [_bfd(t_inject + 0.87, c1_a11.peer_ip, c1_a11.local_ip, "up", "down")],
        "e11": [_route(t_inject - 3, "add", "10.0.1.1/32"),
                _route(t_inject + 1.5, "add", "10.0.3.1/32")],
        "c2": [_route(t_inject + 2.75, "delete", "10.0.2.1/32")],
    }
    for name, routing in plan.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "bfdd.log").write_text("".join(
            line for line in logs.get(name, []) if "state-change" in line))
        (folder / "bgpd.log").write_text("".join(
            line for line in logs.get(name, []) if "Tx route" in line))
        nos.switches[name] = SwitchNos(name, routing, None, None,  # type: ignore[arg-type]
                                       frr=_Frr(folder))  # type: ignore[arg-type]
    monkeypatch.setattr(fabric_nos, "FAILURE_WAIT_S", 30.0)
    timing = nos.measure_failure(["a11-c1"], up=False, t_inject=t_inject)
    assert timing["detect_s"] == pytest.approx(0.87, abs=0.002)
    assert timing["converge_s"] == pytest.approx(2.75, abs=0.002)
    assert timing["bfd_sessions"] == 2
    assert timing["reprogram_s"] is None  # no route agent wrote
