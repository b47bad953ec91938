"""SetForwardingPipelineConfig / GetForwardingPipelineConfig / Capabilities over real gRPC."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import (
    DEVICE_ID,
    INSERT,
    JSON_PATH,
    Switch,
    details,
    load_p4info,
    lpm_entry,
    update,
)

Action = p4rt.SetForwardingPipelineConfigRequest
RType = p4rt.GetForwardingPipelineConfigRequest


@pytest.fixture
def sw():
    s = Switch()
    yield s
    s.close()


def get(sw, rtype, device_id=DEVICE_ID):
    return sw.stub.GetForwardingPipelineConfig(
        p4rt.GetForwardingPipelineConfigRequest(device_id=device_id, response_type=rtype)).config


def test_capabilities_reports_api_version(sw):
    rep = sw.stub.Capabilities(p4rt.CapabilitiesRequest())
    assert rep.p4runtime_api_version == "1.4.1"


def test_get_before_set_is_failed_precondition(sw):
    with pytest.raises(grpc.RpcError) as exc:
        get(sw, RType.ALL)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_set_then_get_each_response_type(sw):
    sw.set_pipeline(cookie=0xC0FFEE)
    assert sw.dp.pipeline_json() == JSON_PATH.read_bytes()
    full = get(sw, RType.ALL)
    assert full.p4info == load_p4info()
    assert full.p4_device_config == JSON_PATH.read_bytes()
    assert full.cookie.cookie == 0xC0FFEE
    cookie_only = get(sw, RType.COOKIE_ONLY)
    assert not cookie_only.HasField("p4info") and cookie_only.p4_device_config == b""
    assert cookie_only.cookie.cookie == 0xC0FFEE
    p4info_only = get(sw, RType.P4INFO_AND_COOKIE)
    assert p4info_only.p4info == load_p4info() and p4info_only.p4_device_config == b""
    dev_only = get(sw, RType.DEVICE_CONFIG_AND_COOKIE)
    assert not dev_only.HasField("p4info")
    assert dev_only.p4_device_config == JSON_PATH.read_bytes()


def test_no_cookie_means_no_cookie_field(sw):
    sw.set_pipeline()
    assert not get(sw, RType.ALL).HasField("cookie")


def test_verify_checks_but_installs_nothing(sw):
    sw.set_pipeline(action=Action.VERIFY)
    assert sw.dp.pipeline_json() is None
    with pytest.raises(grpc.RpcError) as exc:
        get(sw, RType.ALL)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_unspecified_action_is_invalid_argument(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(action=Action.UNSPECIFIED)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = details(exc.value)
    assert status.code == code_pb2.INVALID_ARGUMENT


def test_verify_and_save_then_commit(sw):
    sw.set_pipeline(action=Action.VERIFY_AND_SAVE, cookie=7)
    assert sw.dp.pipeline_json() is None
    sw.set_pipeline(action=Action.COMMIT)
    assert sw.dp.pipeline_json() == JSON_PATH.read_bytes()
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 7


def test_commit_without_saved_config_fails_like_bmv2(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(action=Action.COMMIT)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN


def test_bad_p4info_rejected_and_nothing_changes(sw):
    sw.set_pipeline(cookie=1)
    bad = load_p4info()
    bad.tables[1].preamble.id = bad.tables[0].preamble.id  # duplicate id
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(p4info=bad, cookie=2)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "Error when importing p4info" in exc.value.details()
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 1


def test_p4info_with_wrong_id_prefix_rejected(sw):
    bad = load_p4info()
    bad.actions[0].preamble.id = 0x02000099  # a table prefix on an action
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(p4info=bad)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert sw.dp.pipeline_json() is None


def test_bad_device_config_rejected_and_old_pipeline_kept(sw):
    sw.set_pipeline(cookie=1)
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(device_config=b"{not json", cookie=2)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "Error in first phase of device update" in exc.value.details()
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 1
    te = p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm")))
    assert len(sw.read(te)) == 1


def test_p4info_of_another_program_rejected_at_set_pipeline(sw):
    """The P4Runtime spec has the server verify the config; BMv2 1.15.5 accepts the pair and
    fails later on writes (a documented target difference: p4sim follows the spec)."""
    sw.set_pipeline(cookie=1)
    other = load_p4info()
    other.tables[0].preamble.name = "MyIngress.not_in_this_json"
    for action in (Action.VERIFY, Action.VERIFY_AND_COMMIT):
        with pytest.raises(grpc.RpcError) as exc:
            sw.set_pipeline(p4info=other, action=action, cookie=2)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert exc.value.details() == (
            "P4Info does not match the P4 device config: table 'MyIngress.not_in_this_json' "
            f"(id {other.tables[0].preamble.id}) is not in the device config")
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 1


def test_new_pipeline_discards_state(sw):
    sw.set_pipeline()
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    sw.set_pipeline()
    te = p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm")))
    assert sw.read(te) == []


def test_reconcile_keeps_forwarding_state(sw):
    sw.set_pipeline(cookie=1)
    entry = lpm_entry(sw, b"\x0a\x01\x00\x00", 16)
    sw.write(update(INSERT, table_entry=entry))
    sw.set_pipeline(action=Action.RECONCILE_AND_COMMIT, cookie=2)
    te = p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm")))
    (got,) = sw.read(te)
    assert got.table_entry.match == entry.match
    assert got.table_entry.action == entry.action
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 2


def test_reconcile_that_cannot_keep_state_restores_old_pipeline(sw):
    sw.set_pipeline(cookie=1)
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x01\x00\x00", 16)))
    smaller = load_p4info()
    del smaller.tables[0]  # the new program lacks the table holding the entry
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(action=Action.RECONCILE_AND_COMMIT, p4info=smaller, cookie=2)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "Error when reconciling config" in exc.value.details()
    assert get(sw, RType.COOKIE_ONLY).cookie.cookie == 1
    te = p4rt.Entity(table_entry=p4rt.TableEntry(table_id=sw.table_id("MyIngress.ipv4_lpm")))
    assert len(sw.read(te)) == 1


def test_wrong_device_id_is_refused_as_bmv2_does(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(device_id=DEVICE_ID + 5)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "assign device" in exc.value.details()
    sw.set_pipeline()
    with pytest.raises(grpc.RpcError) as exc:
        get(sw, RType.ALL, device_id=DEVICE_ID + 5)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(table_entry=p4rt.TableEntry()), device_id=DEVICE_ID + 5)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)),
                 device_id=DEVICE_ID + 5)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_write_and_read_without_pipeline_fail_precondition(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(table_entry=p4rt.TableEntry()))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
