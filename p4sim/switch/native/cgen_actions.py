"""The generated C's calculations (hashes, checksums' inputs) and actions (see ``cgen``)."""

from __future__ import annotations

from typing import Any

from p4sim.switch.codegen import hexstr
from p4sim.switch.native.cgen import CGen, Unsupported
from p4sim.switch.primitives import DROP_PORT

HASHES = {"crc32": "h_crc32", "crc32_custom": "h_crc32", "crc16": "h_crc16",
          "crc16_custom": "h_crc16", "csum16": "h_csum16", "cksum16": "h_csum16",
          "identity": "h_identity", "xor16": "h_xor16", "xor32": "h_xor32"}
AB_RANDOM = 5
AB_NEGATIVE_POS = 6



class ActionBlocks:
    def __init__(self, g: CGen) -> None:
        self.g = g
        self.p = g.p
        self.emit = g.emit
        self.action_by_name: dict[str, list[int]] = {}
        for aid, act in self.p.actions.items():
            self.action_by_name.setdefault(act.get("name"), []).append(aid)
        self.profile_calc: dict[str, str] = {}

    # -- state --------------------------------------------------------------------------------

    def context(self) -> None:
        g, p = self.g, self.p
        for pipe in p.pipelines.values():
            for t in pipe.get("tables") or []:
                g.table_ids[t["name"]] = len(g.tables)
                g.tables.append(t)
        nt, nr, nc = max(1, len(g.tables)), max(1, len(g.registers)), max(1, len(g.counters))
        self.emit(f"typedef struct {{ rt_t rt; tbl_t tbl[{nt}]; i64 *reg[{nr}]; "
                  f"i64 *cpk[{nc}]; i64 *cby[{nc}]; }} ctx_t;")
        self.emit("static inline i128 reg_read(ctx_t *C, int r, i64 size, i128 i) "
                  "{ return (i >= 0 && i < size) ? (i128)C->reg[r][(i64)i] : 0; }")
        self.emit("static inline void reg_write(ctx_t *C, int r, i64 size, i128 mask, i128 i, "
                  "i128 v) { if (i >= 0 && i < size) C->reg[r][(i64)i] = (i64)(v & mask); }")
        self.emit("static inline void ctr_count(ctx_t *C, int c, i64 size, i128 i, i64 len) "
                  "{ if (i >= 0 && i < size) { C->cpk[c][(i64)i] += 1; "
                  "C->cby[c][(i64)i] += len; } }")
        self.emit(STACK_OPS)

    # -- calculations ---------------------------------------------------------------------------

    def _calc(self, name: str, algo: str, inputs: list, where: str) -> None:
        fn = HASHES.get(algo)
        if fn is None:
            raise Unsupported(f"hash algorithm '{algo}' ({where})")
        g = self.g
        lines: list[str] = []
        total = 0
        group: list = []

        def flush() -> None:
            nonlocal total
            if not group:
                return
            inst = group[0][0]
            lines.append(f"  if (F[{inst.valid_slot}]) {{")
            for _, f in group:
                lines.append(f"    put_bits(b, n, (uint64_t)F[{f.slot}] & {f.mask}ULL, "
                             f"{f.width}); n += {f.width};")
                total += f.width
            lines.append("  }")
            group.clear()

        for item in inputs:
            kind, value = item.get("type"), item.get("value")
            if kind == "field":
                info = self.p.field(value)
                inst = self.p.header(value[0])
                if group and group[0][0] is not inst:
                    flush()
                group.append((inst, info))
                continue
            flush()
            if kind == "header":
                inst = self.p.header(value)
                group.extend((inst, f) for f in inst.fields)
                flush()
            elif kind in ("hexstr", "expression"):
                width = int(item.get("bitwidth") or 0)
                if width <= 0 or width > 63:
                    raise Unsupported(f"{where}: {kind} input of {width} bits")
                src = (g.expr(value) if kind == "expression"
                       else str(hexstr(value, where) & ((1 << width) - 1)) + "ULL")
                lines.append(f"  put_bits(b, n, (uint64_t)({src}) & {(1 << width) - 1}ULL, "
                             f"{width}); n += {width};")
                total += width
            else:
                raise Unsupported(f"{where}: {kind} input")
        flush()
        size = total // 8 + 2
        self.emit(f"static uint64_t {name}(ctx_t *C, pkt_t *P, i64 *F) {{")
        self.emit(f"  rt_t *R = &C->rt; (void)R; (void)P; uint8_t b[{size}]; int64_t n = 0;")
        self.emit(f"  memset(b, 0, {size});")
        self.out_lines(lines)
        self.emit(f"  return {fn}(b, (int)((n + 7) / 8));")
        self.emit("}")

    def out_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.emit(line)

    def calculations(self) -> None:
        for name, calc in self.p.calculations.items():
            cid = self.g.calc_ids[name]
            self._calc(f"calc_{cid}", calc.get("algo", ""), calc.get("input") or [],
                       f"calculation '{name}'")
        for pipe in self.p.pipelines.values():
            for prof in pipe.get("action_profiles") or []:
                sel = prof.get("selector")
                if sel:
                    cname = f"sel_{self.g._ident(prof['name'])}"
                    self._calc(cname, sel.get("algo", ""), sel.get("input") or [],
                               f"action selector '{prof['name']}'")
                    self.profile_calc[prof["name"]] = cname

    # -- actions --------------------------------------------------------------------------------

    def actions(self) -> None:
        for aid, act in self.p.actions.items():
            where = f"action '{act.get('name')}'"
            prims = act.get("primitives") or []
            self.emit(f"static void act_{aid}(ctx_t *C, pkt_t *P, i64 *F, const i64 *D) {{")
            self.emit("  rt_t *R = &C->rt; (void)R; (void)D; (void)P;")
            for i, prim in enumerate(prims):
                self.emit(f" L{i}:;")
                for line in self.primitive(prim, len(prims), f"{where} {prim.get('op')!r}"):
                    self.emit("  " + line)
            self.emit(f" L{len(prims)}:;")
            self.emit("}")
        self.emit("static void run_action(ctx_t *C, pkt_t *P, i64 *F, int a, const i64 *D) {")
        self.emit("  switch (a) {")
        for aid in self.p.actions:
            self.emit(f"  case {aid}: act_{aid}(C, P, F, D); break;")
        self.emit("  default: break;")
        self.emit("  }")
        self.emit("}")

    def _jump_target(self, node: Any, n: int, where: str) -> int:
        if not (isinstance(node, dict) and node.get("type") == "hexstr"):
            raise Unsupported(f"{where}: computed jump")
        target = hexstr(node.get("value"), where)
        if not 0 <= target <= n:
            raise Unsupported(f"{where}: jump out of the action")
        return target

    def _copy_header(self, dst: tuple, src: tuple) -> list[str]:
        g = self.g
        lines = [f"F[{g.field_slot(dst, i)}] = F[{g.field_slot(src, i)}];"
                 for i in range(len(dst[0].fields))]
        lines.append(f"{g.valid_src(dst)} = {g.valid_src(src)};")
        return lines

    def primitive(self, prim: dict, nprims: int, where: str) -> list[str]:
        g, p = self.g, self.p
        op = prim.get("op")
        ps = prim.get("parameters") or []
        if op in ("assign", "modify_field"):
            lv = g.lvalue(ps[0])
            src = g.expr(ps[1])
            if op == "modify_field" and len(ps) > 2:
                mask = g.expr(ps[2])
                src = f"((((i128)F[{lv[0]}]) & ~{mask}) | ({src} & {mask}))"
            return [g.store(lv, src)]
        if op in ("add_to_field", "subtract_from_field"):
            lv = g.lvalue(ps[0])
            sign = "+" if op == "add_to_field" else "-"
            return [g.store(lv, f"((i128)F[{lv[0]}] {sign} {g.expr(ps[1])})")]
        if op == "assign_header":
            return self._copy_header(g.header(ps[0]), g.header(ps[1]))
        if op == "assign_header_stack":
            ds, ss = p.stacks[ps[0]["value"]], p.stacks[ps[1]["value"]]
            lines = [f"F[{ds.next_slot}] = F[{ss.next_slot}];"]
            for dh, sh in zip(ds.headers, ss.headers):
                lines += self._copy_header((dh.htype, dh, None), (sh.htype, sh, None))
            return lines
        if op == "assign_union":
            du, su = p.unions[ps[0]["value"]], p.unions[ps[1]["value"]]
            lines = []
            for dh, sh in zip(du.members.values(), su.members.values()):
                lines += self._copy_header((dh.htype, dh, None), (sh.htype, sh, None))
            return lines
        if op in ("add_header", "add_header_fast"):
            ref = g.header(ps[0])
            lines = [f"if (!{g.valid_src(ref)}) {{"]
            lines += [f"  F[{g.field_slot(ref, i)}] = 0;" for i in range(len(ref[0].fields))]
            return [*lines, f"  {g.valid_src(ref)} = 1;", "}", *g.others_invalid(ref)]
        if op == "remove_header":
            return [f"{g.valid_src(g.header(ps[0]))} = 0;"]
        if op in ("push", "pop"):
            stack = p.stacks[ps[0].get("value")]
            lst, n = g.stack_list(stack.name)
            width = len(stack.headers[0].fields) + 1
            fn = "stk_push" if op == "push" else "stk_pop"
            return [f"{fn}(F, {lst}, {n}, {width}, {g.expr(ps[1])}, {stack.next_slot});"]
        return self._primitive_effects(op, ps, nprims, where)

    def _primitive_effects(self, op: str, ps: list, nprims: int, where: str) -> list[str]:
        """The packet's fate, externs and control flow inside an action."""
        g, p = self.g, self.p
        if op in ("mark_to_drop", "drop"):
            return [f"F[{p.std_slot('egress_spec')}] = {DROP_PORT};",
                    f"F[{p.std_slot('mcast_grp')}] = 0;"]
        if op == "exit":
            return ["P->exit = 1;", "return;"]
        if op == "clone_ingress_pkt_to_egress":
            fl = g.expr(ps[1]) if len(ps) > 1 else "0"
            return ["P->has_clone = 1;", f"P->clone_session = (i64)({g.expr(ps[0])});",
                    f"P->clone_fl = (i64)({fl});"]
        if op == "modify_field_with_hash_based_offset":
            lv = g.lvalue(ps[0])
            cid = g.calc_ids.get(ps[2].get("value"))
            if cid is None:
                raise Unsupported(f"{where}: unknown calculation")
            return ["{", f"  i128 sz = {g.expr(ps[3])}; if (sz == 0) sz = 1;",
                    "  " + g.store(lv, f"({g.expr(ps[1])} + fmod_(R, (i128)calc_{cid}(C, P, F), "
                                       "sz))"), "}"]
        if op == "modify_field_rng_uniform":
            lv = g.lvalue(ps[0])
            return ["{", f"  i128 lo = {g.expr(ps[1])}, hi = {g.expr(ps[2])};",
                    f"  if (lo > hi) nat_abort(R, {AB_RANDOM});",
                    "  " + g.store(lv, "(i128)nat_randint(R, (i64)lo, (i64)hi)"), "}"]
        if op == "register_read":
            lv = g.lvalue(ps[0])
            return [g.store(lv, g.expr({"type": "register",
                                        "value": [ps[1].get("value"), ps[2]]}))]
        if op == "register_write":
            name = ps[0].get("value")
            r = p.register_arrays[name]
            rid = g.registers.index(name)
            mask = (1 << int(r.get("bitwidth", 32))) - 1
            return [f"reg_write(C, {rid}, {int(r.get('size', 0))}, {mask}LL, "
                    f"{g.expr(ps[1])}, {g.expr(ps[2])});"]
        if op == "count":
            name = ps[0].get("value")
            if name not in g.counters:
                raise Unsupported(f"{where}: counter {name!r}")
            size = int(p.counter_arrays[name].get("size", 0))
            return [f"ctr_count(C, {g.counters.index(name)}, {size}, {g.expr(ps[1])}, "
                    "P->length);"]
        if op in ("assert", "assume"):
            return [f"if (!({g.expr(ps[0])})) nat_abort(R, AB_ASSERT);"]
        if op == "no_op":
            return []
        if op == "_jump":
            return [f"goto L{self._jump_target(ps[0], nprims, where)};"]
        if op == "_jump_if_zero":
            return [f"if (({g.expr(ps[0])}) == 0) "
                    f"goto L{self._jump_target(ps[1], nprims, where)};"]
        raise Unsupported(f"primitive {op!r} ({where})")

    # -- parser ---------------------------------------------------------------------------------


STACK_OPS = r"""
static void stk_pop(i64 *F, const int *hs, int n, int w, i128 count, int next) {
    for (int i = 0; i < n; i++) {
        if (i + count < n) memmove(F + HB[hs[i]], F + HB[hs[i + (int)count]], sizeof(i64) * w);
        else F[HB[hs[i]] + w - 1] = 0;
    }
    i128 v = (i128)F[next] - count; F[next] = (i64)(v > 0 ? v : 0);
}
static void stk_push(i64 *F, const int *hs, int n, int w, i128 count, int next) {
    for (int i = n - 1; i >= 0; i--) {
        if (i >= count) memmove(F + HB[hs[i]], F + HB[hs[i - (int)count]], sizeof(i64) * w);
        else F[HB[hs[i]] + w - 1] = 0;
    }
    i128 v = (i128)F[next] + count; F[next] = (i64)(v < n ? v : n);
}
"""
