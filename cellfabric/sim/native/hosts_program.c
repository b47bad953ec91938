/* hostsim.Program and SimHost: frames to the program they are for, a program run at its next
 * deadline and after each frame, stale wake-ups skipped; and the entry points. */

static void set_now(hc_t *H, i64 now_ns) {
    H->now_ns = now_ns;
    H->now = (double)now_ns / 1e9; /* Engine.clock */
}

/* Program._run: 0, or 1 + the id of a sender whose run is over */
static int prog_run(hc_t *H, int id) {
    prog_t *P = &H->prog[id];
    P->polls++;
    double now = H->now, due;
    if (P->sender) {
        if (snd_poll(H, P, now, &due)) {
            P->done = 1;
            return id + 1;
        }
    } else {
        due = rcv_poll(H, P, now);
    }
    if (isinf(due)) return 0;
    i64 at = H->now_ns;
    if (due > now) {
        i64 t = to_ns(due);
        at = H->now_ns + 1 > t ? H->now_ns + 1 : t;
    }
    if (P->wake_at < 0 || at < P->wake_at || P->wake_at < H->now_ns) {
        P->wake_at = at;
        H->push_timer(H->X, at, id, at);
    }
    return 0;
}

/* SimHost.receive -> Program.receive (the fabric's deliver callback) */
int hc_deliver(void *ctx, int host, int nic, const uint8_t *data, i32 len, i64 now_ns) {
    hc_t *H = ctx;
    host_t *h = &H->host[host];
    roce_t f;
    if (!parse_roce(data, len, &f)) {
        h->unclaimed++;
        return 0;
    }
    int id = -1;
    if (is_data(f.opcode)) {
        id = h->receiver;
    } else {
        for (int i = h->nsnd - 1; i >= 0; i--)
            if (h->qpn[i] == f.qpn) {
                id = h->qprog[i];
                break;
            }
    }
    if (id < 0) {
        h->unclaimed++;
        return 0;
    }
    prog_t *P = &H->prog[id];
    if (P->done) return 0;
    int port = -1;
    for (int i = 0; i < P->nports; i++)
        if (P->host_port[i] == nic) port = i;
    if (port < 0) return 0;
    set_now(H, now_ns);
    if (P->sender) snd_frame(P->s, data, &f, H->now);
    else rcv_frame(H, P, port, data, &f, H->now);
    return prog_run(H, id);
}

/* Program._wake (the fabric's timer callback) */
int hc_timer(void *ctx, int id, i64 t, i64 now_ns) {
    hc_t *H = ctx;
    prog_t *P = &H->prog[id];
    if (t != P->wake_at || P->done) return 0;
    P->wake_at = -1;
    set_now(H, now_ns);
    return prog_run(H, id);
}

/* -- set-up from Python (cellfabric.sim.chosts) ------------------------------------------- */

hc_t *hc_new(int nhosts, const i64 *layout) {
    static int crc_ready;
    if (!crc_ready) {
        crc_init();
        crc_ready = 1;
    }
    memcpy(LAY, layout, sizeof LAY);
    hc_t *H = xcalloc(1, sizeof(hc_t));
    H->nhosts = nhosts;
    H->host = xcalloc((size_t)nhosts, sizeof(host_t));
    for (int i = 0; i < nhosts; i++) H->host[i].receiver = -1;
    return H;
}

void hc_free(hc_t *H) {
    for (int i = 0; i < H->nprogs; i++) {
        prog_t *P = &H->prog[i];
        snd_free(P->s);
        rcv_free(P->r);
        free(P->host_port); free(P->sent); free(P->send_errors);
    }
    for (int i = 0; i < H->nhosts; i++) {
        free(H->host[i].wire);
        free(H->host[i].mac);
        free(H->host[i].qpn);
        free(H->host[i].qprog);
    }
    free(H->prog);
    free(H->host);
    free(H);
}

void hc_bind(hc_t *H, void *X, void *push_timer, void *push_frame) {
    H->X = X;
    H->push_timer = (push_timer_fn)push_timer;
    H->push_frame = (push_frame_fn)push_frame;
}

/* host h's port i (a NIC port or an NVLink): its wire into the fabric (w: to a switch, or
 * to the peer GPU's endpoint), its serialization and delay, its MAC */
