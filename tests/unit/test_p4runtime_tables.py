"""Table entries over real gRPC: every match kind, default actions, validation errors with
PI's per-update details, direct counters and meters."""

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
    details,
    ipv4_frame,
    lpm_entry,
    update,
    write_errors,
)

from p4sim.switch import api

LPM, ACL, PORT_MAP, ECMP = ("MyIngress.ipv4_lpm", "MyIngress.acl", "MyIngress.port_map",
                            "MyIngress.ecmp")


@pytest.fixture
def sw():
    s = Switch()
    s.set_pipeline()
    yield s
    s.close()


def read_table(sw, name, **kw) -> list[p4rt.TableEntry]:
    te = p4rt.TableEntry(table_id=sw.table_id(name) if name else 0, **kw)
    return [e.table_entry for e in sw.read(p4rt.Entity(table_entry=te))]


def fail_one(sw, upd) -> p4rt.Error:
    """Write one update that must fail; its p4.v1.Error."""
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(upd)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    (err,) = write_errors(exc.value)
    assert err.space == "ALL-sswitch-p4org"
    return err


def acl_entry(sw, prio, ether=None, rng=None, port=None, act="MyIngress.drop"):
    te = p4rt.TableEntry(table_id=sw.table_id(ACL), priority=prio)
    if ether is not None:
        m = te.match.add(field_id=1).ternary
        m.value, m.mask = ether
    if rng is not None:
        m = te.match.add(field_id=2).range
        m.low, m.high = rng
    if port is not None:
        te.match.add(field_id=3).optional.value = port
    te.action.action.CopyFrom(action(sw, act) if act != "MyIngress.set_nhop"
                              else action(sw, act, b"\x02", b"\x01"))
    return te


# ---- LPM ------------------------------------------------------------------------------------


def test_lpm_insert_read_modify_delete(sw):
    entry = lpm_entry(sw, b"\x0a\x01\x00\x00", 16, port=b"\x03")
    entry.controller_metadata = 42
    entry.metadata = b"note"
    sw.write(update(INSERT, table_entry=entry))
    (stored,) = sw.dp.table_entries(LPM)
    assert stored.key == (api.Lpm(0x0A010000, 16),)
    assert stored.action == api.ActionCall("MyIngress.set_nhop", (3, 0x020000000001))
    (got,) = read_table(sw, LPM)
    assert got.match == entry.match and got.action == entry.action
    assert got.controller_metadata == 42 and got.metadata == b"note"

    entry.action.action.CopyFrom(action(sw, "MyIngress.drop"))
    sw.write(update(MODIFY, table_entry=entry))
    (got,) = read_table(sw, LPM)
    assert got.action.action.action_id == sw.action_id("MyIngress.drop")
    assert not got.action.action.params

    sw.write(update(DELETE, table_entry=entry))
    assert not read_table(sw, LPM) and not sw.dp.table_entries(LPM)


def test_padded_bytestrings_accepted_and_read_back_canonical(sw):
    entry = lpm_entry(sw, b"\x0a\x00\x00\x00", 8, port=b"\x00\x05")
    sw.write(update(INSERT, table_entry=entry))
    (got,) = read_table(sw, LPM)
    assert got.action.action.params[0].value == b"\x05"


def test_read_single_entry_by_key_and_all_tables(sw):
    a = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    b = lpm_entry(sw, b"\x0b\x00\x00\x00", 8)
    sw.write(update(INSERT, table_entry=a), update(INSERT, table_entry=b),
             update(INSERT, table_entry=acl_entry(sw, 10, ether=(b"\x08\x00", b"\xff\xff"))))
    key_only = p4rt.TableEntry(table_id=sw.table_id(LPM))
    key_only.match.extend(b.match)
    (got,) = [e.table_entry for e in sw.read(p4rt.Entity(table_entry=key_only))]
    assert got.match == b.match
    everything = read_table(sw, None)
    assert sorted(e.table_id for e in everything) == sorted(
        [sw.table_id(LPM)] * 2 + [sw.table_id(ACL)])


