"""`fabricctl routes`: a namespace's kernel routes next to the entries a real p4sim switch holds,
with routes that have no entry, entries that have no route and differing ports flagged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cellfabric.nos.route_agent import RouteAgent
from controlplane.cli import main
from controlplane.cli_commands import UsageError
from controlplane.cli_routes import port_map
from controlplane.connection import SwitchConnection
from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config
from netlab.targets import compile_p4

sys.path.insert(0, str(Path(__file__).parent / "nos_fixtures"))
sys.path.insert(0, str(Path(__file__).parent / "cp_fixtures"))
from p4sim_switch import P4simSwitch
from route_lab import needs_root, route_lab

ROOT = Path(__file__).resolve().parents[2]


def test_port_map_defaults_to_interfaces_named_after_their_port() -> None:
    assert port_map(None, {"1", "12", "eth0", "lo"}) == {"1": 1, "12": 12}
    # a --routing bgp namespace's TAPs and host ports
    assert port_map(None, {"port1", "port3", "portx", "lo"}) == {"port1": 1, "port3": 3}
    assert port_map("tapA=3, tapB=4", set()) == {"tapA": 3, "tapB": 4}
    with pytest.raises(UsageError, match="'tapA:3' is not IFNAME=PORT"):
        port_map("tapA:3", set())


@needs_root
def test_routes_view_flags_what_the_switch_and_the_kernel_disagree_on(tmp_path: Path,
                                                                      capsys) -> None:
    json_path, p4info_path = compile_p4(ROOT / "p4src" / "fabric.p4", tmp_path, "embedded")
    with route_lab() as lab, P4simSwitch(1, log=tmp_path / "switch.log") as sw:
        lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2))
        lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(2, 3))
        lab.ip("route", "add", "10.3.3.0/24", *lab.via(3))
        with SwitchConnection(sw.addr, 1, (0, 1), reconnect=False) as ctl:
            ctl.set_pipeline(p4info_path, json_path)
        with SwitchConnection(sw.addr, 1, (0, 1), reconnect=False, role=ROUTE_AGENT_ROLE,
                              role_config=route_agent_role_config()) as conn:
            RouteAgent(lab.ns, "l1", lab.port_of_ifname, conn, True,
                       log=lambda _line: None).sync()
        # the kernel moves on while no agent follows it
        lab.ip("route", "del", "10.3.3.0/24")
        lab.ip("route", "replace", "10.2.0.0/16", "proto", "bgp", *lab.via(3))
        lab.ip("route", "add", "10.9.0.0/16", "proto", "bgp", *lab.via(1))
        where = ["--switch", f"{sw.addr},1"]
        args = ["routes", "--netns", lab.ns, "--port-map",
                ",".join(f"{n}={p}" for n, p in lab.port_of_ifname.items())]
        assert main([*where, "--json", *args]) == 0
        view = json.loads(capsys.readouterr().out)
        status = {r["prefix"]: (r["status"], r["kernel_ports"], r["entry_ports"])
                  for r in view["routes"]}
        assert status["10.1.0.0/16"] == ("ok", [1, 2], [1, 2])
        assert status["10.2.0.0/16"] == ("PORTS DIFFER", [3], [2, 3])
        assert status["10.3.3.0/24"] == ("ENTRY WITHOUT ROUTE", [], [3])
        assert status["10.9.0.0/16"] == ("NO ENTRY", [1], [])
        assert status["10.77.1.0/24"][0] == "skipped"
        assert view["flagged"] == 3
        assert main([*where, *args]) == 0
        text = capsys.readouterr().out
        assert "10.9.0.0/16" in text and "NO ENTRY" in text
        assert text.rstrip().endswith("3 flagged")
        # a namespace that is not there: one line, exit 2
        assert main([*where, "routes", "--netns", "cfra-absent"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == "fabricctl: error: netns cfra-absent: no such network namespace"
        assert main([*where, "routes"]) == 2
        assert "give --netns" in capsys.readouterr().err