void hc_port(hc_t *H, int h, int i, int w, double ns_per_byte, i64 delay, const uint8_t *mac) {
    host_t *o = &H->host[h];
    if (i >= o->nwires) {
        o->wire = xrealloc(o->wire, sizeof(hwire_t) * (size_t)(i + 1));
        memset(o->wire + o->nwires, 0, sizeof(hwire_t) * (size_t)(i + 1 - o->nwires));
        o->mac = xrealloc(o->mac, 6 * (size_t)(i + 1));
        memset(o->mac + o->nwires, 0, 6 * (size_t)(i + 1 - o->nwires));
        o->nwires = i + 1;
    }
    o->wire[i] = (hwire_t){.ns_per_byte = ns_per_byte, .delay = delay, .up = 1, .w = w};
    memcpy(o->mac[i], mac, 6);
}

/* a program on the host's ports host_ports[0..nports) (its ports 0..nports) */
static int new_prog(hc_t *H, int host, int nports, const i32 *host_ports, int sender) {
    if (H->nprogs == H->capprogs) {
        H->capprogs = H->capprogs ? 2 * H->capprogs : 64;
        H->prog = xrealloc(H->prog, sizeof(prog_t) * (size_t)H->capprogs);
    }
    int id = H->nprogs++;
    prog_t *P = &H->prog[id];
    *P = (prog_t){.sender = sender, .host = host, .wake_at = -1, .nports = nports};
    P->host_port = xcalloc((size_t)nports, sizeof(int));
    for (int i = 0; i < nports; i++) P->host_port[i] = host_ports[i];
    P->sent = xcalloc((size_t)nports, sizeof(i64));
    P->send_errors = xcalloc((size_t)nports, sizeof(i64));
    return id;
}

/* a sender on nports ports (host_ports), ip_sum and tmpl: each port's CellTemplate */
int hc_sender(hc_t *H, int host, int nports, const i32 *host_ports, const i64 *iv,
              const double *dv, const i64 *ip_sum, const uint8_t *tmpl) {
    int id = new_prog(H, host, nports, host_ports, 1);
    H->prog[id].s = snd_new(iv, dv, nports, ip_sum, tmpl);
    host_t *h = &H->host[host];
    h->qpn = xrealloc(h->qpn, sizeof(i64) * (size_t)(h->nsnd + 1));
    h->qprog = xrealloc(h->qprog, sizeof(int) * (size_t)(h->nsnd + 1));
    h->qpn[h->nsnd] = iv[0];
    h->qprog[h->nsnd++] = id;
    return id;
}

int hc_receiver(hc_t *H, int host, int nports, const i32 *host_ports, const i64 *iv,
                const double *dv) {
    int id = new_prog(H, host, nports, host_ports, 0);
    H->prog[id].r = rcv_new(iv, dv);
    H->host[host].receiver = id;
    return id;
}

/* Program.start at now_ns (Python syncs the fabric's clock and counter around it) */
int hc_start(hc_t *H, int id, i64 now_ns) {
    prog_t *P = &H->prog[id];
    set_now(H, now_ns);
    if (P->sender) { /* Sender.begin */
        P->s->start = H->now;
        for (int p = 0; p < P->s->nports; p++) P->s->last_progress[p] = H->now;
        P->s->next_health = H->now;
        add_messages(P->s, H->now);
    }
    return prog_run(H, id);
}

/* -- what Python reads back for the metrics ----------------------------------------------- */

int hc_done(hc_t *H, int id) { return H->prog[id].done; }
i64 hc_unclaimed(hc_t *H, int h) { return H->host[h].unclaimed; }

/* the program's port p: sent, send_errors, polls, up (a receiver's ports stay up) */
void hc_prog_info(hc_t *H, int id, int p, i64 *iv) {
    prog_t *P = &H->prog[id];
    iv[0] = P->sent[p];
    iv[1] = P->send_errors[p];
    iv[2] = P->polls;
    iv[3] = P->s ? P->s->up[p] : 1;
}

/* a sender's port events (NicPort.events, all ports in order): their count; with iv and dv,
 * iv = port, down (1) or up (0), reason (0 "", 1 link down, 2 no ACK progress); dv = t */
