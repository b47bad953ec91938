/* hosts.receiver.Receiver with hosts.reorder.ReorderBuffer and MessageAssembler: no credit
 * granter, no Telemetry Reports; a flow answers on the port its cells last arrived on. */

typedef struct { /* a UdpFramer: its header and IP id counter */
    uint8_t hdr[42];
    i64 ip_id;
} framer_t;

typedef struct {
    i64 index, length, crc;
    double completion;
} rec_t;

typedef struct {
    uint8_t src_ip[4];
    i64 qpn;
    /* Flow.port (the program's port index), Flow.framer (fr[cur]) and Flow.framers
     * (by_port: port -> index in fr, -1: none; the first framer is in fr but not there) */
    int port, cur, nfr, *by_port;
    framer_t *fr;
    /* the reorder buffer: held cells in a ring indexed by seq & mask, every held seq below
     * expected + cap (grown as cells arrive further ahead, up to the window) */
    i64 expected, window, cap, mask, depth, hist_cap;
    i64 *h_seq;
    double *h_at;
    int *h_op, *h_pad;
    i32 *h_len;
    uint8_t **h_data;
    i64 received, delivered, out_of_order, duplicates, beyond_window, max_depth, delayed;
    double delay_max, delay_sum;
    i64 *hist; /* depth -> out-of-order arrivals, 0..hist_cap - 1 (grown) */
    /* the assembler */
    uint8_t *a_held;
    i32 a_held_len;
    int a_has_held, a_has_first;
    uint32_t a_crc;
    i64 a_len, a_count, a_malformed;
    double a_first;
    /* the flow */
    i64 pending, gap_expected, cells, ce_cells, int_cells, cnps, acks, naks, delivered_msgs;
    double last_ack, last_cnp, last_nak, gap_since;
    uint8_t int_block[1024];
    i32 int_len;
    int has_int;
    rec_t *rec;
    i64 nrec, caprec;
} flow_t;

typedef struct rcv_t {
    i64 window, ack_every, keep_records, start_psn;
    double ack_delay_s, nak_holdoff_s, cnp_interval_s;
    flow_t **flow;
    int nflows, capflows;
    i64 messages_total, not_roce;
} rcv_t;

static rcv_t *rcv_new(const i64 *iv, const double *dv) {
    rcv_t *R = xcalloc(1, sizeof(rcv_t));
    R->window = iv[0]; R->ack_every = iv[1]; R->keep_records = iv[2]; R->start_psn = iv[3];
    R->ack_delay_s = dv[0]; R->nak_holdoff_s = dv[1]; R->cnp_interval_s = dv[2];
    return R;
}

static void rcv_free(rcv_t *R) {
    if (!R) return;
    for (int i = 0; i < R->nflows; i++) {
        flow_t *F = R->flow[i];
        for (i64 k = 0; k < F->cap; k++) free(F->h_data[k]);
        free(F->h_seq); free(F->h_at); free(F->h_op); free(F->h_pad); free(F->h_len);
        free(F->h_data); free(F->hist); free(F->a_held); free(F->rec); free(F->fr);
        free(F->by_port); free(F);
    }
    free(R->flow);
    free(R);
}

static void ring_alloc(flow_t *F, i64 cap) {
    F->cap = cap;
    F->mask = cap - 1;
    F->h_seq = xcalloc((size_t)cap, sizeof(i64));
    for (i64 k = 0; k < cap; k++) F->h_seq[k] = -1;
    F->h_at = xcalloc((size_t)cap, sizeof(double));
    F->h_op = xcalloc((size_t)cap, sizeof(int));
    F->h_pad = xcalloc((size_t)cap, sizeof(int));
    F->h_len = xcalloc((size_t)cap, sizeof(i32));
    F->h_data = xcalloc((size_t)cap, sizeof(uint8_t *));
}

/* Double the ring: a thousand flows of the default 4096-cell window would hold 160 MiB
 * before a cell was out of order. */
static void ring_grow(flow_t *F) {
    flow_t old = *F;
    ring_alloc(F, 2 * old.cap);
    for (i64 k = 0; k < old.cap; k++) {
        i64 seq = old.h_seq[k];
        if (seq < 0) {
            free(old.h_data[k]);
            continue;
        }
        i64 j = seq & F->mask;
        F->h_seq[j] = seq;
        F->h_at[j] = old.h_at[k];
        F->h_op[j] = old.h_op[k];
        F->h_pad[j] = old.h_pad[k];
        F->h_len[j] = old.h_len[k];
        F->h_data[j] = old.h_data[k];
    }
    free(old.h_seq); free(old.h_at); free(old.h_op); free(old.h_pad); free(old.h_len);
    free(old.h_data);
}

