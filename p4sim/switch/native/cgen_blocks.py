"""The larger blocks of the generated C: context, calculations, actions, parser, checksums,
deparser, pipelines and the exported entry points (see ``cgen``)."""

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


class Blocks:
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
                    "  " + g.store(lv, "(i128)R->randint((i64)lo, (i64)hi)"), "}"]
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

    def _extract(self, fields: list[tuple[str, int, bool]], nbits: int, base: str,
                 short: int) -> list[str]:
        nbytes = (nbits + 7) // 8
        lines = [f"if (P->pos + {nbytes} > P->len) return {short};",
                 "{ int64_t o = (int64_t)P->pos * 8;"]
        off = 0
        for i, (slot, width, signed) in enumerate(fields):
            val = f"(i64)get_bits(P->data, o + {off}, {width})"
            if signed:
                half = 1 << (width - 1)
                val = f"((({val}) ^ {half}LL) - {half}LL)"
            lines.append(f"  F[{base.format(i=i, slot=slot)}] = {val};")
            off += width
        lines.append(f"  P->pos += {nbytes}; }}")
        return lines

    def parser(self) -> None:
        p, g = self.p, self.g
        parser = p.parsers[0]
        err = p.errors
        short = err["PacketTooShort"]
        states = {s.get("name"): s for s in parser.get("parse_states") or []}
        self.emit("static int parse(ctx_t *C, pkt_t *P, i64 *F) {")
        self.emit("  rt_t *R = &C->rt; (void)R; const i64 *D = 0; (void)D;")
        init = parser.get("init_state")
        if init not in states:
            raise Unsupported("parser without its init state")
        self.emit(f"  goto S_{g._ident(init)};")
        for sname, st in states.items():
            self.emit(f" S_{g._ident(sname)}:;")
            for op in st.get("parser_ops") or []:
                for line in self._parser_op(op, short, err):
                    self.emit("  " + line)
            for line in self._transition(st, err):
                self.emit("  " + line)
        self.emit("}")

    def _parser_op(self, op: dict, short: int, err: dict) -> list[str]:
        g, p = self.g, self.p
        kind = op.get("op")
        ps = op.get("parameters") or []
        if kind == "extract":
            target = ps[0]
            ttype, tval = target.get("type"), target.get("value")
            if ttype == "regular":
                inst = p.header(tval)
                refs = [(f.slot, f.width, f.signed) for f in inst.fields]
                lines = self._extract(refs, inst.htype.fixed_bits, "{slot}", short)
                return [*lines, f"F[{inst.valid_slot}] = 1;",
                        *g.others_invalid((inst.htype, inst, None))]
            if ttype == "stack":
                stack = p.stacks[tval]
                lst, n = g.stack_list(stack.name)
                htype = stack.headers[0].htype
                refs = [(i, w, s) for i, (_, w, s) in enumerate(htype.fields)]
                lines = ["{", f"  i64 si = F[{stack.next_slot}];",
                         f"  if (si >= {n}) return {err['StackOutOfBounds']};",
                         f"  int hb = HB[{lst}[si]];"]
                lines += ["  " + x for x in self._extract(refs, htype.fixed_bits, "hb + {i}",
                                                           short)]
                lines += [f"  F[hb + {len(htype.fields)}] = 1;",
                          f"  F[{stack.next_slot}] = si + 1;", "}"]
                return lines
            raise Unsupported(f"extract into {ttype}")
        if kind == "set":
            return [g.store(g.lvalue(ps[0]), g.expr(ps[1]))]
        if kind == "verify":
            return [f"if (!({g.expr(ps[0])})) return (int)({g.expr(ps[1])});"]
        if kind in ("advance", "shift"):
            # advance: bits, whole bytes only (BMv2: else ParserInvalidArgument); shift: bytes.
            lines = ["{", f"  i128 b = {g.expr(ps[0])};"]
            if kind == "advance":
                lines += [f"  if (fmod_(R, b, 8) != 0) return {err['ParserInvalidArgument']};",
                          "  b = fdiv(R, b, 8);"]
            return [*lines, "  i128 e = (i128)P->pos + b;",
                    f"  if (e > P->len) return {short};",
                    f"  if (e < 0) nat_abort(R, {AB_NEGATIVE_POS});", "  P->pos = (i32)e;", "}"]
        if kind == "primitive":
            inner = ps[0]
            if inner.get("op") in ("exit", "_jump", "_jump_if_zero"):
                raise Unsupported(f"parser primitive {inner.get('op')!r}")
            return self.primitive(inner, 0, f"parser primitive {inner.get('op')!r}")
        raise Unsupported(f"parser op {kind!r}")

    def _transition(self, st: dict, err: dict) -> list[str]:
        g = self.g
        transitions = st.get("transitions") or []
        key = st.get("transition_key") or []

        def goto(t: dict) -> str:
            nxt = t.get("next_state")
            return "return 0;" if nxt is None else f"goto S_{g._ident(nxt)};"

        if not key:
            for t in transitions:
                if t.get("type") == "default" or t.get("value") is None:
                    return [goto(t)]
            return [goto(transitions[0])] if transitions else ["return 0;"]
        parts = []
        for comp in key:
            if comp.get("type") not in ("field", "stack_field"):
                raise Unsupported(f"parser transition key {comp.get('type')!r}")
            slot, width, _ = g.lvalue(comp)
            parts.append((f"F[{slot}]", width))
        lines = ["{", "  i128 k = 0;"]
        total = 0
        for i, (src, width) in enumerate(parts):
            nbits = width if len(parts) == 1 else (width + 7) // 8 * 8
            total += nbits
            mask = (1 << width) - 1
            lines.append(f"  k = (k << {nbits if i else 0}) | ((i128){src} & {mask}LL);")
        if total > 120:
            raise Unsupported("parser transition key wider than 120 bits")
        from p4sim.switch.native.cgen import _lit
        for t in transitions:
            ttype = t.get("type")
            if ttype == "default" or (ttype is None and t.get("value") is None):
                lines += ["  " + goto(t), "}"]
                return lines
            if ttype != "hexstr":
                raise Unsupported(f"parser transition {ttype!r}")
            value = hexstr(t.get("value"), "native")
            mask = t.get("mask")
            if mask is None:
                lines.append(f"  if (k == {_lit(value)}) {goto(t)}")
            else:
                m = hexstr(mask, "native")
                lines.append(f"  if ((k & {_lit(m)}) == {_lit(value & m)}) {goto(t)}")
        lines += [f"  return {err['NoMatch']};", "}"]
        return lines

    # -- checksums and deparser ---------------------------------------------------------------

    def checksums(self) -> None:
        g, p = self.g, self.p
        verify, update = [], []
        cerr = p.std_slot("checksum_error")
        for ck in p.checksums:
            cid = g.calc_ids.get(ck.get("calculation"))
            if cid is None:
                raise Unsupported("checksum with an unknown calculation")
            target = p.field(ck.get("target"))
            cond = g.expr(ck["if_cond"]) if ck.get("if_cond") else "1"
            if ck.get("verify", True):
                verify.append(f"  if (({cond}) && (i64)(calc_{cid}(C, P, F) & {target.mask}ULL)"
                              f" != F[{target.slot}]) F[{cerr}] = 1;")
            if ck.get("update", True):
                fn = "wraps" if target.signed else "wrapu"
                update.append(f"  if ({cond}) F[{target.slot}] = "
                              f"{fn}((i128)calc_{cid}(C, P, F), {target.width});")
        for name, body in (("verify_ck", verify), ("update_ck", update)):
            self.emit(f"static void {name}(ctx_t *C, pkt_t *P, i64 *F) {{")
            self.emit("  rt_t *R = &C->rt; (void)R;")
            self.out_lines(body)
            self.emit("}")

    def deparser(self) -> None:
        p = self.p
        self.emit("static int deparse(pkt_t *P, i64 *F, uint8_t *out) {")
        self.emit("  int64_t n = 0;")
        total = 0
        for hname in p.deparsers[0].get("order") or []:
            inst = p.header(hname)
            nbytes = (inst.htype.fixed_bits + 7) // 8
            total += nbytes
            self.emit(f"  if (F[{inst.valid_slot}]) {{ memset(out + n, 0, {nbytes});")
            off = 0
            for f in inst.fields:
                self.emit(f"    put_bits(out + n, {off}, (uint64_t)F[{f.slot}] & {f.mask}ULL, "
                          f"{f.width});")
                off += f.width
            self.emit(f"    n += {nbytes}; }}")
        self.emit("  memcpy(out + n, P->data + P->pos, (size_t)(P->len - P->pos));")
        self.emit("  return (int)(n + P->len - P->pos);")
        self.emit("}")
        self.emit(f"int nat_hdr_bytes(void) {{ return {total}; }}")

    # -- pipelines ----------------------------------------------------------------------------

    def _next(self, name: str | None) -> str:
        return "goto N_end;" if name is None else f"goto N_{self.g._ident(name)};"

    def _by_action(self, t: dict, var: str) -> list[str]:
        nt = t.get("next_tables") or {}
        lines = [f"switch ({var}) {{"]
        for aname, nxt in nt.items():
            if aname in ("__HIT__", "__MISS__"):
                continue
            for aid in self.action_by_name.get(aname, []):
                lines.append(f"case {aid}: {self._next(nxt)}")
        lines.append(f"default: {self._next(t.get('base_default_next'))}")
        return [*lines, "}"]

    def _table(self, t: dict) -> list[str]:
        g, p = self.g, self.p
        tid = g.table_ids[t["name"]]
        if t.get("support_timeout"):
            raise Unsupported(f"idle timeouts (table {t['name']})")
        if t.get("direct_meters"):
            raise Unsupported(f"direct meters (table {t['name']})")
        nt = t.get("next_tables") or {}
        hit_miss = "__HIT__" in nt or "__MISS__" in nt
        counters = bool(t.get("with_counters")) or any(
            c.get("is_direct") and c.get("binding") == t["name"]
            for c in p.counter_arrays.values())
        indirect = t.get("type") in ("indirect", "indirect_ws")
        keys = t.get("key") or []
        lines = ["{", f"  tbl_t *T = &C->tbl[{tid}]; int a; const i64 *d; (void)d;"]
        if keys or indirect:
            srcs = []
            for k in keys:
                kind = k.get("match_type")
                if kind == "valid":
                    src = f"F[{p.header(k.get('target')).valid_slot}]"
                elif kind in ("exact", "lpm", "ternary", "range", "optional"):
                    info = p.field(k.get("target"))
                    if info.width > 63:
                        raise Unsupported(f"table key wider than 63 bits ({t['name']})")
                    src = f"(F[{info.slot}] & {info.mask}LL)"
                else:
                    raise Unsupported(f"match kind {kind!r}")
                if k.get("mask"):
                    src = f"({src} & {hexstr(k['mask'], 'native')}LL)"
                srcs.append(src)
            nk = len(srcs)
            lines.append(f"  i64 key[{max(1, nk)}] = {{{', '.join(srcs) or '0'}}};")
            lines.append(f"  int e = tbl_find(T, key, {nk});")
            lines.append(f"  if (e < 0) goto M_{tid};")
            if counters:
                lines.append("  T->pk[e] += 1; T->by[e] += P->length; R->counted = 1;")
            lines.append("  if (T->act[e] >= 0) { a = T->act[e]; d = T->data + (i64)e * MAXD; }")
            if indirect:
                calc = self.profile_calc.get(t.get("action_profile"))
                lines.append(f"  else {{ int gn = T->gcnt[e]; if (gn == 0) goto M_{tid};")
                pick = f"(int)({calc}(C, P, F) % (uint64_t)gn)" if calc else "0"
                lines.append(f"    int gk = T->goff[e] + {pick};")
                lines.append("    a = T->gact[gk]; d = T->gdata + (i64)gk * MAXD; }")
            else:
                lines.append(f"  else goto M_{tid};")
            lines.append("  run_action(C, P, F, a, d);")
            lines.append("  if (P->exit) return;")
            if hit_miss:
                lines.append("  " + self._next(nt.get("__HIT__")))
            else:
                lines += ["  " + x for x in self._by_action(t, "a")]
        lines.append(f" M_{tid}:")
        lines.append("  a = T->def_act;")
        lines.append("  if (a >= 0) run_action(C, P, F, a, T->def_data);")
        lines.append("  if (P->exit) return;")
        if hit_miss:
            lines.append("  " + self._next(nt.get("__MISS__")))
        else:
            lines.append(f"  if (a < 0) {self._next(t.get('base_default_next'))}")
            lines += ["  " + x for x in self._by_action(t, "a")]
        return [*lines, "}"]

    def pipelines(self) -> None:
        g = self.g
        for pname, pipe in self.p.pipelines.items():
            self.emit(f"static void pipe_{g._ident(pname)}(ctx_t *C, pkt_t *P, i64 *F) {{")
            self.emit("  rt_t *R = &C->rt; (void)R;")
            self.emit(f"  {self._next(pipe.get('init_table'))}")
            for t in pipe.get("tables") or []:
                self.emit(f" N_{g._ident(t['name'])}:")
                self.out_lines(["  " + x for x in self._table(t)])
            for c in pipe.get("conditionals") or []:
                self.emit(f" N_{g._ident(c['name'])}:")
                self.emit(f"  if ({g.expr(c.get('expression'))}) {self._next(c.get('true_next'))}"
                          f" else {self._next(c.get('false_next'))}")
            for ac in pipe.get("action_calls") or []:
                aid = ac.get("action_id")
                if aid not in self.p.actions:
                    raise Unsupported("action call of an unknown action")
                self.emit(f" N_{g._ident(ac['name'])}:")
                self.emit(f"  act_{aid}(C, P, F, 0); if (P->exit) return;")
                self.emit(f"  {self._next(ac.get('next_node'))}")
            self.emit(" N_end: return;")
            self.emit("}")

    # -- entry points ---------------------------------------------------------------------------

    def entry_points(self) -> None:
        p, g = self.p, self.g
        s = p.std_slot
        pipes = {name: f"pipe_{g._ident(name)}" for name in p.pipelines}
        ingress = pipes.get("ingress")
        egress = pipes.get("egress") if (p.pipelines.get("egress") or {}).get("init_table") \
            else None
        metadata_valid = [inst.valid_slot for inst in p.headers.values() if inst.metadata]
        deq_mask = self._mask(s("deq_timedelta"))
        self.emit(ENTRY_COMMON)
        # The stage bodies; the exported calls wrap them in the abort handler (setjmp).
        self.emit("static void ingress_body(ctx_t *C, pkt_t *P, i64 *F, i32 port, i64 igts, "
                  "i64 *out) {")
        self.emit("  memset(F, 0, sizeof(i64) * NSLOTS);")
        for slot in metadata_valid:
            self.emit(f"  F[{slot}] = 1;")
        self.emit(f"  F[{s('ingress_port')}] = port; F[{s('packet_length')}] = P->len; "
                  f"F[{s('ingress_global_timestamp')}] = igts;")
        self.emit("  int err = parse(C, P, F);")
        self.emit(f"  if (err) {{ F[{s('parser_error')}] = err; out[2] = 1; }}")
        self.emit("  out[1] = P->pos;")
        self.emit("  verify_ck(C, P, F);")
        if ingress:
            self.emit(f"  {ingress}(C, P, F);")
        self.emit("  out[3] = P->has_clone; out[4] = P->clone_session; out[5] = P->clone_fl;")
        self.emit("}")
        self.emit("static int egress_body(ctx_t *C, pkt_t *P, i64 *F, i32 port, i64 ts, "
                  "i64 left, i64 prio, uint8_t *outbuf, i64 *out) {")
        self.emit(f"  F[{s('egress_port')}] = port; F[{s('egress_global_timestamp')}] = ts;")
        self.emit(f"  F[{s('deq_timedelta')}] = (ts - F[{s('enq_timestamp')}]) & {deq_mask}LL;")
        self.emit(f"  F[{s('deq_qdepth')}] = left; F[{s('qid')}] = prio;")
        if egress:
            self.emit(f"  {egress}(C, P, F);")
        self.emit("  if (P->has_clone) { out[4] = P->clone_session; out[5] = P->clone_fl; "
                  "return -2; }")
        self.emit(f"  if (F[{s('egress_spec')}] == {DROP_PORT}) return -3;")
        self.emit("  update_ck(C, P, F);")
        self.emit("  return deparse(P, F, outbuf);")
        self.emit("}")
        self.emit("int nat_ingress(ctx_t *C, i64 *F, const uint8_t *data, i32 len, i32 port, "
                  "i64 igts, i64 *out) {")
        self.emit("  pkt_t P = {F, data, len, 0, 0, 0, 0, 0, len};")
        self.emit("  out[2] = 0;")
        self.emit("  if (setjmp(C->rt.jb)) { out[0] = C->rt.abort_code; return -1; }")
        self.emit("  ingress_body(C, &P, F, port, igts, out);")
        self.emit("  return 0;")
        self.emit("}")
        self.emit("int nat_egress(ctx_t *C, i64 *F, const uint8_t *data, i32 len, i32 pos, "
                  "i32 port, i64 ts, i64 left, i64 prio, uint8_t *outbuf, i64 *out) {")
        self.emit("  pkt_t P = {F, data, len, pos, 0, 0, 0, 0, len};")
        self.emit("  if (setjmp(C->rt.jb)) { out[0] = C->rt.abort_code; return -1; }")
        self.emit("  return egress_body(C, &P, F, port, ts, left, prio, outbuf, out);")
        self.emit("}")
        # Ingress, and egress at once when the packet's queue lets it through (``direct``):
        # 0 queue it, 1 ingress special, 2 dropped in ingress, 3 sent (port out[6], length
        # out[7]), 4 dropped in egress, 5 egress special, -1 aborted.
        self.emit("int nat_run(ctx_t *C, i64 *F, const uint8_t *data, i32 len, i32 port, "
                  "i64 igts, i64 nowus, const uint8_t *direct, uint8_t *outbuf, i64 *out) {")
        self.emit("  pkt_t P = {F, data, len, 0, 0, 0, 0, 0, len};")
        self.emit("  out[2] = 0;")
        self.emit("  if (setjmp(C->rt.jb)) { out[0] = C->rt.abort_code; return -1; }")
        self.emit("  ingress_body(C, &P, F, port, igts, out);")
        self.emit(f"  if (P.has_clone || F[{s('mcast_grp')}]) return 1;")
        self.emit(f"  i64 ep = F[{s('egress_spec')}];")
        self.emit(f"  if (ep == {DROP_PORT}) return 2;")
        self.emit("  if (!direct || ep < 0 || ep >= 512 || !direct[ep]) return 0;")
        self.emit(f"  F[{s('enq_timestamp')}] = nowus & {self._mask(s('enq_timestamp'))}LL; "
                  f"F[{s('enq_qdepth')}] = 0;")
        self.emit("  out[6] = ep;")
        self.emit("  int n = egress_body(C, &P, F, (i32)ep, nowus, 0, 0, outbuf, out);")
        self.emit("  if (n >= 0) { out[7] = n; return 3; }")
        self.emit("  return n == -3 ? 4 : 5;")
        self.emit("}")

    def _mask(self, slot: int) -> int:
        info = self.p.slot_fields[slot]
        return info.mask if info is not None and info.width else -1


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

