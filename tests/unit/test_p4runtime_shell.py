"""p4runtime-shell, unchanged and used as a library, drives the p4sim P4Runtime server."""

from __future__ import annotations

import pytest
from p4rt_harness import DEVICE_ID, JSON_PATH, P4INFO_PATH, Switch

from p4sim.switch import api


@pytest.fixture
def sw():
    s = Switch()
    yield s
    s.close()


def test_shell_sets_pipeline_inserts_and_reads_back(sw):
    from p4runtime_sh import shell as sh

    sh.setup(device_id=DEVICE_ID, grpc_addr=sw.addr, election_id=(0, 1),
             config=sh.FwdPipeConfig(str(P4INFO_PATH), str(JSON_PATH)), verbose=False)
    try:
        assert sw.dp.pipeline_json() == JSON_PATH.read_bytes()
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.set_nhop")
        te.match["hdr.ipv4.dstAddr"] = "10.1.0.0/16"
        te.action["port"] = "3"
        te.action["dmac"] = "02:00:00:00:00:09"
        te.insert()
        acl = sh.TableEntry("MyIngress.acl")(action="MyIngress.drop")
        acl.match["hdr.ethernet.etherType"] = "0x0800&&&0xffff"
        acl.match["meta.l4_port"] = "80..443"
        acl.priority = 7
        acl.insert()
        (stored,) = sw.dp.table_entries("MyIngress.ipv4_lpm")
        assert stored.key == (api.Lpm(0x0A010000, 16),)
        assert stored.action == api.ActionCall("MyIngress.set_nhop", (3, 0x020000000009))

        got = list(sh.TableEntry("MyIngress.ipv4_lpm").read())
        assert len(got) == 1
        assert str(got[0].match["hdr.ipv4.dstAddr"].lpm.prefix_len) == "16"
        assert got[0].action["port"].value == b"\x03"
        (acl_got,) = sh.TableEntry("MyIngress.acl").read()
        assert acl_got.priority == 7
        assert acl_got.match["meta.l4_port"].range.low == b"\x50"

        te.action["port"] = "5"
        te.modify()
        assert sw.dp.table_entries("MyIngress.ipv4_lpm")[0].action.args[0] == 5

        # a write error surfaces as p4runtime-shell's parsed per-update exception
        from p4runtime_sh.p4runtime import P4RuntimeWriteException
        with pytest.raises(P4RuntimeWriteException) as exc:
            te.insert()
        assert "ALREADY_EXISTS" in str(exc.value)
        te.delete()
        assert sw.dp.table_entries("MyIngress.ipv4_lpm") == []

        member = sh.ActionProfileMember("MyIngress.ecmp_selector")(
            member_id=1, action="MyIngress.set_nhop")
        member.action["port"] = "2"
        member.action["dmac"] = "02:00:00:00:00:02"
        member.insert()
        group = sh.ActionProfileGroup("MyIngress.ecmp_selector")(group_id=1)
        group.add(1)
        group.insert()
        assert [m.member_id for m in sw.dp.groups("MyIngress.ecmp_selector")[1]] == [1]
        counter = sh.CounterEntry("MyIngress.port_counter")
        counter.index = 2
        assert sum(1 for _ in counter.read()) == 1
    finally:
        sh.teardown()