/* Receiver._framer (cells.l2l4_header): replies go back to the cell's source MAC and IP
 * from our port's MAC, UDP from the cell's source port to 4791; appended to the flow's */
static int new_framer(flow_t *F, const roce_t *f, const uint8_t *mac) {
    F->fr = xrealloc(F->fr, sizeof(framer_t) * (size_t)(F->nfr + 1));
    framer_t *fr = &F->fr[F->nfr];
    memset(fr, 0, sizeof *fr);
    uint8_t *h = fr->hdr;
    memcpy(h, f->src_mac, 6);
    memcpy(h + 6, mac, 6);
    wr16(h + 12, 0x0800);
    uint8_t *ip = h + 14;
    ip[0] = 0x45; ip[1] = 0;
    wr16(ip + 2, 28); wr16(ip + 4, 0); wr16(ip + 6, (uint32_t)LAY[L_DF]);
    ip[8] = (uint8_t)LAY[L_TTL]; ip[9] = 17;
    wr16(ip + 10, 0);
    memcpy(ip + 12, f->dst_ip, 4);
    memcpy(ip + 16, f->src_ip, 4);
    wr16(ip + 10, ip_checksum(ip));
    wr16(h + 34, (uint32_t)f->sport);
    wr16(h + 36, (uint32_t)LAY[L_ROCE_PORT]);
    wr16(h + 38, 8);
    wr16(h + 40, 0);
    return F->nfr++;
}

/* Receiver._new_flow, on the program's port ``port`` (of nports) */
static flow_t *new_flow(rcv_t *R, const roce_t *f, const uint8_t *mac, int port, int nports) {
    flow_t *F = xcalloc(1, sizeof(flow_t));
    memcpy(F->src_ip, f->src_ip, 4);
    F->qpn = f->qpn;
    F->port = port;
    F->cur = new_framer(F, f, mac);
    F->by_port = xcalloc((size_t)nports, sizeof(int));
    for (int i = 0; i < nports; i++) F->by_port[i] = -1;
    F->window = R->window;
    F->expected = R->start_psn;
    ring_alloc(F, 64);
    F->hist_cap = 64;
    F->hist = xcalloc((size_t)F->hist_cap, sizeof(i64));
    F->last_cnp = F->last_nak = -INFINITY;
    F->gap_expected = -1;
    if (R->nflows == R->capflows) {
        R->capflows = R->capflows ? 2 * R->capflows : 4;
        R->flow = xrealloc(R->flow, sizeof(flow_t *) * (size_t)R->capflows);
    }
    R->flow[R->nflows++] = F;
    return F;
}

/* flow.framer.frame(body) into H->frame, then out on flow.port */
static void send_control(hc_t *H, prog_t *P, flow_t *F, const uint8_t *body, i32 blen) {
    uint8_t *buf = H->frame;
    framer_t *fr = &F->fr[F->cur];
    memcpy(buf, fr->hdr, 42);
    fr->ip_id = (fr->ip_id + 1) & 0xFFFF;
    wr16(buf + 16, (uint32_t)(28 + blen));
    wr16(buf + 18, (uint32_t)fr->ip_id);
    wr16(buf + 24, 0);
    wr16(buf + 24, ip_checksum(buf + 14));
    wr16(buf + 38, (uint32_t)(8 + blen));
    memcpy(buf + 42, body, (size_t)blen);
    port_send(H, P, F->port, buf, 42 + blen);
}

static inline int held(flow_t *F, i64 seq) { return F->h_seq[seq & F->mask] == seq; }

/* Receiver._send_ack: sack.encode_ack with the reorder buffer's bitmap */
static void send_ack(hc_t *H, prog_t *P, rcv_t *R, flow_t *F, double now, int nak) {
    uint8_t body[12 + 4 + 12 + 64 + 1024 + 4];
    i64 cum = F->expected - 1, nb = LAY[L_BITMAP];
    int echo = F->has_int && F->int_len > 0;
    uint8_t *p = body;
    p[0] = (uint8_t)LAY[L_OP_ACK]; p[1] = 0; wr16(p + 2, 0xFFFF);
    wr32(p + 4, (uint32_t)(F->qpn & 0xFFFFFF));
    wr32(p + 8, (uint32_t)(cum & 0xFFFFFF));
    p += 12;
    wr32(p, (uint32_t)((nak ? LAY[L_NAK] : 0) << 24 | (F->delivered_msgs & 0xFFFFFF)));
    p += 4;
    p[0] = (uint8_t)LAY[L_SACK_VERSION];
    p[1] = (uint8_t)(echo ? LAY[L_SACK_INT] : 0);
    wr16(p + 2, (uint32_t)nb);
    wr32(p + 4, (uint32_t)((cum + 1) & 0xFFFFFF));
    wr32(p + 8, 0);
    p += 12;
    memset(p, 0, (size_t)nb);
    if (F->depth)
        for (i64 i = 0; i < nb * 8; i++)
            if (held(F, F->expected + i)) p[i >> 3] |= (uint8_t)(0x80 >> (i & 7));
    p += nb;
    if (echo) {
        memcpy(p, F->int_block, (size_t)F->int_len);
        p += F->int_len;
    }
    memset(p, 0, 4);
    p += 4;
    F->has_int = 0;
    send_control(H, P, F, body, (i32)(p - body));
    F->pending = 0;
    F->last_ack = now;
    if (nak) F->naks++;
    else F->acks++;
}

