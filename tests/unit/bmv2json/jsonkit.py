"""A small builder for hand-written BMv2 JSON test programs (per docs/JSON_format.md).

Programs parse Ethernet and, for EtherType 0x88B5, one "probe" header whose fields a test chooses;
ingress and egress are chains of tables (each table's next node is the next table in the list).
"""

from __future__ import annotations

import json
import struct
from typing import Any

PROBE_TYPE = 0x88B5

STD_FIELDS = [
    ("ingress_port", 9), ("egress_spec", 9), ("egress_port", 9), ("instance_type", 32),
    ("packet_length", 32), ("enq_timestamp", 32), ("enq_qdepth", 19), ("deq_timedelta", 32),
    ("deq_qdepth", 19), ("ingress_global_timestamp", 48), ("egress_global_timestamp", 48),
    ("mcast_grp", 16), ("egress_rid", 16), ("checksum_error", 1), ("parser_error", 32),
    ("priority", 3), ("_padding", 3),
]
ERRORS = [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
          ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6]]


def f(h: str, name: str) -> dict:
    return {"type": "field", "value": [h, name]}


def hx(v: int) -> dict:
    return {"type": "hexstr", "value": hex(v) if v >= 0 else "-" + hex(-v)}


def rd(i: int) -> dict:
    return {"type": "runtime_data", "value": i}


