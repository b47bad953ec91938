/* hosts.sender.Sender with hosts.transport.SenderTransport and hosts.ratelimit.TokenBucket,
 * rate control "none" (a fixed line rate, no window), one NIC port. */

typedef struct snd_t {
    /* configuration */
    i64 qpn, payload_len, msg_size, count, seed, start_seq, max_inflight, frame_len, cells;
    double rto_s, holdoff_s, health_s, idle_poll_s, rate_bps, burst;
    uint8_t *tmpl;
    i32 tmpl_len, bth_off, payload_off;
    i64 ip_sum;
    /* the transport */
    i64 snd_una, snd_nxt, next_seq, added, done_n;
    double *queued_at, *first_sent, *completed; /* per message; first_sent NAN: None */
    i64 cap, mask; /* rings indexed by seq & mask, cap > snd_nxt - snd_una (grown) */
    i64 *fl_seq, *fl_prev, *fl_next, *fl_tx, *sk_seq, *rq_seq;
    double *fl_at;
    i64 fl_head, fl_tail, fl_n;
    i64 *retx, retx_cap, retx_head, retx_n; /* a deque of seqs */
    double srtt, rttvar, last_hole_scan;
    int has_srtt;
    i64 st[10]; /* TransportStats in field order */
    /* the sender */
    double tokens, stamp, last_send, next_health, start;
    int has_stamp, paced_idle;
    i64 rr, cnps, malformed, unsupported;
    uint8_t unit[264]; /* cells.message_bytes' repeating unit of message unit_index */
    i64 unit_index;
} snd_t;

enum { S_SENT, S_NEW, S_RETX_SACK, S_RETX_NAK, S_RETX_TIMEOUT, S_RETX_FAILOVER, S_ACKS, S_NAKS,
       S_BAD_ACKS, S_DONE };

/* -- the ordered in-flight map (a dict in (re)send order) --------------------------------- */

static inline i64 fl_slot(snd_t *S, i64 seq) { return seq & S->mask; }
static inline int fl_has(snd_t *S, i64 seq) { return S->fl_seq[fl_slot(S, seq)] == seq; }

static void fl_unlink(snd_t *S, i64 seq) {
    i64 k = fl_slot(S, seq), p = S->fl_prev[k], n = S->fl_next[k];
    if (p >= 0) S->fl_next[fl_slot(S, p)] = n;
    else S->fl_head = n;
    if (n >= 0) S->fl_prev[fl_slot(S, n)] = p;
    else S->fl_tail = p;
    S->fl_seq[k] = -1;
    S->fl_n--;
}

static void fl_append(snd_t *S, i64 seq, double at, i64 tx) {
    i64 k = fl_slot(S, seq);
    S->fl_seq[k] = seq;
    S->fl_at[k] = at;
    S->fl_tx[k] = tx;
    S->fl_prev[k] = S->fl_tail;
    S->fl_next[k] = -1;
    if (S->fl_tail >= 0) S->fl_next[fl_slot(S, S->fl_tail)] = seq;
    else S->fl_head = seq;
    S->fl_tail = seq;
    S->fl_n++;
}

static inline int sacked(snd_t *S, i64 seq) { return S->sk_seq[seq & S->mask] == seq; }

static void retx_push(snd_t *S, i64 seq) {
    if (S->retx_n == S->retx_cap) {
        i64 cap = S->retx_cap ? 2 * S->retx_cap : 64;
        i64 *r = xcalloc((size_t)cap, sizeof(i64));
        for (i64 i = 0; i < S->retx_n; i++) r[i] = S->retx[(S->retx_head + i) % S->retx_cap];
        free(S->retx);
        S->retx = r;
        S->retx_cap = cap;
        S->retx_head = 0;
    }
    S->retx[(S->retx_head + S->retx_n++) % S->retx_cap] = seq;
}

static void retx_pop(snd_t *S) { /* popleft, and _retx_queued.discard */
    i64 seq = S->retx[S->retx_head];
    S->retx_head = (S->retx_head + 1) % S->retx_cap;
    S->retx_n--;
    if (S->rq_seq[seq & S->mask] == seq) S->rq_seq[seq & S->mask] = -1;
}

