/* hosts.sender.Sender, rate control "none" (a fixed line rate, no window): pacing
 * (hosts.ratelimit.TokenBucket), cells sprayed round-robin over the ports that are up, and
 * _check_ports' port health (a port down with its link, or when its cells see no ACK for
 * port_timeout_s while another port's do). */

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
    int nup = 0; /* [p for p in self.ports if p.up] */
    for (int i = 0; i < S->nports; i++)
        if (S->up[i]) S->upidx[nup++] = i;
    if (!nup) return S->health_s;
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
        int port = S->upidx[S->rr % nup];
        S->rr++;
        i32 len = build_cell(S, seq, port, H->frame);
        if (!port_send(H, P, port, H->frame, len)) return pmin(0.0002, S->idle_poll_s);
        on_sent(S, seq, now, port);
        S->last_send = now;
        if (S->rate_bps > 0) {
            refill(S, now);
            S->tokens -= S->frame_len;
        }
    }
    return 0.0;
}

/* -- the ports' health: Sender._check_ports and _fail ------------------------------------- */

enum { R_NONE, R_LINK_DOWN, R_NO_PROGRESS };

static inline int oper_up(hc_t *H, prog_t *P, int port) { /* SimNic.oper_up: the wire's up */
    return H->host[P->host].wire[P->host_port[port]].up;
}

static void port_event(snd_t *S, int port, int down, int reason, double t) {
    if (S->nev == S->capev) {
        S->capev = S->capev ? 2 * S->capev : 8;
        S->ev = xrealloc(S->ev, sizeof(pevent_t) * (size_t)S->capev);
    }
    S->ev[S->nev++] = (pevent_t){port, down, reason, t};
}

static void fail(snd_t *S, int port, double now, int reason) {
    S->up[port] = 0;
    S->down_reason[port] = reason;
    S->down_since[port] = now;
    if (S->nfo == S->capfo) {
        S->capfo = S->capfo ? 2 * S->capfo : 4;
        S->fo = xrealloc(S->fo, sizeof(fover_t) * (size_t)S->capfo);
    }
    fover_t *e = &S->fo[S->nfo++];
    *e = (fover_t){.port = port, .reason = reason, .detected_at = now,
                   .since = now - S->last_progress[port], .recovered = NAN, .pending = 1};
    fail_port(S, port, e);
    port_event(S, port, 1, reason, now);
}

/* another port than p is up and its cells were acknowledged within the timeout */
static int other_progress(snd_t *S, int p, double now) {
    for (int q = 0; q < S->nports; q++)
        if (S->up[q] && q != p && now - S->last_progress[q] < S->port_timeout_s) return 1;
    return 0;
}

static void check_ports(hc_t *H, prog_t *P, double now) {
    snd_t *S = P->s;
    double timeout = S->port_timeout_s;
    /* a single port is never failed for lack of progress (no other port makes any): its
     * in-flight count is not needed then */
    memset(S->per_port, 0, sizeof(i64) * (size_t)S->nports);
    if (S->nports > 1)
        for (i64 seq = S->fl_head; seq >= 0; seq = S->fl_next[fl_slot(S, seq)])
            S->per_port[S->fl_port[fl_slot(S, seq)]]++;
    for (int p = 0; p < S->nports; p++) {
        int oper = oper_up(H, P, p);
        if (S->up[p] && !oper)
            fail(S, p, now, R_LINK_DOWN);
        else if (S->up[p] && S->per_port[p] && now - S->last_progress[p] > timeout &&
                 other_progress(S, p, now))
            fail(S, p, now, R_NO_PROGRESS);
    }
    for (int p = 0; p < S->nports; p++) {
        if (S->up[p] || !oper_up(H, P, p)) continue;
        int alone = 1;
        for (int q = 0; q < S->nports; q++)
            if (S->up[q]) alone = 0;
        if (S->down_reason[p] == R_LINK_DOWN || alone ||
            now - S->down_since[p] >= S->port_retry_s) {
            S->up[p] = 1;
            S->down_reason[p] = R_NONE;
            S->last_progress[p] = now;
            port_event(S, p, 0, R_NONE, now);
        }
    }
    for (int i = 0; i < S->nfo; i++) { /* _pending_recovery, in failover order */
        fover_t *e = &S->fo[i];
        if (!e->pending) continue;
        int all = 1;
        for (i64 k = 0; k < e->nmoved && all; k++)
            if (!(e->moved[k] < S->snd_una || sacked(S, e->moved[k]))) all = 0;
        if (all) {
            e->recovered = now - e->detected_at;
            e->pending = 0;
        }
    }
}