def ex(op: str, left: Any, right: Any, cond: Any = None) -> dict:
    value = {"op": op, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


def prim(op: str, *params: Any) -> dict:
    return {"op": op, "parameters": list(params)}


def assign(dst: dict, src: dict) -> dict:
    return prim("assign", dst, src)


class Prog:
    def __init__(self, probe_fields: list[tuple[str, int]] | list[tuple[str, int, bool]]) -> None:
        self.probe_fields = [list(x) for x in probe_fields]
        self.actions: list[dict] = [{"name": "NoAction", "id": 0, "runtime_data": [],
                                     "primitives": []}]
        self.tables: dict[str, list[dict]] = {"ingress": [], "egress": []}
        self.profiles: list[dict] = []
        self.doc_extra: dict[str, Any] = {}
        self.extra_headers: list[tuple[str, list]] = []
        self.headers_extra_instances: list[dict] = []
        self.field_lists: list[dict] = []
        self.learn_lists: list[dict] = []
        self.counters: list[dict] = []
        self.meters: list[dict] = []
        self.registers: list[dict] = []
        self.calculations: list[dict] = []
        self.checksums: list[dict] = []

    def action(self, name: str, params: list[tuple[str, int]], prims: list[dict]) -> int:
        aid = len(self.actions)
        self.actions.append({"name": name, "id": aid,
                             "runtime_data": [{"name": n, "bitwidth": w} for n, w in params],
                             "primitives": prims})
        return aid

    def table(self, name: str, keys: list[tuple[str, Any]], actions: list[int],
              default: tuple[int, list[int]] | None = None, pipe: str = "ingress",
              **extra: Any) -> dict:
        kinds = {k for k, _ in keys}
        mt = ("range" if "range" in kinds else "ternary" if kinds & {"ternary", "optional"}
              else "lpm" if "lpm" in kinds else "exact")
        t = {"name": name, "id": len(self.tables["ingress"]) + len(self.tables["egress"]),
             "key": [{"match_type": k, "target": tgt, "mask": None} for k, tgt in keys],
             "match_type": mt, "type": "simple", "max_size": 1024, "with_counters": False,
             "support_timeout": False, "direct_meters": None,
             "action_ids": actions, "actions": [self.actions[a]["name"] for a in actions],
             "base_default_next": None, "next_tables": {}}
        if default is not None:
            t["default_entry"] = {"action_id": default[0], "action_const": False,
                                  "action_data": [hex(v) for v in default[1]],
                                  "action_entry_const": False}
        t.update(extra)
        self.tables[pipe].append(t)
        return t

    def _pipeline(self, name: str, pid: int) -> dict:
        tables = self.tables[name]
        for i, t in enumerate(tables):
            nxt = tables[i + 1]["name"] if i + 1 < len(tables) else None
            t["base_default_next"] = nxt
            if "__HIT__" not in t["next_tables"] and "__MISS__" not in t["next_tables"]:
                t["next_tables"] = {self.actions[a]["name"]: nxt for a in t["action_ids"]}
        return {"name": name, "id": pid, "init_table": tables[0]["name"] if tables else None,
                "tables": tables, "action_profiles": self.profiles if name == "ingress" else [],
                "conditionals": []}

    def doc(self) -> dict:
        header_types = [
            {"name": "scalars_0", "id": 0, "fields": [["meta_a", 32, False], ["meta_b", 32, False]]},
            {"name": "standard_metadata", "id": 1, "fields": [[n, w, False] for n, w in STD_FIELDS]},
            {"name": "ethernet_t", "id": 2,
             "fields": [["dstAddr", 48, False], ["srcAddr", 48, False], ["etherType", 16, False]]},
            {"name": "probe_t", "id": 3, "fields": [x if len(x) == 3 else [*x, False]
                                                    for x in self.probe_fields]},
        ]
        headers = [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
             "metadata": True},
            {"name": "ethernet", "id": 2, "header_type": "ethernet_t", "metadata": False},
            {"name": "probe", "id": 3, "header_type": "probe_t", "metadata": False},
        ]
        parser = {"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0,
             "parser_ops": [prim("extract", {"type": "regular", "value": "ethernet"})],
             "transition_key": [f("ethernet", "etherType")],
             "transitions": [{"type": "hexstr", "value": hex(PROBE_TYPE), "mask": None,
                              "next_state": "parse_probe"},
                             {"type": "default", "value": None, "mask": None,
                              "next_state": None}]},
            {"name": "parse_probe", "id": 1,
             "parser_ops": [prim("extract", {"type": "regular", "value": "probe"})],
             "transition_key": [], "transitions": [{"type": "default", "value": None,
                                                    "mask": None, "next_state": None}]}]}
        doc = {
            "__meta__": {"version": [2, 23], "compiler": "tests/unit/bmv2json/jsonkit.py"},
            "header_types": header_types, "headers": headers, "header_stacks": [],
            "header_union_types": [], "header_unions": [], "header_union_stacks": [],
            "field_lists": self.field_lists, "errors": ERRORS, "enums": [],
            "parsers": [parser], "parse_vsets": [],
            "deparsers": [{"name": "deparser", "id": 0, "order": ["ethernet", "probe"]}],
            "meter_arrays": self.meters, "counter_arrays": self.counters,
            "register_arrays": self.registers, "calculations": self.calculations,
            "learn_lists": self.learn_lists, "actions": self.actions,
            "pipelines": [self._pipeline("ingress", 0), self._pipeline("egress", 1)],
            "checksums": self.checksums, "extern_instances": [], "field_aliases": [],
        }
        doc.update(self.doc_extra)
        return doc

    def json(self) -> bytes:
        return json.dumps(self.doc()).encode()

    def frame(self, *values: int, eth_dst: int = 0x0000000000AA) -> bytes:
        """An Ethernet frame carrying a probe header with these field values (then 8 pad bytes)."""
        total = 0
        nbits = 0
        padded = list(values) + [0] * (len(self.probe_fields) - len(values))
        for (_name, width, *_), v in zip(self.probe_fields, padded):
            total = (total << width) | (v & ((1 << width) - 1))
            nbits += width
        eth = eth_dst.to_bytes(6, "big") + bytes.fromhex("00000000bb01") + struct.pack(
            "!H", PROBE_TYPE)
        return eth + total.to_bytes((nbits + 7) // 8, "big") + b"\x00" * 8

    def fields(self, frame: bytes) -> dict[str, int]:
        nbits = sum(x[1] for x in self.probe_fields)
        value = int.from_bytes(frame[14:14 + (nbits + 7) // 8], "big")
        out = {}
        shift = (nbits + 7) // 8 * 8
        for name, width, *_ in self.probe_fields:
            shift -= width
            out[name] = (value >> shift) & ((1 << width) - 1)
        return out
