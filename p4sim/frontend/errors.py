"""Source locations and the one error type every compiler pass raises."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loc:
    """A position in a source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Loc("<builtin>", 0, 0)


class CompileError(Exception):
    """A rejected program: where and what. `unsupported` marks valid P4 we do not handle."""

    def __init__(self, loc: Loc | None, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.loc = loc or NOWHERE
        self.message = ("unsupported: " + message) if unsupported else message

    def render(self, sources: dict[str, list[str]], fallback: str = "",
               kind: str = "error") -> str:
        """p4c-style text: `FILE:LINE:COL: error: MESSAGE`, then the line and a caret
        (`FILE: error: MESSAGE` for whole-program errors); `kind` "warning" for a warning."""
        if self.loc is NOWHERE or self.loc.line == 0:
            return f"{fallback or self.loc.file}: {kind}: {self.message}"
        head = f"{self.loc}: {kind}: {self.message}"
        lines = sources.get(self.loc.file)
        if lines and 0 < self.loc.line <= len(lines):
            text = lines[self.loc.line - 1].rstrip("\n").expandtabs(1)
            caret = " " * max(self.loc.col - 1, 0) + "^"
            return f"{head}\n{text}\n{caret}"
        return head


def unsupported(loc: Loc | None, what: str) -> CompileError:
    return CompileError(loc, what, unsupported=True)
