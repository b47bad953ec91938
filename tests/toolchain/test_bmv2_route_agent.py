"""The route agent on real simple_switch_grpc (`make test-toolchain`): fabric.p4 compiled by
real p4c-bm2-ss, a namespace's static multipath routes written, followed and read back, and
`fabricctl routes` agreeing. BMv2's PI arbitrates every role as one (a role config is ignored,
and the highest election id is the one primary): the agent gets the higher id, after the other
writer has written, and its named reads and diffs leave that writer's entries alone."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cellfabric.nos.route_agent import RouteAgent
from controlplane.cli import main
from controlplane.connection import SwitchConnection, wait_until
from controlplane.entities import ActionProfileGroup, TableEntry
from controlplane.fabric_plan import P_SELECTOR, T_LPM, T_MY_STATION
from controlplane.route_entries import ROUTE_AGENT_ROLE, route_agent_role_config
from netlab.hosts import free_port, tcp_accepts
from netlab.targets import compile_p4, switch_argv

pytestmark = pytest.mark.skipif(
    not (shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"))
    or os.geteuid() != 0, reason="real BMv2 toolchain not on PATH, or not root")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "nos_fixtures"))
from route_lab import route_lab  # noqa: E402

AGENT_ROLE = {"role": ROUTE_AGENT_ROLE, "role_config": route_agent_role_config()}


@pytest.fixture
def bmv2(tmp_path: Path):
    json_path, p4info_path = compile_p4(Path(__file__).resolve().parents[2] / "p4src"
                                        / "fabric.p4", tmp_path / "build", "bmv2")
    addr = f"127.0.0.1:{free_port()}"
    argv = switch_argv("bmv2", {}, addr, device_id=1, cpu_port=510,
                       thrift_port=free_port())
    log = open(tmp_path / "switch.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        port = int(addr.rsplit(":", 1)[1])
        assert wait_until(lambda: tcp_accepts(port) or proc.poll() is not None, 30.0)
        assert proc.poll() is None, (tmp_path / "switch.log").read_text()[-2000:]
        with SwitchConnection(addr, 1, (0, 1), reconnect=False) as ctl:
            ctl.set_pipeline(p4info_path, json_path)
        yield addr
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_agent_programs_and_follows_real_bmv2(bmv2: str, capsys) -> None:
    with route_lab() as lab, SwitchConnection(bmv2, 1, (0, 1), reconnect=False) as ctl:
        # another writer's entry, which the agent's reads and diffs must leave alone
        ctl.insert(TableEntry(table=T_MY_STATION, action="NoAction",
                              match={"hdr.ethernet.dst_addr": "02:00:00:00:00:01"}))
        conn = SwitchConnection(bmv2, 1, (0, 2), reconnect=False,
                                **AGENT_ROLE).connect()
        lab.ip("route", "add", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 2, 3))
        lab.ip("route", "add", "10.2.0.0/16", "proto", "bgp", *lab.via(3))

        def routes() -> dict[str, int]:
            out = {}
            for e in ctl.read(TableEntry(table=T_LPM)):
                m = e.match["hdr.ipv4.dst_addr"]
                out[f"{ipaddress.IPv4Address(m.value)}/{m.prefix_len}"] = e.params["group_id"]
            return out

        def groups() -> dict[int, set[int]]:
            return {g.group_id: {m.member_id for m in g.members}
                    for g in ctl.read(ActionProfileGroup(profile=P_SELECTOR))}

        agent = RouteAgent(lab.ns, "l1", lab.port_of_ifname, conn, True, modify_groups=False,
                           log=lambda _l: None)
        stop = threading.Event()
        thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert wait_until(lambda: len(routes()) == 2 or agent.errors, 30.0)
            assert agent.errors == []
            gid = routes()["10.1.0.0/16"]
            assert groups()[gid] == {1, 2, 3}
            lab.ip("route", "replace", "10.1.0.0/16", "proto", "bgp", *lab.via(1, 3))
            # a new group for the shrunk set, the old one gone
            assert wait_until(lambda: sorted(map(sorted, groups().values())) == [[1, 3], [3]]
                              or agent.errors, 30.0)
            assert agent.errors == []
            assert routes()["10.1.0.0/16"] != gid
            assert groups()[routes()["10.1.0.0/16"]] == {1, 3}
            lab.ip("route", "del", "10.2.0.0/16")
            assert wait_until(lambda: set(routes()) == {"10.1.0.0/16"}, 30.0)
        finally:
            stop.set()
            thread.join(timeout=30)
            conn.close()
        assert agent.errors == []
        assert len(ctl.read(TableEntry(table=T_MY_STATION))) == 1
        ports = ",".join(f"{n}={p}" for n, p in lab.port_of_ifname.items())
        assert main(["--switch", f"{bmv2},1", "--election-id", "0,3", "--json", "routes", "--netns", lab.ns,
                     "--port-map", ports]) == 0
        view = json.loads(capsys.readouterr().out)
        assert view["flagged"] == 0
        assert [r["status"] for r in view["routes"] if r["prefix"] == "10.1.0.0/16"] == ["ok"]
