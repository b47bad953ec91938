"""The client never believes a write happened unless the switch said so, and never forgets one
that did: large batches with a failure, per-update outcomes, ambiguous errors reconciled by
reading the switch back, and a restart that replays exactly what the switch had accepted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controlplane import writes
from controlplane.errors import AmbiguousWriteError
from controlplane.p4rt import P4RuntimeError, SwitchConnection, TableEntry

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch, compile_test_program

GRPC_DEFAULT_METADATA = 16 << 10  # what a plain grpc channel accepts


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    json_path, p4info_path = compile_test_program(tmp_path_factory.mktemp("cp-build"))
    return p4info_path, json_path


def route(i: int, port: int = 1) -> TableEntry:
    return TableEntry("ipv4_lpm", match={"dstAddr": f"10.{i >> 8}.{i & 255}.0/24"},
                      action="set_nhop", params={"dmac": 1, "port": port})


def ports_on_switch(conn: SwitchConnection) -> dict[str, int]:
    return {str(e.match["hdr.ipv4.dstAddr"]): e.params["port"]
            for e in conn.read(TableEntry("ipv4_lpm"))}


def test_500_inserts_with_one_duplicate_agree_and_replay_499(program, tmp_path: Path) -> None:
    seen: list[int] = []
    with P4simSwitch(log=tmp_path / "sw.log") as sw, \
            SwitchConnection(sw.addr, on_resync=lambda c, n: seen.append(n)) as conn:
        conn.set_pipeline(*program)
        batch = [route(i) for i in range(500)]
        batch[250] = route(0)  # the duplicate
        with pytest.raises(P4RuntimeError) as info:
            conn.insert(*batch)
        assert not isinstance(info.value, AmbiguousWriteError)
        assert [u.index for u in info.value.failed] == [250]
        assert info.value.failed[0].code == 6  # ALREADY_EXISTS, for that update only
        assert "insert table MyIngress.ipv4_lpm entry dstAddr=10.0.0.0/24" in str(info.value)
        assert len(info.value.updates) == 500
        assert len(conn.intended) == 499
        assert len(ports_on_switch(conn)) == 499
        sw.restart()
        assert conn.wait_resync(1, timeout=30)
        assert seen == [499]
        assert len(ports_on_switch(conn)) == 499
        assert conn.last_verification is not None and conn.last_verification.ok


def test_batches_beyond_one_request_keep_every_outcome(program, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch larger than WRITE_BATCH goes as several WriteRequests; failures keep their
    index in the caller's batch (the table holds 1024 entries, so the split is made small)."""
    monkeypatch.setattr(writes, "WRITE_BATCH", 300)
    with P4simSwitch(log=tmp_path / "sw.log") as sw, SwitchConnection(sw.addr) as conn:
        conn.set_pipeline(*program)
        conn.insert(route(1), route(700))
        with pytest.raises(P4RuntimeError) as info:
            conn.insert(*[route(i) for i in range(1000)])
        assert [u.index for u in info.value.failed] == [1, 700]
        assert len(info.value.updates) == 1000
        assert len(conn.intended) == 1000 == len(ports_on_switch(conn))


def test_results_lost_in_transit_are_learned_by_reading_back(program, tmp_path: Path) -> None:
    """With gRPC's default metadata limit the per-update results of a 500-update batch cannot
    arrive (RESOURCE_EXHAUSTED): the client reads the switch back instead of guessing."""
    seen: list[int] = []
    with P4simSwitch(log=tmp_path / "sw.log") as sw, \
            SwitchConnection(sw.addr, max_metadata=GRPC_DEFAULT_METADATA,
                             on_resync=lambda c, n: seen.append(n)) as conn:
        conn.set_pipeline(*program)
        conn.insert(route(7, port=3))
        batch = [route(i) for i in range(1000, 1500)]
        batch[250] = route(7, port=2)  # a duplicate key with another value: not applied
        with pytest.raises(AmbiguousWriteError) as info:
            conn.insert(*batch)
        assert info.value.code == "RESOURCE_EXHAUSTED"
        assert "read back: 499 of 500 updates applied" in str(info.value)
        assert [i for i, ok in enumerate(info.value.applied) if not ok] == [250]
        on_switch = ports_on_switch(conn)
        assert len(on_switch) == len(conn.intended) == 500
        sw.restart()
        assert conn.wait_resync(1, timeout=30)
        assert seen == [500]
        after = conn.read(TableEntry("ipv4_lpm", match={"dstAddr": "10.0.7.0/24"}))
        assert [e.params["port"] for e in after] == [3]  # the switch's value, not the rejected
        assert len(ports_on_switch(conn)) == 500


def test_deletes_of_an_ambiguous_batch_are_forgotten_only_if_gone(program, tmp_path) -> None:
    with P4simSwitch(log=tmp_path / "sw.log") as sw, \
            SwitchConnection(sw.addr, max_metadata=GRPC_DEFAULT_METADATA) as conn:
        conn.set_pipeline(*program)
        conn.insert(*[route(i) for i in range(600)])
        doomed = [route(i) for i in range(600)]
        doomed[10] = route(3000)  # never inserted: NOT_FOUND
        with pytest.raises(AmbiguousWriteError) as info:
            conn.delete(*doomed)
        assert [i for i, ok in enumerate(info.value.applied) if not ok] == []  # absent = gone
        assert len(conn.intended) == 1 == len(ports_on_switch(conn))  # route(10) survives
