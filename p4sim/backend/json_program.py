"""Builds the whole BMv2 JSON document for a type-checked v1model program: header layout
(scalars, standard_metadata, user headers/stacks), extern instances, actions, and the parser,
pipelines, deparser and checksums via the lowering mixins."""

from __future__ import annotations

import itertools
from typing import Any

from p4sim.backend.json_control import ControlLowering
from p4sim.backend.json_expr import Env
from p4sim.backend.json_externs import ExternLowering
from p4sim.backend.json_layout import StorageLayout
from p4sim.backend.json_parser import ParserLowering
from p4sim.backend.model import ActionModel, ControlPlaneModel, InstanceModel, TableModel
from p4sim.backend.naming import qualify
from p4sim.backend.refs import (
    DataRef,
    FieldRef,
    Json,
    ObjRef,
    Ref,
    StructRef,
    d2b,
    hexstr,
)
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported
from p4sim.frontend.side_effects import order_side_effects
from p4sim.frontend.typecheck import Checker

V1SWITCH_ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum",
                  "deparser")


class ProgramBuilder(StorageLayout, ExternLowering, ControlLowering, ParserLowering):
    def __init__(self, checker: Checker, prog: A.Program, sources: dict[str, list[str]],
                 program_name: str) -> None:
        self.checker = checker
        self.prog = prog
        self.sources = sources
        self.program_name = program_name
        self.errors = {n: i for i, n in enumerate(checker.error_members)}
        self.header_types: list[Json] = []
        self.header_type_ids: dict[str, str] = {}
        self.headers: list[Json] = []
        self.header_names: set[str] = set()
        self.header_stacks: list[Json] = []
        self.header_union_types: list[Json] = []
        self.header_unions: list[Json] = []
        self.header_union_stacks: list[Json] = []
        self.union_type_names: set[str] = set()
        self.scalars: list[list[Any]] = []
        self.scalar_names: set[str] = set()
        self.actions_json: list[Json] = []
        self.action_cache: dict[Any, tuple[str, int]] = {}
        self.action_names: set[str] = set()
        self.calculations: list[Json] = []
        self.field_lists: list[Json] = []
        self.learn_lists: list[Json] = []
        self.register_arrays: list[Json] = []
        self.counter_arrays: list[Json] = []
        self.meter_arrays: list[Json] = []
        self.parse_vsets: list[Json] = []
        self.value_sets: list[tuple[str, A.ValueSetDecl]] = []
        self.action_profiles: dict[str, Json] = {}
        self.profile_info: dict[str, dict[str, Any]] = {}
        self.direct_meter_targets: dict[str, Json] = {}
        self.table_info: list[tuple[str, A.TableDecl, Env]] = []
        self.table_pipeline: dict[str, int] = {}
        self.action_pipeline: dict[str, int] = {}
        self.tables_applied: dict[str, A.TableDecl] = {}
        self.hidden_tables: set[str] = set()
        self.hidden_actions: set[str] = set()
        self.applied_controls = {}
        self.control_envs = {}
        self.ret_targets = []
        self.return_patches = []
        self.loop_jumps = []
        self.pre_prims = []
        self.fn_returns = []
        self.copy_out_frames = []
        self.param_uses = {}
        self.table_names: set[str] = set()
        self.cond_count = 0
        self.table_count = 0
        self.state_ids = itertools.count()
        self.instances: list[tuple[str, A.Instance, dict[str, Any]]] = []
        self.digests: dict[str, T.StructT] = {}
        self.action_params: dict[str, list[tuple[str, int, A.Param]]] = {}
        self.action_decls: dict[str, A.ActionDecl] = {}
        self.global_actions = {d for d in prog.decls if isinstance(d, A.ActionDecl)}
        self.table_actions = {id(a) for d in prog.decls
                              if isinstance(d, A.ControlDecl) and not d.is_type
                              for t in d.locals if isinstance(t, A.TableDecl)
                              for a, _, _ in t.action_list}
        self.globals_env = Env(None, "")
        self.pipeline: Json = {"id": 0}

    # ---- helpers used by the mixins -------------------------------------------------------------
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

    def unique(self, base: str, taken: set[str]) -> str:
        name, n = base, 0
        while name in taken:
            name = f"{base}_{n}"
            n += 1
        taken.add(name)
        return name

    def unique_table(self, base: str) -> str:
        return self.unique(base, self.table_names)

    def unique_action(self, base: str) -> str:
        return self.unique(base, self.action_names)

    # ---- actions ----------------------------------------------------------------------------------
    def add_action_json(self, name: str, runtime: list[Json], prims: list[Json], node: Any
                        ) -> int:
        end_exits(prims)
        aid = len(self.actions_json)
        self.actions_json.append({"name": name, "id": aid, "runtime_data": runtime,
                                  "primitives": prims})
        return aid

    def note_called_action(self, act: A.ActionDecl, c: A.Call, env: Env) -> None:
        """An action called directly is inlined where it is called, but p4c still emits it as
        an action of its own (in the JSON and the P4Info): do the same, with the first call's
        directional arguments bound."""
        prefix = "" if act in self.global_actions else env.prefix
        if qualify(act, prefix) in self.action_decls or id(act) in self.table_actions:
            return  # a table's use of the action gives it its name
        aenv = self.globals_env if act in self.global_actions else env
        # like p4c, the data parameters of a directly called action are bound too: the action
        # it emits takes no action data
        bound = [(p, self.called_action_arg(a.expr, p, env))
                 for a, p in zip(c.args, act.params) if a.expr is not None]
        saved = self.return_patches
        self.return_patches = []
        self.action_for(act, aenv, bound)
        self.return_patches = saved

    def called_action_arg(self, e: A.Expr, p: A.Param, env: Env) -> Ref:
        composite = isinstance(p.rtype, (T.StructT, T.StackT))
        if (p.direction in ("out", "inout") and not isinstance(e, A.Slice)) or (
                composite and not isinstance(e, (A.ListExpr, A.StructInit))):
            return self.ref(e, env)
        if composite or p.direction in ("out", "inout"):  # storage of the parameter's type
            return self.layout(p.rtype, p.name, "")
        return DataRef(self.data(e, env), p.rtype)

    def action_for(self, act: A.ActionDecl, env: Env, bound: list[Any]) -> tuple[str, int]:
        prefix = "" if act in self.global_actions else env.prefix
        key = (id(act), prefix, env.application, tuple((id(p), repr(r)) for p, r in bound))
        if key in self.action_cache:
            return self.action_cache[key]
        name = qualify(act, prefix)
        other = self.action_decls.get(name)
        if other is not None and other is not act:
            raise CompileError(act.loc, f"{name}: conflicting control plane name (also used by"
                               f" the action at {other.loc})")
        if name in self.action_names and other is not act:
            name = self.unique_action(name)
        # the same action bound to other directional arguments by another table (`setbyte(x)`
        # and `setbyte(y)`) is another JSON action of the same name: one P4Info action, as p4c
        self.action_names.add(name)
        inner = Env(env)
        runtime: list[Json] = []
        params: list[tuple[str, int, A.Param]] = []
        # A directly called action has its data parameters bound by the call: no action data
        # (p4c's JSON and P4Info list it with no parameters).
        bound_params = {id(p) for p, _ in bound}
        for p in act.params:
            if p.direction or id(p) in bound_params:
                continue
            w = T.bit_width(p.rtype)
            rd = {"type": "runtime_data", "value": len(runtime)}
            inner.bind(p, DataRef(d2b(rd) if p.rtype == T.BOOL else rd, p.rtype))
            runtime.append({"name": p.name, "bitwidth": w})
            params.append((p.name, w, p))
        for p, r in bound:
            inner.bind(p, r)
        prims: list[Json] = []
        self.body_to_prims(act.body.stmts, inner, prims)
        end_exits(prims)
        aid = len(self.actions_json)
        self.actions_json.append({"name": name, "id": aid, "runtime_data": runtime,
                                  "primitives": prims})
        self.action_params[name] = params
        self.action_decls[name] = act
        self.action_cache[key] = (name, aid)
        self.action_pipeline[name] = -1 if act in self.global_actions else self.pipeline["id"]
        return name, aid

    # ---- the program ------------------------------------------------------------------------------
    def build(self) -> Json:
        roles = self.v1switch_roles()
        parser = roles["parser"]
        assert isinstance(parser, A.ParserDecl)
        self.layout_v1model_blocks(parser)
        for d in self.prog.decls:
            if isinstance(d, A.Instance) and d is not self.checker.main:
                self.globals_env.bind(d, self.register_instance(d, ""))
        parser_json = self.lower_parser(parser, self.block_env(parser))
        pipelines = []
        for pid, role in enumerate(("ingress", "egress")):
            decl = roles[role]
            assert isinstance(decl, A.ControlDecl)
            self.pipeline = {"name": role, "id": pid, "source_info": self.source_info(decl),
                             "init_table": None, "tables": [], "action_profiles": [],
                             "conditionals": []}
            self.pipeline["init_table"] = self.lower_control(decl, self.block_env(decl))
            pipelines.append(self.pipeline)
        self.pipelines_done = pipelines
        checksums: list[Json] = []
        for role, verify in (("verify_checksum", True), ("compute_checksum", False)):
            decl = roles[role]
            assert isinstance(decl, A.ControlDecl)
            self.pipeline = {"id": 2, "tables": [], "conditionals": [], "action_profiles": []}
            self.lower_checksums(decl, self.block_env(decl), verify, checksums)
        dep = roles["deparser"]
        assert isinstance(dep, A.ControlDecl)
        deparser_json = self.lower_deparser(dep, self.block_env(dep))
        pad = -sum(f[1] for f in self.scalars) % 8
        if pad:
            self.scalars.append(["_padding_0", pad, False])
        return self.document(parser_json, pipelines, checksums, deparser_json)

    def v1switch_roles(self) -> dict[str, A.Node]:
        """The six blocks of `V1Switch(...) main`, by role."""
        main = self.checker.main
        assert main is not None
        pkg = main.rtype.decl
        if pkg.name != "V1Switch":
            raise unsupported(main.loc, f"package {pkg.name} (only v1model's V1Switch)")
        roles: dict[str, A.Node] = {}
        for role, a in zip(V1SWITCH_ROLES, main.args):
            roles[role] = a.expr.target[1]  # type: ignore[union-attr]
        parser = roles.get("parser")
        if (len(roles) != len(V1SWITCH_ROLES) or not isinstance(parser, A.ParserDecl)
                or len(parser.params) != 4
                or not all(isinstance(roles[r], A.ControlDecl) for r in V1SWITCH_ROLES[1:])):
            raise unsupported(main.loc, "a V1Switch package that is not v1model's")
        return roles

    def layout_v1model_blocks(self, parser: A.ParserDecl) -> None:
        """Storage shared by all blocks: scalars, standard metadata, headers, user metadata."""
        htype = parser.params[1].rtype
        mtype = parser.params[2].rtype
        self.header_types.append({"name": "scalars_0", "id": 0, "fields": self.scalars})
        self.header_type_ids["scalars_0"] = "scalars_0"
        self.headers.append({"name": "scalars", "id": 0, "header_type": "scalars_0",
                             "metadata": True, "pi_omit": True})
        self.header_names.add("scalars")
        smt = parser.params[3].rtype
        self.header_type(smt, "standard_metadata", metadata=True)
        self.add_header("standard_metadata", "standard_metadata", True)
        std = StructRef({f: FieldRef("standard_metadata", f, ft)
                         for f, ft in smt.fields.items()}, smt)
        if not isinstance(htype, T.StructT) or htype.kind != "struct":
            raise CompileError(parser.params[1].loc, "the headers type must be a struct")
        hdrs = self.layout(htype, "", None)
        meta = self.layout(mtype, "", "userMetadata.")
        self.field_list_members = self.collect_field_lists(mtype, meta)
        self.htype, self.mtype, self.smt = htype, mtype, smt
        self.block_storage = (hdrs, std, meta)

    def block_env(self, decl: Any) -> Env:
        """A v1model block's parameters bound to the shared storage."""
        hdrs, std, meta = self.block_storage
        htype, mtype, smt = self.htype, self.mtype, self.smt
        env = Env(self.globals_env, prefix=qualify(decl, ""))
        for p in decl.params:
            t = p.rtype
            if isinstance(t, T.ObjT):
                env.bind(p, ObjRef(t.decl.name, p.name, t.decl))
            elif t is htype or (isinstance(t, T.StructT) and t.name == htype.name):
                env.bind(p, hdrs)
            elif isinstance(t, T.StructT) and t.name == smt.name:
                env.bind(p, std)
            elif isinstance(t, T.StructT) and t.name == mtype.name:
                env.bind(p, meta)
            else:
                raise unsupported(p.loc, f"parameter of type {t} in a v1model block")
        return env

    def document(self, parser_json: Json, pipelines: list[Json], checksums: list[Json],
                 deparser_json: Json) -> Json:
        aliases = []
        for fname, fd in zip(self.smt.fields, self.smt.decl.fields):
            a = A.anno(fd.annos, "alias")
            if a and a.args:
                aliases.append([a.args[0], ["standard_metadata", fname]])
        enums = []
        for d in self.prog.decls:
            if isinstance(d, A.EnumDecl) and d.rtype.underlying is None:
                enums.append({"name": d.name, "entries": [[m, i] for i, m in
                                                          enumerate(d.rtype.members)]})
        return {
            "header_types": self.header_types, "headers": self.headers,
            "header_stacks": self.header_stacks,
            "header_union_types": self.header_union_types, "header_unions": self.header_unions,
            "header_union_stacks": self.header_union_stacks, "field_lists": self.field_lists,
            "errors": [[n, i] for n, i in self.errors.items()], "enums": enums,
            "parsers": [parser_json], "parse_vsets": self.parse_vsets,
            "deparsers": [deparser_json], "meter_arrays": self.meter_arrays,
            "counter_arrays": self.counter_arrays, "register_arrays": self.register_arrays,
            "calculations": self.calculations, "learn_lists": self.learn_lists,
            "actions": self.actions_json, "pipelines": pipelines, "checksums": checksums,
            "force_arith": [], "extern_instances": [], "field_aliases": aliases,
            "program": self.program_name,
            "__meta__": {"version": [2, 23], "compiler": "p4sim"},
        }

    def control_plane_model(self) -> ControlPlaneModel:
        """The entities P4Info describes, once `build` has run."""
        jtables = {t["name"]: t for p in self.pipelines_done for t in p["tables"]}
        tables = [TableModel(n, t, jtables[n], self.table_pipeline[n])
                  for n, t, _ in self.table_info
                  if n not in self.hidden_tables and not A.anno(t.annos, "hidden")]
        actions: dict[str, ActionModel] = {}
        for a in self.actions_json:  # a specialised action has several JSON actions: the first
            name = a["name"]
            decl = self.action_decls.get(name)
            if name in actions or name in self.hidden_actions or decl is None or A.anno(
                    decl.annos, "hidden"):
                continue
            actions[name] = ActionModel(name, decl, self.action_params.get(name, []),
                                        self.action_pipeline[name])
        return ControlPlaneModel(
            main_annos=self.checker.main.annos, source_files=list(self.sources),
            tables=tables, actions=list(actions.values()),
            instances=[InstanceModel(n, i, info) for n, i, info in self.instances],
            controller_headers=[d for d in self.prog.decls if isinstance(d, A.HeaderDecl)
                                and A.anno(d.annos, "controller_header")],
            digests=dict(self.digests), value_sets=list(self.value_sets))

    def collect_field_lists(self, mtype: T.StructT, meta: Ref) -> list[tuple[Json, set[int]]]:
        out: list[tuple[Json, set[int]]] = []

        def walk(t: T.StructT, r: Ref) -> None:
            if not isinstance(r, StructRef) or t.decl is None:
                return
            for fd in t.decl.fields:
                sub = r.fields[fd.name]
                a = A.anno(fd.annos, "field_list")
                ft = t.fields[fd.name]
                if a is not None and isinstance(sub, FieldRef):
                    out.append((sub.json(), {int(x) for x in a.args if isinstance(x, int)}))
                if isinstance(ft, T.StructT) and ft.kind == "struct":
                    walk(ft, sub)

        walk(mtype, meta)
        return out


def end_exits(prims: list[Json]) -> None:
    """BMv2's `exit` primitive only marks the packet: the action's later primitives still run.
    Each `exit` is followed by a jump to the action's end (dropped when nothing follows)."""
    n = len(prims)

    def jumps_to_end(p: Json) -> bool:
        at = {"_jump": 0, "_jump_if_zero": 1}.get(p["op"])
        return at is not None and not p.get("to_end") and int(
            p["parameters"][at]["value"], 16) == n

    if n >= 2 and prims[-1].get("to_end") and prims[-2]["op"] == "exit" and not any(
            jumps_to_end(p) for p in prims):
        prims.pop()
    for p in prims:
        if p.pop("to_end", False):
            p["parameters"][0] = hexstr(len(prims))


def build_json(checker: Checker, prog: A.Program, sources: dict[str, list[str]],
               program_name: str) -> tuple[Json, ProgramBuilder]:
    order_side_effects(prog)
    b = ProgramBuilder(checker, prog, sources, program_name)
    return b.build(), b
