"""`fabricctl fabric up|diff|status` on a leaf-spine of four real p4sim switches running
fabric.p4 (the controller itself is tested in test_fabric_controller.py; this checks the CLI
wiring: addresses from the topology, idempotence seen from the CLI, --down, status, errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from controlplane.addresses import topology_addresses
from controlplane.cli import main
from netlab.targets import compile_p4

sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch, free_port_block

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies" / "leaf-spine.yaml"


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("fabricctl")
    json_path, p4info_path = compile_p4(ROOT / "p4src" / "fabric.p4", work / "build",
                                        "embedded")
    grpc_base, thrift_base = free_port_block(8), free_port_block(8)
    addrs = topology_addresses(TOPO, grpc_base, thrift_base)
    switches = []
    try:
        for name, a in addrs.items():
            switches.append(P4simSwitch(a.device_id, int(a.grpc_addr.rsplit(":", 1)[1]),
                                        work / f"{name}.log",
                                        int(a.admin_addr.rsplit(":", 1)[1])).start())
        yield ["--topology", str(TOPO), "--grpc-base", str(grpc_base), "--thrift-base",
               str(thrift_base)], ["--p4info", str(p4info_path), "--bmv2-json", str(json_path)]
    finally:
        for sw in switches:
            sw.stop()


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_fabric_up_is_idempotent_and_plans_around_a_down_link(fabric, capsys) -> None:
    where, files = fabric
    rc, out, err = run(capsys, *where, "--json", "fabric", "up", *files)
    assert rc == 0, err
    first = json.loads(out)
    assert set(first) == {"s1", "s2", "l1", "l2"}
    assert all(r["insert"] > 0 for r in first.values())
    rc, out, err = run(capsys, *where, "--json", "fabric", "up", *files)
    assert rc == 0, err
    assert all(r == {"insert": 0, "modify": 0, "delete": 0} for r in json.loads(out).values())
    rc, out, _ = run(capsys, *where, "--json", "fabric", "status", *files)
    status = json.loads(out)
    assert {n: (s["pipeline"], s["pending_writes"]) for n, s in status.items()} == {
        n: (True, 0) for n in ("s1", "s2", "l1", "l2")}
    # Planning around l1-s1 changes l1 and s1 (and what reaches l1 through s1), not nothing.
    rc, out, _ = run(capsys, *where, "--json", "fabric", "diff", "--down", "l1-s1", *files)
    assert rc == 0
    pending = {n: sum(r.values()) for n, r in json.loads(out).items()}
    assert pending["l1"] > 0 and pending["s1"] > 0
    rc, out, _ = run(capsys, *where, "fabric", "diff", *files)  # diff wrote nothing
    assert rc == 0 and out.strip().endswith("fabric diff: would write 0 updates on 4 switches")


def test_fabric_errors_are_one_line(fabric, capsys, tmp_path: Path) -> None:
    where, files = fabric
    rc, _, err = run(capsys, "fabric", "status")
    assert rc == 2 and err == "fabricctl: error: fabric: needs --topology FILE\n"
    rc, _, err = run(capsys, *where, "fabric", "up", "--p4info", str(tmp_path / "nope"),
                     "--bmv2-json", str(tmp_path / "nope.json"))
    assert rc == 2 and "no such file" in err and err.count("\n") == 1
    rc, _, err = run(capsys, *where, "fabric", "diff", "--down", "l1-zz", *files)
    assert rc == 2 and "--down l1-zz" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "--topology", str(TOPO), "--grpc-base", "1", "--timeout", "0.3",
                     "fabric", "status", *files)
    assert rc == 2 and "connect failed on switch" in err and err.count("\n") == 1


def test_ecn_and_int_views_show_the_planned_entries(fabric, capsys) -> None:
    where, files = fabric
    assert run(capsys, *where, "fabric", "up", *files)[0] == 0
    for concern, table in (("ecn", "MyEgress.ecn.ecn_profile"),
                           ("int", "MyIngress.int_ingress.int_watchlist")):
        rc, out, err = run(capsys, *where, "--switch", "l1", "--json", concern)
        assert rc == 0, err
        view = json.loads(out)
        assert table in view
        assert any(view.values()), f"the plan programs {concern} tables on l1"
        rc, out, _ = run(capsys, *where, "--switch", "l1", "--json", "table", "dump", table)
        assert view[table] == json.loads(out)
