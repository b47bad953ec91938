"""Action profile members/groups (watch_port), PRE (multicast groups, clone sessions),
indirect counters, meters and registers, over real gRPC."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import (
    DELETE,
    INSERT,
    MODIFY,
    Switch,
    action,
    ipv4_frame,
    update,
    write_errors,
)

from p4sim.switch import api

PROFILE = "MyIngress.ecmp_selector"


@pytest.fixture
def sw():
    s = Switch()
    s.set_pipeline()
    yield s
    s.close()


def fail(sw, *updates) -> list[p4rt.Error]:
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(*updates)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    return write_errors(exc.value)


def member(sw, mid, port=b"\x01", act="MyIngress.set_nhop"):
    m = p4rt.ActionProfileMember(action_profile_id=sw.obj_id("action_profiles", PROFILE),
                                 member_id=mid)
    m.action.CopyFrom(action(sw, act, port, b"\x01") if act == "MyIngress.set_nhop"
                      else action(sw, act))
    return m


def group(sw, gid, *members, max_size=0):
    g = p4rt.ActionProfileGroup(action_profile_id=sw.obj_id("action_profiles", PROFILE),
                                group_id=gid, max_size=max_size)
    for m in members:
        g.members.add().CopyFrom(m)
    return g


def gm(mid, weight=1, watch_port=None, watch=None):
    m = p4rt.ActionProfileGroup.Member(member_id=mid, weight=weight)
    if watch_port is not None:
        m.watch_port = watch_port
    if watch is not None:
        m.watch = watch
    return m


# ---- members and groups ----------------------------------------------------------------------


def test_members_insert_read_modify_delete(sw):
    sw.write(update(INSERT, action_profile_member=member(sw, 1, b"\x02")),
             update(INSERT, action_profile_member=member(sw, 2, b"\x03")))
    assert sw.dp.members(PROFILE) == {
        1: api.ActionCall("MyIngress.set_nhop", (2, 1)),
        2: api.ActionCall("MyIngress.set_nhop", (3, 1))}
    got = sw.read(p4rt.Entity(action_profile_member=p4rt.ActionProfileMember()))
    assert [e.action_profile_member for e in got] == [member(sw, 1, b"\x02"),
                                                      member(sw, 2, b"\x03")]
    sw.write(update(MODIFY, action_profile_member=member(sw, 2, act="MyIngress.drop")))
    assert sw.dp.members(PROFILE)[2] == api.ActionCall("MyIngress.drop")
    sw.write(update(DELETE, action_profile_member=member(sw, 1)))
    assert set(sw.dp.members(PROFILE)) == {2}
    errs = fail(sw, update(INSERT, action_profile_member=member(sw, 2)),
                update(MODIFY, action_profile_member=member(sw, 9)),
                update(INSERT, action_profile_member=member(sw, 3, act="NoAction")))
    assert [e.canonical_code for e in errs] == [
        code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND, code_pb2.INVALID_ARGUMENT]
    assert errs[2].message == "Invalid action for action profile"


def test_groups_with_watch_port_and_weights(sw):
    for mid, port in ((1, b"\x01"), (2, b"\x02"), (3, b"\x03")):
        sw.write(update(INSERT, action_profile_member=member(sw, mid, port)))
    g = group(sw, 10, gm(1, 2, watch_port=b"\x01"), gm(2, 1, watch_port=b"\x00\x02"),
              gm(3, watch=3), max_size=8)
    sw.write(update(INSERT, action_profile_group=g))
    assert sorted(sw.dp.groups(PROFILE)[10], key=lambda m: m.member_id) == [
        api.GroupMember(1, 2, 1), api.GroupMember(2, 1, 2), api.GroupMember(3, 1, 3)]
    (got,) = sw.read(p4rt.Entity(action_profile_group=p4rt.ActionProfileGroup(
        action_profile_id=g.action_profile_id, group_id=10)))
    assert got.action_profile_group == g  # watch_port bytes and watch echo as written
    g2 = group(sw, 10, gm(3))
    sw.write(update(MODIFY, action_profile_group=g2))
    assert sw.dp.groups(PROFILE)[10] == [api.GroupMember(3, 1, None)]
    # an entry of the indirect table can point at the group, which then cannot be deleted
    te = p4rt.TableEntry(table_id=sw.table_id("MyIngress.ecmp"))
    te.match.add(field_id=1).exact.value = b"\x01"
    te.action.action_profile_group_id = 10
    sw.write(update(INSERT, table_entry=te))
    (read_te,) = sw.read(p4rt.Entity(table_entry=p4rt.TableEntry(table_id=te.table_id)))
    assert read_te.table_entry.action.action_profile_group_id == 10
    (err,) = fail(sw, update(DELETE, action_profile_group=group(sw, 10)))
    assert err.canonical_code == code_pb2.UNKNOWN
    assert 10 in sw.dp.groups(PROFILE)


@pytest.mark.parametrize("grp, code, message", [
    (lambda sw: group(sw, 1, gm(1, weight=0)), code_pb2.INVALID_ARGUMENT,
     "Member weight must be a positive integer value"),
    (lambda sw: group(sw, 1, gm(7)), code_pb2.NOT_FOUND, "Member id does not exist: 7"),
    (lambda sw: group(sw, 1, gm(1), gm(1)), code_pb2.INVALID_ARGUMENT, "Duplicate member id"),
    (lambda sw: group(sw, 1, gm(1, weight=20)), code_pb2.RESOURCE_EXHAUSTED,
     "Sum of member weights exceeds maximum group size"),
    (lambda sw: group(sw, 1, gm(1), max_size=17), code_pb2.INVALID_ARGUMENT,
     "Group max_size cannot exceed static max_group_size (from P4Info)"),
    (lambda sw: group(sw, 1, gm(1, watch_port=b"")), code_pb2.INVALID_ARGUMENT,
     "Port must not be the empty string"),
])
def test_group_validation(sw, grp, code, message):
    sw.write(update(INSERT, action_profile_member=member(sw, 1)))
    (err,) = fail(sw, update(INSERT, action_profile_group=grp(sw)))
    assert err.canonical_code == code and message in err.message
    assert sw.dp.groups(PROFILE) == {}


def test_group_modify_and_delete_missing(sw):
    errs = fail(sw, update(MODIFY, action_profile_group=group(sw, 4)),
                update(DELETE, action_profile_group=group(sw, 4)))
    assert [e.canonical_code for e in errs] == [code_pb2.NOT_FOUND, code_pb2.NOT_FOUND]


def test_member_in_a_group_cannot_be_deleted(sw):
    sw.write(update(INSERT, action_profile_member=member(sw, 1)),
             update(INSERT, action_profile_group=group(sw, 2, gm(1))))
    (err,) = fail(sw, update(DELETE, action_profile_member=member(sw, 1)))
    assert err.canonical_code == code_pb2.UNKNOWN
    assert 1 in sw.dp.members(PROFILE)


# ---- packet replication engine ---------------------------------------------------------------


def mc(gid, *replicas):
    e = p4rt.Entity()
    g = e.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = gid
    for port, inst in replicas:
        r = g.replicas.add(instance=inst)
        if isinstance(port, bytes):
            r.port = port
        else:
            r.egress_port = port
    return e


def clone(sid, *replicas, cos=0, trunc=0):
    e = p4rt.Entity()
    c = e.packet_replication_engine_entry.clone_session_entry
    c.session_id, c.class_of_service, c.packet_length_bytes = sid, cos, trunc
    for port, inst in replicas:
        c.replicas.add(egress_port=port, instance=inst)
    return e


def test_multicast_groups(sw):
    g = mc(5, (1, 0), (b"\x00\x02", 0), (3, 1))
    sw.write(p4rt.Update(type=INSERT, entity=g))
    assert sorted((r.egress_port, r.instance) for r in sw.dp.mcast_groups()[5]) == [
        (1, 0), (2, 0), (3, 1)]
    (got,) = sw.read(mc(0))
    assert got == g  # port spelling kept; listed by instance then port
    sw.write(p4rt.Update(type=MODIFY, entity=mc(5, (4, 2))))
    assert [(r.egress_port, r.instance) for r in sw.dp.mcast_groups()[5]] == [(4, 2)]
    errs = fail(sw, p4rt.Update(type=INSERT, entity=mc(5, (1, 0))),
                p4rt.Update(type=INSERT, entity=mc(0, (1, 0))),
                p4rt.Update(type=INSERT, entity=mc(1 << 15, (1, 0))),
                p4rt.Update(type=INSERT, entity=mc(6, (1, 0), (1, 0))),
                p4rt.Update(type=DELETE, entity=mc(7)))
    assert [e.canonical_code for e in errs] == [
        code_pb2.ALREADY_EXISTS, code_pb2.INVALID_ARGUMENT, code_pb2.OUT_OF_RANGE,
        code_pb2.INVALID_ARGUMENT, code_pb2.NOT_FOUND]
    sw.write(p4rt.Update(type=DELETE, entity=mc(5)))
    assert sw.dp.mcast_groups() == {}
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(mc(5))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_clone_sessions(sw):
    sw.write(p4rt.Update(type=INSERT, entity=clone(3, (510, 1), trunc=64)))
    s = sw.dp.clone_sessions()[3]
    assert [(r.egress_port, r.instance) for r in s.replicas] == [(510, 1)]
    assert s.packet_length_bytes == 64
    (got,) = sw.read(clone(0))
    assert got == clone(3, (510, 1), trunc=64)
    errs = fail(sw, p4rt.Update(type=INSERT, entity=clone(3, (1, 0))),
                p4rt.Update(type=INSERT, entity=clone(0, (1, 0))),
                p4rt.Update(type=INSERT, entity=clone(4, (1, 0), cos=2)),
                p4rt.Update(type=MODIFY, entity=clone(9, (1, 0))),
                p4rt.Update(type=INSERT, entity=clone(40000, (1, 0))))
    assert [e.canonical_code for e in errs] == [
        code_pb2.ALREADY_EXISTS, code_pb2.INVALID_ARGUMENT, code_pb2.UNIMPLEMENTED,
        code_pb2.NOT_FOUND, code_pb2.INVALID_ARGUMENT]
    sw.write(p4rt.Update(type=DELETE, entity=clone(3)))
    assert sw.dp.clone_sessions() == {}


# ---- counters, meters, registers -------------------------------------------------------------


def counter(sw, name, index=None, packets=0, bytes_=0):
    c = p4rt.CounterEntry(counter_id=sw.obj_id("counters", name))
    if index is not None:
        c.index.index = index
    c.data.packet_count, c.data.byte_count = packets, bytes_
    return c


def test_counter_write_read_and_wildcards(sw):
    sw.write(update(MODIFY, counter_entry=counter(sw, "MyIngress.port_counter", 3, 5, 500)),
             update(MODIFY, counter_entry=counter(sw, "MyIngress.byte_counter", 1, 9, 900)))
    assert sw.dp.counter_read("MyIngress.port_counter", 3) == (5, 500)
    (one,) = sw.read(p4rt.Entity(counter_entry=counter(sw, "MyIngress.port_counter", 3)))
    assert (one.counter_entry.data.packet_count, one.counter_entry.data.byte_count) == (5, 500)
    every = sw.read(p4rt.Entity(counter_entry=p4rt.CounterEntry(
        counter_id=sw.obj_id("counters", "MyIngress.port_counter"))))
    assert [e.counter_entry.index.index for e in every] == list(range(8))
    everything = sw.read(p4rt.Entity(counter_entry=p4rt.CounterEntry()))
    assert len(everything) == 8 + 4
    (byte_only,) = [e for e in everything if e.counter_entry.counter_id ==
                    sw.obj_id("counters", "MyIngress.byte_counter")
                    and e.counter_entry.index.index == 1]
    assert byte_only.counter_entry.data.byte_count == 900
    assert byte_only.counter_entry.data.packet_count == 0  # BYTES counter: packets not kept
    sw.write(update(DELETE, counter_entry=counter(sw, "MyIngress.port_counter", 3)))
    assert sw.dp.counter_read("MyIngress.port_counter", 3) == (0, 0)
    errs = fail(sw, update(INSERT, counter_entry=counter(sw, "MyIngress.port_counter", 1)),
                update(MODIFY, counter_entry=counter(sw, "MyIngress.port_counter")),
                update(MODIFY, counter_entry=counter(sw, "MyIngress.port_counter", 99)))
    assert [e.canonical_code for e in errs] == [
        code_pb2.INVALID_ARGUMENT, code_pb2.UNIMPLEMENTED, code_pb2.UNKNOWN]


def test_direct_counter_id_in_counter_entry_rejected(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(counter_entry=p4rt.CounterEntry(
            counter_id=sw.obj_id("direct_counters", "MyIngress.lpm_counter"))))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_meters(sw):
    mid = sw.obj_id("meters", "MyIngress.port_meter")
    m = p4rt.MeterEntry(meter_id=mid)
    m.index.index = 2
    m.config.cir, m.config.cburst, m.config.pir, m.config.pburst = 10, 5, 20, 8
    sw.write(update(MODIFY, meter_entry=m))
    assert sw.dp.meter_get("MyIngress.port_meter", 2) == api.MeterConfig(10, 5, 20, 8)
    got = sw.read(p4rt.Entity(meter_entry=p4rt.MeterEntry(meter_id=mid)))
    assert len(got) == 4
    assert got[2].meter_entry == m and not got[0].meter_entry.HasField("config")
    m.ClearField("config")
    sw.write(update(MODIFY, meter_entry=m))
    assert sw.dp.meter_get("MyIngress.port_meter", 2) is None
    errs = fail(sw, update(INSERT, meter_entry=m), update(DELETE, meter_entry=m))
    assert [e.canonical_code for e in errs] == [code_pb2.INVALID_ARGUMENT] * 2


def test_meter_rates_checked_as_pi_and_bmv2_do(sw):
    """PI refuses a field below -1 (INVALID_ARGUMENT, per field); BMv2 refuses a committed rate
    above the peak rate, -1 counting as the largest rate (UNKNOWN, the target's error)."""
    mid = sw.obj_id("meters", "MyIngress.port_meter")

    def meter(cir, cburst, pir, pburst):
        m = p4rt.MeterEntry(meter_id=mid)
        m.index.index = 1
        m.config.cir, m.config.cburst, m.config.pir, m.config.pburst = cir, cburst, pir, pburst
        return update(MODIFY, meter_entry=m)

    errs = fail(sw, meter(10, 10, 5, 10), meter(-1, 10, 5, 10), meter(-2, 1, 5, 1),
                meter(1, 1, -5, 1), meter(5, 10, -1, 10), meter(10, 10, 20, 10))
    assert [(e.canonical_code, e.message) for e in errs] == [
        (code_pb2.UNKNOWN, "Error when writing meter spec"),
        (code_pb2.UNKNOWN, "Error when writing meter spec"),
        (code_pb2.INVALID_ARGUMENT, "Negative meter CIR"),
        (code_pb2.INVALID_ARGUMENT, "Negative meter PIR"),
        (code_pb2.OK, ""), (code_pb2.OK, "")]
    assert sw.dp.meter_get("MyIngress.port_meter", 1) == api.MeterConfig(10, 10, 20, 10)


def register(sw, index=None, value=None):
    r = p4rt.RegisterEntry(register_id=sw.obj_id("registers", "MyIngress.reg"))
    if index is not None:
        r.index.index = index
    if value is not None:
        r.data.bitstring = value
    return r


def test_registers_unimplemented_like_pi(sw):
    (err,) = fail(sw, update(MODIFY, register_entry=register(sw, 1, b"\x05")))
    assert err.canonical_code == code_pb2.UNIMPLEMENTED
    assert err.message == "Register writes are not supported yet"
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(register_entry=register(sw)))
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_registers_when_enabled():
    sw = Switch(registers=True)
    try:
        sw.set_pipeline()
        sw.write(update(MODIFY, register_entry=register(sw, 1, b"\x01\x00\x00\x05")))
        assert sw.dp.register_read("MyIngress.reg", 1) == 0x01000005
        (one,) = sw.read(p4rt.Entity(register_entry=register(sw, 1)))
        assert one.register_entry.data.bitstring == b"\x01\x00\x00\x05"
        assert len(sw.read(p4rt.Entity(register_entry=register(sw)))) == 8
        (err,) = fail(sw, update(MODIFY, register_entry=register(sw, 1, b"\x01" * 5)))
        assert err.canonical_code == code_pb2.INVALID_ARGUMENT
        assert sw.dp.register_read("MyIngress.reg", 1) == 0x01000005
    finally:
        sw.close()


