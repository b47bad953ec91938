"""The controller headers on a CPU-port interface (controlplane.cpuport): the bytes a switch
without --cpu-port sends and expects, bit-packed in P4Info order as PI packs them. Checked
against bytes worked out by hand and against p4sim's P4Runtime server, which packs the same
headers for PacketIn and PacketOut messages."""

from __future__ import annotations

import random

import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controlplane.cpuport import CpuHeaderError, CpuPortCodec
from controlplane.p4info import P4InfoIndex
from p4sim.switch.p4runtime.p4info import ControllerHeader as ServerHeader
from p4sim.switch.p4runtime.packetio import packet_in_message, packet_out_frame


def _p4info(packet_in: list[tuple[str, int]], packet_out: list[tuple[str, int]] | None
            ) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    for hid, (name, fields) in enumerate((("packet_in", packet_in), ("packet_out", packet_out)),
                                         start=1):
        if fields is None:
            continue
        cpm = info.controller_packet_metadata.add()
        cpm.preamble.id = 0x04000000 + hid  # P4Ids: controller headers
        cpm.preamble.name = name
        for mid, (fname, width) in enumerate(fields, start=1):
            cpm.metadata.add(id=mid, name=fname, bitwidth=width)
    return info


FABRIC = _p4info([("ingress_port", 9), ("_pad", 7)], [("egress_port", 9), ("_pad", 7)])


def test_fabric_headers_as_worked_out_by_hand() -> None:
    codec = CpuPortCodec.of(P4InfoIndex(FABRIC))
    # port 5: 0b000000101 then seven zero bits -> 0000 0010 | 1000 0000
    assert codec.frame(b"ETH", egress_port=5) == b"\x02\x80ETH"
    # port 510: 0b111111110 then 0000000 -> 1111 1111 | 0000 0000
    assert codec.frame(b"", egress_port=510, _pad=0) == b"\xff\x00"
    assert codec.split(b"\x01\x00rest") == ({"ingress_port": 2, "_pad": 0}, b"rest")
    assert codec.split(b"\xff\x80") == ({"ingress_port": 511, "_pad": 0}, b"")
    assert codec.split(b"\x02") is None  # shorter than the header: not a punted frame


def test_odd_widths_pad_the_last_byte_and_agree_with_the_switchs_server() -> None:
    fields = [("port", 9), ("reason", 3), ("flag", 1), ("id", 20)]  # 33 bits -> 5 bytes
    info = _p4info(fields, fields)
    codec = CpuPortCodec.of(P4InfoIndex(info))
    server = ServerHeader(1, "packet_in", [(i, n, w) for i, (n, w) in enumerate(fields, 1)])
    assert codec.packet_in.size == 5
    rng = random.Random(7)
    for _ in range(200):
        values = {n: rng.randrange(1 << w) for n, w in fields}
        payload = rng.randbytes(rng.randrange(0, 40))
        frame = codec.frame(payload, **values)
        # what p4sim's server would hand a controller for this CPU-port frame...
        msg = packet_in_message(server, frame)
        assert msg is not None and msg.packet.payload == payload
        got = {fields[md.metadata_id - 1][0]: int.from_bytes(md.value, "big")
               for md in msg.packet.metadata}
        assert got == values
        assert codec.split(frame) == (values, payload)


def test_a_packet_out_frame_is_what_the_server_injects_for_the_message() -> None:
    from p4sim.switch.p4runtime.p4info import PipelineInfo

    info = _p4info([("ingress_port", 9), ("_pad", 7)], [("egress_port", 9), ("_pad", 7)])
    server_info = PipelineInfo(info)
    codec = CpuPortCodec.of(P4InfoIndex(info))
    for port in (0, 1, 7, 255, 256, 510):
        msg = p4runtime_pb2.PacketOut(payload=b"\xaa" * 20)
        msg.metadata.add(metadata_id=1, value=port.to_bytes(2, "big"))
        assert codec.frame(b"\xaa" * 20, egress_port=port) == packet_out_frame(server_info, msg)


def test_bad_values_and_missing_headers_are_one_line_errors() -> None:
    codec = CpuPortCodec.of(P4InfoIndex(FABRIC))
    with pytest.raises(CpuHeaderError, match=r"packet_out.egress_port: 512 does not fit in 9 bits"):
        codec.frame(b"", egress_port=512)
    with pytest.raises(CpuHeaderError, match=r"packet_out: no field 'port'"):
        codec.frame(b"", port=1)
    with pytest.raises(CpuHeaderError, match=r"no controller header 'packet_out'"):
        CpuPortCodec.of(P4InfoIndex(_p4info([("ingress_port", 9), ("_pad", 7)], None)))
