"""StreamChannel over real gRPC: arbitration between clients, packet-out/packet-in through the
controller headers, digest lists and acks."""

from __future__ import annotations

import time
import traceback

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as p4rt
from p4rt_harness import (
    DEVICE_ID,
    INSERT,
    MODIFY,
    Switch,
    action,
    ipv4_frame,
    lpm_entry,
    update,
    write_errors,
)

from p4sim.switch.p4runtime.codec import P4RTError

SRC_MAC = bytes.fromhex("aabbccddeeff")


@pytest.fixture
def sw():
    s = Switch()
    yield s
    s.close()


def status_of(msg: p4rt.StreamMessageResponse) -> tuple[int, int]:
    arb = msg.arbitration
    return arb.status.code, (arb.election_id.high << 64) | arb.election_id.low


# ---- arbitration ------------------------------------------------------------------------------


def test_primary_and_backup(sw):
    a = sw.stream(election=(0, 5))
    assert status_of(a.get("arbitration")) == (code_pb2.OK, 5)
    b = sw.stream(election=(0, 3))
    assert status_of(b.get("arbitration")) == (code_pb2.ALREADY_EXISTS, 5)
    assert a.nothing("arbitration")  # the primary did not change: only b is told

    sw.set_pipeline(election=(0, 5))
    with pytest.raises(grpc.RpcError) as exc:
        sw.set_pipeline(election=(0, 3))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    entry = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=entry), election=(0, 3))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=entry))  # streams open: an election id is needed
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert sw.dp.table_entries("MyIngress.ipv4_lpm") == []
    sw.write(update(INSERT, table_entry=entry), election=(0, 5))
    assert len(sw.read(p4rt.Entity(table_entry=p4rt.TableEntry()))) == 1  # backups may read


def test_primary_changes_when_a_higher_id_arrives_and_when_primary_leaves(sw):
    a = sw.stream(election=(0, 5))
    a.get("arbitration")
    b = sw.stream(election=(1, 0))  # high word counts: (1,0) > (0,5)
    assert status_of(b.get("arbitration")) == (code_pb2.OK, 1 << 64)
    assert status_of(a.get("arbitration")) == (code_pb2.ALREADY_EXISTS, 1 << 64)
    sw.set_pipeline(election=(1, 0))
    b.close()
    assert status_of(a.get("arbitration")) == (code_pb2.OK, 5)
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)), election=(0, 5))


def test_client_raises_its_election_id_to_become_primary(sw):
    a = sw.stream(election=(0, 5))
    a.get("arbitration")
    b = sw.stream(election=(0, 2))
    b.get("arbitration")
    b.arbitrate((0, 9))
    assert status_of(b.get("arbitration")) == (code_pb2.OK, 9)
    assert status_of(a.get("arbitration")) == (code_pb2.ALREADY_EXISTS, 9)


def test_duplicate_election_id_ends_the_stream(sw):
    a = sw.stream(election=(0, 5))
    a.get("arbitration")
    b = sw.stream(election=(0, 5))
    assert b.ended.wait(3)
    assert b.error is not None and b.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert a.nothing("arbitration")


def test_changing_device_id_on_a_live_stream_fails(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    a.arbitrate((0, 1), device_id=DEVICE_ID + 1)
    assert a.ended.wait(3)
    assert a.error.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_no_streams_write_without_election_id_accepted_with_one_refused(sw):
    sw.set_pipeline()
    sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0a\x00\x00\x00", 8)))
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, table_entry=lpm_entry(sw, b"\x0b\x00\x00\x00", 8)),
                 election=(0, 1))
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED


# ---- packet-out / packet-in -------------------------------------------------------------------


def packet_out(payload: bytes, **metadata: tuple[int, bytes]) -> p4rt.StreamMessageRequest:
    msg = p4rt.StreamMessageRequest()
    msg.packet.payload = payload
    for _, (mid, value) in metadata.items():
        msg.packet.metadata.add(metadata_id=mid, value=value)
    return msg


