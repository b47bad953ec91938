"""cellfabric.core.bmv2log: simple_switch's debug log (its message shapes, as BMv2 1.15
prints them) read into journey records, 1 packet in N kept by p4sim's identity hash."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cellfabric.core.bmv2log import LACKS, read_log
from p4sim.switch.tracesample import TraceSampler


def _frame(ip_id: int, ttl: int = 64) -> bytes:
    eth = bytes.fromhex("02fa0000000302fa000000010800")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0x02, 1068, ip_id, 0x4000, ttl, 17, 0,
                     bytes([10, 0, 1, 2]), bytes([10, 0, 2, 2]))
    return eth + ip + struct.pack("!HHHH", 65414, 4791, 1048, 0)


def _packet_lines(pid: int, ip_id: int, t: str, drop: bool = False) -> list[str]:
    d = f"[{t}] [bmv2] [D] [thread 11] [{pid}.0] [cxt 0] "
    e = f"[{t}] [bmv2] [D] [thread 12] [{pid}.0] [cxt 0] "
    lines = [f"[{t}] [bmv2] [I] [thread 10] Received packet of length 1082 on port 4: "
             + _frame(ip_id).hex(),
             d + "Processing packet received on port 4",
             d + "Parser 'parser': start", d + "Extracting header 'ethernet'",
             d + "Extracting header 'ipv4'", d + "Parser 'parser': end",
             d + "Looking up key:", "", d + "Table 'tbl_fabric33': miss",
             d + "Action entry is fabric33 - ",
             d + "Looking up key:", "* hdr.ipv4.dst_addr   : 0a000202", "",
             d + "Table 'MyIngress.forwarding.ipv4_lpm': hit with handle 2",
             d + "Dumping entry 2", "Match key:", "* hdr.ipv4.dst_addr   : LPM       0a000200/24",
             "Action entry: MyIngress.forwarding.set_next_group - 3,", "",
             d + "Action entry is MyIngress.forwarding.set_next_group - 3,",
             d + "Looking up key:", "* meta.group_id       : 0003", "",
             d + "Choosing member 1 from group 2",
             d + "Table 'MyIngress.spray.group_select': hit with handle 2",
             d + "Dumping entry 2", "Match key:", "* meta.group_id       : EXACT     0003",
             "Index: group(2)", "Group members:",
             "  mbr 0: MyIngress.spray.set_egress_port - 1,",
             "  mbr 1: MyIngress.spray.set_egress_port - 2,", "",
             d + "Action entry is MyIngress.spray.set_egress_port - 2,",
             d + "Pipeline 'ingress': end"]
    if drop:
        return [*lines, d + "Dropping packet at the end of ingress"]
    t_out = t[:-3] + f"{int(t[-3:]) + 2:03d}"
    return [*lines, d + "Egress port is 2",
            f"[{t_out}] [bmv2] [D] [thread 12] [{pid}.0] [cxt 0] Pipeline 'egress': start",
            e + "Pipeline 'egress': end",
            f"[{t_out}] [bmv2] [D] [thread 13] [{pid}.0] [cxt 0] Transmitting packet of size "
            "1082 out of port 2",
            f"[{t_out}] [bmv2] [I] [thread 13] Sending packet of length 1082 on port 2: "
            + _frame(ip_id, ttl=63).hex()]


def _log(tmp_path: Path, every: int, packets: list[list[str]]) -> Path:
    path = tmp_path / f"l1ab12.bmv2-every-{every}.txt"
    path.write_text("\n".join(line for p in packets for line in p) + "\n")
    return path


def test_a_packet_becomes_one_record_with_what_bmv2_logged(tmp_path: Path) -> None:
    (rec,) = read_log(_log(tmp_path, 1, [_packet_lines(7, 300, "01:02:03.004")]), "l1")
    assert rec["switch"] == "l1" and rec["in_port"] == 4 and rec["len"] == 1082
    assert rec["t_in"] == ((1 * 60 + 2) * 60 + 3) * 10**9 + 4 * 10**6
    assert rec["id"] == {"src": "10.0.1.2", "dst": "10.0.2.2", "proto": 17, "ip_id": 300,
                         "sport": 65414, "dport": 4791}
    assert rec["ingress"][0] == {"ev": "parser", "headers": ["ethernet", "ipv4"]}
    tables = [ev for ev in rec["ingress"] if ev["ev"] == "table"]
    # p4c's keyless tbl_* wrappers are left out, as p4sim's records leave them out
    assert [t["table"] for t in tables] == ["MyIngress.forwarding.ipv4_lpm",
                                            "MyIngress.spray.group_select"]
    assert tables[0]["key"] == {"hdr.ipv4.dst_addr": 0x0A000202} and tables[0]["hit"]
    actions = [(ev["name"], ev["args"]) for ev in rec["ingress"] if ev["ev"] == "action"]
    assert actions == [("MyIngress.forwarding.set_next_group", [3]),
                       ("MyIngress.spray.set_egress_port", [2])]
    (choice,) = [ev for ev in rec["ingress"] if ev["ev"] == "choice"]
    assert [m["args"] for m in choice["members"]] == [[1], [2]] and choice["chosen"] == 1
    (copy,) = rec["copies"]
    assert copy["port"] == 2 and copy["wait_ns"] == 2 * 10**6 and copy["depth"] is None
    assert copy["t_out"] - rec["t_in"] == 2 * 10**6 and copy["changes"] == {"ttl": [64, 63]}
    assert rec["lacks"] == LACKS and "depth" in LACKS


def test_a_drop_at_the_end_of_ingress_is_the_records_drop(tmp_path: Path) -> None:
    (rec,) = read_log(_log(tmp_path, 1, [_packet_lines(1, 5, "00:00:01.000", drop=True)]))
    assert rec["drop"]["stage"] == "ingress" and rec["copies"] == []


def test_one_in_n_are_kept_by_the_same_hash_as_p4sim(tmp_path: Path) -> None:
    ids = list(range(100, 140))
    packets = [_packet_lines(i, ip_id, "00:00:01.000") for i, ip_id in enumerate(ids)]
    kept = {r["id"]["ip_id"] for r in read_log(_log(tmp_path, 4, packets))}
    sampler = TraceSampler(4)
    assert kept == {ip_id for ip_id in ids if sampler.wants(_frame(ip_id))}
    assert 0 < len(kept) < len(ids)


def test_a_file_not_named_as_a_bmv2_trace_log_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "l1.log"
    path.write_text("")
    with pytest.raises(ValueError, match="not a BMv2 trace log"):
        read_log(path)