/* MessageAssembler.add: 1 when a message completed (its record kept) */
static void a_reset(flow_t *F) {
    F->a_has_held = 0;
    F->a_crc = 0;
    F->a_len = 0;
    F->a_has_first = 0;
}

static void a_take(flow_t *F, const uint8_t *d, i64 n) {
    F->a_crc = crc32_update(F->a_crc, d, n);
    F->a_len += n;
}

static int a_add(rcv_t *R, flow_t *F, int opcode, const uint8_t *pay, i32 n, int pad,
                 double arrived, double now) {
    if ((opcode == LAY[L_OP_FIRST] || opcode == LAY[L_OP_ONLY_IMM]) && F->a_has_held) {
        F->a_malformed++;
        a_reset(F);
    }
    if (!F->a_has_first || arrived < F->a_first) {
        F->a_has_first = 1;
        F->a_first = arrived;
    }
    if (!is_last(opcode)) {
        if (F->a_has_held) a_take(F, F->a_held, F->a_held_len);
        F->a_held = xrealloc(F->a_held, (size_t)n);
        memcpy(F->a_held, pay, (size_t)n);
        F->a_held_len = n;
        F->a_has_held = 1;
        return 0;
    }
    if (n < 4) goto bad;
    i64 msg_len = rd32(pay);
    i64 hl = F->a_has_held ? F->a_held_len : 0;
    i64 tail = msg_len - F->a_len - hl, room = n - 4;
    i64 tpos = tail > 0 ? tail : 0;
    if (tail > room || tail <= -4 || (tail < 0 && !hl) || ((-tpos) % 4 + 4) % 4 != pad)
        goto bad;
    if (tail < 0) {
        a_take(F, F->a_held, hl + tail);
    } else {
        a_take(F, F->a_held, hl);
        a_take(F, pay + 4, tail);
    }
    if (F->nrec < R->keep_records) {
        if (F->nrec == F->caprec) {
            F->caprec = F->caprec ? 2 * F->caprec : 8;
            F->rec = xrealloc(F->rec, sizeof(rec_t) * (size_t)F->caprec);
        }
        double first = F->a_has_first ? F->a_first : arrived;
        F->rec[F->nrec++] = (rec_t){F->a_count, msg_len, F->a_crc, now - first};
    }
    F->a_count++;
    a_reset(F);
    return 1;
bad:
    F->a_malformed++;
    a_reset(F);
    return 0;
}

/* one in-order cell to the assembler (Receiver.on_frame's loop body) */
static int deliver_cell(rcv_t *R, flow_t *F, int op, const uint8_t *pay, i32 n, int pad,
                        double arrived, double now) {
    if (!a_add(R, F, op, pay, n, pad, arrived, now)) return 0;
    F->delivered_msgs++;
    R->messages_total++;
    return 1;
}