static int queue_retx(snd_t *S, i64 seq) {
    if (S->rq_seq[seq & S->mask] == seq || seq < S->snd_una || sacked(S, seq)) return 0;
    S->rq_seq[seq & S->mask] = seq;
    retx_push(S, seq);
    return 1;
}

/* -- messages and cells ------------------------------------------------------------------- */

static void add_message(snd_t *S, double now) {
    i64 i = S->added++;
    if (i >= S->count) abort(); /* _add_messages never goes past count */
    S->queued_at[i] = now;
    S->first_sent[i] = NAN;
    S->completed[i] = NAN;
    S->next_seq += S->cells;
}

static void add_messages(snd_t *S, double now) {
    while (S->next_seq - S->snd_nxt < 2 * S->max_inflight) {
        if (S->added >= S->count) return;
        add_message(S, now);
    }
}

/* cells.message_bytes(index, size, seed)[off:off+n] into out: its unit (seed, index, then
 * bytes 0..255) repeated */
static void message_slice(snd_t *S, i64 index, i64 off, i64 n, uint8_t *out) {
    if (index != S->unit_index) {
        wr32(S->unit + 4, (uint32_t)index);
        S->unit_index = index;
    }
    i64 u = off % 264;
    while (n > 0) {
        i64 run = 264 - u < n ? 264 - u : n;
        memcpy(out, S->unit + u, (size_t)run);
        out += run;
        n -= run;
        u = 0;
    }
}

/* transport.cell + CellTemplate.frame into H->frame; its length */
static i32 build_cell(snd_t *S, i64 seq, uint8_t *buf) {
    i64 m = (seq - S->start_seq) / S->cells, index = seq - S->start_seq - m * S->cells;
    i64 plen = S->payload_len, len = S->msg_size, n = S->cells;
    int opcode, pad = 0;
    i64 offset = index * plen, length;
    if (n == 1) {
        opcode = (int)LAY[L_OP_ONLY_IMM];
        offset = 0;
        length = len;
    } else if (index == n - 1) {
        opcode = (int)LAY[L_OP_LAST_IMM];
        if (offset > len) offset = len;
        length = len - index * plen > 0 ? len - index * plen : 0;
    } else {
        opcode = (int)(index == 0 ? LAY[L_OP_FIRST] : LAY[L_OP_MIDDLE]);
        length = plen < len - offset ? plen : len - offset;
    }
    memcpy(buf, S->tmpl, (size_t)S->tmpl_len);
    uint8_t *pay = buf + S->payload_off;
    i64 at = 0;
    if (is_last(opcode)) {
        wr32(pay, (uint32_t)len);
        at = 4;
        pad = (int)((-length) % 4 + 4) % 4;
    }
    message_slice(S, m, offset, length, pay + at);
    memset(pay + at + length, 0, (size_t)(plen - at - length));
    /* the IP id and checksum, the BTH's opcode, pad and PSN */
    i64 ip_id = seq & 0xFFFF, total = S->ip_sum + ip_id;
    total = (total & 0xFFFF) + (total >> 16);
    total = (total & 0xFFFF) + (total >> 16);
    wr16(buf + 14 + 4, (uint32_t)ip_id);
    wr16(buf + 14 + 10, (uint32_t)(~total & 0xFFFF));
    i32 b = S->bth_off;
    buf[b + LAY[L_OPCODE]] = (uint8_t)opcode;
    buf[b + LAY[L_PAD_BYTE]] = (uint8_t)((pad & 3) << LAY[L_PAD_SHIFT]);
    wr32(buf + b + LAY[L_PSN_WORD], (uint32_t)(seq & 0xFFFFFF));
    return S->tmpl_len;
}

/* -- the transport ------------------------------------------------------------------------ */

