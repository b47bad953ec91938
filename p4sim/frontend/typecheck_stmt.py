"""Statement and table typing (blocks, if, switch, exit/return, tables and their
properties)."""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError

_KEY_TYPES = (T.BitT, T.EnumT, T.NewT)


def _is_key_path(e: A.Expr) -> bool:
    """Keys p4c names by their text: field paths, slices of them, and isValid() calls."""
    if isinstance(e, A.Slice):
        e = e.expr
    if isinstance(e, A.Binary) and e.op == "&" and e.right.const is not None:
        e = e.left  # a field under a constant mask
    if isinstance(e, A.Call):
        return bool(e.target) and e.target[:2] == ("builtin", "isValid")
    while isinstance(e, (A.Member, A.Index)):
        e = e.expr
    return isinstance(e, A.Name)


class StmtChecker:
    check_expr: Any
    coerce: Any
    resolve_type: Any
    push: Any
    pop: Any
    declare: Any
    lookup: Any
    check_lvalue: Any
    check_var_decl: Any
    check_key_value: Any
    check_plain_args: Any
    const_int: Any
    scope: Any
    ctx: list[Any]
    match_kinds: set[str]

    def check_block(self, b: A.Block, new_scope: bool = True) -> None:
        if new_scope:
            self.push()
        for s in b.stmts:
            self.check_stmt(s)
        if new_scope:
            self.pop()

    def check_stmt(self, s: A.Stmt) -> None:
        self.visit(s)

    def visit_Block(self, s: A.Block) -> None:
        self.check_block(s)

    def visit_Assign(self, s: A.Assign) -> None:
        lt = self.check_expr(s.lhs)
        self.check_lvalue(s.lhs, "assignment")
        self.check_expr(s.rhs, lt)
        self.coerce(s.rhs, lt, "assignment")

    def visit_CallStmt(self, s: A.CallStmt) -> None:
        self.check_expr(s.call)

    def visit_If(self, s: A.If) -> None:
        ct = self.check_expr(s.cond)
        if ct != T.BOOL:
            raise CompileError(s.cond.loc, f"condition must be bool, got {ct}")
        self.check_stmt(s.then)
        if s.other is not None:
            self.check_stmt(s.other)

    def visit_Exit(self, s: A.Exit) -> None:
        if any(isinstance(c, (A.ParserDecl, A.FunctionDecl)) for c in self.ctx):
            raise CompileError(s.loc, "'exit' is not allowed in a parser or function")

    def visit_VarDecl(self, s: A.VarDecl) -> None:
        self.check_var_decl(s)

    def visit_EmptyStmt(self, s: A.EmptyStmt) -> None:
        pass

    def visit_Break(self, s: A.Break) -> None:
        self.loop_control(s, "break")

    def visit_Continue(self, s: A.Continue) -> None:
        self.loop_control(s, "continue")

    def loop_control(self, s: A.Stmt, word: str) -> None:
        if not self.loop_depth:
            raise CompileError(s.loc, f"'{word}' outside a loop")

    loop_depth = 0

    def visit_For(self, s: A.For) -> None:
        self.push()
        for x in s.init:
            self.check_stmt(x)
        if s.cond is not None:
            ct = self.check_expr(s.cond)
            if ct != T.BOOL:
                raise CompileError(s.cond.loc, f"condition must be bool, got {ct}")
        for x in s.updates:
            self.check_stmt(x)
        self.loop_depth += 1
        try:
            self.check_stmt(s.body)
        finally:
            self.loop_depth -= 1
        self.pop()

    def visit_Return(self, s: A.Return) -> None:
        fn = self.ctx[-1]
        if isinstance(fn, A.ParserDecl):
            raise CompileError(s.loc, "'return' is not allowed in a parser")
        if isinstance(fn, A.FunctionDecl):
            if fn.rret == T.VOID:
                if s.value is not None:
                    raise CompileError(s.loc, "a void function cannot return a value")
                return
            if s.value is None:
                raise CompileError(s.loc, f"function {fn.name} must return a {fn.rret}")
            self.check_expr(s.value, fn.rret)
            self.coerce(s.value, fn.rret, "return value")
        elif s.value is not None:
            raise CompileError(s.loc, "'return' in an action or control takes no value")

    def visit_Switch(self, s: A.Switch) -> None:
        t = self.check_expr(s.expr)
        seen: set[Any] = set()
        if isinstance(t, T.ObjT) and t.kind == "action_enum":
            table = t.decl
            names = {d.name for d, _, _ in table.action_list}
            for c in s.cases:
                for lab in c.labels:
                    if isinstance(lab, A.DefaultExpr):
                        key: Any = "default"
                    elif isinstance(lab, A.Name) and lab.name in names:
                        key = lab.name
                        lab.decl = next(d for d, _, _ in table.action_list if d.name == key)
                    else:
                        raise CompileError(lab.loc, f"'{getattr(lab, 'name', '?')}' is not an"
                                           f" action of table {table.name}")
                    if key in seen:
                        raise CompileError(lab.loc, f"duplicate switch label '{key}'")
                    seen.add(key)
                if c.body is not None:
                    self.check_block(c.body)
            s.kind = "action_run"
            return
        if not isinstance(t, (T.BitT, T.EnumT, T.NewT)) and t != T.ERROR:
            raise CompileError(s.expr.loc, f"cannot switch on a value of type {t}")
        for c in s.cases:
            for lab in c.labels:
                if isinstance(lab, A.DefaultExpr):
                    key = "default"
                else:
                    self.check_expr(lab, t)
                    self.coerce(lab, t, "switch label")
                    key = lab.const
                    if key is None:
                        raise CompileError(lab.loc, "switch label must be a compile-time"
                                           " constant")
                if key in seen:
                    raise CompileError(lab.loc, "duplicate switch label")
                seen.add(key)
            if c.body is not None:
                self.check_block(c.body)
        s.kind = "value"

    # ---- tables -------------------------------------------------------------------------------
    def visit_TableDecl(self, t: A.TableDecl) -> None:
        self.declare(t.name, t, t.loc)
        props: dict[str, A.TableProperty] = {}
        for p in t.props:
            if p.name in props:
                raise CompileError(p.loc, f"duplicate table property '{p.name}'")
            props[p.name] = p
        t.prop_map = props
        t.keys = []
        if "key" in props:
            for k in props["key"].value:
                kt = self.check_expr(k.expr)
                if not isinstance(kt, _KEY_TYPES) and kt not in (T.BOOL, T.ERROR):
                    raise CompileError(k.loc, f"cannot match on a value of type {kt}")
                if k.match_kind not in self.match_kinds:
                    raise CompileError(k.mk_loc, f"unknown match kind '{k.match_kind}'")
                if not _is_key_path(k.expr) and not A.anno(k.annos, "name"):
                    raise CompileError(k.loc, "a complex key expression needs a @name"
                                       " annotation")
                if k.match_kind == "lpm" and any(x.match_kind == "lpm" for x in t.keys):
                    raise CompileError(k.mk_loc, f"table {t.name} has more than one lpm key")
                t.keys.append(k)
        if "actions" not in props:
            raise CompileError(t.loc, f"table {t.name} has no 'actions' property")
        t.action_list = []
        for annos, ae in props["actions"].value:
            act, call = self.table_action_ref(t, ae, full=False)
            if any(d is act for d, _, _ in t.action_list):
                raise CompileError(ae.loc, f"action {act.name} appears twice in table {t.name}")
            t.action_list.append((act, call, annos))
        t.default = None
        if "default_action" in props:
            dp = props["default_action"]
            act, call = self.table_action_ref(t, dp.value, full=True)
            annos = next((an for a, _, an in t.action_list if a is act), [])
            if A.anno(annos, "tableonly"):
                raise CompileError(dp.value.loc, f"action {act.name} is @tableonly and cannot be"
                                   " the default action")
            t.default = (act, call, dp.const)
        else:
            noaction = self.lookup("NoAction", t.loc)
            if not any(d is noaction for d, _, _ in t.action_list):
                t.action_list.append((noaction, None, [A.Annotation(t.loc, "defaultonly")]))
            t.default = (noaction, None, False)
        t.size = None
        if "size" in props:
            t.size = self.const_int(props["size"].value, "table size")
        t.entries = []
        if "entries" in props and "key" in props and t.props.index(props["entries"]) < (
                t.props.index(props["key"])):
            raise CompileError(props["entries"].loc, "table entries must come after the key")
        if "entries" in props:
            for ent in props["entries"].value:
                self.check_entry(t, ent)
                t.entries.append(ent)
        t.synthetic = []
        for pname in ("implementation", "counters", "meters"):
            if pname in props:
                v = props[pname].value
                if isinstance(v, A.Call) and isinstance(v.func, A.Name):
                    v = props[pname].value = self.inline_instance(t, props[pname], v)
                vt = self.check_expr(v)
                want = {"implementation": ("action_profile", "action_selector"),
                        "counters": ("direct_counter",), "meters": ("direct_meter",)}[pname]
                if not (isinstance(vt, T.ObjT) and vt.kind == "extern"
                        and vt.decl.name in want) and not isinstance(v, A.Call):
                    raise CompileError(v.loc, f"table property '{pname}' must name a"
                                       f" {' or '.join(want)} instance")
        if "support_timeout" in props:
            self.check_expr(props["support_timeout"].value, T.BOOL)
            if props["support_timeout"].value.type != T.BOOL:
                raise CompileError(props["support_timeout"].loc, "support_timeout must be bool")

    def inline_instance(self, t: A.TableDecl, prop: A.TableProperty, call: A.Call) -> A.Name:
        """`implementation = action_selector(...)`: an instance declared on the spot, named by
        the property's @name (as p4c does) or after the table."""
        assert isinstance(call.func, A.Name)
        a = A.anno(prop.annos, "name")
        name = str(a.args[0]) if a and a.args else f"{t.name}_{prop.name}"
        annos = [A.Annotation(prop.loc, "name", ["." + name.lstrip(".")])] if a else []
        annos += [x for x in prop.annos if x.name != "name"]  # e.g. @max_group_size
        inst = A.Instance(call.loc, annos, f"{t.name}.{prop.name}",
                          A.TypeRef(call.func.loc, call.func.name, call.type_args), call.args)
        self.check_instance(inst)
        t.synthetic.append(inst)
        ref = A.Name(call.loc, inst.name)
        return ref

    check_instance: Any

    def table_action_ref(self, t: A.TableDecl, e: A.Expr, full: bool
                         ) -> tuple[A.ActionDecl, A.Call | None]:
        name_e = e.func if isinstance(e, A.Call) else e
        if not isinstance(name_e, A.Name):
            raise CompileError(e.loc, "expected an action name")
        d = self.lookup(name_e.name, name_e.loc, name_e.top)
        name_e.decl = d
        if not isinstance(d, A.ActionDecl):
            raise CompileError(name_e.loc, f"'{name_e.name}' is not an action")
        if full and t.action_list is not None and not any(a is d for a, _, _ in t.action_list):
            raise CompileError(name_e.loc, f"action {d.name} is not in the actions list of"
                               f" table {t.name}")
        directional = [p for p in d.params if p.direction]
        params = d.params if full else directional
        if not isinstance(e, A.Call):
            if full and d.params:
                raise CompileError(e.loc, f"action {d.name} expects {len(d.params)} arguments,"
                                   " got 0")
            if directional:
                raise CompileError(e.loc, f"action {d.name} needs arguments for its"
                                   " directional parameters")
            return d, None
        self.check_plain_args(e.loc, d.name, params, e.args)
        if full:
            for a, p in zip(e.args, d.params):
                if not p.direction and (a.expr is None or a.expr.const is None):
                    raise CompileError(a.loc, f"action argument '{p.name}' must be a"
                                       " compile-time constant")
        e.target = ("action", d)
        e.type = T.VOID
        return d, e

    def check_entry(self, t: A.TableDecl, ent: A.TableEntry) -> None:
        if len(ent.keys) != len(t.keys):
            raise CompileError(ent.loc, f"entry has {len(ent.keys)} key values, table {t.name}"
                               f" has {len(t.keys)} keys")
        for kv, k in zip(ent.keys, t.keys):
            self.check_key_value(kv, k.expr.type)
            if k.match_kind == "exact" and (isinstance(kv, A.DefaultExpr) or (
                    isinstance(kv, A.Binary) and kv.op in ("&&&", ".."))):
                raise CompileError(kv.loc, "an exact key needs a single value")
        act, _ = self.table_action_ref(t, ent.action, full=True)
        ent.act = act
        annos = next((an for a, _, an in t.action_list if a is act), [])
        if A.anno(annos, "defaultonly"):
            raise CompileError(ent.action.loc, f"action {act.name} is @defaultonly and cannot"
                               " be used in an entry")
        ent.prio = None
        if ent.priority is not None:
            ent.prio = self.const_int(ent.priority, "entry priority")
            if all(k.match_kind in ("exact", "lpm") for k in t.keys):
                raise CompileError(ent.priority.loc, f"table {t.name} has no ternary, range or"
                                   " optional key: its entries take no priority")
        ent.raw_prio = None
        a = A.anno(ent.annos, "priority")
        if ent.priority is None and a and a.args and isinstance(a.args[0], int):
            # the older annotation form: p4c passes its value to BMv2 as it is (there, the
            # smaller value wins), not as a P4 priority where the larger wins
            ent.raw_prio = a.args[0]