/* Receiver.on_frame for a data cell */
static void rcv_frame(hc_t *H, prog_t *P, int port, const uint8_t *b, const roce_t *f,
                      double now) {
    rcv_t *R = P->r;
    if (!is_data(f->opcode)) return;
    flow_t *F = NULL;
    for (int i = 0; i < R->nflows; i++)
        if (R->flow[i]->qpn == f->qpn && !memcmp(R->flow[i]->src_ip, f->src_ip, 4)) {
            F = R->flow[i];
            break;
        }
    const uint8_t *mac = H->host[P->host].mac[P->host_port[port]];
    if (!F) F = new_flow(R, f, mac, port, P->nports);
    if (F->port != port) { /* answer on the port the peer's cells now arrive on */
        F->port = port;
        if (F->by_port[port] < 0) F->by_port[port] = new_framer(F, f, mac);
        F->cur = F->by_port[port];
    }
    F->cells++;
    if (f->ecn == LAY[L_ECN_CE]) {
        F->ce_cells++;
        if (now - F->last_cnp >= R->cnp_interval_s) {
            F->last_cnp = now;
            F->cnps++;
            uint8_t cnp[12 + 16 + 4] = {0};
            cnp[0] = (uint8_t)LAY[L_OP_CNP];
            wr16(cnp + 2, 0xFFFF);
            wr32(cnp + 4, (uint32_t)(LAY[L_BECN] | (F->qpn & 0xFFFFFF)));
            send_control(H, P, F, cnp, sizeof cnp);
        }
    }
    if (f->int_block) {
        F->int_cells++;
        F->has_int = 1;
        F->int_len = f->int_len < (i32)sizeof F->int_block ? f->int_len : 0;
        memcpy(F->int_block, f->int_block, (size_t)F->int_len);
    }
    i64 seq = psn_unwrap(f->psn, F->expected);
    int dup = seq < F->expected || held(F, seq);
    const uint8_t *pay = b + f->body_off;
    i32 n = f->body_end - f->body_off;
    int completed = 0;
    /* ReorderBuffer.push */
    F->received++;
    if (dup) {
        F->duplicates++;
    } else if (seq >= F->expected + F->window) {
        F->beyond_window++;
    } else if (seq != F->expected) {
        F->out_of_order++;
        while (seq - F->expected >= F->cap) ring_grow(F);
        i64 k = seq & F->mask;
        F->h_seq[k] = seq;
        F->h_at[k] = now;
        F->h_op[k] = f->opcode;
        F->h_pad[k] = f->pad;
        F->h_data[k] = xrealloc(F->h_data[k], (size_t)(n > 0 ? n : 1));
        memcpy(F->h_data[k], pay, (size_t)(n > 0 ? n : 0));
        F->h_len[k] = n;
        F->depth++;
        if (F->depth > F->max_depth) F->max_depth = F->depth;
        if (F->depth >= F->hist_cap) {
            F->hist = xrealloc(F->hist, sizeof(i64) * (size_t)(2 * F->hist_cap));
            memset(F->hist + F->hist_cap, 0, sizeof(i64) * (size_t)F->hist_cap);
            F->hist_cap *= 2;
        }
        F->hist[F->depth]++;
    } else {
        F->expected++;
        i64 out = 1;
        completed |= deliver_cell(R, F, f->opcode, pay, n, f->pad, now, now);
        while (held(F, F->expected)) {
            i64 k = F->expected & F->mask;
            double delay = now - F->h_at[k];
            F->delayed++;
            F->delay_sum += delay;
            F->delay_max = pmax(F->delay_max, delay);
            F->h_seq[k] = -1;
            F->depth--;
            F->expected++;
            out++;
            completed |= deliver_cell(R, F, F->h_op[k], F->h_data[k], F->h_len[k], F->h_pad[k],
                                      F->h_at[k], now);
        }
        F->delivered += out;
    }
    F->pending++;
    if (dup || completed || F->pending >= R->ack_every) send_ack(H, P, R, F, now, 0);
}

/* Receiver.poll: tick, then the next deadline (INFINITY: none) */
static double rcv_poll(hc_t *H, prog_t *P, double now) {
    rcv_t *R = P->r;
    for (int i = 0; i < R->nflows; i++) {
        flow_t *F = R->flow[i];
        if (F->pending && now - F->last_ack >= R->ack_delay_s) send_ack(H, P, R, F, now, 0);
        if (F->depth) {
            if (F->gap_expected != F->expected) {
                F->gap_expected = F->expected;
                F->gap_since = now;
            } else if (now - F->gap_since >= R->nak_holdoff_s &&
                       now - F->last_nak >= R->nak_holdoff_s) {
                F->last_nak = now;
                send_ack(H, P, R, F, now, 1);
            }
        }
    }
    double due = INFINITY;
    int any = 0;
    for (int i = 0; i < R->nflows; i++) {
        flow_t *F = R->flow[i];
        if (F->pending) {
            due = any ? pmin(due, F->last_ack + R->ack_delay_s) : F->last_ack + R->ack_delay_s;
            any = 1;
        }
        if (F->depth) {
            double d = F->gap_expected != F->expected
                           ? now : pmax(F->gap_since, F->last_nak) + R->nak_holdoff_s;
            due = any ? pmin(due, d) : d;
            any = 1;
        }
    }
    if (!any) return INFINITY;
    return pmax(due, nextafter(now, INFINITY));
}
