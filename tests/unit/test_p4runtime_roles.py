"""P4Runtime roles on the p4sim server (spec 1.4, "Client Arbitration and Controller
Replication"): one primary per (device, role), writes limited to the role's entities
(PERMISSION_DENIED per update), reads open to all with the role as a filter, packet I/O and
digests by the role config, malformed configs refused with INVALID_ARGUMENT."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import (
    DEVICE_ID,
    INSERT,
    Stream,
    Switch,
    action,
    ipv4_frame,
    lpm_entry,
    update,
    write_errors,
)

from controlplane.roles import role_config

ACL, LPM = "MyIngress.acl", "MyIngress.ipv4_lpm"


@pytest.fixture
def sw():
    s = Switch()
    s.set_pipeline()  # no stream yet: PI accepts a pipeline push without an election id
    yield s
    s.close()


def role_stream(sw: Switch, role: str, election: int, config: any_pb2.Any | None) -> Stream:
    s = Stream(sw.stub)
    sw.streams.append(s)
    req = p4rt.StreamMessageRequest()
    req.arbitration.device_id = DEVICE_ID
    req.arbitration.election_id.low = election
    req.arbitration.role.name = role
    if config is not None:
        req.arbitration.role.config.CopyFrom(config)
    s.send(req)
    return s


def role_write(sw: Switch, role: str, election: int, *updates: p4rt.Update) -> None:
    req = p4rt.WriteRequest(device_id=DEVICE_ID, role=role, updates=updates)
    req.election_id.low = election
    sw.stub.Write(req)


def acl_entry(sw: Switch, priority: int) -> p4rt.TableEntry:
    te = p4rt.TableEntry(table_id=sw.table_id(ACL), priority=priority)
    te.action.action.CopyFrom(action(sw, "MyIngress.drop"))
    return te


def code_of(call) -> int:
    try:
        call()
    except grpc.RpcError as err:
        return err.code().value[0]
    return code_pb2.OK


def test_primary_writes_only_its_roles_tables(sw):
    s = role_stream(sw, "acl", 1, role_config([ACL]))
    arb = s.get("arbitration").arbitration
    assert (arb.status.code, arb.role.name) == (code_pb2.OK, "acl")
    assert arb.role.config == role_config([ACL])  # the notification echoes the config
    role_write(sw, "acl", 1, update(INSERT, table_entry=acl_entry(sw, 1)))
    with pytest.raises(grpc.RpcError) as exc:
        role_write(sw, "acl", 1, update(INSERT, table_entry=acl_entry(sw, 2)),
                   update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert [e.canonical_code for e in write_errors(exc.value)] == \
        [code_pb2.OK, code_pb2.PERMISSION_DENIED]
    assert len(sw.dp.table_entries(ACL)) == 2 and sw.dp.table_entries(LPM) == []


def test_ids_name_entities_as_well_as_names(sw):
    role_stream(sw, "lpm", 1, role_config(p4_ids=[sw.table_id(LPM)])).get("arbitration")
    role_write(sw, "lpm", 1, update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert code_of(lambda: role_write(sw, "lpm", 1, update(
        INSERT, table_entry=acl_entry(sw, 1)))) == code_pb2.UNKNOWN  # per-update failure


def test_one_primary_per_role_and_roles_are_independent(sw):
    a = role_stream(sw, "acl", 5, role_config([ACL]))
    assert a.get("arbitration").arbitration.status.code == code_pb2.OK
    # the same election id in another role is allowed, and that client is its primary too
    b = role_stream(sw, "lpm", 5, role_config([LPM]))
    assert b.get("arbitration").arbitration.status.code == code_pb2.OK
    c = role_stream(sw, "acl", 9, role_config([ACL]))  # takes over role "acl"
    assert c.get("arbitration").arbitration.status.code == code_pb2.OK
    assert a.get("arbitration").arbitration.status.code == code_pb2.ALREADY_EXISTS
    assert b.nothing("arbitration")  # the other role is not told
    entry = update(INSERT, table_entry=acl_entry(sw, 1))
    assert code_of(lambda: role_write(sw, "acl", 5, entry)) == code_pb2.PERMISSION_DENIED
    role_write(sw, "acl", 9, entry)
    role_write(sw, "lpm", 5, update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    # a default-role write needs the default role's primary; there is none
    assert code_of(lambda: sw.write(update(INSERT, table_entry=acl_entry(sw, 2)),
                                    election=(0, 9))) == code_pb2.PERMISSION_DENIED


def test_same_election_id_in_the_same_role_ends_the_stream(sw):
    role_stream(sw, "acl", 3, role_config([ACL])).get("arbitration")
    dup = role_stream(sw, "acl", 3, role_config([ACL]))
    assert dup.ended.wait(3) and dup.error is not None
    assert dup.error.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("config", [
    any_pb2.Any(type_url="type.googleapis.com/p4.v1.TableEntry", value=b""),
    any_pb2.Any(type_url="type.googleapis.com/p4sim.v1.RoleConfig", value=b"\xff\xff\xff"),
    role_config([""]),
], ids=["other message type", "undecodable bytes", "empty entity name"])
def test_malformed_role_config_is_invalid_argument(sw, config):
    s = role_stream(sw, "acl", 1, config)
    assert s.ended.wait(3) and s.error is not None
    assert s.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "RoleConfig" in s.error.details() or "name" in s.error.details()


def test_role_change_on_a_live_stream_fails(sw):
    s = role_stream(sw, "acl", 1, role_config([ACL]))
    s.get("arbitration")
    req = p4rt.StreamMessageRequest()
    req.arbitration.device_id = DEVICE_ID
    req.arbitration.election_id.low = 1
    req.arbitration.role.name = "lpm"
    s.send(req)
    assert s.ended.wait(3) and s.error.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_write_for_a_role_no_one_holds_is_not_found(sw):
    role_stream(sw, "acl", 1, role_config([ACL])).get("arbitration")
    entry = update(INSERT, table_entry=acl_entry(sw, 1))
    assert code_of(lambda: role_write(sw, "nobody", 1, entry)) == code_pb2.NOT_FOUND


def test_role_without_config_has_full_access(sw):
    role_stream(sw, "ops", 1, None).get("arbitration")
    role_write(sw, "ops", 1, update(INSERT, table_entry=acl_entry(sw, 1)),
               update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert len(sw.dp.table_entries(ACL)) == 1 and len(sw.dp.table_entries(LPM)) == 1


def test_reads_are_open_and_the_role_filters_them(sw):
    role_stream(sw, "acl", 1, role_config([ACL])).get("arbitration")
    role_stream(sw, "lpm", 1, role_config([LPM])).get("arbitration")
    role_write(sw, "acl", 1, update(INSERT, table_entry=acl_entry(sw, 1)))
    role_write(sw, "lpm", 1, update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    every_table = p4rt.Entity(table_entry=p4rt.TableEntry())

    def read(role: str) -> list[int]:
        req = p4rt.ReadRequest(device_id=DEVICE_ID, role=role, entities=[every_table])
        return sorted(e.table_entry.table_id for r in sw.stub.Read(req) for e in r.entities)

    assert read("") == sorted([sw.table_id(ACL), sw.table_id(LPM)])  # no election id needed
    assert read("acl") == [sw.table_id(ACL)]
    assert read("lpm") == [sw.table_id(LPM)]
    assert read("nobody") == []


def test_pipeline_push_needs_a_role_that_may(sw):
    role_stream(sw, "acl", 1, role_config([ACL])).get("arbitration")
    role_stream(sw, "ops", 1, role_config(can_push_pipeline=True)).get("arbitration")

    def push(role: str) -> int:
        req = p4rt.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, role=role, action=p4rt.SetForwardingPipelineConfigRequest.VERIFY)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(sw.info)
        req.config.p4_device_config = sw.handle.device.config.p4_device_config
        return code_of(lambda: sw.stub.SetForwardingPipelineConfig(req))

    assert push("acl") == code_pb2.PERMISSION_DENIED
    assert push("ops") == code_pb2.OK


def test_packet_io_follows_the_role_config(sw):
    te = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    te.action.action.CopyFrom(action(sw, "MyIngress.send_to_cpu"))
    sw.write(update(INSERT, table_entry=te))
    quiet = role_stream(sw, "acl", 1, role_config([ACL]))
    punt = role_stream(sw, "punt", 1, role_config(receives_packet_ins=True))
    quiet.get("arbitration"), punt.get("arbitration")
    sw.inject(3, ipv4_frame(b"\x0a\x01\x02\x03"))
    assert punt.get("packet").packet.payload == ipv4_frame(b"\x0a\x01\x02\x03")
    assert quiet.nothing("packet")
    out = p4rt.StreamMessageRequest()
    out.packet.payload = ipv4_frame(b"\x0a\x01\x02\x04")
    quiet.send(out)
    err = quiet.get("error").error
    assert err.canonical_code == code_pb2.PERMISSION_DENIED
    assert sw.packet_outs == []


def test_digest_lists_go_to_the_role_that_owns_the_digest(sw):
    did = sw.obj_id("digests", "mac_learn_t")
    owner = role_stream(sw, "learn", 1, role_config(["mac_learn_t", ACL]))
    other = role_stream(sw, "lpm", 1, role_config([LPM]))
    owner.get("arbitration"), other.get("arbitration")
    d = p4rt.DigestEntry(digest_id=did)
    d.config.max_list_size = 1
    assert code_of(lambda: role_write(sw, "lpm", 1, update(INSERT, digest_entry=d))) \
        == code_pb2.UNKNOWN  # outside role "lpm"
    te = p4rt.TableEntry(table_id=sw.table_id(ACL), priority=1)
    te.action.action.CopyFrom(action(sw, "MyIngress.learn"))
    role_write(sw, "learn", 1, update(INSERT, digest_entry=d), update(INSERT, table_entry=te))
    sw.inject(7, ipv4_frame(b"\x0a\x01\x02\x03"))
    assert owner.get("digest").digest.digest_id == did
    assert other.nothing("digest")


def test_controlplane_builds_the_same_role_config_as_p4sim_parses():
    from controlplane.roles import role_config
    from p4sim.switch.p4runtime.roleconfig import parse_role

    sent = role_config([ACL], [7], can_push_pipeline=True, receives_packet_ins=True)
    assert sent.type_url == "type.googleapis.com/p4sim.v1.RoleConfig"
    name, grant = parse_role(p4rt.Role(name="ops", config=sent))
    assert name == "ops" and grant is not None
    assert (grant.ids, grant.names) == (frozenset({7}), frozenset({ACL}))
    assert grant.can_push_pipeline and grant.receives_packet_ins
    assert not (grant.can_send_packet_outs or grant.packet_replication)