def test_counters_count_real_traffic(sw):
    """Direct counter of an LPM entry, read through P4Runtime after packets really hit it."""
    te = p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm"))
    m = te.match.add(field_id=1).lpm
    m.value, m.prefix_len = b"\x0a\x00\x00\x00", 8
    te.action.action.CopyFrom(action(sw, "MyIngress.set_nhop", b"\x02", b"\x01"))
    sw.write(update(INSERT, table_entry=te))
    for _ in range(3):
        sw.inject(1, ipv4_frame(b"\x0a\x00\x00\x07", length=64))
    assert [p for p, _ in sw.egress] == [2, 2, 2]
    (got,) = sw.read(p4rt.Entity(direct_counter_entry=p4rt.DirectCounterEntry(table_entry=te)))
    assert got.direct_counter_entry.data.packet_count == 3
    assert got.direct_counter_entry.data.byte_count == 3 * 64


# ---- one-shot action selector programming ----------------------------------------------------


def oneshot_entry(sw, group_key, *actions):
    te = p4rt.TableEntry(table_id=sw.table_id("MyIngress.ecmp"))
    te.match.add(field_id=1).exact.value = group_key
    aset = te.action.action_profile_action_set
    aset.SetInParent()  # present even when empty
    for port, weight, watch in actions:
        a = aset.action_profile_actions.add(weight=weight)
        a.action.CopyFrom(action(sw, "MyIngress.set_nhop", port, b"\x01"))
        if watch is not None:
            a.watch_port = watch
    return te


