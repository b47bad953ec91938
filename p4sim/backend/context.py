"""What every back-end converter shares: the program and its types, the pipeline JSON being
built, the names already given, and the ids handed out. Each converter owns the rest of its
state itself."""

from __future__ import annotations

import itertools
from typing import Any

from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend.typecheck import Checker


class LoweringContext:
    def __init__(self, checker: Checker, prog: A.Program, sources: dict[str, list[str]],
                 program_name: str) -> None:
        self.checker, self.prog = checker, prog
        self.sources, self.program_name = sources, program_name
        self.errors = {n: i for i, n in enumerate(checker.error_members)}  # error -> value
        self.globals_env = Env(None, "")
        # the pipeline (or checksum pseudo-pipeline) being lowered: its tables,
        # conditionals and action profiles are appended to it
        self.pipeline: Json = {"id": 0}
        self.table_names: set[str] = set()
        self.action_names: set[str] = set()
        self.cond_count = 0
        self.table_count = 0
        self.state_ids = itertools.count()

    def source_info(self, node: Any) -> Json:
        loc = node.loc
        lines = self.sources.get(loc.file)
        frag = ""
        if lines and 0 < loc.line <= len(lines):
            frag = lines[loc.line - 1][max(loc.col - 1, 0):].strip()[:80]
        return {"filename": loc.file, "line": loc.line, "column": loc.col,
                "source_fragment": frag}

    def next_cond_id(self) -> int:
        self.cond_count += 1
        return self.cond_count - 1

    def next_table_id(self) -> int:
        self.table_count += 1
        return self.table_count - 1

    def unique_table(self, base: str) -> str:
        return unique(base, self.table_names)

    def unique_action(self, base: str) -> str:
        return unique(base, self.action_names)


def unique(base: str, taken: set[str]) -> str:
    """`base`, or `base_N` with the first N not yet in `taken`; the name is then taken."""
    name, n = base, 0
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name
