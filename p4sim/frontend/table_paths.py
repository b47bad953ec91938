"""p4c's rule that no path through a control's apply block applies one table twice: BMv2
JSON gives each table one node in the pipeline graph, so a second application on the same
path would be an edge from the table back to itself. Applications on exclusive branches
(if/else, switch cases, after a `return` or `exit`) are allowed, as in p4c."""

from __future__ import annotations

from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError


class TablePathCheck(A.NodeVisitor):
    """Walks one apply block in execution order; `applied` holds the tables some path
    reaching the current statement has applied (the union over the paths), so applying one
    of them again means a path exists that applies it twice."""

    def __init__(self, control: A.ControlDecl) -> None:
        self.control = control
        self.applied: frozenset[int] = frozenset()

    def visit_Call(self, c: A.Call) -> None:
        self.generic_visit(c)  # the arguments are evaluated before the table runs
        target = c.target
        if target and target[0] == "table_apply":
            table = target[1]
            if id(table) in self.applied:
                raise CompileError(
                    table.loc, "Program can not be implemented on this target since it"
                    f" contains a path from table {self.control.name}.{table.name} back to"
                    " itself")
            self.applied |= {id(table)}

    def visit_If(self, s: A.If) -> None:
        self.visit(s.cond)
        before = self.applied
        self.visit(s.then)
        after_then, self.applied = self.applied, before
        if s.other is not None:
            self.visit(s.other)
        self.applied |= after_then

    def visit_Switch(self, s: A.Switch) -> None:
        self.visit(s.expr)
        before = self.applied
        reached = frozenset() if _has_default(s) else before
        for case in s.cases:
            if case.body is None:
                continue  # falls through to the next case's body
            self.applied = before
            self.visit(case.body)
            reached |= self.applied
        self.applied = reached

    def visit_Return(self, s: A.Return) -> None:
        self.generic_visit(s)
        self.applied = frozenset()  # no path continues past a return

    def visit_Exit(self, s: A.Exit) -> None:
        self.applied = frozenset()


def _has_default(s: A.Switch) -> bool:
    return any(isinstance(label, A.DefaultExpr) for case in s.cases for label in case.labels)


def check_table_paths(control: A.ControlDecl, applied: list[A.TableDecl]) -> None:
    """`applied`: the tables the checker saw applied in the body, in any order (a table seen
    twice may still be on exclusive paths; one seen once never needs the walk)."""
    if control.body is not None and len({id(t) for t in applied}) < len(applied):
        TablePathCheck(control).visit(control.body)
