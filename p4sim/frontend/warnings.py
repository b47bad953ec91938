"""p4c's warnings for a checked program, in p4c's words and format (nothing here changes what
compiles):

- ``[--Wwarn=unused]``: a constant, typedef, action, extern instance, table or local variable
  that nothing refers to (declarations of the system includes are never reported); a table
  also gets p4c's ``[--Winfo=removed]`` note;
- ``[--Wwarn=overflow]``: an integer literal that does not fit the width it is given;
- ``[--Wwarn=invalid-header]``: a field read of a header that is certainly invalid there (after
  its ``setInvalid()`` on every path to the read, in an action, a control's apply block or a
  parser state).

p4c prints each as ``FILE(LINE): [--Wwarn=KIND] warning: MESSAGE``, then the source line as the C
preprocessor left it (runs of blanks inside a line made one) and carets under the culprit, in
groups: unused declarations, overflows, removal notes, invalid-header accesses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import Loc

SYSTEM_INCLUDE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "p4include")
_HEADER_METHODS = ("setValid", "setInvalid", "isValid")


@dataclass(frozen=True)
class Diagnostic:
    loc: Loc  # where the culprit starts
    width: int  # how many characters the carets cover
    option: str  # "unused", "overflow", "mismatch", "invalid-header", "removed"
    message: str
    level: str = "warning"  # "info", or "error" under --Werror
    cut: bool = False  # p4c echoes the line only up to the culprit's end (sized literals)
    origin: Loc | None = None  # the expression's start, when the carets point inside it

    def render(self, sources: dict[str, list[str]]) -> str:
        switch = {"info": "Winfo", "error": "Werror"}.get(self.level, "Wwarn")
        head = (f"{self.loc.file}({self.loc.line}): "
                f"[--{switch}={self.option}] {self.level}: {self.message}")
        lines = sources.get(self.loc.file)
        if not lines or not 0 < self.loc.line <= len(lines):
            return head
        line = lines[self.loc.line - 1]
        if self.cut:
            line = line[:self.loc.col - 1 + self.width]
        text, col = cpp_line(line, self.loc.col)
        return f"{head}\n{text}\n{' ' * (col - 1)}{'^' * max(self.width, 1)}"


def cpp_line(line: str, col: int) -> tuple[str, int]:
    """``line`` as cpp prints it (indentation and comments kept, inner blank runs one space, no
    trailing blanks) and where column ``col`` of the original lands in it."""
    raw = line.rstrip("\n")
    indent = len(raw) - len(raw.lstrip(" \t"))
    out, new_col, blank = raw[:indent], col, False
    for m in _CPP_PIECES.finditer(raw, indent):
        if m.lastgroup == "blank":  # one space between tokens
            blank = True
            continue
        if blank and len(out) > indent:
            out += " "
        blank = False
        if m.start() <= col - 1 < m.end():
            new_col = len(out) + (col - 1 - m.start()) + 1
        out += m.group()
    return out, new_col


# p4c runs cpp keeping comments (-C): only blank runs inside a line change.
_CPP_PIECES = re.compile(r"(?P<blank>[ \t]+)|(?P<text>[^ \t]+)")


def _is_system(loc: Loc) -> bool:
    return os.path.abspath(loc.file).startswith(SYSTEM_INCLUDE + os.sep) or loc.line == 0


def _name_col(sources: dict[str, list[str]], loc: Loc, name: str) -> Loc:
    """The position of ``name`` at or after ``loc`` on its line (a statement's location is
    where it starts; p4c points at the declared name)."""
    lines = sources.get(loc.file)
    if lines and 0 < loc.line <= len(lines):
        m = re.compile(rf"\b{re.escape(name)}\b").search(lines[loc.line - 1], loc.col - 1)
        if m:
            return Loc(loc.file, loc.line, m.start() + 1)
    return loc


class _References(A.NodeVisitor):
    """Every name the program refers to (expressions and types), by spelling."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: A.Name) -> None:
        self.names.add(node.name)

    def visit_TypeRef(self, node: A.TypeRef) -> None:
        self.names.add(node.name)
        self.generic_visit(node)


