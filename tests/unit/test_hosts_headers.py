"""hosts.headers: the one description of BTH, AETH, SACK and INT hop layouts, checked against
independent descriptions (Scapy's BTH/AETH layers, the INT v2.1 sizes, the struct formats
the wire prose in hosts.wire gives)."""

from __future__ import annotations

from scapy.contrib.roce import AETH as ScapyAETH
from scapy.contrib.roce import BTH as ScapyBTH

from hosts import wire
from hosts.headers import AETH, BTH, INT_HOP, SACK, hop_bytes
from hosts.layers import HopRecord, SackBlock, decode_hop, encode_hop


def _scapy_widths(layer) -> list[int]:
    # Scapy's BTH carries the ICRC as a trailing field; on the wire it ends the packet.
    return [getattr(f, "size", None) or f.sz * 8 for f in layer.fields_desc
            if f.name != "icrc"]


def test_bth_and_aeth_match_scapys_layers_bit_for_bit() -> None:
    assert [w for _, w in BTH.fields] == _scapy_widths(ScapyBTH)
    assert [w for _, w in AETH.fields] == _scapy_widths(ScapyAETH)
    assert BTH.size == wire.BTH_LEN == 12
    frame = bytes(ScapyBTH(opcode=0x11, padcount=2, becn=1, dqpn=0xABCDE, ackreq=1, psn=77))
    got = BTH.unpack(frame)
    assert (got["opcode"], got["pad"], got["becn"], got["dqpn"], got["ackreq"], got["psn"]) \
        == (0x11, 2, 1, 0xABCDE, 1, 77)
    assert BTH.pack(**got) == frame[:BTH.size]


def test_struct_formats_are_the_word_layouts_the_wire_prose_describes() -> None:
    assert BTH.struct.format == "!BBHII"
    assert SACK.struct.format == "!BBHII" and SACK.size == 12
    assert (BTH.byte_offset("pad"), BTH.shift("pad")) == (1, 4)
    assert (BTH.byte_offset("psn"), BTH.byte_offset("dqpn")) == (9, 5)


def test_sack_scapy_layer_is_built_from_the_table() -> None:
    names = [f.name for f in SackBlock.fields_desc]
    assert names == [n for n, _ in SACK.fields] + ["bitmap"]
    raw = bytes(SackBlock(flags=3, base_psn=0x123456, grant_psn=0x654321, bitmap=b"\x80" * 4))
    assert SACK.unpack(raw) == {"version": wire.SACK_VERSION, "flags": 3, "bitmap_len": 4,
                                "rsv1": 0, "base_psn": 0x123456, "rsv2": 0,
                                "grant_psn": 0x654321}


def test_int_hop_sizes_are_int_v21s_and_round_trip() -> None:
    sizes = {bit: layout.size for bit, layout in INT_HOP.items()}
    assert sizes == {0: 4, 1: 4, 2: 4, 3: 4, 4: 8, 5: 8, 6: 8, 7: 4, 8: 4}
    assert hop_bytes(wire.INT_INSTRUCTIONS) == 36 == wire.INT_HOP_ML * 4
    rec = HopRecord(node_id=9, ingress_port=3, egress_port=4, hop_latency=17, queue_id=1,
                    queue_occupancy=0xABCDE, ingress_ts=1 << 40, egress_ts=(1 << 40) + 5,
                    tx_bytes=0xFFFFFFFE)
    data = encode_hop(wire.INT_INSTRUCTIONS, rec)
    assert len(data) == 36
    assert decode_hop(wire.INT_INSTRUCTIONS, data) == rec
    assert encode_hop(wire.int_bitmap(wire.INT_BIT_NODE_ID), HopRecord()) == b"\xff" * 4