# ---- ternary / range / optional with priorities --------------------------------------------


def test_ternary_range_optional_entries(sw):
    full = acl_entry(sw, 100, ether=(b"\x08\x00", b"\xff\xff"), rng=(b"\x00\x50", b"\x01\xbb"),
                     port=b"\x07")
    wild = acl_entry(sw, 5)  # every field omitted: all don't care
    sw.write(update(INSERT, table_entry=full), update(INSERT, table_entry=wild))
    stored = {e.priority: e for e in sw.dp.table_entries(ACL)}
    assert stored[100].key == (api.Ternary(0x0800, 0xFFFF), api.Range(80, 443),
                               api.Optional_(7))
    assert stored[5].key == (api.Ternary(0, 0), api.Range(0, 0xFFFF), api.Optional_(None))
    got = {e.priority: e for e in read_table(sw, ACL)}
    assert len(got[5].match) == 0  # don't-care fields stay omitted on read
    assert [m.field_id for m in got[100].match] == [1, 2, 3]
    assert got[100].match[1].range.low == b"\x50" and got[100].match[1].range.high == b"\x01\xbb"
    # same key, other priority: a different entry; same key and priority: ALREADY_EXISTS
    sw.write(update(INSERT, table_entry=acl_entry(sw, 6)))
    err = fail_one(sw, update(INSERT, table_entry=acl_entry(sw, 6)))
    assert err.canonical_code == code_pb2.ALREADY_EXISTS
    sw.write(update(DELETE, table_entry=acl_entry(sw, 5)))
    assert sorted(e.priority for e in read_table(sw, ACL)) == [6, 100]


