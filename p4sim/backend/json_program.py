"""Builds the whole BMv2 JSON document for a type-checked v1model program: header layout
(scalars, standard_metadata, user headers/stacks), extern instances, actions, and the parser,
pipelines, deparser and checksums by the converters this builder wires together."""

from __future__ import annotations

from typing import Any

from p4sim.backend import refs as R
from p4sim.backend.action_registry import ActionRegistry
from p4sim.backend.context import LoweringContext
from p4sim.backend.json_actions import StatementConverter
from p4sim.backend.json_calls import CallInliner
from p4sim.backend.json_control import ControlConverter
from p4sim.backend.json_deparser import DeparserConverter
from p4sim.backend.json_expr import Env, ExprConverter
from p4sim.backend.json_externs import ExternConverter
from p4sim.backend.json_layout import StorageLayout
from p4sim.backend.json_parser import ParserConverter
from p4sim.backend.json_tables import TableConverter
from p4sim.backend.model import ActionModel, ControlPlaneModel, InstanceModel, TableModel
from p4sim.backend.naming import qualify
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError, unsupported
from p4sim.frontend.side_effects import order_side_effects
from p4sim.frontend.typecheck import Checker

V1SWITCH_ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum",
                  "deparser")


class ProgramBuilder:
    """Wires the converters together and runs them over the six V1Switch blocks."""

    def __init__(self, checker: Checker, prog: A.Program, sources: dict[str, list[str]],
                 program_name: str) -> None:
        self.ctx = ctx = LoweringContext(checker, prog, sources, program_name)
        self.storage = storage = StorageLayout()
        self.exprs = exprs = ExprConverter(ctx)
        self.externs = externs = ExternConverter(ctx, exprs)
        self.calls = calls = CallInliner(ctx, exprs, storage)
        self.stmts = stmts = StatementConverter(ctx, exprs, calls, storage, externs)
        self.actions = actions = ActionRegistry(ctx, exprs, storage)
        self.tables = tables = TableConverter(ctx, exprs, storage, externs, actions)
        self.controls = ControlConverter(ctx, exprs, calls, stmts, storage, externs, actions,
                                         tables)
        self.parsers = ParserConverter(ctx, exprs, stmts, storage, externs)
        self.deparsers = DeparserConverter(ctx, exprs, externs)
        # the converters that call each other: expressions call functions whose bodies are
        # statements, which call actions, whose bodies are statements
        exprs.calls = calls
        calls.stmts = stmts
        stmts.actions = actions
        actions.stmts = stmts

    # ---- the program ----------------------------------------------------------------------
    def build(self) -> Json:
        roles = self.v1switch_roles()
        parser = roles["parser"]
        assert isinstance(parser, A.ParserDecl)
        self.layout_v1model_blocks(parser)
        for d in self.ctx.prog.decls:
            if isinstance(d, A.Instance) and d is not self.ctx.checker.main:
                self.ctx.globals_env.bind(d, self.externs.register_instance(d, ""))
        parser_json = self.parsers.lower_parser(parser, self.block_env(parser))
        pipelines = []
        for pid, role in enumerate(("ingress", "egress")):
            decl = roles[role]
            assert isinstance(decl, A.ControlDecl)
            self.ctx.pipeline = {"name": role, "id": pid,
                                 "source_info": self.ctx.source_info(decl),
                                 "init_table": None, "tables": [], "action_profiles": [],
                                 "conditionals": []}
            self.ctx.pipeline["init_table"] = self.controls.lower_control(decl,
                                                                          self.block_env(decl))
            pipelines.append(self.ctx.pipeline)
        self.pipelines_done = pipelines
        checksums: list[Json] = []
        for role, verify in (("verify_checksum", True), ("compute_checksum", False)):
            decl = roles[role]
            assert isinstance(decl, A.ControlDecl)
            self.ctx.pipeline = {"id": 2, "tables": [], "conditionals": [], "action_profiles": []}
            self.deparsers.lower_checksums(decl, self.block_env(decl), verify, checksums)
        dep = roles["deparser"]
        assert isinstance(dep, A.ControlDecl)
        deparser_json = self.deparsers.lower_deparser(dep, self.block_env(dep))
        pad = -sum(f[1] for f in self.storage.scalars) % 8
        if pad:
            self.storage.scalars.append(["_padding_0", pad, False])
        return self.document(parser_json, pipelines, checksums, deparser_json)

    def v1switch_roles(self) -> dict[str, A.Node]:
        """The six blocks of `V1Switch(...) main`, by role."""
        main = self.ctx.checker.main
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
        storage = self.storage
        storage.header_types.append({"name": "scalars_0", "id": 0, "fields": storage.scalars})
        storage.header_type_ids["scalars_0"] = "scalars_0"
        storage.headers.append({"name": "scalars", "id": 0, "header_type": "scalars_0",
                                "metadata": True, "pi_omit": True})
        storage.header_names.add("scalars")
        smt = parser.params[3].rtype
        storage.header_type(smt, "standard_metadata", metadata=True)
        storage.add_header("standard_metadata", "standard_metadata", True)
        std = R.StructRef({f: R.FieldRef("standard_metadata", f, ft)
                           for f, ft in smt.fields.items()}, smt)
        if not isinstance(htype, T.StructT) or htype.kind != "struct":
            raise CompileError(parser.params[1].loc, "the headers type must be a struct")
        hdrs = storage.layout(htype, "", None)
        meta = storage.layout(mtype, "", "userMetadata.")
        self.externs.field_list_members = self.collect_field_lists(mtype, meta)
        self.htype, self.mtype, self.smt = htype, mtype, smt
        self.block_storage = (hdrs, std, meta)

    def block_env(self, decl: Any) -> Env:
        """A v1model block's parameters bound to the shared storage."""
        hdrs, std, meta = self.block_storage
        htype, mtype, smt = self.htype, self.mtype, self.smt
        env = Env(self.ctx.globals_env, prefix=qualify(decl, ""))
        for p in decl.params:
            t = p.rtype
            if isinstance(t, T.ObjT):
                env.bind(p, R.ObjRef(t.decl.name, p.name, t.decl))
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
        for d in self.ctx.prog.decls:
            if isinstance(d, A.EnumDecl) and d.rtype.underlying is None:
                enums.append({"name": d.name, "entries": [[m, i] for i, m in
                                                          enumerate(d.rtype.members)]})
        storage, externs = self.storage, self.externs
        return {
            "header_types": storage.header_types, "headers": storage.headers,
            "header_stacks": storage.header_stacks,
            "header_union_types": storage.header_union_types,
            "header_unions": storage.header_unions,
            "header_union_stacks": storage.header_union_stacks,
            "field_lists": externs.field_lists,
            "errors": [[n, i] for n, i in self.ctx.errors.items()], "enums": enums,
            "parsers": [parser_json], "parse_vsets": self.parsers.parse_vsets,
            "deparsers": [deparser_json], "meter_arrays": externs.meter_arrays,
            "counter_arrays": externs.counter_arrays, "register_arrays": externs.register_arrays,
            "calculations": externs.calculations, "learn_lists": externs.learn_lists,
            "actions": self.actions.actions_json, "pipelines": pipelines, "checksums": checksums,
            "force_arith": [], "extern_instances": [], "field_aliases": aliases,
            "program": self.ctx.program_name,
            "__meta__": {"version": [2, 23], "compiler": "p4sim"},
        }

    def control_plane_model(self) -> ControlPlaneModel:
        """The entities P4Info describes, once `build` has run."""
        jtables = {t["name"]: t for p in self.pipelines_done for t in p["tables"]}
        tables = [TableModel(n, t, jtables[n], self.tables.table_pipeline[n])
                  for n, t, _ in self.tables.table_info
                  if n not in self.tables.hidden_tables and not A.anno(t.annos, "hidden")]
        actions: dict[str, ActionModel] = {}
        # a specialised action has several JSON actions: the first one stands for them all
        registry = self.actions
        for a in registry.actions_json:
            name = a["name"]
            decl = registry.action_decls.get(name)
            if name in actions or name in registry.hidden_actions or decl is None or A.anno(
                    decl.annos, "hidden"):
                continue
            actions[name] = ActionModel(name, decl, registry.action_params.get(name, []),
                                        registry.action_pipeline[name])
        return ControlPlaneModel(
            main_annos=self.ctx.checker.main.annos, source_files=list(self.ctx.sources),
            tables=tables, actions=list(actions.values()),
            instances=[InstanceModel(n, i, info) for n, i, info in self.externs.instances],
            controller_headers=[d for d in self.ctx.prog.decls if isinstance(d, A.HeaderDecl)
                                and A.anno(d.annos, "controller_header")],
            digests=dict(self.externs.digests), value_sets=list(self.parsers.value_sets))

    def collect_field_lists(self, mtype: T.StructT, meta: R.Ref) -> list[tuple[Json, set[int]]]:
        out: list[tuple[Json, set[int]]] = []

        def walk(t: T.StructT, r: R.Ref) -> None:
            if not isinstance(r, R.StructRef) or t.decl is None:
                return
            for fd in t.decl.fields:
                sub = r.fields[fd.name]
                a = A.anno(fd.annos, "field_list")
                ft = t.fields[fd.name]
                if a is not None and isinstance(sub, R.FieldRef):
                    out.append((sub.json(), {int(x) for x in a.args if isinstance(x, int)}))
                if isinstance(ft, T.StructT) and ft.kind == "struct":
                    walk(ft, sub)

        walk(mtype, meta)
        return out


def build_json(checker: Checker, prog: A.Program, sources: dict[str, list[str]],
               program_name: str) -> tuple[Json, ProgramBuilder]:
    order_side_effects(prog)
    b = ProgramBuilder(checker, prog, sources, program_name)
    return b.build(), b
