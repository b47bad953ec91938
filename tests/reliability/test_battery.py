"""The bad-request battery (battery.py) on p4sim and, when the p4lang toolchain is beside the
repository, on real simple_switch_grpc: every request gets BMv2's code, except the documented
differences, and the switch stays up and serving throughout."""

from __future__ import annotations

import pytest
from battery import CASES, Case, restore_pipeline
from p4rt_client import Client
from targets import SwitchProcess, compile_program, toolchain_env

TARGETS = ["embedded", "bmv2"]


@pytest.fixture(scope="module", params=TARGETS)
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    target = request.param
    env = None
    if target == "bmv2":
        env = toolchain_env()
        if env is None:
            pytest.skip("real BMv2 battery: no ../shared/toolchains beside the repository")
    work = tmp_path_factory.mktemp(f"battery-{target}")
    p4info, json_path = compile_program(target, work, env)
    with SwitchProcess(target, env, work / "switch.log") as sw:
        c = Client(sw.addr, sw.device_id, p4info, json_path)
        assert c.set_pipeline() == "OK"
        yield target, c, sw
        c.close()
        assert sw.proc is not None and sw.proc.poll() is None, "the switch died"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_request(client, case: Case) -> None:
    target, c, sw = client
    got = case.run(c)
    if case.repush:
        assert restore_pipeline(c) == "OK"
    assert got == case.expected(target), f"{case.name}: {case.why}" if case.why else case.name
    assert sw.proc is not None and sw.proc.poll() is None, "the switch died"


def test_differences_are_documented() -> None:
    """Every case where p4sim answers otherwise than BMv2 says why (and only those)."""
    assert all(bool(c.p4sim) == bool(c.why) for c in CASES)
    assert len(CASES) >= 50 and len({c.name for c in CASES}) == len(CASES)

