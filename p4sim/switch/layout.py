"""Byte layout of fixed-size headers for fast generated (de)serialization.

A header's fields are split into byte-aligned chunks (a chunk ends where a field ends on a byte
boundary). Each chunk is read or written with ``struct`` as a few machine words (1, 2, 4 or 8
bytes), so the generated code shifts and masks small integers instead of one big integer for the
whole header, which is several times faster in CPython.
"""

from __future__ import annotations

from dataclasses import dataclass

_CODES = {8: "Q", 4: "I", 2: "H", 1: "B"}


@dataclass
class Chunk:
    nbytes: int
    words: list[int]  # sizes in bytes of the struct words making up the chunk, big-endian order
    fields: list[tuple[int, int, bool]]  # (slot-or-offset, width, signed), in order


def split_words(nbytes: int) -> list[int]:
    words = []
    rest = nbytes
    for size in (8, 4, 2, 1):
        while rest >= size:
            words.append(size)
            rest -= size
    return words


def chunks(fields: list[tuple[int, int, bool]]) -> list[Chunk] | None:
    """Split (slot, width, signed) fields into byte-aligned chunks; None if the header does not
    end on a byte boundary."""
    out: list[Chunk] = []
    cur: list[tuple[int, int, bool]] = []
    bits = 0
    for fld in fields:
        cur.append(fld)
        bits += fld[1]
        if bits % 8 == 0:
            out.append(Chunk(bits // 8, split_words(bits // 8), cur))
            cur = []
            bits = 0
    if cur:
        return None
    return out


def struct_format(chs: list[Chunk]) -> str:
    return "!" + "".join(_CODES[w] for ch in chs for w in ch.words)


def unpack_lines(chs: list[Chunk], slot_src: callable, var: str = "_w") -> list[str]:  # type: ignore[valid-type]
    """Lines assigning fields from unpacked words ``{var}0, {var}1, ...`` (already bound)."""
    lines = []
    k = 0
    for ch in chs:
        names = [f"{var}{k + i}" for i in range(len(ch.words))]
        k += len(ch.words)
        if len(names) == 1:
            value = names[0]
        else:
            # Combine the words into the chunk's integer, most significant first.
            shift = ch.nbytes * 8
            parts = []
            for name, size in zip(names, ch.words):
                shift -= size * 8
                parts.append(f"({name} << {shift})" if shift else name)
            lines.append(f"_c = {' | '.join(parts)}")
            value = "_c"
        shift = ch.nbytes * 8
        for ref, width, signed in ch.fields:
            shift -= width
            mask = (1 << width) - 1
            src = value
            if shift:
                src = f"({src} >> {shift})"
            if shift or width != ch.nbytes * 8:
                src = f"{src} & {mask}"
            if signed:
                half = 1 << (width - 1)
                src = f"(({src}) ^ {half}) - {half}"
            lines.append(f"F[{slot_src(ref)}] = {src}")
    return lines


def pack_args(chs: list[Chunk], slot_src: callable) -> list[str]:  # type: ignore[valid-type]
    """Argument expressions for ``struct.pack(fmt, *args)`` from the fields' PHV slots."""
    args = []
    for ch in chs:
        shift = ch.nbytes * 8
        terms = []
        for ref, width, _ in ch.fields:
            shift -= width
            term = f"(F[{slot_src(ref)}] & {(1 << width) - 1})"
            terms.append(f"{term} << {shift}" if shift else term)
        value = " | ".join(terms)
        if len(ch.words) == 1:
            args.append(value)
            continue
        args_value = f"({value})"
        rest = ch.nbytes * 8
        for size in ch.words:
            rest -= size * 8
            word = f"({args_value} >> {rest})" if rest else args_value
            args.append(f"{word} & {(1 << (size * 8)) - 1}")
    return args