static i64 next_to_send(snd_t *S) {
    while (S->retx_n) {
        i64 seq = S->retx[S->retx_head];
        if (seq < S->snd_una || sacked(S, seq)) {
            retx_pop(S);
            continue;
        }
        return seq;
    }
    i64 seq = S->snd_nxt;
    if (seq >= S->next_seq || seq - S->snd_una >= S->max_inflight) return -1;
    return seq;
}

static void rings_alloc(snd_t *S, i64 cap) {
    S->cap = cap;
    S->mask = cap - 1;
    S->fl_seq = xcalloc((size_t)cap, sizeof(i64));
    S->fl_prev = xcalloc((size_t)cap, sizeof(i64));
    S->fl_next = xcalloc((size_t)cap, sizeof(i64));
    S->fl_tx = xcalloc((size_t)cap, sizeof(i64));
    S->sk_seq = xcalloc((size_t)cap, sizeof(i64));
    S->rq_seq = xcalloc((size_t)cap, sizeof(i64));
    S->fl_at = xcalloc((size_t)cap, sizeof(double));
    for (i64 i = 0; i < cap; i++) S->fl_seq[i] = S->sk_seq[i] = S->rq_seq[i] = -1;
}

/* Double the rings (a flow's window fills them only under loss or a long path; a thousand
 * senders of the largest window would hold 100 MiB): every live seq keeps its entries; a
 * queued-for-resend mark below snd_una, which nothing asks about, is dropped. */
static void rings_grow(snd_t *S) {
    snd_t old = *S;
    rings_alloc(S, 2 * old.cap);
    for (i64 k = 0; k < old.cap; k++) {
        i64 seq = old.fl_seq[k];
        if (seq >= 0) {
            i64 j = seq & S->mask;
            S->fl_seq[j] = seq;
            S->fl_prev[j] = old.fl_prev[k];
            S->fl_next[j] = old.fl_next[k];
            S->fl_tx[j] = old.fl_tx[k];
            S->fl_at[j] = old.fl_at[k];
        }
        if (old.sk_seq[k] >= 0) S->sk_seq[old.sk_seq[k] & S->mask] = old.sk_seq[k];
        if (old.rq_seq[k] >= S->snd_una) S->rq_seq[old.rq_seq[k] & S->mask] = old.rq_seq[k];
    }
    free(old.fl_seq); free(old.fl_prev); free(old.fl_next); free(old.fl_tx);
    free(old.sk_seq); free(old.rq_seq); free(old.fl_at);
}

static void on_sent(snd_t *S, i64 seq, double now) {
    i64 tx = 1;
    while (seq - S->snd_una >= S->cap) rings_grow(S);
    if (fl_has(S, seq)) {
        tx = S->fl_tx[fl_slot(S, seq)] + 1;
        fl_unlink(S, seq);
    }
    fl_append(S, seq, now, tx);
    S->st[S_SENT]++;
    if (S->retx_n && S->retx[S->retx_head] == seq) retx_pop(S);
    if (seq == S->snd_nxt) {
        S->snd_nxt++;
        S->st[S_NEW]++;
        i64 m = (seq - S->start_seq) / S->cells;
        if (isnan(S->first_sent[m])) S->first_sent[m] = now;
    }
}

static void rtt_sample(snd_t *S, double rtt) {
    if (!S->has_srtt) {
        S->has_srtt = 1;
        S->srtt = rtt;
        S->rttvar = rtt / 2;
    } else {
        S->rttvar = 0.75 * S->rttvar + 0.25 * fabs(S->srtt - rtt);
        S->srtt = 0.875 * S->srtt + 0.125 * rtt;
    }
}

static double rto(snd_t *S) {
    return S->has_srtt ? pmax(S->rto_s, S->srtt + 4 * S->rttvar) : S->rto_s;
}

static void complete(snd_t *S, double now) {
    while (S->done_n < S->added && (S->done_n + 1) * S->cells + S->start_seq <= S->snd_una) {
        S->completed[S->done_n++] = now;
        S->st[S_DONE]++;
    }
}