def test_oneshot_entry_lifecycle(sw):
    te = oneshot_entry(sw, b"\x01", (b"\x02", 3, b"\x02"), (b"\x03", 1, None))
    sw.write(update(INSERT, table_entry=te))
    (stored,) = sw.dp.table_entries("MyIngress.ecmp")
    assert isinstance(stored.action, api.GroupRef)
    (members,) = sw.dp.groups(PROFILE).values()
    calls = sw.dp.members(PROFILE)
    assert sorted((calls[m.member_id].args[0], m.weight, m.watch_port) for m in members) == [
        (2, 3, 2), (3, 1, None)]
    (got,) = sw.read(p4rt.Entity(table_entry=p4rt.TableEntry(table_id=te.table_id)))
    assert got.table_entry.action == te.action  # read-write symmetry
    # wildcard member/group reads leave the one-shot profile out; explicit ones are refused
    assert sw.read(p4rt.Entity(action_profile_member=p4rt.ActionProfileMember())) == []
    (err,) = fail(sw, update(INSERT, action_profile_member=member(sw, 1)))
    assert err.message == "Invalid attempt to mix action selector programming modes"

    te2 = oneshot_entry(sw, b"\x01", (b"\x05", 2, None))
    sw.write(update(MODIFY, table_entry=te2))
    (members,) = sw.dp.groups(PROFILE).values()
    assert [(sw.dp.members(PROFILE)[m.member_id].args[0], m.weight) for m in members] == [(5, 2)]
    assert len(sw.dp.members(PROFILE)) == 1  # the old group's members are gone
    sw.write(update(DELETE, table_entry=te2))
    assert sw.dp.groups(PROFILE) == {} and sw.dp.members(PROFILE) == {}
    sw.write(update(INSERT, action_profile_member=member(sw, 1)))  # empty again: mode is free


@pytest.mark.parametrize("actions, code", [
    ((), code_pb2.UNIMPLEMENTED),
    (((b"\x02", 0, None),), code_pb2.INVALID_ARGUMENT),
    (((b"\x02", 17, None),), code_pb2.RESOURCE_EXHAUSTED),
    (((b"\x02", 1, b""),), code_pb2.INVALID_ARGUMENT),
])
def test_oneshot_validation_leaves_nothing_behind(sw, actions, code):
    (err,) = fail(sw, update(INSERT, table_entry=oneshot_entry(sw, b"\x01", *actions)))
    assert err.canonical_code == code
    assert sw.dp.groups(PROFILE) == {} and sw.dp.members(PROFILE) == {}
    assert sw.dp.table_entries("MyIngress.ecmp") == []
