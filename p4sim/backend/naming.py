"""p4c's naming: fully-qualified control-plane names (with `@name`) and key names taken from
the key expression's text."""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A


def qualify(decl: Any, prefix: str) -> str:
    a = A.anno(decl.annos, "name")
    local = decl.name
    if a and a.args and isinstance(a.args[0], str):
        local = a.args[0]
        if local.startswith("."):
            return local[1:]
    return f"{prefix}.{local}" if prefix else local


def expr_text(e: A.Expr) -> str:
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.Member):
        # a struct field's @name renames it in key names; ".x" starts the path afresh
        st = e.expr.type
        decl = getattr(st, "decl", None)
        if isinstance(decl, A.HeaderDecl):
            fd = next((f for f in decl.fields if f.name == e.name), None)
            a = A.anno(fd.annos, "name") if fd is not None else None
            if a and a.args and isinstance(a.args[0], str):
                if a.args[0].startswith("."):
                    return a.args[0][1:]
                return f"{expr_text(e.expr)}.{a.args[0]}"
        return f"{expr_text(e.expr)}.{e.name}"
    if isinstance(e, A.Index):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, A.IntLit):
        digits = {16: f"0x{e.value:x}", 2: f"0b{e.value:b}", 8: f"0o{e.value:o}"}.get(
            e.base, str(e.value))
        return (f"{e.width}{'s' if e.signed else 'w'}" if e.width else "") + digits
    if isinstance(e, A.Binary):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    if isinstance(e, A.Unary):
        return f"{e.op}{expr_text(e.expr)}"
    if isinstance(e, A.Slice):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, A.Call):
        if e.target and e.target[:2] == ("builtin", "isValid"):
            return f"{expr_text(e.target[2])}.$valid$"  # p4c's name for validity keys
        return f"{expr_text(e.func)}()"
    return "expr"
