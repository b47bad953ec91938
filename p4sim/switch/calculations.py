"""Named calculations (hash inputs) and checksums (verify after parsing, update before deparsing).

BMv2 builds a calculation's input by packing the listed fields bit by bit (skipping fields of
invalid headers), whole valid headers byte-aligned, constants at their declared bit width and
optionally the payload, then padding the end to a byte boundary; the hash runs over those bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4sim.switch.codegen import Gen, hexstr, wrap_src
from p4sim.switch.externs import hash_algorithm
from p4sim.switch.program import ProgramError

HashFn = Callable[..., int]


def input_body(gen: Gen, inputs: list[Any], where: str) -> list[str]:
    """Source lines leaving the packed input bytes in local ``_b``."""
    lines = ["_v = 0", "_n = 0"]
    with_payload = False
    group: list = []  # consecutive fields of one header, packed with one validity check

    def flush() -> None:
        if not group:
            return
        inst = group[0][0]
        width = sum(f.width for _, f in group)
        shift = width
        terms = []
        for _, f in group:
            shift -= f.width
            terms.append(f"((F[{f.slot}] & {f.mask}) << {shift})" if shift
                         else f"(F[{f.slot}] & {f.mask})")
        lines.append(f"if F[{inst.valid_slot}]:")
        lines.append(f"    _v = (_v << {width}) | {' | '.join(terms)}; _n += {width}")
        group.clear()

    for k, item in enumerate(inputs):
        kind, value = item.get("type"), item.get("value")
        if kind == "field":
            info = gen.p.field(value, f"{where} input[{k}]")
            inst = gen.p.header(value[0], where)
            if group and group[0][0] is not inst:
                flush()
            if info.width == 0 and inst.vl_slot is not None:
                # A varbit field counts with its current length (BMv2 packs its bytes as
                # extracted, e.g. IPv4 options in the header checksum).
                flush()
                lines.append(f"if F[{inst.valid_slot}]:")
                lines.append(f"    _w = F[{inst.vl_slot}]; "
                             f"_v = (_v << _w) | (F[{info.slot}] & ((1 << _w) - 1)); _n += _w")
                continue
            group.append((inst, info))
            continue
        flush()
        if kind == "header":
            inst = gen.p.header(value, where)
            lines.append(f"if F[{inst.valid_slot}]:")
            for f in inst.fields:
                if f.width == 0 and inst.vl_slot is not None:  # varbit: its current length
                    lines.append(f"    _w = F[{inst.vl_slot}]; _v = (_v << _w) | "
                                 f"(F[{f.slot}] & ((1 << _w) - 1)); _n += _w")
                    continue
                lines.append(f"    _v = (_v << {f.width}) | (F[{f.slot}] & {f.mask}); "
                             f"_n += {f.width}")
        elif kind == "hexstr":
            width = int(item.get("bitwidth") or 0)
            if width <= 0:
                raise ProgramError(f"{where} input[{k}]: hexstr needs a positive bitwidth")
            lines.append(f"_v = (_v << {width}) | {hexstr(value, where) & ((1 << width) - 1)}; "
                         f"_n += {width}")
        elif kind == "payload":
            with_payload = True
        elif kind == "expression":
            # v1model hash over an expression list: p4c flattens to fields, but accept any
            # expression with an explicit bitwidth.
            width = int(item.get("bitwidth") or 0)
            if width <= 0:
                raise ProgramError(f"{where} input[{k}]: expression needs a bitwidth")
            src = gen.expr(value, where)
            lines.append(f"_v = (_v << {width}) | ({src} & {(1 << width) - 1}); _n += {width}")
        else:
            raise ProgramError(f"{where} input[{k}]: unsupported input type {kind!r}")
    flush()
    lines.append("_p = -_n % 8")
    lines.append("_b = (_v << _p).to_bytes((_n + _p) // 8, 'big')")
    if with_payload:
        lines += _after_last_header(gen, inputs, where)
        lines.append("_b += P.payload")
    return lines


def _csum16_words(gen: Gen, inputs: list[Any], where: str) -> list[str] | None:
    """Body computing the Internet checksum word by word from the fields, when the input is
    fields of one header totalling a multiple of 16 bits (the IPv4 header case): small-integer
    arithmetic instead of packing a 160-bit integer into bytes. None when not applicable."""
    if not inputs or any(i.get("type") != "field" for i in inputs):
        return None
    infos = [gen.p.field(i.get("value"), where) for i in inputs]
    headers = {i["value"][0] for i in inputs}
    total = sum(f.width for f in infos)
    if len(headers) != 1 or total % 16 or any(f.width == 0 for f in infos):
        return None
    inst = gen.p.header(headers.pop(), where)
    words = []
    for k in range(total // 16):
        lo, hi = 16 * k, 16 * k + 16
        pieces = []
        start = 0
        for f in infos:
            end = start + f.width
            a, b = max(start, lo), min(end, hi)
            if a < b:
                down = end - b
                src = f"(F[{f.slot}] >> {down})" if down else f"F[{f.slot}]"
                src = f"({src} & {(1 << (b - a)) - 1})"
                up = hi - b
                pieces.append(f"({src} << {up})" if up else src)
            start = end
        words.append(" | ".join(pieces))
    return [f"if not F[{inst.valid_slot}]: return 0xFFFF",
            "_s = " + " + ".join(f"({w})" for w in words),
            "_s = (_s & 0xFFFF) + (_s >> 16)",
            "_s = (_s & 0xFFFF) + (_s >> 16)",
            "return ~_s & 0xFFFF"]


def _after_last_header(gen: Gen, inputs: list[Any], where: str) -> list[str]:
    """BMv2's ``payload`` input: every valid header the deparser emits after the last header
    named in the input (e.g. an INT shim after UDP), then the unparsed payload."""
    from p4sim.switch.deparser import header_pack_src, pack_varbit  # (no import cycle)

    gen.ns.setdefault("_pack_vl", pack_varbit)

    named = [i["value"][0] if i.get("type") == "field" else i.get("value")
             for i in inputs if i.get("type") in ("field", "header")]
    order = (gen.p.deparsers[0].get("order") or []) if gen.p.deparsers else []
    positions = [order.index(h) for h in named if h in order]
    lines = []
    for hname in order[max(positions) + 1:] if positions else []:
        inst = gen.p.header(hname, where)
        if inst.htype.has_varbit:
            lines.append(f"if F[{inst.valid_slot}]: _b += _pack_vl(F, {gen.const(inst, 'h')})")
        else:
            lines.append(f"if F[{inst.valid_slot}]: _b += {header_pack_src(gen, inst)}")
    return lines


def compile_hash(gen: Gen, algo: str, inputs: list[Any], where: str) -> HashFn:
    fn = hash_algorithm(algo, gen.rng)
    if fn is None:
        raise ProgramError(f"{where}: unsupported hash algorithm '{algo}'")
    if algo in ("csum16", "cksum16"):
        body = _csum16_words(gen, inputs, where)
        if body is not None:
            return gen.make_function("_calc", body, where)
    name = gen.const(fn, "algo")
    body = [*input_body(gen, inputs, where), f"return {name}(_b)"]
    return gen.make_function("_calc", body, where)


def compile_calculations(gen: Gen) -> dict[str, HashFn]:
    out = {}
    for name, calc in gen.p.calculations.items():
        where = f"calculation '{name}'"
        out[name] = compile_hash(gen, calc.get("algo", ""), calc.get("input") or [], where)
    return out


def compile_checksums(gen: Gen, calcs: dict[str, HashFn], std_checksum_error: int
                      ) -> tuple[HashFn | None, HashFn | None]:
    """(verify_fn, update_fn) over all JSON checksums, or None when there is nothing to do."""
    verify: list[str] = []
    update: list[str] = []
    for i, ck in enumerate(gen.p.checksums):
        where = f"checksums[{i}] '{ck.get('name')}'"
        calc = ck.get("calculation")
        if calc not in calcs:
            raise ProgramError(f"{where}: unknown calculation {calc!r}")
        target = gen.p.field(ck.get("target"), where)
        cname = gen.const(calcs[calc], "ck")
        cond = gen.expr(ck["if_cond"], where) if ck.get("if_cond") else "True"
        if ck.get("verify", True):
            verify.append(f"if {cond} and ({cname}(P, F, D) & {target.mask}) != F[{target.slot}]:")
            verify.append(f"    F[{std_checksum_error}] = 1")
        if ck.get("update", True):
            verify_src = wrap_src(target.width, target.signed, f"{cname}(P, F, D)")
            update.append(f"if {cond}:")
            update.append(f"    F[{target.slot}] = {verify_src}")
    vfn = gen.make_function("_verify", verify, "verify checksums") if verify else None
    ufn = gen.make_function("_update", update, "update checksums") if update else None
    return vfn, ufn
