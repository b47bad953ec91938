"""P4_16 lexer: turns preprocessed text into tokens carrying their original source location.

`>` is always its own token (with `adjacent` telling whether the next `>` follows directly), so
the parser can close nested type arguments (`register<bit<32>>`) and still read `>>` shifts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from p4sim.frontend.errors import CompileError, Loc
from p4sim.frontend.preprocess import Preprocessed

KEYWORDS = frozenset(["abstract", "action", "apply", "bit", "bool", "const", "control", "default", "else", "enum", "error", "exit", "extern", "false", "header", "header_union", "if", "in", "inout", "int", "match_kind", "out", "package", "parser", "return", "select", "state", "string", "struct", "switch", "table", "transition", "true", "tuple", "type", "typedef", "varbit", "void", "list", "entries", "actions", "key"]) - {"entries", "actions", "key", "list"}

OPERATORS = sorted(["&&&", "..", "++", "|+|", "|-|", "<<", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "?", ":", ";", ",", ".", "=", "(", ")", "{", "}", "[", "]", "<", ">", "@"], key=len, reverse=True)

_MASTER = re.compile(r"""
 (?P<ws>[ \t\r\f\v]+)
|(?P<nl>\n)
|(?P<int>(?:\d+[ws])?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[\d_]*))
|(?P<id>[A-Za-z_][A-Za-z0-9_]*)
|(?P<str>"(?:[^"\\\n]|\\.)*")
|(?P<op>""" + "|".join(re.escape(o) for o in OPERATORS) + r""")
""", re.VERBOSE)


@dataclass(slots=True)
class Token:
    kind: str  # "id", "kw", "int", "str", "op", "eof"
    text: str
    loc: Loc
    value: int | str | None = None
    width: int | None = None  # for int literals with a width prefix (8w5, 4s3)
    signed: bool = False
    adjacent: bool = False  # next token starts right after this one

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.loc})"


def parse_int(text: str) -> tuple[int, int | None, bool]:
    width: int | None = None
    signed = False
    m = re.match(r"(\d+)([ws])(.*)$", text)
    if m:
        width, signed, text = int(m.group(1)), m.group(2) == "s", m.group(3)
    t = text.replace("_", "")
    base = 10
    if len(t) > 1 and t[0] == "0" and t[1] in "xXbBoOdD":
        base = {"x": 16, "b": 2, "o": 8, "d": 10}[t[1].lower()]
        t = t[2:]
    return int(t, base), width, signed


def tokenize(pp: Preprocessed) -> list[Token]:
    text, lmap = pp.text, pp.line_map
    toks: list[Token] = []
    line, line_start, pos, n = 0, 0, 0, len(text)
    while pos < n:
        m = _MASTER.match(text, pos)
        if not m:
            f, ln = lmap[min(line, len(lmap) - 1)]
            raise CompileError(Loc(f, ln, pos - line_start + 1),
                               f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            line_start = m.end()
        elif kind != "ws":
            f, ln = lmap[min(line, len(lmap) - 1)]
            s = m.group(0)
            loc = Loc(f, ln, pos - line_start + 1)
            if toks and toks[-1].kind == "op" and kind == "op":
                prev = toks[-1]
                prev.adjacent = prev.loc.line == ln and prev.loc.col + len(prev.text) == loc.col
            if kind == "int":
                if len(s) > 700:
                    raise CompileError(loc, "integer literal is too large")
                val, width, signed = parse_int(s)
                toks.append(Token("int", s, loc, val, width, signed))
            elif kind == "id":
                toks.append(Token("kw" if s in KEYWORDS else "id", s, loc, s))
            elif kind == "str":
                toks.append(Token("str", s, loc, bytes(s[1:-1], "utf-8").decode("unicode_escape")))
            else:
                toks.append(Token("op", s, loc, s))
        pos = m.end()
    f, ln = lmap[-1] if lmap else ("<input>", 1)
    toks.append(Token("eof", "end of file", Loc(f, ln, 1)))
    return toks