@pytest.mark.parametrize("entry_args, message", [
    (dict(prio=0, ether=(b"\x08\x00", b"\xff\xff")), "Zero priority for ternary match"),
    (dict(prio=1, ether=(b"\x08\x01", b"\xff\x00")), "value & mask == value"),
    (dict(prio=1, ether=(b"\x00", b"\x00")), "don't care"),
    (dict(prio=1, rng=(b"\x02", b"\x01")), "low <= high"),
    (dict(prio=1, rng=(b"\x00", b"\xff\xff")), "don't care"),
    (dict(prio=1, port=b"\x02\x00"), "does not fit within 9 bits"),
])
def test_acl_validation(sw, entry_args, message):
    err = fail_one(sw, update(INSERT, table_entry=acl_entry(sw, **entry_args)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    assert message in err.message
    assert sw.dp.table_entries(ACL) == []


def test_unknown_match_field_id(sw):
    te = acl_entry(sw, 1)
    te.match.add(field_id=9).optional.value = b"\x01"
    err = fail_one(sw, update(INSERT, table_entry=te))
    assert err.message == "Unknown field in match key"


# ---- exact, idle timeout, metadata ------------------------------------------------------------


def port_map_entry(sw, port=b"\x01", mac=b"\x0a\x0b\x0c\x0d\x0e\x0f"):
    te = p4rt.TableEntry(table_id=sw.table_id(PORT_MAP))
    te.match.add(field_id=1).exact.value = port
    te.match.add(field_id=2).exact.value = mac
    te.action.action.CopyFrom(action(sw, "MyIngress.set_nhop", b"\x02", b"\x01"))
    return te


def test_exact_entry_with_idle_timeout(sw):
    te = port_map_entry(sw)
    te.idle_timeout_ns = 2_500_000_000
    sw.write(update(INSERT, table_entry=te))
    (stored,) = sw.dp.table_entries(PORT_MAP)
    assert stored.key == (api.Exact(1), api.Exact(0x0A0B0C0D0E0F))
    assert stored.timeout_ms == 2500
    (got,) = read_table(sw, PORT_MAP)
    assert got.idle_timeout_ns == 2_500_000_000 and got.match == te.match


def test_idle_timeout_on_table_without_support_rejected(sw):
    te = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    te.idle_timeout_ns = 10**9
    err = fail_one(sw, update(INSERT, table_entry=te))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT


@pytest.mark.parametrize("mutate, message", [
    (lambda te: te.match.pop(), "Missing non-ternary field in match key"),
    (lambda te: te.match.add(field_id=9), "Too many fields in match key"),
    (lambda te: setattr(te, "priority", 3), "Non-zero priority for non-ternary match"),
    (lambda te: te.match[0].ClearField("exact") or te.match[0].lpm.SetInParent(),
     "Invalid match type"),
    (lambda te: setattr(te.match[1].exact, "value", b"\x01" * 7), "does not fit within 48 bits"),
    (lambda te: setattr(te, "table_id", 0x02000999), "Invalid P4 id"),
])
def test_exact_validation(sw, mutate, message):
    te = port_map_entry(sw)
    mutate(te)
    err = fail_one(sw, update(INSERT, table_entry=te))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    assert message in err.message


@pytest.mark.parametrize("value, plen, message", [
    (b"\x0a\x01\x00\x00", 8, "trailing zeros"),
    (b"\x0a\x00\x00\x00", 33, "Prefix length cannot be > bitwidth"),
    (b"\x00", 0, "don't care"),
    (b"\x01\x0a\x00\x00\x00", 8, "does not fit within 32 bits"),
])
def test_lpm_validation(sw, value, plen, message):
    err = fail_one(sw, update(INSERT, table_entry=lpm_entry(sw, value, plen)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    assert message in err.message


@pytest.mark.parametrize("params, message", [
    ((b"\x01",), "Unexpected number of action parameters"),
    ((b"\x02\x00", b"\x01"), "does not fit within 9 bits"),
])
def test_action_param_validation(sw, params, message):
    te = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    te.action.action.CopyFrom(action(sw, "MyIngress.set_nhop", *params))
    err = fail_one(sw, update(INSERT, table_entry=te))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT and message in err.message


def test_action_not_in_table_and_unknown_action(sw):
    te = port_map_entry(sw)
    te.action.action.CopyFrom(action(sw, "MyIngress.drop"))
    assert "Invalid action for table" in fail_one(sw, update(INSERT, table_entry=te)).message
    te.action.action.action_id = 0x01000777
    assert fail_one(sw, update(INSERT, table_entry=te)).message == "Invalid P4 id"


# ---- batches: per-update details; a failed update changes nothing ---------------------------


def test_batch_reports_each_update_and_keeps_successes(sw):
    good1 = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    bad = lpm_entry(sw, b"\x0a\x01\x00\x00", 8)  # host bits set
    good2 = lpm_entry(sw, b"\x0b\x00\x00\x00", 8)
    missing = lpm_entry(sw, b"\x0c\x00\x00\x00", 8)
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=good1), update(INSERT, table_entry=bad),
                 update(INSERT, table_entry=good2), update(DELETE, table_entry=missing),
                 update(INSERT, table_entry=good1))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    errs = write_errors(exc.value)
    assert [e.canonical_code for e in errs] == [
        code_pb2.OK, code_pb2.INVALID_ARGUMENT, code_pb2.OK, code_pb2.NOT_FOUND,
        code_pb2.ALREADY_EXISTS]
    assert errs[0].message == "" and errs[0].space == ""
    assert {e.key for e in sw.dp.table_entries(LPM)} == {
        (api.Lpm(0x0A000000, 8),), (api.Lpm(0x0B000000, 8),)}


def test_modify_of_missing_entry_is_not_found(sw):
    err = fail_one(sw, update(MODIFY, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert err.canonical_code == code_pb2.NOT_FOUND


def test_update_type_unset_and_empty_entity(sw):
    err = fail_one(sw, update(p4rt.Update.UNSPECIFIED,
                              table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    err = fail_one(sw, p4rt.Update(type=INSERT))
    assert err.canonical_code == code_pb2.UNKNOWN


def test_atomic_modes_unimplemented(sw):
    req = p4rt.WriteRequest(device_id=1, atomicity=p4rt.WriteRequest.DATAPLANE_ATOMIC)
    req.updates.add().CopyFrom(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    with pytest.raises(grpc.RpcError) as exc:
        sw.stub.Write(req)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert details(exc.value).code == code_pb2.UNIMPLEMENTED
    assert sw.dp.table_entries(LPM) == []


# ---- default actions ---------------------------------------------------------------------------


def default_entry(sw, table, act=None):
    te = p4rt.TableEntry(table_id=sw.table_id(table), is_default_action=True)
    if act is not None:
        te.action.action.CopyFrom(act)
    return te


def test_default_action_read_modify_reset(sw):
    (got,) = read_table(sw, LPM, is_default_action=True)
    assert got.is_default_action
    assert got.action.action.action_id == sw.action_id("MyIngress.drop")  # from the JSON
    nhop = action(sw, "MyIngress.set_nhop", b"\x04", b"\x01")
    sw.write(update(MODIFY, table_entry=default_entry(sw, LPM, nhop)))
    assert sw.dp.table_get_default(LPM) == api.ActionCall("MyIngress.set_nhop", (4, 1))
    (got,) = read_table(sw, LPM, is_default_action=True)
    assert got.action.action == nhop
    sw.write(update(MODIFY, table_entry=default_entry(sw, LPM)))  # no action: reset
    assert sw.dp.table_get_default(LPM) == api.ActionCall("MyIngress.drop")


def test_default_entry_rules(sw):
    nhop = action(sw, "MyIngress.set_nhop", b"\x04", b"\x01")
    err = fail_one(sw, update(MODIFY, table_entry=default_entry(sw, PORT_MAP, nhop)))
    assert err.canonical_code == code_pb2.PERMISSION_DENIED  # const default action
    err = fail_one(sw, update(INSERT, table_entry=default_entry(sw, LPM, nhop)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    err = fail_one(sw, update(DELETE, table_entry=default_entry(sw, LPM)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT
    err = fail_one(sw, update(MODIFY, table_entry=default_entry(sw, ACL, nhop)))
    assert err.canonical_code == code_pb2.PERMISSION_DENIED  # TABLE_ONLY action
    err = fail_one(sw, update(INSERT, table_entry=acl_entry(sw, 1, act="NoAction")))
    assert err.canonical_code == code_pb2.PERMISSION_DENIED  # DEFAULT_ONLY action
    err = fail_one(sw, update(MODIFY, table_entry=default_entry(sw, ECMP)))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT  # indirect table
    assert sw.dp.table_get_default(LPM) == api.ActionCall("MyIngress.drop")


# ---- indirect tables ---------------------------------------------------------------------------


def test_indirect_table_action_rules(sw):
    te = p4rt.TableEntry(table_id=sw.table_id(ECMP))
    te.match.add(field_id=1).exact.value = b"\x01"
    te.action.action.CopyFrom(action(sw, "MyIngress.drop"))
    assert "direct action for indirect table" in fail_one(
        sw, update(INSERT, table_entry=te)).message
    te.action.action_profile_member_id = 5
    assert fail_one(sw, update(INSERT, table_entry=te)).message == "Invalid member / group id"
    lpm = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    lpm.action.action_profile_member_id = 5
    assert "indirect action for direct table" in fail_one(
        sw, update(INSERT, table_entry=lpm)).message


# ---- direct counters and meters ----------------------------------------------------------------


def test_direct_counter_read_and_write(sw):
    entry = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    sw.write(update(INSERT, table_entry=entry))
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", length=100))
    sw.inject(1, ipv4_frame(b"\x0a\x09\x09\x09", length=60))
    sw.inject(1, ipv4_frame(b"\x0b\x01\x02\x03", length=80))  # no match: not counted
    req = p4rt.TableEntry(table_id=sw.table_id(LPM))
    req.counter_data.SetInParent()
    (got,) = [e.table_entry for e in sw.read(p4rt.Entity(table_entry=req))]
    assert (got.counter_data.packet_count, got.counter_data.byte_count) == (2, 160)
    (plain,) = read_table(sw, LPM)
    assert not plain.HasField("counter_data")  # only when asked for
    dce = p4rt.DirectCounterEntry(table_entry=entry)
    dce.data.packet_count, dce.data.byte_count = 7, 700
    sw.write(update(MODIFY, direct_counter_entry=dce))
    (got,) = sw.read(p4rt.Entity(direct_counter_entry=p4rt.DirectCounterEntry(
        table_entry=p4rt.TableEntry(table_id=sw.table_id(LPM)))))
    assert got.direct_counter_entry.data.packet_count == 7
    assert got.direct_counter_entry.data.byte_count == 700
    assert got.direct_counter_entry.table_entry.match == entry.match
    err = fail_one(sw, update(INSERT, direct_counter_entry=dce))
    assert err.canonical_code == code_pb2.INVALID_ARGUMENT


def test_direct_counter_on_table_without_one(sw):
    te = port_map_entry(sw)
    sw.write(update(INSERT, table_entry=te))
    err = fail_one(sw, update(MODIFY, direct_counter_entry=p4rt.DirectCounterEntry(
        table_entry=te)))
    assert err.message == "Table has no direct counters"


def test_direct_meter_config_on_insert_and_modify(sw):
    te = acl_entry(sw, 10, ether=(b"\x08\x00", b"\xff\xff"))
    te.meter_config.cir, te.meter_config.cburst = 100, 10
    te.meter_config.pir, te.meter_config.pburst = 200, 20
    sw.write(update(INSERT, table_entry=te))
    (stored,) = sw.dp.table_entries(ACL)
    assert stored.meter == api.MeterConfig(100, 10, 200, 20)
    req = p4rt.TableEntry(table_id=sw.table_id(ACL))
    req.meter_config.SetInParent()
    (got,) = [e.table_entry for e in sw.read(p4rt.Entity(table_entry=req))]
    assert got.meter_config == te.meter_config
    dme = p4rt.DirectMeterEntry(table_entry=acl_entry(sw, 10, ether=(b"\x08\x00", b"\xff\xff")))
    dme.config.cir, dme.config.cburst, dme.config.pir, dme.config.pburst = 1, 2, 3, 4
    sw.write(update(MODIFY, direct_meter_entry=dme))
    assert sw.dp.table_entries(ACL)[0].meter == api.MeterConfig(1, 2, 3, 4)
    (got,) = sw.read(p4rt.Entity(direct_meter_entry=dme))
    assert got.direct_meter_entry.config == dme.config
    dme.ClearField("config")
    sw.write(update(MODIFY, direct_meter_entry=dme))  # no config: back to unmetered
    (got,) = sw.read(p4rt.Entity(direct_meter_entry=dme))
    assert not got.direct_meter_entry.HasField("config")
    bad = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    bad.meter_config.cir = 5
    assert fail_one(sw, update(INSERT, table_entry=bad)).message == "Table has no direct meters"
    te2 = acl_entry(sw, 11)
    te2.meter_config.cir = -5
    assert fail_one(sw, update(INSERT, table_entry=te2)).message == "Negative meter CIR"


def test_read_of_unknown_table_fails_with_details(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(table_entry=p4rt.TableEntry(table_id=0x02000999)))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(exc.value).message == "Invalid P4 id"


def test_read_stops_at_first_bad_entity_after_sending_what_it_read(sw):
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    req = p4rt.ReadRequest(device_id=1, entities=[
        p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id(LPM))),
        p4rt.Entity(table_entry=p4rt.TableEntry(table_id=0x02000999)),
        p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id(ACL)))])
    got = []
    with pytest.raises(grpc.RpcError) as exc:
        for rep in sw.stub.Read(req):
            got.extend(rep.entities)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [e.table_entry.table_id for e in got] == [sw.table_id(LPM)]
