"""Checking the package instance (`V1Switch(...) main;`): p4c's rules and messages for the
number of its arguments and for each argument's type against its parameter's."""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError
from p4sim.frontend.typecheck_call import order_args


class PackageChecker:
    # Provided by the checker.
    lookup: Any
    push: Any
    pop: Any
    scope: Any
    resolve_type: Any

    def check_package(self, d: A.Instance, decl: A.PackageDecl) -> None:
        _check_package_arity(d, decl)
        order_args(d.loc, decl.name, d.args, decl.params)
        self.main_pkg = decl
        self.pkg_bind: dict[str, T.Type] = {}
        for a, p in zip(d.args, decl.params):
            self.check_package_arg(a, p)

    def check_package_arg(self, a: A.Arg, p: A.Param) -> None:
        e = a.expr
        if not (isinstance(e, A.Call) and isinstance(e.func, A.Name)):
            raise CompileError(a.loc, f"package argument for '{p.name}' must instantiate a"
                               " parser or control")
        d = self.lookup(e.func.name, e.func.loc)
        self.push("call")
        for tp in self.main_pkg.type_params:
            self.scope.names[tp] = T.TypeVar(tp, id(self.main_pkg))
        want = self.resolve_type(p.type_syntax)
        self.pop()
        assert isinstance(want, T.ObjT)
        kind = "parser" if isinstance(d, A.ParserDecl) else (
            "control" if isinstance(d, A.ControlDecl) else None)
        proto = want.decl
        # p4c's wording for an argument that does not unify with the parameter's type
        generic = "<...>" if proto.type_params else ""
        mismatch = CompileError(a.loc, f"Type of argument '{d.name}' ({kind or 'object'}"
                                f" {d.name}) does not match type of parameter '{p.name}'"
                                f" ({want.kind} {proto.name}{generic})")
        if kind != want.kind or getattr(d, "is_type", True) or len(d.params) != len(
                proto.params) or any(
                mine.direction != theirs.direction
                or _extern_name(theirs) != _extern_name(mine)
                for mine, theirs in zip(d.params, proto.params)):
            raise mismatch
        # Parameter types must match the prototype, with the package's type variables (H, M)
        # bound consistently across all its arguments.
        self.push("call")
        for tp in proto.type_params:
            self.scope.names[tp] = want.targs.get(tp) or T.TypeVar(tp, id(proto))
        proto_types = [self.resolve_type(q.type_syntax) for q in proto.params]
        self.pop()
        for mine, pt in zip(d.params, proto_types):
            have = mine.rtype
            if isinstance(pt, T.TypeVar):
                bound = self.pkg_bind.setdefault(pt.name, have)
                ok = bound == have or (isinstance(bound, T.StructT)
                                       and isinstance(have, T.StructT)
                                       and bound.name == have.name)
            elif isinstance(pt, T.ObjT):
                ok = isinstance(have, T.ObjT) and have.decl is pt.decl
            else:
                ok = pt == have or (isinstance(pt, T.StructT) and isinstance(have, T.StructT)
                                    and pt.name == have.name)
            if not ok:
                raise mismatch
        e.target = ("instantiate", d)
        e.type = T.ObjT(kind, d)


def _check_package_arity(d: A.Instance, decl: A.PackageDecl) -> None:
    """p4c's messages for a package instantiated with too many or too few arguments, at the
    instance's name."""
    params = decl.params
    named = {a.name for a in d.args if a.name}
    if named:
        missing = [p for p in params if p.name not in named and p.default is None]
    elif len(d.args) > len(params):
        raise CompileError(d.loc, f"{decl.name}: {len(d.args)} arguments supplied while"
                           f" {len(params)} are expected")
    else:
        missing = [p for p in params[len(d.args):] if p.default is None]
    if missing:
        raise CompileError(d.loc, f"{missing[0].name}: No argument supplied for parameter")


def _extern_name(p: A.Param) -> str | None:
    ts = p.type_syntax
    if isinstance(ts, A.TypeRef) and ts.name in ("packet_in", "packet_out"):
        return ts.name
    return None
