"""Storage for P4 values in BMv2 terms: header types and instances, stacks, unions and their
stacks, and the `scalars` header for everything else (locals, temporaries, metadata)."""

from __future__ import annotations

from typing import Any

from p4sim.backend import refs as R
from p4sim.backend.context import unique
from p4sim.backend.json_expr import Env
from p4sim.backend.refs import Json
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.errors import CompileError


class StorageLayout:
    """Where values live: header types and instances, stacks, unions, and the scalars header
    holding metadata and locals."""

    def __init__(self) -> None:
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

    def header_type(self, st: T.StructT, name: str | None = None, metadata: bool = False) -> str:
        key = name or st.name
        if key in self.header_type_ids:
            return key
        fields: list[list[Any]] = []
        max_bits = 0
        varbit = False
        for fname, ft in _flat_fields(st.fields):
            max_bits += T.bit_width(ft)
            if isinstance(ft, T.VarbitT):
                if varbit:
                    raise CompileError(st.decl.loc if st.decl else None,
                                       f"header {st.name} has more than one varbit field")
                varbit = True
                fields.append([fname, "*"])
                continue
            fields.append([fname, T.bit_width(ft), isinstance(ft, T.BitT) and ft.signed])
        if metadata:
            pad = -sum(f[1] for f in fields) % 8
            if pad:
                fields.append(["_padding", pad, False])
        self.header_type_ids[key] = key
        ht: Json = {"name": key, "id": len(self.header_types), "fields": fields}
        if varbit:
            ht["max_length"] = (max_bits + 7) // 8
        self.header_types.append(ht)
        return key

    def add_header(self, base: str, htype: str, metadata: bool) -> str:
        name = unique(base, self.header_names)
        self.headers.append({"name": name, "id": len(self.headers), "header_type": htype,
                             "metadata": metadata, "pi_omit": True})
        return name

    def add_scalar(self, base: str, t: T.Type) -> R.FieldRef:
        name = unique(base, self.scalar_names)
        self.scalars.append([name, T.bit_width(t), isinstance(t, T.BitT) and t.signed])
        return R.FieldRef("scalars", name, t)

    def layout(self, t: T.Type, path: str, meta_prefix: str | None) -> R.Ref:
        """Allocate storage for a value of type `t`: headers become instances, scalar fields go
        to the `scalars` header (with `meta_prefix` naming) ."""
        if isinstance(t, T.StructT) and t.kind == "header":
            htype = self.header_type(t)
            return R.HeaderRef(self.add_header(path.split(".")[-1] if path else t.name, htype,
                                               False), t)
        if isinstance(t, T.StackT):
            if t.elem.kind == "header_union":
                return self.layout_union_stack(t, path)
            htype = self.header_type(t.elem)
            base = unique(path.split(".")[-1], self.header_names)
            elems = []
            ids = []
            for i in range(t.size):
                n = self.add_header(f"{base}[{i}]", htype, False)
                elems.append(n)
                ids.append(self.headers[-1]["id"])
            self.header_stacks.append({"name": base, "id": len(self.header_stacks),
                                       "header_type": htype, "size": t.size,
                                       "header_ids": ids})
            return R.StackRef(base, t, elems)
        if isinstance(t, T.StructT) and t.kind == "header_union":
            return self.layout_union(t, path)
        if isinstance(t, T.StructT):
            fields = {}
            for fname, ft in t.fields.items():
                sub = f"{path}.{fname}" if path else fname
                fields[fname] = self.layout(ft, sub, meta_prefix)
            return R.StructRef(fields, t)
        if isinstance(t, (T.BitT, T.EnumT, T.NewT)) or t in (T.BOOL, T.ERROR):
            return self.add_scalar(f"{meta_prefix}{path}" if meta_prefix else path, t)
        if isinstance(t, T.TupleT):  # a tuple is stored as a struct of its items
            return R.StructRef({str(i): self.layout(it, f"{path}_{i}", meta_prefix)
                                for i, it in enumerate(t.items)}, t)
        if isinstance(t, T.VarbitT):
            return self.varbit_local(t, path)
        raise CompileError(None, f"cannot allocate storage for a value of type {t}")

    def varbit_local(self, t: T.VarbitT, path: str) -> R.FieldRef:
        """A varbit local lives in a metadata header of its own (as p4c does), since the
        scalars header has fixed-width fields only."""
        htype = f"$varbit{t.max_width}"
        if htype not in self.header_type_ids:
            self.header_type_ids[htype] = htype
            self.header_types.append({"name": htype, "id": len(self.header_types),
                                      "fields": [["field", "*"]],
                                      "max_length": (t.max_width + 7) // 8})
        return R.FieldRef(self.add_header(path.split(".")[-1], htype, True), "field", t)

    def layout_union(self, t: T.StructT, path: str) -> R.UnionRef:
        if t.name not in self.union_type_names:
            self.union_type_names.add(t.name)
            self.header_union_types.append({
                "name": t.name, "id": len(self.header_union_types),
                "headers": [[m, self.header_type(mt)] for m, mt in t.fields.items()]})
        base = unique(path.split(".")[-1] if path else t.name, self.header_names)
        members: dict[str, R.HeaderRef] = {}
        for m, mt in t.fields.items():
            assert isinstance(mt, T.StructT)
            members[m] = R.HeaderRef(self.add_header(f"{base}.{m}", self.header_type(mt), False),
                                     mt)
        ids = [h["id"] for h in self.headers if h["name"] in {r.name for r in
                                                               members.values()}]
        self.header_unions.append({"name": base, "id": len(self.header_unions),
                                   "union_type": t.name, "header_ids": ids})
        return R.UnionRef(base, t, members)

    def layout_union_stack(self, t: T.StackT, path: str) -> R.UnionStackRef:
        base = unique(path.split(".")[-1], self.header_names)
        unions = [self.layout_union(t.elem, f"{base}[{i}]") for i in range(t.size)]
        self.header_union_stacks.append({
            "name": base, "id": len(self.header_union_stacks), "union_type": t.elem.name,
            "size": t.size, "header_union_ids": [self.header_unions[-t.size + i]["id"]
                                                 for i in range(t.size)]})
        return R.UnionStackRef(base, t, unions)

    def declare_local(self, d: A.VarDecl, env: Env) -> R.Ref:
        """Storage for a local variable, bound to it in `env`."""
        r = self.alloc_local(d, env)
        env.bind(d, r)
        return r

    def alloc_local(self, d: A.VarDecl, env: Env) -> R.Ref:
        return self.layout(d.type, d.name, "")

    def alloc_temp(self, bits: int, env: Env, base: str = "tmp") -> R.FieldRef:
        return self.add_scalar(base, T.BitT(bits))


def _flat_fields(fields: dict[str, T.Type], prefix: str = "") -> list[tuple[str, T.Type]]:
    """Struct-typed header fields become one field per member, named `outer.inner`."""
    out: list[tuple[str, T.Type]] = []
    for name, t in fields.items():
        if isinstance(t, T.StructT) and t.kind == "struct":
            out.extend(_flat_fields(t.fields, f"{prefix}{name}."))
        else:
            out.append((prefix + name, t))
    return out
