/* hosts.transport.SenderTransport (with the messages and cells of hosts.sender.Sender it
 * sends): PSNs, the in-flight map in (re)send order with each cell's port, SACK, NAK and
 * timeout resends, a failed port's cells moved to the resend queue. */

typedef struct { /* a Sender.failovers entry (and its _pending_recovery cells) */
    int port, reason;
    double detected_at, since, recovered; /* recovered NAN: not yet */
    i64 *moved, nmoved;
    int pending;
} fover_t;

typedef struct { /* a NicPort.events entry */
    int port, down, reason;
    double t;
} pevent_t;

typedef struct snd_t {
    /* configuration */
    i64 qpn, payload_len, msg_size, count, seed, start_seq, max_inflight, frame_len, cells;
    double rto_s, holdoff_s, health_s, idle_poll_s, rate_bps, burst, port_timeout_s,
        port_retry_s;
    int nports;
    uint8_t *tmpl; /* one CellTemplate per port (its MACs), tmpl_len bytes each */
    i64 *ip_sum;   /* per port */
    i32 tmpl_len, bth_off, payload_off;
    /* the transport */
    i64 snd_una, snd_nxt, next_seq, added, done_n;
    double *queued_at, *first_sent, *completed; /* per message; first_sent NAN: None */
    i64 cap, mask; /* rings indexed by seq & mask, cap > snd_nxt - snd_una (grown) */
    i64 *fl_seq, *fl_prev, *fl_next, *fl_tx, *sk_seq, *rq_seq;
    int *fl_port;
    double *fl_at;
    i64 fl_head, fl_tail, fl_n;
    i64 *retx, retx_cap, retx_head, retx_n; /* a deque of seqs */
    double srtt, rttvar, last_hole_scan;
    int has_srtt;
    uint8_t *acked; /* per port: transport.acked_ports (kept as it was by an ACK refused) */
    i64 st[10];     /* TransportStats in field order */
    /* the sender */
    double tokens, stamp, last_send, next_health, start;
    int has_stamp, paced_idle;
    i64 rr, cnps, malformed, unsupported;
    uint8_t unit[264]; /* cells.message_bytes' repeating unit of message unit_index */
    i64 unit_index;
    /* its NIC ports' PortState (sent / send_errors are the program's) */
    int *up, *down_reason, *upidx; /* down_reason: 0 "", 1 link down, 2 no ACK progress */
    double *last_progress, *down_since;
    i64 *per_port; /* _check_ports' in-flight count per port (scratch) */
    fover_t *fo;
    int nfo, capfo;
    pevent_t *ev;
    int nev, capev;
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

static void fl_append(snd_t *S, i64 seq, double at, i64 tx, int port) {
    i64 k = fl_slot(S, seq);
    S->fl_seq[k] = seq;
    S->fl_port[k] = port;
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

/* transport.cell + the port's CellTemplate.frame into buf; its length */
static i32 build_cell(snd_t *S, i64 seq, int port, uint8_t *buf) {
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
    memcpy(buf, S->tmpl + (size_t)port * (size_t)S->tmpl_len, (size_t)S->tmpl_len);
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
    i64 ip_id = seq & 0xFFFF, total = S->ip_sum[port] + ip_id;
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
    S->fl_port = xcalloc((size_t)cap, sizeof(int));
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
            S->fl_port[j] = old.fl_port[k];
            S->fl_at[j] = old.fl_at[k];
        }
        if (old.sk_seq[k] >= 0) S->sk_seq[old.sk_seq[k] & S->mask] = old.sk_seq[k];
        if (old.rq_seq[k] >= S->snd_una) S->rq_seq[old.rq_seq[k] & S->mask] = old.rq_seq[k];
    }
    free(old.fl_seq); free(old.fl_prev); free(old.fl_next); free(old.fl_tx); free(old.fl_port);
    free(old.sk_seq); free(old.rq_seq); free(old.fl_at);
}

static void on_sent(snd_t *S, i64 seq, double now, int port) {
    i64 tx = 1;
    while (seq - S->snd_una >= S->cap) rings_grow(S);
    if (fl_has(S, seq)) {
        tx = S->fl_tx[fl_slot(S, seq)] + 1;
        fl_unlink(S, seq);
    }
    fl_append(S, seq, now, tx, port);
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
    memset(S->acked, 0, (size_t)S->nports);
    for (i64 seq = S->snd_una; seq <= cum; seq++) {
        if (fl_has(S, seq)) {
            i64 k = fl_slot(S, seq);
            S->acked[S->fl_port[k]] = 1;
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
            if (fl_has(S, seq)) {
                S->acked[S->fl_port[fl_slot(S, seq)]] = 1;
                fl_unlink(S, seq);
            }
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


/* fail_port: everything in flight on the port, in (re)send order, queued to be resent
 * elsewhere; the cells moved are the failover's (its recovery waits for them) */
static void fail_port(snd_t *S, int port, fover_t *e) {
    e->nmoved = 0;
    for (i64 seq = S->fl_head; seq >= 0; seq = S->fl_next[fl_slot(S, seq)])
        if (S->fl_port[fl_slot(S, seq)] == port) e->nmoved++;
    e->moved = xcalloc((size_t)e->nmoved, sizeof(i64));
    i64 n = 0;
    for (i64 seq = S->fl_head; seq >= 0; seq = S->fl_next[fl_slot(S, seq)])
        if (S->fl_port[fl_slot(S, seq)] == port) e->moved[n++] = seq;
    for (i64 i = 0; i < n; i++)
        if (queue_retx(S, e->moved[i])) S->st[S_RETX_FAILOVER]++;
}
