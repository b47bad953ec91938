"""The legacy p4.tmp.P4DeviceConfig wrapper that p4lang/tutorials' p4runtime_lib sends: PI
takes the BMv2 JSON out of it (logging that it is deprecated), and so does p4sim."""

from __future__ import annotations

import logging

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import DEVICE_ID, JSON_PATH, Switch


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def legacy_wrapper(device_data: bytes) -> bytes:
    """P4DeviceConfig{reassign: true, device_data} in protobuf wire format, written by hand
    (field 1 varint, field 3 length-delimited) so the test does not use p4sim's own message."""
    return b"\x08\x01" + b"\x1a" + _varint(len(device_data)) + device_data


@pytest.fixture
def sw():
    s = Switch()
    yield s
    s.close()


def test_wrapped_json_installs_with_deprecation_note(sw, caplog):
    with caplog.at_level(logging.WARNING, logger="p4sim.p4runtime"):
        sw.set_pipeline(device_config=legacy_wrapper(JSON_PATH.read_bytes()), cookie=5)
    assert sw.dp.pipeline_json() == JSON_PATH.read_bytes()
    assert "p4::tmp::P4DeviceConfig is deprecated" in caplog.text
    got = sw.stub.GetForwardingPipelineConfig(p4rt.GetForwardingPipelineConfigRequest(
        device_id=DEVICE_ID, response_type=p4rt.GetForwardingPipelineConfigRequest.ALL))
    assert got.config.cookie.cookie == 5


def test_raw_json_still_installs_without_note(sw, caplog):
    with caplog.at_level(logging.WARNING, logger="p4sim.p4runtime"):
        sw.set_pipeline()
    assert "deprecated" not in caplog.text


def test_wrapper_around_garbage_is_refused(sw):
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(device_config=legacy_wrapper(b"\xff\xfe not json"))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "Error in first phase of device update" in exc.value.details()