/* Sender.poll: 1 when the run is over (None), else the deadline in *due */
static int snd_poll(hc_t *H, prog_t *P, double now, double *due) {
    snd_t *S = P->s;
    add_messages(S, now); /* finished() */
    if (S->done_n == S->added && S->added >= S->count) return 1;
    if (now >= S->next_health) {
        S->next_health = now + S->health_s;
        check_timeouts(S, now);
        check_ports(H, P, now);
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
    for (int p = 0; p < S->nports; p++) /* even after an ACK on_ack refused: as Python */
        if (S->acked[p]) S->last_progress[p] = now;
}

/* iv, dv: chosts.NativeHosts.sender's; ip_sum: each port's template's IP sum; tmpl: the
 * ports' templates one after another */
static snd_t *snd_new(const i64 *iv, const double *dv, int nports, const i64 *ip_sum,
                      const uint8_t *tmpl) {
    snd_t *S = xcalloc(1, sizeof(snd_t));
    S->qpn = iv[0]; S->payload_len = iv[1]; S->msg_size = iv[2]; S->count = iv[3];
    S->seed = iv[4]; S->start_seq = iv[5]; S->max_inflight = iv[6]; S->frame_len = iv[7];
    S->cells = iv[8]; S->tmpl_len = (i32)iv[9]; S->bth_off = (i32)iv[10];
    S->payload_off = (i32)iv[11];
    S->rto_s = dv[0]; S->holdoff_s = dv[1]; S->health_s = dv[2]; S->idle_poll_s = dv[3];
    S->rate_bps = dv[4]; S->burst = dv[5]; S->port_timeout_s = dv[6]; S->port_retry_s = dv[7];
    wr32(S->unit, (uint32_t)S->seed);
    wr32(S->unit + 4, 0);
    for (int i = 0; i < 256; i++) S->unit[8 + i] = (uint8_t)i;
    S->unit_index = 0;
    S->nports = nports;
    S->tmpl = xcalloc((size_t)nports * (size_t)S->tmpl_len, 1);
    memcpy(S->tmpl, tmpl, (size_t)nports * (size_t)S->tmpl_len);
    S->ip_sum = xcalloc((size_t)nports, sizeof(i64));
    memcpy(S->ip_sum, ip_sum, sizeof(i64) * (size_t)nports);
    S->acked = xcalloc((size_t)nports, 1);
    S->up = xcalloc((size_t)nports, sizeof(int));
    S->down_reason = xcalloc((size_t)nports, sizeof(int));
    S->upidx = xcalloc((size_t)nports, sizeof(int));
    S->last_progress = xcalloc((size_t)nports, sizeof(double));
    S->down_since = xcalloc((size_t)nports, sizeof(double));
    S->per_port = xcalloc((size_t)nports, sizeof(i64));
    for (int p = 0; p < nports; p++) S->up[p] = 1;
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
    free(S->tmpl); free(S->ip_sum); free(S->queued_at); free(S->first_sent);
    free(S->completed); free(S->fl_seq); free(S->fl_prev); free(S->fl_next); free(S->fl_tx);
    free(S->fl_port); free(S->sk_seq); free(S->rq_seq); free(S->fl_at); free(S->retx);
    free(S->acked); free(S->up); free(S->down_reason); free(S->upidx);
    free(S->last_progress); free(S->down_since); free(S->per_port);
    for (int i = 0; i < S->nfo; i++) free(S->fo[i].moved);
    free(S->fo); free(S->ev);
    free(S);
}
