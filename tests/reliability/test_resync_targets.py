"""The client's bookkeeping against each target: a 500-insert batch with one duplicate leaves
client and switch agreeing on 499 entries, and after a kill -9 and restart the re-sync replays
exactly those 499 and verifies them by reading back — on p4sim and on real simple_switch_grpc
(when the p4lang toolchain is beside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest
from targets import SwitchProcess, compile_program, toolchain_env

from controlplane.p4rt import P4RuntimeError, SwitchConnection, TableEntry


def route(i: int) -> TableEntry:
    return TableEntry("ipv4_lpm", match={"dstAddr": f"10.{i >> 8}.{i & 255}.0/24"},
                      action="set_nhop", params={"dmac": 1, "port": 1})


@pytest.mark.parametrize("target", ["embedded", "bmv2"])
def test_batch_with_a_duplicate_then_kill_and_resync(target: str, tmp_path: Path) -> None:
    env = None
    if target == "bmv2":
        env = toolchain_env()
        if env is None:
            pytest.skip("real BMv2: no ../shared/toolchains beside the repository")
    p4info, json_path = compile_program(target, tmp_path / "build", env)
    seen: list[int] = []
    sw = SwitchProcess(target, env, tmp_path / "switch.log")
    with sw, SwitchConnection(sw.addr, sw.device_id, timeout=20,
                              on_resync=lambda c, n: seen.append(n)) as conn:
        conn.set_pipeline(p4info, json_path)
        batch = [route(i) for i in range(500)]
        batch[250] = route(0)
        with pytest.raises(P4RuntimeError) as info:
            conn.insert(*batch)
        assert [u.index for u in info.value.failed] == [250]
        assert info.value.code == "UNKNOWN" and info.value.failed[0].code == 6  # ALREADY_EXISTS
        assert len(conn.intended) == 499 == len(conn.read(TableEntry("ipv4_lpm")))
        sw.kill()
        sw.start()
        assert conn.wait_resync(1, timeout=60)
        assert seen == [499]
        assert conn.last_verification is not None and conn.last_verification.ok
        assert len(conn.read(TableEntry("ipv4_lpm"))) == 499