def test_packet_out_prepends_bit_packed_header_and_runs_the_pipeline(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    sw.set_pipeline(election=(0, 1))
    nhop = lpm_entry(sw, b"\x0a\x00\x00\x00", 8, port=b"\x04")
    sw.write(update(INSERT, table_entry=nhop), election=(0, 1))
    payload = ipv4_frame(b"\x0a\x01\x02\x03")
    # egress_port 0x1a5 (9 bits), flags 0b101 (3 bits), _pad (4 bits, left out: zero)
    a.send(packet_out(payload, egress_port=(1, b"\x01\xa5"), flags=(2, b"\x05")))
    deadline = time.monotonic() + 3
    while not sw.egress and time.monotonic() < deadline:
        time.sleep(0.01)
    header = (0x1A5 << 7 | 0b101 << 4).to_bytes(2, "big")
    assert sw.packet_outs == [header + payload]
    # the packet went through the pipeline from the CPU port: LPM hit, out of port 4
    assert sw.egress == [(4, bytes.fromhex("020000000001") + payload[6:])]


def test_packet_out_from_backup_or_with_bad_metadata_is_dropped(sw):
    a = sw.stream(election=(0, 2))
    a.get("arbitration")
    b = sw.stream(election=(0, 1))
    b.get("arbitration")
    sw.set_pipeline(election=(0, 2))
    b.send(packet_out(ipv4_frame(b"\x0a\x01\x02\x03")))
    a.send(packet_out(ipv4_frame(b"\x0a\x01\x02\x03"), bad=(9, b"\x01")))
    a.send(packet_out(ipv4_frame(b"\x0a\x01\x02\x03"), too_wide=(1, b"\x02\x00")))
    a.send(packet_out(b"marker", egress_port=(1, b"\x03")))
    deadline = time.monotonic() + 3
    while not sw.packet_outs and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert sw.packet_outs == [(3 << 7).to_bytes(2, "big") + b"marker"]
    # Not silently: each rejected packet-out comes back to its sender as a StreamError.
    errors = [a.get("error") for _ in range(2)]
    assert [(e.error.canonical_code, e.error.message) for e in errors] == [
        (code_pb2.INVALID_ARGUMENT, "Unknown metadata id in PacketOut message"),
        (code_pb2.INVALID_ARGUMENT, errors[1].error.message)]
    assert errors[0].error.packet_out.packet_out.metadata[0].metadata_id == 9
    assert sw.handle.device.packet_out_rejected == 2
    assert b.nothing("error")


def test_packet_in_metadata_decoded_and_sent_to_primary_only(sw):
    a = sw.stream(election=(0, 2))
    a.get("arbitration")
    b = sw.stream(election=(0, 1))
    b.get("arbitration")
    sw.set_pipeline(election=(0, 2))
    to_cpu = lpm_entry(sw, b"\x0a\x00\x00\x00", 8)
    to_cpu.action.action.CopyFrom(action(sw, "MyIngress.send_to_cpu"))
    sw.write(update(INSERT, table_entry=to_cpu), election=(0, 2))
    frame = ipv4_frame(b"\x0a\x01\x02\x03")
    sw.inject(300, frame)
    msg = a.get("packet")
    assert [(m.metadata_id, m.value) for m in msg.packet.metadata] == [(1, b"\x01\x2c"),
                                                                         (2, b"\x00")]
    assert msg.packet.payload == frame
    assert b.nothing("packet")


def test_short_packet_in_frame_dropped(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    sw.set_pipeline(election=(0, 1))
    sw.handle.device._on_packet_in(b"\x01")  # shorter than the 2-byte packet_in header
    sw.handle.device._on_packet_in(b"\x00\x80xyz")
    msg = a.get("packet")
    assert msg.packet.payload == b"xyz"
    assert [m.value for m in msg.packet.metadata] == [b"\x01", b"\x00"]


# ---- digests ----------------------------------------------------------------------------------


def digest_entry(sw, max_list_size=1, max_timeout_ns=0, ack_timeout_ns=0):
    d = p4rt.DigestEntry(digest_id=sw.obj_id("digests", "mac_learn_t"))
    d.config.max_list_size = max_list_size
    d.config.max_timeout_ns = max_timeout_ns
    d.config.ack_timeout_ns = ack_timeout_ns
    return d


def learn_everything(sw, election):
    te = p4rt.TableEntry(table_id=sw.table_id("MyIngress.acl"), priority=1)
    te.action.action.CopyFrom(action(sw, "MyIngress.learn"))
    sw.write(update(INSERT, table_entry=te), election=election)


def samples(msg) -> list[tuple[bytes, ...]]:
    return [tuple(m.bitstring for m in d.struct.members) for d in msg.digest.data]


def test_digest_needs_config_then_arrives_with_list_ids(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    sw.set_pipeline(election=(0, 1))
    learn_everything(sw, (0, 1))
    sw.inject(7, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    assert a.nothing("digest")  # not configured: PI drops digests
    sw.write(update(INSERT, digest_entry=digest_entry(sw)), election=(0, 1))
    sw.inject(7, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    sw.inject(8, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=bytes.fromhex("000000000102")))
    first, second = a.get("digest"), a.get("digest")
    assert (first.digest.list_id, second.digest.list_id) == (1, 2)
    assert samples(first) == [(SRC_MAC, b"\x07")]
    assert samples(second) == [(b"\x01\x02", b"\x08")]
    (cfg,) = sw.read(p4rt.Entity(digest_entry=p4rt.DigestEntry(digest_id=first.digest.digest_id)))
    assert cfg.digest_entry == digest_entry(sw)


def test_digest_batching_by_list_size_and_ack_cache(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    sw.set_pipeline(election=(0, 1))
    learn_everything(sw, (0, 1))
    sw.write(update(INSERT, digest_entry=digest_entry(
        sw, max_list_size=2, max_timeout_ns=10**10, ack_timeout_ns=10**10)), election=(0, 1))
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))  # duplicate: cached
    assert a.nothing("digest")
    sw.inject(2, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    msg = a.get("digest")
    assert samples(msg) == [(SRC_MAC, b"\x01"), (SRC_MAC, b"\x02")]
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    sw.inject(2, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    assert a.nothing("digest")  # not acked yet: still suppressed
    ack = p4rt.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = msg.digest.digest_id, msg.digest.list_id
    a.send(ack)
    time.sleep(0.2)
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    sw.inject(2, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    again = a.get("digest")
    assert samples(again) == samples(msg) and again.digest.list_id == msg.digest.list_id + 1


def test_digest_flushed_by_timeout(sw):
    a = sw.stream(election=(0, 1))
    a.get("arbitration")
    sw.set_pipeline(election=(0, 1))
    learn_everything(sw, (0, 1))
    # no thread wakes for digests until one is configured (a simulation holds hundreds of
    # devices whose programs have none)
    assert not sw.handle.device.digests.timers_running
    sw.write(update(INSERT, digest_entry=digest_entry(sw, max_list_size=100,
                                                      max_timeout_ns=100_000_000)),
             election=(0, 1))
    assert sw.handle.device.digests.timers_running
    sw.inject(1, ipv4_frame(b"\x0a\x01\x02\x03", src_mac=SRC_MAC))
    msg = a.get("digest", timeout=3)
    assert samples(msg) == [(SRC_MAC, b"\x01")]


def test_digest_entry_errors(sw):
    sw.set_pipeline()
    sw.write(update(INSERT, digest_entry=digest_entry(sw)))
    with pytest.raises(grpc.RpcError) as exc:
        sw.write(update(INSERT, digest_entry=digest_entry(sw)),
                 update(MODIFY, digest_entry=p4rt.DigestEntry(digest_id=0x17000099)))
    assert [e.canonical_code for e in write_errors(exc.value)] == [
        code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND]
    with pytest.raises(grpc.RpcError) as exc:
        sw.read(p4rt.Entity(digest_entry=p4rt.DigestEntry()))
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED



def test_seventeenth_client_refused(sw):
    streams = [sw.stream(election=(0, i + 1)) for i in range(16)]
    for s in streams:
        s.get("arbitration")
    extra = sw.stream(election=(0, 100))
    assert extra.ended.wait(3)
    assert extra.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert streams[-1].nothing("arbitration")  # the refused client changed nothing


def test_repeated_refusals_keep_no_earlier_frames(sw):
    """A refusal raised again and again (no pipeline yet, not primary) must not chain every
    raise's frames onto one shared exception: they stayed alive (at k=16, 320 switches' set-up
    frames with the half-megabyte JSON each held)."""
    device = sw.handle.device
    refused = []
    for _ in range(3):
        try:
            device.get_pipeline(p4rt.GetForwardingPipelineConfigRequest(device_id=device.device_id),
                                p4rt.ForwardingPipelineConfig())
        except P4RTError as err:
            refused.append(err)
    assert len({id(e) for e in refused}) == 3
    depths = [len(traceback.extract_tb(e.__traceback__)) for e in refused]
    assert depths[0] == depths[-1]
    assert refused[0].code == code_pb2.FAILED_PRECONDITION and refused[0].plain