int hc_port_events(hc_t *H, int id, i64 *iv, double *dv) {
    snd_t *S = H->prog[id].s;
    if (iv)
        for (int i = 0; i < S->nev; i++) {
            iv[3 * i] = S->ev[i].port;
            iv[3 * i + 1] = S->ev[i].down;
            iv[3 * i + 2] = S->ev[i].reason;
            dv[i] = S->ev[i].t;
        }
    return S->nev;
}

/* a sender's failovers: their count; with iv and dv, iv = port, reason, cells moved;
 * dv = detected at, since last progress, recovered after (NAN: not recovered) */
int hc_failovers(hc_t *H, int id, i64 *iv, double *dv) {
    snd_t *S = H->prog[id].s;
    if (iv)
        for (int i = 0; i < S->nfo; i++) {
            fover_t *e = &S->fo[i];
            iv[3 * i] = e->port;
            iv[3 * i + 1] = e->reason;
            iv[3 * i + 2] = e->nmoved;
            dv[3 * i] = e->detected_at;
            dv[3 * i + 1] = e->since;
            dv[3 * i + 2] = e->recovered;
        }
    return S->nfo;
}

/* a sender: iv = stats[10], added, done, cnps, malformed, credit probes, unsupported;
 * dv = srtt (NAN: None), rttvar; then per done message queued, first sent (NAN), completed */
void hc_sender_info(hc_t *H, int id, i64 *iv, double *dv, double *msgs) {
    snd_t *S = H->prog[id].s;
    memcpy(iv, S->st, sizeof S->st);
    iv[10] = S->added;
    iv[11] = S->done_n;
    iv[12] = S->cnps;
    iv[13] = S->malformed;
    iv[14] = 0;
    iv[15] = S->unsupported;
    dv[0] = S->has_srtt ? S->srtt : NAN;
    dv[1] = S->rttvar;
    if (msgs)
        for (i64 m = 0; m < S->done_n; m++) {
            msgs[3 * m] = S->queued_at[m];
            msgs[3 * m + 1] = S->first_sent[m];
            msgs[3 * m + 2] = S->completed[m];
        }
}

int hc_receiver_flows(hc_t *H, int id, i64 *iv) {
    rcv_t *R = H->prog[id].r;
    iv[0] = R->messages_total;
    iv[1] = R->not_roce;
    return R->nflows;
}

/* flow f: iv = qpn, cells, ce, int, cnps, acks, naks, messages, malformed messages, received,
 * delivered, out of order, duplicates, beyond window, max depth, delayed, records, src ip
 * (as an int), window, expected; dv = delay max, delay sum */
void hc_flow_info(hc_t *H, int id, int f, i64 *iv, double *dv) {
    flow_t *F = H->prog[id].r->flow[f];
    i64 v[] = {F->qpn, F->cells, F->ce_cells, F->int_cells, F->cnps, F->acks, F->naks,
               F->delivered_msgs, F->a_malformed, F->received, F->delivered, F->out_of_order,
               F->duplicates, F->beyond_window, F->max_depth, F->delayed, F->nrec,
               (i64)rd32(F->src_ip), F->window, F->expected};
    memcpy(iv, v, sizeof v);
    dv[0] = F->delay_max;
    dv[1] = F->delay_sum;
}

/* flow f's depth histogram (min(window, max depth) + 1 counts) and its records (index,
 * length, crc; completion) */
void hc_flow_detail(hc_t *H, int id, int f, i64 *hist, i64 *rec, double *completion) {
    flow_t *F = H->prog[id].r->flow[f];
    /* depths 0..min(window, max_depth): none deeper was ever counted (the caller's
       buffer holds as many) */
    i64 top = F->max_depth < F->window ? F->max_depth : F->window;
    for (i64 d = 0; d <= top; d++) hist[d] = d < F->hist_cap ? F->hist[d] : 0;
    for (i64 i = 0; i < F->nrec; i++) {
        rec[3 * i] = F->rec[i].index;
        rec[3 * i + 1] = F->rec[i].length;
        rec[3 * i + 2] = F->rec[i].crc;
        completion[i] = F->rec[i].completion;
    }
}
