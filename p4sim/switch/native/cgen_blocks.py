"""The larger blocks of the generated C: parser, checksums, deparser, pipelines and the
exported entry points (see ``cgen``; calculations and actions are in ``cgen_actions``)."""

from __future__ import annotations

from p4sim.switch.codegen import hexstr
from p4sim.switch.native.cgen import Unsupported, _lit
from p4sim.switch.native.cgen_actions import AB_NEGATIVE_POS, ActionBlocks
from p4sim.switch.primitives import DROP_PORT


class Blocks(ActionBlocks):
    def _extract(self, fields: list[tuple[str, int, bool]], nbits: int, base: str,
                 short: int) -> list[str]:
        nbytes = (nbits + 7) // 8
        lines = [f"if (P->pos + {nbytes} > P->len) return {short};",
                 "{ int64_t o = (int64_t)P->pos * 8;"]
        off = 0
        for i, (slot, width, signed) in enumerate(fields):
            if off % 8 == 0 and width % 8 == 0:
                val = f"(i64)get_be(P->data + P->pos + {off // 8}, {width // 8})"
            else:
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
                v = f"(uint64_t)F[{f.slot}] & {f.mask}ULL"
                if off % 8 == 0 and f.width % 8 == 0:
                    self.emit(f"    put_be(out + n + {off // 8}, {v}, {f.width // 8});")
                else:
                    self.emit(f"    put_bits(out + n, {off}, {v}, {f.width});")
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


ENTRY_COMMON = r"""
size_t nat_ctx_size(void) { return sizeof(ctx_t); }
int nat_nslots(void) { return NSLOTS; }
int nat_maxd(void) { return MAXD; }
void nat_init(ctx_t *C, i64 (*randint)(i64, i64), void *mt) {
    memset(C, 0, sizeof *C); C->rt.randint = randint; C->rt.mt = (mt_t *)mt;
}
void nat_set_table(ctx_t *C, int t, i32 n, i64 *m, i32 *act, i64 *data, i32 *goff, i32 *gcnt,
                   i32 *gact, i64 *gdata, i64 *pk, i64 *by, i32 def_act, i64 *def_data,
                   i32 *hidx, i32 hsize, i64 *runs, i32 nk) {
    tbl_t *T = &C->tbl[t];
    T->n = n; T->m = m; T->act = act; T->data = data; T->goff = goff; T->gcnt = gcnt;
    T->gact = gact; T->gdata = gdata; T->pk = pk; T->by = by; T->def_act = def_act;
    T->def_data = def_data; T->hidx = hidx; T->runs = runs; T->nruns = 0;
    T->hsize = nk <= 64 ? hsize : 0;
    if (T->hsize) tbl_index(T, nk);
}
void nat_set_register(ctx_t *C, int r, i64 *v) { C->reg[r] = v; }
void nat_set_counter(ctx_t *C, int c, uint64_t *pk, uint64_t *by) {
    C->cpk[c] = (i64 *)pk; C->cby[c] = (i64 *)by;
}
int nat_take_counted(ctx_t *C) { int c = C->rt.counted; C->rt.counted = 0; return c; }
"""