static void retx_holes(snd_t *S, i64 top, double now) {
    double limit = now - S->holdoff_s;
    for (i64 seq = S->snd_una; seq < top; seq++)
        if (fl_has(S, seq) && S->fl_at[fl_slot(S, seq)] <= limit && queue_retx(S, seq))
            S->st[S_RETX_SACK]++;
}

/* SenderTransport.on_ack with sack.decode_ack's fields */
static void on_ack(snd_t *S, i64 cum_psn, int syndrome, i64 base_psn, const uint8_t *bitmap,
                   i32 blen, double now) {
    i64 cum = psn_unwrap(cum_psn, S->snd_una - 1);
    if (cum >= S->snd_nxt || cum < S->snd_una - 1 - S->max_inflight) {
        S->st[S_BAD_ACKS]++;
        return;
    }
    S->st[S_ACKS]++;
    for (i64 seq = S->snd_una; seq <= cum; seq++) {
        if (fl_has(S, seq)) {
            i64 k = fl_slot(S, seq);
            if (seq == cum && S->fl_tx[k] == 1) rtt_sample(S, now - S->fl_at[k]);
            fl_unlink(S, seq);
        }
        if (sacked(S, seq)) S->sk_seq[seq & S->mask] = -1;
    }
    if (cum + 1 > S->snd_una) S->snd_una = cum + 1;
    i64 base = psn_unwrap(base_psn, S->snd_una), top = -1;
    for (i32 i = 0; i < blen * 8; i++) {
        if (!(bitmap[i >> 3] & (0x80 >> (i & 7)))) continue;
        i64 seq = base + i;
        if (seq < S->snd_una || seq >= S->snd_nxt) continue;
        top = seq;
        if (!sacked(S, seq)) {
            S->sk_seq[seq & S->mask] = seq;
            if (fl_has(S, seq)) fl_unlink(S, seq);
        }
    }
    if (syndrome == LAY[L_NAK]) {
        S->st[S_NAKS]++;
        if (fl_has(S, S->snd_una) && now - S->fl_at[fl_slot(S, S->snd_una)] >= S->holdoff_s &&
            queue_retx(S, S->snd_una))
            S->st[S_RETX_NAK]++;
    }
    if (top >= 0 && now - S->last_hole_scan >= S->holdoff_s / 4) {
        S->last_hole_scan = now;
        retx_holes(S, top, now);
    }
    complete(S, now);
}

static void check_timeouts(snd_t *S, double now) {
    double limit = now - rto(S);
    i64 count = 0;
    for (i64 seq = S->fl_head; seq >= 0; seq = S->fl_next[fl_slot(S, seq)]) {
        if (S->fl_at[fl_slot(S, seq)] > limit) break;
        if (queue_retx(S, seq)) count++;
    }
    S->st[S_RETX_TIMEOUT] += count;
}

/* -- the sender: pacing and the poll ------------------------------------------------------ */

static void refill(snd_t *S, double now) {
    if (!S->has_stamp) {
        S->has_stamp = 1;
        S->stamp = now;
        S->tokens = S->burst;
        return;
    }
    if (now > S->stamp) {
        S->tokens = pmin(S->burst, S->tokens + (now - S->stamp) * S->rate_bps / 8);
        S->stamp = now;
    }
}

static double send_burst(hc_t *H, prog_t *P, double now) {
    snd_t *S = P->s;
    for (int k = 0; k < 64; k++) {
        i64 seq = next_to_send(S);
        if (seq < 0) {
            if (S->snd_nxt >= S->next_seq && !S->retx_n) S->paced_idle = 1;
            return S->idle_poll_s;
        }
        if (S->paced_idle) {
            S->paced_idle = 0;
            S->has_stamp = 1;
            S->stamp = now;
            S->tokens = pmin(S->burst, (double)S->frame_len);
        }
        if (S->rate_bps > 0) {
            refill(S, now);
            double missing = S->frame_len - S->tokens;
            double wait = missing <= 0 ? 0.0 : missing * 8 / S->rate_bps;
            if (wait > 0) return wait;
        }
        S->rr++;
        i32 len = build_cell(S, seq, H->frame);
        if (!port_send(H, P, 0, H->frame, len)) return pmin(0.0002, S->idle_poll_s);
        on_sent(S, seq, now);
        S->last_send = now;
        if (S->rate_bps > 0) {
            refill(S, now);
            S->tokens -= S->frame_len;
        }
    }
    return 0.0;
}

