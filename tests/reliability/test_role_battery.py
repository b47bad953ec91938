"""The role rows of the battery (role_battery.py) on p4sim and, when the p4lang toolchain is
beside the repository, on real simple_switch_grpc: each request gets BMv2's code, or the
specification's where BMv2 has no roles (documented per case), and the switch stays up."""

from __future__ import annotations

import pytest
from battery import Case
from p4rt_client import Client
from role_battery import ROLE_CASES
from targets import SwitchProcess, compile_program, toolchain_env


@pytest.fixture(scope="module", params=["embedded", "bmv2"])
def role_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    target = request.param
    env = None
    if target == "bmv2":
        env = toolchain_env()
        if env is None:
            pytest.skip("real BMv2 role battery: no ../shared/toolchains beside the repository")
    work = tmp_path_factory.mktemp(f"roles-{target}")
    p4info, json_path = compile_program(target, work, env)
    with SwitchProcess(target, env, work / "switch.log") as sw:
        c = Client(sw.addr, sw.device_id, p4info, json_path)
        assert c.set_pipeline() == "OK"
        c.primary.close()  # no default-role client while the role cases run
        yield target, c, sw
        c.close()
        assert sw.proc is not None and sw.proc.poll() is None, "the switch died"


@pytest.mark.parametrize("case", ROLE_CASES, ids=[c.name for c in ROLE_CASES])
def test_role_request(role_client, case: Case) -> None:
    target, c, sw = role_client
    got = case.run(c)
    assert got == case.expected(target), f"{case.name}: {case.why}" if case.why else case.name
    assert sw.proc is not None and sw.proc.poll() is None, "the switch died"


def test_role_differences_are_documented() -> None:
    assert all(bool(c.p4sim) == bool(c.why) for c in ROLE_CASES)
    assert len({c.name for c in ROLE_CASES}) == len(ROLE_CASES)
