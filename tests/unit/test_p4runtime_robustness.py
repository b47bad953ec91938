"""Bad input never takes the P4Runtime server down, and a failed update changes nothing."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import INSERT, Switch, update, write_errors


@pytest.fixture(scope="module")
def sw():
    s = Switch()
    s.set_pipeline()
    yield s
    s.close()


def test_undecodable_request_bytes(sw):
    raw = sw.channel.unary_unary("/p4.v1.P4Runtime/Write")
    with pytest.raises(grpc.RpcError):
        raw(b"\xff\xff\xff\xff garbage", timeout=5)
    assert sw.stub.Capabilities(p4rt.CapabilitiesRequest()).p4runtime_api_version


field_match = st.builds(
    lambda fid, kind, a, b, n: _fm(fid, kind, a, b, n),
    st.integers(min_value=0, max_value=4), st.sampled_from(["exact", "lpm", "ternary", "range",
                                                            "optional"]),
    st.binary(max_size=6), st.binary(max_size=6), st.integers(min_value=-2, max_value=40))


def _fm(fid, kind, a, b, n):
    fm = p4rt.FieldMatch(field_id=fid)
    if kind == "exact":
        fm.exact.value = a
    elif kind == "lpm":
        fm.lpm.value, fm.lpm.prefix_len = a, n
    elif kind == "ternary":
        fm.ternary.value, fm.ternary.mask = a, b
    elif kind == "range":
        fm.range.low, fm.range.high = a, b
    else:
        fm.optional.value = a
    return fm


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from([0x02000001, 0x02000002, 0x02000003, 0x02000004, 0x02000099, 0]),
       matches=st.lists(field_match, max_size=4), priority=st.integers(min_value=-1, max_value=3),
       action_id=st.sampled_from([0x01000001, 0x01000002, 0x01000003, 0x01000009]),
       params=st.lists(st.tuples(st.integers(min_value=0, max_value=3), st.binary(max_size=7)),
                       max_size=3))
def test_random_table_entries_fail_cleanly(sw, table, matches, priority, action_id, params):
    te = p4rt.TableEntry(table_id=table, priority=priority, match=matches)
    te.action.action.action_id = action_id
    for pid, value in params:
        te.action.action.params.add(param_id=pid, value=value)
    names = ["MyIngress.ipv4_lpm", "MyIngress.acl", "MyIngress.port_map", "MyIngress.ecmp"]
    before = {n: len(sw.dp.table_entries(n)) for n in names}
    try:
        sw.write(update(INSERT, table_entry=te))
        ok = True
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNKNOWN
        (e,) = write_errors(err)
        assert e.canonical_code in (3, 5, 6, 7, 12)  # never INTERNAL: no crash path hit
        ok = False
    after = {n: len(sw.dp.table_entries(n)) for n in names}
    assert sum(after.values()) - sum(before.values()) == (1 if ok else 0)
    if ok:
        sw.write(p4rt.Update(type=p4rt.Update.DELETE, entity=p4rt.Entity(table_entry=te)))


ids = st.sampled_from([0, 0x11000001, 0x12002801, 0x12002802, 0x14000001, 0x16000001,
                       0x17000001, 0x02000001, 0x11000099])
small = st.integers(min_value=-2, max_value=40000)


def _entity(kind, pid, n, m, raw):
    e = p4rt.Entity()
    if kind == "member":
        e.action_profile_member.action_profile_id, e.action_profile_member.member_id = pid, n
        e.action_profile_member.action.action_id = 0x01000001
        e.action_profile_member.action.params.add(param_id=1, value=raw)
    elif kind == "group":
        g = e.action_profile_group
        g.action_profile_id, g.group_id, g.max_size = pid, n, m
        g.members.add(member_id=m, weight=n % 5, watch_port=raw)
    elif kind == "counter":
        e.counter_entry.counter_id = pid
        e.counter_entry.index.index = n
    elif kind == "meter":
        e.meter_entry.meter_id = pid
        e.meter_entry.index.index = n
        e.meter_entry.config.cir = m
    elif kind == "mc":
        g = e.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = max(n, 0)
        g.replicas.add(port=raw, instance=max(m, 0))
    else:
        c = e.packet_replication_engine_entry.clone_session_entry
        c.session_id = max(n, 0)
        c.replicas.add(egress_port=max(m, 0))
    return e


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["member", "group", "counter", "meter", "mc", "clone"]),
       utype=st.sampled_from([0, 1, 2, 3]), pid=ids, n=small, m=small,
       raw=st.binary(max_size=6))
def test_random_entities_fail_cleanly(sw, kind, utype, pid, n, m, raw):
    try:
        ent = _entity(kind, pid, n, m, raw)
    except ValueError:
        # A negative value for an unsigned proto field cannot even be encoded by the client.
        assume(False)
    try:
        sw.write(p4rt.Update(type=utype, entity=ent))
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNKNOWN
        (e,) = write_errors(err)
        assert e.canonical_code != 13 and e.message  # no INTERNAL, always a message
    try:
        list(sw.stub.Read(p4rt.ReadRequest(device_id=1, entities=[ent])))
    except grpc.RpcError as err:
        assert err.code() != grpc.StatusCode.INTERNAL
    assert sw.stub.Capabilities(p4rt.CapabilitiesRequest()).p4runtime_api_version
