"""A C-like preprocessor for P4: #include, #define (object- and function-like), #undef,
#if/#ifdef/#ifndef/#elif/#else/#endif with defined() and integer expressions, #error.

The output is one text plus a line map: output line i came from `line_map[i]` (file, line), so
the lexer can report every token at its original place.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from p4sim.frontend.errors import CompileError, Loc

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BUILTIN_INCLUDE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "p4include")


@dataclass
class Macro:
    name: str
    body: str
    params: list[str] | None = None  # None for object-like macros


@dataclass
class Preprocessed:
    text: str
    line_map: list[tuple[str, int]]
    sources: dict[str, list[str]] = field(default_factory=dict)


class Preprocessor:
    def __init__(self, include_dirs: list[str], defines: dict[str, str]) -> None:
        self.include_dirs = list(include_dirs)
        self.macros: dict[str, Macro] = {n: Macro(n, v) for n, v in defines.items()}
        self.out: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.sources: dict[str, list[str]] = {}
        self.once: set[str] = set()
        self.depth = 0

    def run(self, path: str) -> Preprocessed:
        self._file(path, Loc(path, 0, 0))
        return Preprocessed("\n".join(self.out) + "\n", self.line_map, self.sources)

    # ---- files -------------------------------------------------------------------------------
    def _file(self, path: str, where: Loc) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CompileError(where, f"cannot open {path}: {e.strerror}") from None
        self.depth += 1
        if self.depth > 64:
            raise CompileError(where, "#include nested too deeply")
        raw = text.split("\n")
        self.sources[path] = raw
        lines = _strip_comments(raw, path)
        self._lines(path, lines)
        self.depth -= 1

    def _resolve(self, name: str, angled: bool, current: str, loc: Loc) -> str:
        dirs = [] if angled else [os.path.dirname(current) or "."]
        dirs += [*self.include_dirs, BUILTIN_INCLUDE]
        for d in dirs:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                return os.path.normpath(p)
        raise CompileError(loc, f"#include file {name} not found")

    # ---- lines -------------------------------------------------------------------------------
    def _lines(self, path: str, lines: list[str]) -> None:
        # Each stack entry: (this branch active, some branch already taken, parent active)
        stack: list[list[bool]] = []
        i = 0
        while i < len(lines):
            line, lineno = lines[i], i + 1
            # Joined continuation lines keep the first line's number.
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
                self._emit("", path, i)
            i += 1
            stripped = line.lstrip()
            active = all(s[0] for s in stack)
            if stripped.startswith("#"):
                col = len(line) - len(stripped) + 1
                self._directive(stripped[1:].strip(), path, Loc(path, lineno, col), stack, active)
                self._emit("", path, lineno)
                continue
            self._emit(self._expand(line, Loc(path, lineno, 1)) if active else "", path, lineno)
        if stack:
            raise CompileError(Loc(path, len(lines), 1), "missing #endif")

    def _emit(self, text: str, path: str, lineno: int) -> None:
        self.out.append(text)
        self.line_map.append((path, lineno))

    def _directive(self, d: str, path: str, loc: Loc, stack: list[list[bool]],
                   active: bool) -> None:
        m = re.match(r"([A-Za-z_]+)\s*(.*)$", d)
        if not m:
            if d:
                raise CompileError(loc, f"invalid preprocessor directive #{d}")
            return
        name, rest = m.group(1), m.group(2).strip()
        if name in ("ifdef", "ifndef"):
            ok = (rest.split()[0] in self.macros) if rest else False
            if name == "ifndef":
                ok = not ok
            stack.append([active and ok, ok, active])
        elif name == "if":
            ok = active and self._cond(rest, loc)
            stack.append([ok, ok, active])
        elif name == "elif":
            if not stack:
                raise CompileError(loc, "#elif without #if")
            top = stack[-1]
            ok = top[2] and not top[1] and self._cond(rest, loc)
            top[0] = ok
            top[1] = top[1] or ok
        elif name == "else":
            if not stack:
                raise CompileError(loc, "#else without #if")
            top = stack[-1]
            top[0] = top[2] and not top[1]
            top[1] = True
        elif name == "endif":
            if not stack:
                raise CompileError(loc, "#endif without #if")
            stack.pop()
        elif not active:
            return
        elif name == "include":
            mi = re.match(r'"([^"]+)"|<([^>]+)>', rest)
            if not mi:
                raise CompileError(loc, "#include expects \"FILE\" or <FILE>")
            target = self._resolve(mi.group(1) or mi.group(2), mi.group(2) is not None,
                                   path, loc)
            if target not in self.once:
                self._file(target, loc)
        elif name == "define":
            self._define(rest, loc)
        elif name == "undef":
            self.macros.pop(rest.split()[0] if rest else "", None)
        elif name == "error":
            raise CompileError(loc, f"#error {rest}")
        elif name in ("pragma", "line", "warning"):
            if rest.strip() == "once":
                self.once.add(path)
        else:
            raise CompileError(loc, f"unknown preprocessor directive #{name}")

    def _define(self, rest: str, loc: Loc) -> None:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?\s*(.*)$", rest)
        if not m:
            raise CompileError(loc, "#define expects a macro name")
        params = None
        if m.group(2) is not None:
            params = [p.strip() for p in m.group(3).split(",") if p.strip()]
        self.macros[m.group(1)] = Macro(m.group(1), m.group(4).strip(), params)

    # ---- expansion -----------------------------------------------------------------------------
    def _expand(self, text: str, loc: Loc, hide: frozenset[str] = frozenset()) -> str:
        if not self.macros or not _IDENT.search(text):
            return text
        out: list[str] = []
        pos = 0
        for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\d\w*', text):
            word = m.group(0)
            mac = self.macros.get(word)
            if mac is None or word in hide or m.start() < pos:
                continue
            if mac.params is None:
                out.append(text[pos:m.start()])
                out.append(self._expand(mac.body, loc, hide | {word}))
                pos = m.end()
                continue
            args, end = _call_args(text, m.end())
            if args is None:
                continue
            if len(args) != len(mac.params) and not (mac.params == [] and args == [""]):
                raise CompileError(loc, f"macro {word} expects {len(mac.params)} arguments,"
                                   f" got {len(args)}")
            values = {p: self._expand(a.strip(), loc, hide) for p, a in zip(mac.params, args)}
            body = _IDENT.sub(lambda mm, v=values: v.get(mm.group(0), mm.group(0)), mac.body)
            out.append(text[pos:m.start()])
            out.append(self._expand(body, loc, hide | {word}))
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def _cond(self, expr: str, loc: Loc) -> bool:
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", expr)
        expr = self._expand(expr, loc)
        expr = _IDENT.sub("0", expr)  # unknown identifiers are 0, as in C
        py = expr.replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        py = re.sub(r"(\d+)[uUlL]+", r"\1", py)
        if not re.fullmatch(r"[\d\sxXa-fA-F()+\-*/%<>=!&|^~andortn]*", py):
            raise CompileError(loc, f"invalid #if expression: {expr}")
        try:
            return bool(eval(py, {"__builtins__": {}}, {}))  # digits/operators only
        except Exception:
            raise CompileError(loc, f"invalid #if expression: {expr}") from None


def _call_args(text: str, start: int) -> tuple[list[str] | None, int]:
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "(":
        return None, start
    depth, args, cur = 0, [], []
    i += 1
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(cur))
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return None, start


def _strip_comments(lines: list[str], path: str) -> list[str]:
    """Blank out // and /* */ comments, keeping columns and line count."""
    out: list[str] = []
    in_block = False
    for _lineno, line in enumerate(lines, 1):
        res: list[str] = []
        i, n = 0, len(line)
        while i < n:
            if in_block:
                j = line.find("*/", i)
                if j < 0:
                    res.append(" " * (n - i))
                    i = n
                else:
                    res.append(" " * (j + 2 - i))
                    i = j + 2
                    in_block = False
                continue
            c = line[i]
            if c == '"':
                j = i + 1
                while j < n and line[j] != '"':
                    j += 2 if line[j] == "\\" else 1
                res.append(line[i:j + 1])
                i = j + 1
            elif line.startswith("//", i):
                res.append(" " * (n - i))
                i = n
            elif line.startswith("/*", i):
                in_block = True
                res.append("  ")
                i += 2
            else:
                res.append(c)
                i += 1
        out.append("".join(res))
    if in_block:
        raise CompileError(Loc(path, len(lines), 1), "unterminated comment")
    return out


def preprocess(path: str, include_dirs: list[str], defines: dict[str, str]) -> Preprocessed:
    return Preprocessor(include_dirs, defines).run(path)