/* Sender.poll: 1 when the run is over (None), else the deadline in *due */
static int snd_poll(hc_t *H, prog_t *P, double now, double *due) {
    snd_t *S = P->s;
    add_messages(S, now); /* finished() */
    if (S->done_n == S->added && S->added >= S->count) return 1;
    if (now >= S->next_health) {
        S->next_health = now + S->health_s;
        check_timeouts(S, now);
    }
    double wait = send_burst(H, P, now);
    wait = wait ? pmin(wait, pmax(0.0, S->next_health - now)) : 0.0;
    *due = !wait ? now : pmax(now + wait, nextafter(now, INFINITY));
    return 0;
}

/* Sender.on_frame for a frame of its QPN */
static void snd_frame(snd_t *S, const uint8_t *b, const roce_t *f, double now) {
    if (f->opcode == LAY[L_OP_CNP]) {
        S->cnps++;
        return;
    }
    if (f->opcode != LAY[L_OP_ACK]) return;
    i32 off = f->body_off, end = f->body_end;
    if (end - off < 4 + 12) {
        S->malformed++;
        return;
    }
    int version = b[off + 4], flags = b[off + 5];
    i32 blen = rd16(b + off + 6), start = off + 16;
    if (version != LAY[L_SACK_VERSION] || start + blen > end) {
        S->malformed++;
        return;
    }
    if (flags & (LAY[L_SACK_INT] | LAY[L_SACK_GRANT])) S->unsupported++; /* refused upstream */
    on_ack(S, f->psn, b[off], rd32(b + off + 8) & 0xFFFFFF, b + start, blen, now);
}

static snd_t *snd_new(const i64 *iv, const double *dv, const uint8_t *tmpl) {
    snd_t *S = xcalloc(1, sizeof(snd_t));
    S->qpn = iv[0]; S->payload_len = iv[1]; S->msg_size = iv[2]; S->count = iv[3];
    S->seed = iv[4]; S->start_seq = iv[5]; S->max_inflight = iv[6]; S->frame_len = iv[7];
    S->cells = iv[8]; S->tmpl_len = (i32)iv[9]; S->bth_off = (i32)iv[10];
    S->payload_off = (i32)iv[11]; S->ip_sum = iv[12];
    S->rto_s = dv[0]; S->holdoff_s = dv[1]; S->health_s = dv[2]; S->idle_poll_s = dv[3];
    S->rate_bps = dv[4]; S->burst = dv[5];
    wr32(S->unit, (uint32_t)S->seed);
    wr32(S->unit + 4, 0);
    for (int i = 0; i < 256; i++) S->unit[8 + i] = (uint8_t)i;
    S->unit_index = 0;
    S->tmpl = xcalloc((size_t)S->tmpl_len, 1);
    memcpy(S->tmpl, tmpl, (size_t)S->tmpl_len);
    S->snd_una = S->snd_nxt = S->next_seq = S->start_seq;
    S->queued_at = xcalloc((size_t)S->count, sizeof(double));
    S->first_sent = xcalloc((size_t)S->count, sizeof(double));
    S->completed = xcalloc((size_t)S->count, sizeof(double));
    rings_alloc(S, 64);
    S->fl_head = S->fl_tail = -1;
    S->last_hole_scan = -INFINITY;
    S->paced_idle = 1;
    S->last_send = -INFINITY;
    return S;
}

static void snd_free(snd_t *S) {
    if (!S) return;
    free(S->tmpl); free(S->queued_at); free(S->first_sent); free(S->completed);
    free(S->fl_seq); free(S->fl_prev); free(S->fl_next); free(S->fl_tx); free(S->sk_seq);
    free(S->rq_seq); free(S->fl_at); free(S->retx);
    free(S);
}