class _Declarations(A.NodeVisitor):
    """The declarations p4c reports when unused, in source order: (kind, name, loc, node)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str, Loc, A.Node]] = []

    def visit_VarDecl(self, node: A.VarDecl) -> None:
        self.found.append(("var", node.name, node.loc, node))
        self.generic_visit(node)

    def visit_TypedefDecl(self, node: A.TypedefDecl) -> None:
        self.found.append(("typedef", node.name, node.loc, node))

    def visit_ActionDecl(self, node: A.ActionDecl) -> None:
        self.found.append(("action", node.name, node.loc, node))
        self.generic_visit(node)

    def visit_Instance(self, node: A.Instance) -> None:
        self.found.append(("instance", node.name, node.loc, node))
        self.generic_visit(node)

    def visit_TableDecl(self, node: A.TableDecl) -> None:
        self.found.append(("table", node.name, node.loc, node))
        self.generic_visit(node)


def _no_warn(node: A.Node) -> bool:
    annos = getattr(node, "annos", None) or []
    return any(a.name == "noWarn" for a in annos)


def unused_declarations(prog: A.Program, sources: dict[str, list[str]]
                        ) -> tuple[list[Diagnostic], list[Diagnostic], set[str]]:
    """(unused warnings, table removal notes, names of the unused actions)."""
    refs = _References()
    refs.visit(prog)
    decls = _Declarations()
    decls.visit(prog)
    warnings: list[Diagnostic] = []
    removed: list[Diagnostic] = []
    unused_actions: set[str] = set()
    for kind, name, loc, node in decls.found:
        if name in refs.names or _is_system(loc) or _no_warn(node) or name == "main":
            continue
        at = _name_col(sources, loc, name)
        if kind == "action":
            unused_actions.add(name)
        if kind == "table":
            warnings.append(Diagnostic(at, len(name), "unused", f"table '{name}' is unused"))
            removed.append(Diagnostic(at, len(name), "removed", f"removing table '{name}'",
                                      "info"))
        else:
            warnings.append(Diagnostic(at, len(name), "unused", f"'{name}' is unused"))
    return warnings, removed, unused_actions


class _Overflows(A.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Diagnostic] = []

    def visit_Unary(self, node: A.Unary) -> None:
        lit, t = node.expr, node.type
        if (node.op == "-" and isinstance(lit, A.IntLit) and isinstance(t, T.BitT)
                and not t.signed and lit.width is None and not _is_system(node.loc)):
            self.found.append(Diagnostic(lit.loc, len(str(lit.value)), "mismatch",
                                         f"-{t.width}w{lit.value}: negative value with "
                                         "unsigned type", origin=node.loc))
            return
        self.generic_visit(node)

    def visit_IntLit(self, node: A.IntLit) -> None:
        t = node.type
        if not isinstance(t, T.BitT) or _is_system(node.loc):
            return
        width = t.width
        if node.value >= 1 << width:
            shown = f"0x{node.value:x}" if node.base == 16 else str(node.value)
            written = len(f"{node.width}w{shown}") if node.width is not None else len(shown)
            self.found.append(Diagnostic(node.loc, written, "overflow",
                                         f"{width}w{shown}: value does not fit in "
                                         f"{width} bits", cut=node.width is not None))


def _path(e: A.Expr) -> str | None:
    """``hdr.h`` for a header reached through names and members, else None."""
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.Member):
        inner = _path(e.expr)
        return f"{inner}.{e.name}" if inner is not None else None
    return None


class _InvalidHeaders(A.NodeVisitor):
    """Reads of fields of headers known invalid on every path to them, block by block."""

    def __init__(self, unused_actions: set[str]) -> None:
        self.found: list[Diagnostic] = []
        self.unused_actions = unused_actions
        self.invalid: set[str] = set()

    # -- where straight-line code starts: validity is unknown there --------------------------
    def visit_ActionDecl(self, node: A.ActionDecl) -> None:
        if node.name not in self.unused_actions and not _is_system(node.loc):
            self._fresh(node.body.stmts)

    def visit_ControlDecl(self, node: A.ControlDecl) -> None:
        for local in node.locals:
            self.visit(local)
        if node.body is not None and not _is_system(node.loc):
            self._fresh(node.body.stmts)

    def visit_ParserState(self, node: A.ParserState) -> None:
        if not _is_system(node.loc):
            self._fresh(node.stmts)

    def visit_FunctionDecl(self, node: A.FunctionDecl) -> None:
        return  # checked where inlined by p4c; not reported here

    def _fresh(self, stmts: list[A.Stmt]) -> None:
        self.invalid = set()
        self._stmts(stmts)

    # -- statements ---------------------------------------------------------------------------
    def _stmts(self, stmts: list[A.Stmt]) -> None:
        for s in stmts:
            self._stmt(s)

    def _stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Block):
            self._stmts(s.stmts)
        elif isinstance(s, A.CallStmt):
            self._call(s.call)
        elif isinstance(s, A.Assign):
            self._reads(s.rhs)
            self._written(s.lhs)
        elif isinstance(s, A.If):
            self._reads(s.cond)
            before = set(self.invalid)
            self._stmt(s.then)
            after_then, self.invalid = self.invalid, set(before)
            if s.other is not None:
                self._stmt(s.other)
            self.invalid &= after_then  # invalid only if so on both paths
        elif isinstance(s, A.VarDecl):
            if s.init is not None:
                self._reads(s.init)
        else:
            self.invalid = set()  # switch, loops, exit, return: not followed

    def _written(self, lhs: A.Expr) -> None:
        path = _path(lhs)
        if path is not None:
            self.invalid = {h for h in self.invalid if h != path and not h.startswith(path + ".")}

    def _call(self, c: A.Call) -> None:
        func = c.func
        if isinstance(func, A.Member) and func.name in _HEADER_METHODS and _is_header(
                func.expr.type):
            path = _path(func.expr)
            if path is not None and func.name == "setInvalid":
                self.invalid.add(path)
            elif path is not None and func.name == "setValid":
                self.invalid.discard(path)
            return
        for arg in c.args:
            if arg.expr is not None:
                self._reads(arg.expr)
        if not _is_counter_like(func):
            self.invalid = set()  # a table, action or other call may change any validity

    def _reads(self, e: A.Expr) -> None:
        if isinstance(e, A.Member) and _is_header(e.expr.type):
            path = _path(e.expr)
            if path in self.invalid:
                self.found.append(Diagnostic(e.expr.loc, len(path), "invalid-header",
                                             f"accessing a field of an invalid header {path}"))
                return
        if isinstance(e, A.Call):
            func = e.func
            if isinstance(func, A.Member) and func.name in _HEADER_METHODS:
                return
            for arg in e.args:
                if arg.expr is not None:
                    self._reads(arg.expr)
            return
        for child in e.children():
            if isinstance(child, A.Expr):
                self._reads(child)


def _is_header(t: object) -> bool:
    return isinstance(t, T.StructT) and t.kind == "header"


def _is_counter_like(func: A.Expr) -> bool:
    """Extern methods that only read their arguments (counters, meters, registers, hashes)."""
    return isinstance(func, A.Member) and func.name in ("count", "read", "write", "execute",
                                                         "execute_meter")


def p4c_warnings(prog: A.Program, sources: dict[str, list[str]]) -> list[list[Diagnostic]]:
    """Every warning p4c prints for the checked program ``prog``, grouped by the p4c pass that
    reports them, in p4c's order: sized literals that do not fit (the parser), unused
    declarations, other constants that do not fit, removal notes, invalid-header accesses.
    (With --Werror, p4c stops after the first group that had one.)"""
    unused, removed, unused_actions = unused_declarations(prog, sources)
    overflows = _Overflows()
    overflows.visit(prog)
    invalid = _InvalidHeaders(unused_actions)
    invalid.visit(prog)
    sized = [d for d in overflows.found if d.cut]
    folded = [d for d in overflows.found if not d.cut]
    return [sized, unused, folded, removed, invalid.found]
