"""Statement parsing: blocks, if/switch/for, declarations, assignments and calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError
from p4sim.frontend.parse_expr import _TYPE_KWS, ExprParser

Item = TypeVar("Item")


class StmtParser(ExprParser):
    def parse_braced(self, parse_item: Callable[[], Item]) -> list[Item]:
        """`{ ITEM ITEM ... }`: the items up to the closing brace."""
        self.expect("{")
        items: list[Item] = []
        while not self.at("}"):
            items.append(parse_item())
        self.expect("}")
        return items

    def parse_block(self) -> A.Block:
        lb = self.expect("{")
        stmts: list[A.Stmt] = []
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise self.syntax("expected '}'")
            stmts.append(self.parse_stmt())
        self.expect("}")
        return A.Block(lb.loc, stmts)

    def parse_stmt(self) -> A.Stmt:
        annos = self.parse_annotations()
        t = self.tok
        if t.kind == "op" and t.text == "{":
            return self.parse_block()
        if t.kind == "op" and t.text == ";":
            self.pos += 1
            return A.EmptyStmt(t.loc)
        if t.kind == "kw":
            if t.text == "if":
                self.pos += 1
                self.expect("(")
                cond = self.parse_expr()
                self.expect(")")
                then = self.parse_stmt()
                other = self.parse_stmt() if self.accept("else") else None
                return A.If(t.loc, cond, then, other)
            if t.text == "exit":
                self.pos += 1
                self.expect(";")
                return A.Exit(t.loc)
            if t.text == "return":
                self.pos += 1
                value = None if self.at(";") else self.parse_expr()
                self.expect(";")
                return A.Return(t.loc, value)
            if t.text == "switch":
                return self.parse_switch()
            if t.text == "const":
                self.pos += 1
                return self.parse_var_decl(annos, const=True)
        if t.kind == "id" and t.text == "for" and self.peek().text == "(":
            return self.parse_for()
        if t.kind == "id" and t.text in ("break", "continue") and self.peek().text == ";":
            self.pos += 2
            return A.Break(t.loc) if t.text == "break" else A.Continue(t.loc)
        if self._starts_var_decl():
            return self.parse_var_decl(annos)
        s = self.parse_assign_or_call()
        self.expect(";")
        return s

    def parse_assign_or_call(self) -> A.Stmt:
        """`lhs = e`, `lhs op= e` or a call, without the terminating `;`."""
        lhs = self.parse_expr()
        cop = self.compound_assign_op()
        if cop is not None:  # `x += e` is `x = x + e`
            op, n = cop
            t = self.tok
            self.pos += n
            rhs = self.parse_expr()
            return A.Assign(lhs.loc, lhs, A.Binary(t.loc, op, lhs, rhs))
        if self.at("="):
            self.pos += 1
            rhs = self.parse_expr()
            return A.Assign(lhs.loc, lhs, rhs)
        if not isinstance(lhs, A.Call):
            raise CompileError(lhs.loc, "syntax error: expected an assignment or a call")
        return A.CallStmt(lhs.loc, lhs)

    def parse_for(self) -> A.For:
        """`for (init, ...; cond; update, ...) stmt` (P4_16 1.2.5). The range form
        `for (T x in a .. b)` is not supported."""
        t = self.tok
        self.pos += 2  # `for (`
        init: list[A.Stmt] = []
        while not self.at(";"):
            if init:
                self.expect(",")
            if self._starts_var_decl():
                init.append(self.parse_var_decl([], end=None))
            else:
                init.append(self.parse_assign_or_call())
            if self.at("in"):
                raise CompileError(self.tok.loc, "unsupported: 'for ... in' loops")
        self.expect(";")
        cond = None if self.at(";") else self.parse_expr()
        self.expect(";")
        updates: list[A.Stmt] = []
        while not self.at(")"):
            if updates:
                self.expect(",")
            updates.append(self.parse_assign_or_call())
        self.expect(")")
        body = self.parse_stmt()
        return A.For(t.loc, init, cond, updates, body)

    def _starts_var_decl(self) -> bool:
        t = self.tok
        if t.kind == "kw" and t.text in _TYPE_KWS:
            return True
        if t.kind == "id" and self.is_type_name(t.text):
            nxt = self.peek()
            return nxt.kind == "id" or nxt.text in ("<", "[")
        return False

    def parse_var_decl(self, annos: list[A.Annotation], const: bool = False,
                       end: str | None = ";") -> A.VarDecl:
        ty = self.parse_type()
        name = self.ident()
        init = None
        if self.accept("="):
            init = self.parse_expr()
        elif const:
            raise self.syntax("expected '='")
        if end:
            self.expect(end)
        return A.VarDecl(name.loc, annos, ty, name.text, init, const)

    def parse_switch(self) -> A.Switch:
        t = self.expect("switch")
        self.expect("(")
        e = self.parse_expr()
        self.expect(")")
        return A.Switch(t.loc, e, self.parse_braced(self.parse_switch_case))

    def parse_switch_case(self) -> A.SwitchCase:
        label = self.parse_expr()
        self.expect(":")
        body = self.parse_block() if self.at("{") else None
        return A.SwitchCase(label.loc, [label], body)