ENTRY_COMMON = r"""
size_t nat_ctx_size(void) { return sizeof(ctx_t); }
int nat_nslots(void) { return NSLOTS; }
int nat_maxd(void) { return MAXD; }
void nat_init(ctx_t *C, i64 (*randint)(i64, i64)) { memset(C, 0, sizeof *C); C->rt.randint = randint; }
void nat_set_table(ctx_t *C, int t, i32 n, i64 *m, i32 *act, i64 *data, i32 *goff, i32 *gcnt,
                   i32 *gact, i64 *gdata, i64 *pk, i64 *by, i32 def_act, i64 *def_data,
                   i32 *hidx, i32 hsize, i32 nk) {
    tbl_t *T = &C->tbl[t];
    T->n = n; T->m = m; T->act = act; T->data = data; T->goff = goff; T->gcnt = gcnt;
    T->gact = gact; T->gdata = gdata; T->pk = pk; T->by = by; T->def_act = def_act;
    T->def_data = def_data; T->hidx = hidx; T->hsize = nk <= 64 ? hsize : 0;
    if (T->hsize) tbl_index(T, nk);
}
void nat_set_register(ctx_t *C, int r, i64 *v) { C->reg[r] = v; }
void nat_set_counter(ctx_t *C, int c, uint64_t *pk, uint64_t *by) {
    C->cpk[c] = (i64 *)pk; C->cby[c] = (i64 *)by;
}
int nat_take_counted(ctx_t *C) { int c = C->rt.counted; C->rt.counted = 0; return c; }
"""
