"""The back end's typed result for the control plane: every entity P4Info describes, as the
BMv2 JSON builder placed and named it. P4Info generation reads only this, never the builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T


@dataclass(frozen=True)
class TableModel:
    name: str  # fully qualified, as in the JSON
    decl: A.TableDecl
    json: Json  # the BMv2 table (its actions, size, profile, timeout support)
    pipeline: int  # 0 ingress, 1 egress


@dataclass(frozen=True)
class ActionModel:
    name: str
    decl: A.ActionDecl
    params: list[tuple[str, int, A.Param]]  # action data: name, width, declaration
    pipeline: int  # -1 for an action declared at top level


@dataclass(frozen=True)
class InstanceModel:
    name: str
    decl: A.Instance
    info: dict[str, Any]  # "type" (register, counter, ...), size, unit, binding, tables


@dataclass
class ControlPlaneModel:
    main_annos: list[A.Annotation]
    source_files: list[str]  # in the order they were read: p4c orders entities by place
    tables: list[TableModel]  # those the control plane sees (not hidden, not synthetic)
    actions: list[ActionModel]  # likewise, one per name
    instances: list[InstanceModel]
    controller_headers: list[A.HeaderDecl]
    digests: dict[str, T.StructT]
    value_sets: list[tuple[str, A.ValueSetDecl]]
    action_named: dict[str, ActionModel] = field(init=False)

    def __post_init__(self) -> None:
        self.action_named = {a.name: a for a in self.actions}

    def place(self, decl: A.Node, pipeline: int) -> tuple[int, int, int, int]:
        """p4c's P4Info order: by pipeline, then by place in the source."""
        files = {f: i for i, f in enumerate(self.source_files)}
        loc = decl.loc
        return (pipeline, files.get(loc.file, len(files)), loc.line, loc.col)

    def direct_resource(self, table: str, kind: str) -> str | None:
        """The direct counter or meter bound to `table`, if any."""
        for inst in self.instances:
            if inst.info["type"] == kind and inst.info.get("binding") == table:
                return inst.name
        return None
