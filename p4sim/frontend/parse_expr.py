"""Recursive-descent parsing of P4_16 types, expressions and statements (a mixin for Parser).

P4's `<` ambiguity is resolved the way the grammar intends: an identifier followed by `<` opens
type arguments only when the identifier names a type (the parser tracks type names as they are
declared) or when the bracketed text parses as types and is followed by `(` (generic calls).
"""

from __future__ import annotations

from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError
from p4sim.frontend.lexer import Token

# Binary operator precedence, lowest first. Unlike C, P4's bitwise operators bind tighter
# than comparisons (`a & 1 == 0` is `(a & 1) == 0`), and `++` sits with `+` and `-`.
_BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("|",), ("^",), ("&",),
    ("<<", ">>"), ("++", "+", "-", "|+|", "|-|"), ("*", "/", "%"),
]
_TYPE_KWS = ("bit", "int", "varbit", "bool", "error", "string", "void", "tuple")


def _literal_base(text: str) -> int:
    body = text.split("w", 1)[-1].split("s", 1)[-1] if any(c in text for c in "ws") else text
    return {"0x": 16, "0X": 16, "0b": 2, "0B": 2, "0o": 8, "0O": 8}.get(body[:2], 10)


class ExprParser:
    toks: list[Token]
    pos: int
    type_names: list[set[str]]

    # ---- token helpers ------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[min(self.pos, len(self.toks) - 1)]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.kind in ("op", "kw", "id") and t.text == text

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            t = self.tok
            self.pos += 1
            return t
        return None

    def expect(self, text: str) -> Token:
        if self.at(text):
            t = self.tok
            self.pos += 1
            return t
        raise self.syntax(f"expected '{text}'")

    def syntax(self, what: str) -> CompileError:
        t = self.tok
        found = "end of file" if t.kind == "eof" else f"'{t.text}'"
        return CompileError(t.loc, f"syntax error: {what}, found {found}")

    def ident(self) -> Token:
        t = self.tok
        # Contextual keywords of P4 (`key`, `actions`, `entries`, `apply`...) are names too.
        if t.kind == "id" or (t.kind == "kw" and t.text in ("apply", "state", "type")):
            self.pos += 1
            return t
        raise self.syntax("expected an identifier")

    def is_type_name(self, name: str) -> bool:
        return any(name in s for s in self.type_names)

    # ---- types --------------------------------------------------------------------------------
    def starts_type(self, k: int = 0) -> bool:
        t = self.peek(k)
        if t.kind == "kw":
            return t.text in _TYPE_KWS
        if t.kind == "op" and t.text == "." and self.peek(k + 1).kind == "id":
            return self.is_type_name(self.peek(k + 1).text)
        return t.kind == "id" and (self.is_type_name(t.text) or t.text == "_")

    def parse_type(self) -> A.TypeSyntax:
        t = self.tok
        if t.kind == "kw" and t.text in ("bit", "int", "varbit"):
            self.pos += 1
            width: A.Expr | None = None
            if self.at("<"):
                self.pos += 1
                width = self.parse_width()
                self.close_angle()
            elif t.text in ("bit",):
                width = A.IntLit(t.loc, 1)
            elif t.text == "varbit":
                raise self.syntax("expected '<' after varbit")
            ty: A.TypeSyntax = A.BitTypeSyntax(t.loc, width, t.text == "int",
                                               t.text == "varbit")
        elif t.kind == "kw" and t.text == "tuple":
            self.pos += 1
            ty = A.TupleTypeSyntax(t.loc, self.type_args())
        elif t.kind == "kw" and t.text in ("bool", "error", "string", "void", "match_kind"):
            self.pos += 1
            ty = A.BaseTypeSyntax(t.loc, t.text)
        elif t.kind == "id" and t.text == "_":
            self.pos += 1
            ty = A.BaseTypeSyntax(t.loc, "_")
        else:
            self.accept(".")
            name = self.ident()
            args = self.type_args() if self.at("<") else []
            ty = A.TypeRef(name.loc, name.text, args)
        while self.at("["):
            self.pos += 1
            size = self.parse_expr()
            self.expect("]")
            ty = A.StackTypeSyntax(ty.loc, ty, size)
        return ty

    def parse_width(self) -> A.Expr:
        if self.at("("):
            self.pos += 1
            e = self.parse_expr()
            self.expect(")")
            return e
        t = self.tok
        if t.kind == "int":
            self.pos += 1
            return A.IntLit(t.loc, int(t.value), t.width, t.signed,  # type: ignore[arg-type]
                            _literal_base(t.text))
        name = self.ident()
        return A.Name(name.loc, name.text)

    def close_angle(self) -> None:
        self.expect(">")

    def type_args(self) -> list[A.TypeSyntax]:
        self.expect("<")
        args = [self.parse_type_or_dontcare()]
        while self.accept(","):
            args.append(self.parse_type_or_dontcare())
        self.close_angle()
        return args

    def parse_type_or_dontcare(self) -> A.TypeSyntax:
        if self.tok.kind == "int":  # a numeric type argument is not P4_16
            raise self.syntax("expected a type")
        return self.parse_type()

    def try_generic_args(self) -> list[A.TypeSyntax] | None:
        """At `<`: type arguments of a generic call, or None (then it is a comparison)."""
        save = self.pos
        if not self.starts_type(1):
            return None
        try:
            args = self.type_args()
        except CompileError:
            self.pos = save
            return None
        if not self.at("("):
            self.pos = save
            return None
        return args

    # ---- expressions --------------------------------------------------------------------------
    def parse_expr(self) -> A.Expr:
        cond = self.parse_binary(0)
        if self.at("?"):
            q = self.expect("?")
            then = self.parse_expr()
            self.expect(":")
            other = self.parse_expr()
            return A.Ternary(q.loc, cond, then, other)
        return cond

    def parse_binary(self, level: int) -> A.Expr:
        if level == len(_BINARY_LEVELS):
            return self.parse_unary()
        left = self.parse_binary(level + 1)
        ops = _BINARY_LEVELS[level]
        while True:
            t = self.tok
            op = t.text if t.kind == "op" else None
            if op == ">" and t.adjacent and self.peek().text == ">":
                op = ">>"
            if op not in ops or self.compound_assign_op() is not None:
                return left
            self.pos += 2 if (op == ">>" and t.text == ">") else 1
            right = self.parse_binary(level + 1)
            left = A.Binary(left.loc, op, left, right)
            left.op_loc = t.loc

    def parse_unary(self) -> A.Expr:
        t = self.tok
        if t.kind == "op" and t.text in ("!", "~", "-", "+"):
            self.pos += 1
            return A.Unary(t.loc, t.text, self.parse_unary())
        if t.kind == "op" and t.text == "(" and self._is_cast():
            self.pos += 1
            to = self.parse_type()
            self.expect(")")
            return A.Cast(t.loc, to, self.parse_unary())
        return self.parse_postfix(self.parse_primary())

    def _is_cast(self) -> bool:
        nxt = self.peek()
        if nxt.kind == "kw" and nxt.text in ("bit", "int", "varbit", "bool", "error"):
            return True
        if nxt.kind == "id" and self.is_type_name(nxt.text):
            after = self.peek(2)
            return after.text in (")", "<")
        return False

    def parse_primary(self) -> A.Expr:
        t = self.tok
        if t.kind == "int":
            self.pos += 1
            return A.IntLit(t.loc, int(t.value), t.width, t.signed,  # type: ignore[arg-type]
                            _literal_base(t.text))
        if t.kind == "kw" and t.text in ("true", "false"):
            self.pos += 1
            return A.BoolLit(t.loc, t.text == "true")
        if t.kind == "str":
            self.pos += 1
            return A.StrLit(t.loc, str(t.value))
        if t.kind == "op" and t.text == "(":
            self.pos += 1
            e = self.parse_expr()
            self.expect(")")
            return e
        if t.kind == "op" and t.text == "{":
            return self.parse_brace_list()
        if t.kind == "kw" and t.text == "default":
            self.pos += 1
            return A.DefaultExpr(t.loc)
        if t.kind == "id" and t.text == "_":
            self.pos += 1
            return A.DefaultExpr(t.loc)
        if t.kind == "op" and t.text == ".":
            self.pos += 1
            name = self.ident()
            return A.Name(t.loc, name.text, top=True)
        if t.kind == "kw" and t.text == "error":
            self.pos += 1
            return A.Name(t.loc, "error")
        if t.kind == "kw" and t.text in ("bit", "int", "varbit", "bool"):
            return A.TypeExpr(t.loc, self.parse_type())
        if t.kind == "id" or (t.kind == "kw" and t.text in ("apply", "type")):
            self.pos += 1
            if self.at("<") and self.is_type_name(t.text) and self.starts_type(1):
                return A.TypeExpr(t.loc, A.TypeRef(t.loc, t.text, self.type_args()))
            return A.Name(t.loc, t.text)
        raise self.syntax("expected an expression")

    def parse_brace_list(self) -> A.Expr:
        lb = self.expect("{")
        if self.tok.kind == "id" and self.peek().text == "=" and self.peek(2).text != "=":
            fields: list[tuple[str, A.Expr]] = []
            while not self.at("}"):
                name = self.ident()
                self.expect("=")
                fields.append((name.text, self.parse_expr()))
                if not self.accept(","):
                    break
            self.expect("}")
            return A.StructInit(lb.loc, fields)
        items: list[A.Expr] = []
        while not self.at("}"):
            items.append(self.parse_expr())
            if not self.accept(","):
                break
        self.expect("}")
        return A.ListExpr(lb.loc, items)

    def parse_postfix(self, e: A.Expr) -> A.Expr:
        while True:
            t = self.tok
            if t.kind != "op":
                return e
            if t.text == ".":
                self.pos += 1
                name = self.ident() if self.tok.kind != "kw" else self._kw_member()
                e = A.Member(e.loc, e, name.text)
                e.name_loc = name.loc
            elif t.text == "[":
                self.pos += 1
                idx = self.parse_expr()
                if self.accept(":"):
                    lo = self.parse_expr()
                    self.expect("]")
                    e = A.Slice(e.loc, e, idx, lo)
                else:
                    self.expect("]")
                    e = A.Index(t.loc, e, idx)
            elif t.text == "(":
                e = A.Call(e.loc, e, [], self.parse_args())
            elif t.text == "<" and isinstance(e, (A.Name, A.Member)):
                targs = self.try_generic_args()
                if targs is None:
                    return e
                e = A.Call(e.loc, e, targs, self.parse_args())
            else:
                return e

    def _kw_member(self) -> Token:
        t = self.tok
        self.pos += 1
        return t

    def parse_args(self) -> list[A.Arg]:
        self.expect("(")
        args: list[A.Arg] = []
        while not self.at(")"):
            t = self.tok
            name = None
            if t.kind == "id" and self.peek().text == "=" and self.peek(2).text != "=":
                name = t.text
                self.pos += 2
            if self.tok.kind == "id" and self.tok.text == "_" and self.peek().text in (",", ")"):
                self.pos += 1
                args.append(A.Arg(t.loc, None, name))
            else:
                args.append(A.Arg(self.tok.loc, self.parse_expr(), name))
            if not self.accept(","):
                break
        self.expect(")")
        return args

    def parse_keyset(self) -> A.Expr:
        """A select/entry keyset element: expression, mask (&&&), range (..), default, _."""
        e = self.parse_expr()
        t = self.tok
        if t.kind == "op" and t.text in ("&&&", ".."):
            self.pos += 1
            return A.Binary(e.loc, t.text, e, self.parse_expr())
        return e

    # ---- statements ---------------------------------------------------------------------------
    def compound_assign_op(self) -> tuple[str, int] | None:
        """At `op=` (`+=`, `<<=`, `>>=`, `|+|=`...): the operator and its token count."""
        t = self.tok
        if t.kind != "op" or not t.adjacent:
            return None
        if t.text in ("+", "-", "*", "/", "%", "&", "|", "^", "<<", "|+|", "|-|", "++") and (
                self.peek().text == "="):
            return t.text, 2
        if t.text == ">" and self.peek().text == ">" and self.peek().adjacent and (
                self.peek(2).text == "="):
            return ">>", 3
        return None

    def parse_annotations(self) -> list[A.Annotation]:
        annos: list[A.Annotation] = []
        while self.at("@"):
            at = self.expect("@")
            name = self.tok
            self.pos += 1
            args: list[object] = []
            body: list[str] = []
            if self.at("(") and self.tok.loc.line == name.loc.line:
                self.pos += 1
                depth = 0
                while depth > 0 or not self.at(")"):
                    a = self.tok
                    if a.kind == "eof":
                        raise self.syntax("expected ')'")
                    if a.text in ("(", "[", "{"):
                        depth += 1
                    elif a.text in (")", "]", "}"):
                        depth -= 1
                    if a.kind in ("int", "str"):
                        args.append(a.value)
                    elif a.text != ",":
                        args.append(a.text)
                    body.append(a.text + ("" if a.text in ("(", "[", "{") else " ")
                                if a.text == "," else a.text)
                    self.pos += 1
                self.expect(")")
            elif self.at("["):
                self.pos += 1
                depth = 0
                while depth > 0 or not self.at("]"):
                    if self.tok.text == "[":
                        depth += 1
                    elif self.tok.text == "]":
                        depth -= 1
                    self.pos += 1
                self.expect("]")
            annos.append(A.Annotation(at.loc, name.text, args, "".join(body)))
        return annos
