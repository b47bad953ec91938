"""Translate a BMv2 JSON deparser (an ordered header list) into one Python function.

``deparse(P, F, D)`` returns the frame: every valid header in order, packed big-endian, then the
unparsed payload.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from p4sim.switch.codegen import Gen
from p4sim.switch.layout import chunks, pack_args, struct_format
from p4sim.switch.program import HeaderInstance, ProgramError


@functools.lru_cache(maxsize=1024)
def _struct(fmt: str) -> struct.Struct:
    """One Struct per format: a Struct holds no state, so switches may share it."""
    return struct.Struct(fmt)


def pack_varbit(F: list[int], inst: HeaderInstance) -> bytes:
    vl_bits = F[inst.vl_slot]  # type: ignore[index]
    value = 0
    total = 0
    for f in inst.fields:
        width = f.width or vl_bits
        value = (value << width) | (F[f.slot] & ((1 << width) - 1))
        total += width
    return value.to_bytes((total + 7) // 8, "big")


def _pack_layout(inst: HeaderInstance) -> tuple[str, str] | None:
    """A fixed header's struct format and its pack arguments' source (None: no fields)."""
    chs = chunks([(f.slot, f.width, f.signed) for f in inst.fields])
    return (struct_format(chs), ", ".join(pack_args(chs, str))) if chs else None


def header_pack_src(gen: Gen, inst: HeaderInstance) -> str:
    """Source of the packed bytes of a fixed-size header instance."""
    # the layout (struct format and its arguments' source) is the program's, worked out once
    # for every switch loading it; only the name of the pack function is each switch's own
    layout = gen.shared_source(("pack", inst.name), lambda: _pack_layout(inst))
    if layout is not None:
        fmt, args = layout
        return f"{gen.const(_struct(fmt).pack, 'pk')}({args})"
    nbits = inst.htype.fixed_bits
    nbytes = (nbits + 7) // 8
    shift = nbytes * 8
    terms = []
    for f in inst.fields:
        shift -= f.width
        term = f"(F[{f.slot}] & {f.mask})"
        terms.append(f"{term} << {shift}" if shift else term)
    return f"({' | '.join(terms) or '0'}).to_bytes({nbytes}, 'big')"


def compile_deparser(gen: Gen, deparser: dict) -> Any:
    where = f"deparser '{deparser.get('name', 'deparser')}'"
    gen.ns.setdefault("_pack_vl", pack_varbit)
    body = ["_out = []"]
    for hname in deparser.get("order") or []:
        if not isinstance(hname, str):
            raise ProgramError(f"{where}: order must list header instance names")
        inst = gen.p.header(hname, where)
        body.append(f"if F[{inst.valid_slot}]:")
        if inst.htype.has_varbit:
            body.append(f"    _out.append(_pack_vl(F, {gen.const(inst, 'h')}))")
        else:
            body.append(f"    _out.append({header_pack_src(gen, inst)})")
    body.append("_out.append(P.payload)")
    body.append("return b''.join(_out)")
    return gen.make_function("_deparse", body, where)
