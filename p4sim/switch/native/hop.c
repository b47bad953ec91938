/* A switch hop in one call: the traffic manager of p4sim.switch.tm in bit-rate mode (a
 * serializer and a byte buffer per port, strict priority between a port's queues, round
 * robin between ports in the order their first queue was made), holding its packets (PHV and
 * frame), around a program's generated nat_run / nat_egress. Written to give, step for step,
 * what p4sim.switch.native.flow + tm.TrafficManager give for the same calls: the Python
 * path stays the reference (tests/sim and tests/unit hold the two equal). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;
typedef int32_t i32;
typedef __int128 i128; /* t_ns * bps outgrows 64 bits after ~90 ms at 100 Gb/s */

#define MAXP 512
#define MAXPRIO 8
#define NSEC 1000000000LL

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) abort();
    return q;
}

/* Free lists of blocks by power-of-two size class. A packet (PHV and frame) and a frame on a
 * wire are each allocated and freed once per hop; glibc serves blocks of these sizes (past its
 * per-thread cache, ~1 KiB) from its bins, at several times the cost. One pool for every hop
 * and fabric of a thread (cffi calls run without the GIL): a block freed by one switch is
 * taken, last in first out, by the next switch that needs one, while still in the cache. Any
 * block may go back to any thread's pool; each class keeps at most POOL_KEEP bytes. */
#define POOL_MIN 6  /* 64 B */
#define POOL_MAX 16 /* 64 KiB: larger blocks go to malloc and free */
#define POOL_KEEP (16 << 20)

typedef struct {
    void *head[POOL_MAX + 1];
    i64 count[POOL_MAX + 1];
} pool_t;

static __thread pool_t the_pool;

static inline int pool_class(size_t n) {
    return n <= ((size_t)1 << POOL_MIN) ? POOL_MIN : 64 - __builtin_clzll((unsigned long long)n - 1);
}

static void *pool_get(size_t n) {
    pool_t *pl = &the_pool;
    int c = pool_class(n);
    if (c > POOL_MAX) return xrealloc(NULL, n);
    void *b = pl->head[c];
    if (!b) return xrealloc(NULL, (size_t)1 << c);
    pl->head[c] = *(void **)b;
    pl->count[c]--;
    return b;
}

/* b: a block pool_get gave for n bytes (or NULL) */
static void pool_put(void *b, size_t n) {
    pool_t *pl = &the_pool;
    if (!b) return;
    int c = pool_class(n);
    if (c > POOL_MAX || (pl->count[c] << c) >= POOL_KEEP) {
        free(b);
        return;
    }
    *(void **)b = pl->head[c];
    pl->head[c] = b;
    pl->count[c]++;
}

typedef int (*run_fn)(void *, i64 *, const uint8_t *, i32, i32, i64, i64, const uint8_t *,
                      uint8_t *, i64 *);
typedef int (*egr_fn)(void *, i64 *, const uint8_t *, i32, i32, i32, i64, i64, i64, uint8_t *,
                      i64 *);

typedef struct pkt {
    struct pkt *next;
    i32 len, pos, inport;
    i64 *F;
    uint8_t *data;
} pkt;

typedef struct {
    pkt *head, *tail;
    i64 n, depth;
    int exists;
} queue;

typedef struct {
    int has_link, known;
    i64 bps, buffer, queued_bytes, new_depth;
    i128 free_num;
    i64 backlog, busy_since, busy_total, busy_tx, drops, rx, tx, peak;
    queue q[MAXPRIO];
} port_t;

typedef struct {
    void *C;
    run_fn run;
    egr_fn egr;
    int nslots, hdr_bytes, prios;
    int s_es, s_prio, s_enq_ts, s_enq_qd;
    i64 m_enq_ts, t0;
    int has_def_link;
    i64 def_bps, def_buffer, def_depth;
    port_t ports[MAXP];
    i32 order[MAXP];
    int norder, rr;
    i64 backlog, enqueues;
    i64 parser_errors, pipeline_drops, aborts, last_abort;
    uint8_t *arena;
    i64 arena_cap, arena_len;
    i32 *oport, *olen;
    i64 *ooff;
    int nout, out_cap;
    i64 gen; /* moves when the output arrays move (realloc): the caller's pointers are stale */
    pkt *held; /* a packet egress asked to clone: the Python path takes it (and the switch) */
    i32 held_port;
} hop_t;

hop_t *hop_new(void *C, void *run, void *egr, int nslots, int hdr_bytes, int prios, int s_es,
               int s_prio, int s_enq_ts, int s_enq_qd, i64 m_enq_ts, i64 t0) {
    hop_t *T = calloc(1, sizeof(hop_t));
    if (!T) return NULL;
    T->C = C;
    T->run = (run_fn)run;
    T->egr = (egr_fn)egr;
    T->nslots = nslots;
    T->hdr_bytes = hdr_bytes;
    T->prios = prios < 1 ? 1 : prios;
    T->s_es = s_es;
    T->s_prio = s_prio;
    T->s_enq_ts = s_enq_ts;
    T->s_enq_qd = s_enq_qd;
    T->m_enq_ts = m_enq_ts;
    T->t0 = t0;
    T->def_depth = 64;
    return T;
}

static size_t pkt_size(const hop_t *T, i32 len) {
    return sizeof(pkt) + sizeof(i64) * (size_t)T->nslots + (size_t)len;
}

static void free_pkt(hop_t *T, pkt *P) {
    if (P) pool_put(P, pkt_size(T, P->len));
}

void hop_free(hop_t *T) {
    if (!T) return;
    for (int p = 0; p < MAXP; p++)
        for (int q = 0; q < MAXPRIO; q++)
            for (pkt *P = T->ports[p].q[q].head; P;) {
                pkt *nx = P->next;
                free_pkt(T, P);
                P = nx;
            }
    free_pkt(T, T->held);
    free(T->arena);
    free(T->oport);
    free(T->olen);
    free(T->ooff);
    free(T);
}

/* -- settings and state, from and back to the Python TrafficManager ----------------------- */

void hop_defaults(hop_t *T, int has_link, i64 bps, i64 buffer, i64 depth) {
    T->has_def_link = has_link;
    T->def_bps = bps;
    T->def_buffer = buffer;
    T->def_depth = depth;
}

/* v: has_link, bps, buffer, free_hi, free_lo, queued_bytes, new_depth, backlog, busy_since,
 * busy_total, busy_tx, drops, peak */
void hop_set_port(hop_t *T, int port, const i64 *v) {
    port_t *pp = &T->ports[port];
    pp->known = 1;
    pp->has_link = (int)v[0];
    pp->bps = v[1];
    pp->buffer = v[2];
    pp->free_num = ((i128)v[3] << 64) | (i128)(uint64_t)v[4];
    pp->queued_bytes = v[5];
    pp->new_depth = v[6];
    pp->backlog = v[7];
    pp->busy_since = v[8];
    pp->busy_total = v[9];
    pp->busy_tx = v[10];
    pp->drops = v[11];
    pp->peak = v[12];
}

/* The same values, and rx, tx (counted since the last call, then cleared) */
void hop_get_port(hop_t *T, int port, i64 *v) {
    port_t *pp = &T->ports[port];
    v[0] = pp->has_link;
    v[1] = pp->bps;
    v[2] = pp->buffer;
    v[3] = (i64)(pp->free_num >> 64);
    v[4] = (i64)(uint64_t)pp->free_num;
    v[5] = pp->queued_bytes;
    v[6] = pp->new_depth;
    v[7] = pp->backlog;
    v[8] = pp->busy_since;
    v[9] = pp->busy_total;
    v[10] = pp->busy_tx;
    v[11] = pp->drops;
    v[12] = pp->peak;
    v[13] = pp->rx;
    v[14] = pp->tx;
    v[15] = pp->known;
    pp->rx = pp->tx = 0;
}

static void link_for_new_port(hop_t *T, port_t *pp) {
    /* TrafficManager._link_for: a port without a link takes the default one, if any */
    if (!pp->known) {
        pp->known = 1;
        pp->new_depth = T->def_depth;
    }
    if (!pp->has_link && T->has_def_link) {
        pp->has_link = 1;
        pp->bps = T->def_bps;
        pp->buffer = T->def_buffer;
        pp->free_num = 0;
        pp->queued_bytes = 0;
    }
}

static queue *make_queue(hop_t *T, int port, int prio, i64 depth) {
    port_t *pp = &T->ports[port];
    int first = 1;
    for (int q = 0; q < MAXPRIO; q++)
        if (pp->q[q].exists) first = 0;
    queue *q = &pp->q[prio];
    q->exists = 1;
    q->depth = depth;
    if (first) {
        int seen = 0;
        for (int i = 0; i < T->norder; i++)
            if (T->order[i] == port) seen = 1;
        if (!seen) T->order[T->norder++] = port;
    }
    return q;
}

/* A queue as it exists in the Python TM (called in the TM's round-robin port order). */
void hop_add_queue(hop_t *T, int port, int prio, i64 depth) {
    make_queue(T, port, prio, depth);
}

/* A packet's block, for a frame of len bytes: its PHV (P->F) is not yet set. */
static pkt *alloc_pkt(hop_t *T, i32 len) {
    pkt *P = pool_get(pkt_size(T, len));
    P->next = NULL;
    P->len = len;
    P->F = (i64 *)(P + 1);
    P->data = (uint8_t *)P->F + sizeof(i64) * (size_t)T->nslots;
    return P;
}

static pkt *fill_pkt(pkt *P, const uint8_t *data, i32 pos, i32 inport) {
    P->pos = pos;
    P->inport = inport;
    memcpy(P->data, data, (size_t)P->len);
    return P;
}

static pkt *new_pkt(hop_t *T, const i64 *F, const uint8_t *data, i32 len, i32 pos, i32 inport) {
    pkt *P = alloc_pkt(T, len);
    memcpy(P->F, F, sizeof(i64) * (size_t)T->nslots);
    return fill_pkt(P, data, pos, inport);
}

static void push(queue *q, pkt *P) {
    if (q->tail) q->tail->next = P;
    else q->head = P;
    q->tail = P;
    q->n++;
}

static pkt *pop(queue *q) {
    pkt *P = q->head;
    q->head = P->next;
    if (!q->head) q->tail = NULL;
    q->n--;
    P->next = NULL;
    return P;
}

/* A waiting packet as the Python TM held it (queue order; no accounting: hop_set_port). */
void hop_push(hop_t *T, int port, int prio, const i64 *F, const uint8_t *data, i32 len, i32 pos,
              i32 inport) {
    push(&T->ports[port].q[prio], new_pkt(T, F, data, len, pos, inport));
}

void hop_set_rr(hop_t *T, int rr, i64 backlog) {
    T->rr = rr;
    T->backlog = backlog;
}

int hop_get_rr(hop_t *T) { return T->rr; }
int hop_norder(hop_t *T) { return T->norder; }
int hop_order(hop_t *T, int i) { return T->order[i]; }
i64 hop_queue_len(hop_t *T, int port, int prio) { return T->ports[port].q[prio].n; }
int hop_queue_exists(hop_t *T, int port, int prio) { return T->ports[port].q[prio].exists; }
i64 hop_backlog_of(hop_t *T, int port) { return T->ports[port].backlog; }

/* Takes the head of a queue out (back to the Python TM): PHV into F, frame into data (room for
 * len bytes: hop_head_len first); info: len, pos, inport. */
static void take_out(hop_t *T, pkt *P, i64 *F, uint8_t *data, i64 *info) {
    memcpy(F, P->F, sizeof(i64) * (size_t)T->nslots);
    memcpy(data, P->data, (size_t)P->len);
    info[0] = P->len;
    info[1] = P->pos;
    info[2] = P->inport;
    free_pkt(T, P);
}

i32 hop_head_len(hop_t *T, int port, int prio) { return T->ports[port].q[prio].head->len; }
void hop_take(hop_t *T, int port, int prio, i64 *F, uint8_t *data, i64 *info) {
    take_out(T, pop(&T->ports[port].q[prio]), F, data, info);
}

/* The packet held after egress asked for a clone (see hop_t.held), taken the same way. */
i32 hop_held_len(hop_t *T) { return T->held ? T->held->len : -1; }
int hop_held_port(hop_t *T) { return T->held_port; }
void hop_take_held(hop_t *T, i64 *F, uint8_t *data, i64 *info) {
    pkt *P = T->held;
    T->held = NULL;
    take_out(T, P, F, data, info);
}

/* counters since the last call: parser errors, pipeline drops, aborts, the last abort's code */
void hop_take_counters(hop_t *T, i64 *v) {
    v[0] = T->parser_errors;
    v[1] = T->pipeline_drops;
    v[2] = T->aborts;
    v[3] = T->last_abort;
    T->parser_errors = T->pipeline_drops = T->aborts = 0;
}

/* -- outputs of one call: frames to transmit, in order ------------------------------------ */

uint8_t *hop_arena(hop_t *T) { return T->arena; }
i32 *hop_out_ports(hop_t *T) { return T->oport; }
i32 *hop_out_lens(hop_t *T) { return T->olen; }
i64 *hop_out_offs(hop_t *T) { return T->ooff; }

static void emit(hop_t *T, int port, const uint8_t *frame, i64 n) {
    if (T->arena_len + n > T->arena_cap) {
        T->arena_cap = 2 * (T->arena_len + n) + 4096;
        T->arena = xrealloc(T->arena, (size_t)T->arena_cap);
        T->gen++;
    }
    if (T->nout == T->out_cap) {
        T->out_cap = T->out_cap ? 2 * T->out_cap : 64;
        T->oport = xrealloc(T->oport, sizeof(i32) * (size_t)T->out_cap);
        T->olen = xrealloc(T->olen, sizeof(i32) * (size_t)T->out_cap);
        T->ooff = xrealloc(T->ooff, sizeof(i64) * (size_t)T->out_cap);
        T->gen++;
    }
    memcpy(T->arena + T->arena_len, frame, (size_t)n);
    T->oport[T->nout] = port;
    T->olen[T->nout] = (i32)n;
    T->ooff[T->nout] = T->arena_len;
    T->nout++;
    T->arena_len += n;
    if (port >= 0 && port < MAXP) T->ports[port].tx++;
}

/* The deparser's output, copied out (emit) before the next program call: one buffer for
 * every hop of the thread, which stays in the cache where each switch's own would be written
 * cold. Kept for the thread's life. */
static __thread uint8_t *the_obuf;
static __thread i64 the_obuf_cap;

static uint8_t *room(hop_t *T, i64 len) {
    i64 need = T->hdr_bytes + len + 16;
    if (need > the_obuf_cap) {
        the_obuf_cap = need < 16384 ? 16384 : need;
        the_obuf = xrealloc(the_obuf, (size_t)the_obuf_cap);
    }
    return the_obuf;
}

/* -- the traffic manager ------------------------------------------------------------------- */

static int link_busy(port_t *pp, i64 now) {
    return pp->has_link && pp->bps && pp->free_num > (i128)now * pp->bps;
}

static void link_start(port_t *pp, i64 now) {
    if (pp->bps && pp->free_num < (i128)now * pp->bps) pp->free_num = (i128)now * pp->bps;
}

static void link_send(port_t *pp, i64 nbytes) {
    if (pp->bps) pp->free_num += (i128)nbytes * 8 * NSEC;
}

static void settle(port_t *pp, i64 charged, i64 sent) {
    if (pp->has_link && pp->bps && charged != sent) pp->free_num += (i128)(sent - charged) * 8 * NSEC;
}

static i64 ceil_div(i128 a, i64 b) { return (i64)((a + b - 1) / b); }

/* TrafficManager.next_deadline: the earliest time a port's head may leave (-1: none waits) */
static i64 next_deadline(hop_t *T) {
    if (!T->backlog) return -1;
    i64 best = -1;
    for (int i = 0; i < T->norder; i++) {
        port_t *pp = &T->ports[T->order[i]];
        if (!pp->backlog) continue;
        for (int q = T->prios - 1; q >= 0; q--) {
            if (!pp->q[q].n) continue;
            i64 t = 0;
            if (pp->has_link && pp->bps) t = ceil_div(pp->free_num, pp->bps);
            if (best < 0 || t < best) best = t;
            break;
        }
    }
    return best;
}

i64 hop_next_deadline(hop_t *T) { return next_deadline(T); }

i64 hop_ready_at(hop_t *T, int port) {
    port_t *pp = &T->ports[port];
    return pp->has_link && pp->bps ? ceil_div(pp->free_num, pp->bps) : 0;
}

static pkt *dequeue(hop_t *T, i64 now, int *port_out, int *prio_out, i64 *left) {
    int n = T->norder, rr = T->rr;
    for (int i = 0; i < n; i++) {
        int j = rr + i;
        int port = T->order[j >= n ? j - n : j];
        port_t *pp = &T->ports[port];
        if (!pp->backlog) continue;
        for (int prio = T->prios - 1; prio >= 0; prio--) {
            queue *q = &pp->q[prio];
            if (!q->n) continue;
            if (link_busy(pp, now)) break; /* still sending: nothing of it leaves yet */
            pkt *P = pop(q);
            if (q->head) __builtin_prefetch(q->head); /* the port's next, a while from now */
            if (pp->has_link) {
                pp->queued_bytes -= P->len;
                link_send(pp, P->len);
            }
            T->backlog--;
            pp->busy_tx++;
            if (!--pp->backlog) pp->busy_total += now - pp->busy_since;
            T->rr = (rr + i + 1) % n;
            *port_out = port;
            *prio_out = prio;
            *left = q->n;
            return P;
        }
    }
    return NULL;
}

static i64 enqueue(hop_t *T, port_t *pp, queue *q, pkt *P, i64 now) {
    i64 n = q->n;
    if (n >= q->depth || (pp->has_link && pp->buffer && pp->queued_bytes + P->len > pp->buffer)) {
        pp->drops++;
        return -1;
    }
    i64 waiting = pp->backlog;
    if (pp->has_link) {
        pp->queued_bytes += P->len;
        if (!waiting) link_start(pp, now);
    }
    push(q, P);
    T->backlog++;
    if (!waiting) pp->busy_since = now;
    pp->backlog = waiting + 1;
    T->enqueues++;
    return n;
}

/* NativeFlow's egress: 0 done, 1 egress asked for a clone (the packet is held) */
static int egress(hop_t *T, i64 *F, const uint8_t *data, i32 len, i32 pos, int port, int prio,
                  i64 left, i64 now, i64 *out) {
    uint8_t *ob = room(T, len);
    i64 n = T->egr(T->C, F, data, len, pos, port, (now - T->t0) / 1000, left, prio, ob, out);
    port_t *pp = &T->ports[port];
    if (n >= 0) {
        settle(pp, len, n);
        emit(T, port, ob, n);
    } else if (n == -3) {
        T->pipeline_drops++;
        settle(pp, len, 0);
    } else if (n == -2) {
        return 1;
    } else {
        T->aborts++;
        T->last_abort = out[0];
    }
    return 0;
}

/* V1Model.service: egress for every packet that may leave now. 1: stopped at a held packet */
static int service(hop_t *T, i64 now, i64 *out) {
    while (T->backlog) {
        int port, prio;
        i64 left;
        pkt *P = dequeue(T, now, &port, &prio, &left);
        if (!P) break;
        if (egress(T, P->F, P->data, P->len, P->pos, port, prio, left, now, out)) {
            T->held = P;
            T->held_port = port;
            return 1;
        }
        free_pkt(T, P);
    }
    return 0;
}

/* res: [0] frames out, [1] next deadline (-1: nothing waits), [2] what Python must do:
 * 0 nothing, 1 nat_run said 1 or 5 (res[3]; F and out as nat_run left them; nothing served),
 * 2 egress asked for a clone (hop_take_held; the rest not served), [4] 1 when this call
 * enqueued a packet (its port in res[5]), [6] the output arrays' generation (hop_arena...). */
static void finish(hop_t *T, i64 *res) {
    res[0] = T->nout;
    res[1] = next_deadline(T);
    res[6] = T->gen;
}

/* One frame arriving: DataPlane.receive (ingress, the egress buffers, service) and the peak
 * check SimSwitch.receive makes after it. Ingress runs in the PHV of the packet's own block,
 * which is queued as it is: no copy of the PHV (thousands of bytes). Only when the Python path
 * takes over (1) does the PHV, as nat_run left it, go to the caller's F. */
int hop_arrive(hop_t *T, const uint8_t *data, i32 len, i32 port, i64 now, i64 *Fc, i64 *out,
               i64 *res) {
    T->nout = 0;
    T->arena_len = 0;
    res[0] = res[2] = res[4] = 0;
    res[1] = res[5] = -1;
    res[6] = T->gen;
    T->ports[port].rx++;
    uint8_t *ob = room(T, len);
    i64 us = (now - T->t0) / 1000;
    pkt *P = alloc_pkt(T, len); /* freed at the end unless queued or held */
    i64 *F = P->F;
    int rc = T->run(T->C, F, data, len, port, us, -1, NULL, ob, out);
    if (out[2]) T->parser_errors++;
    int enq = -1;
    if (rc == 3) {
        emit(T, (int)out[6], ob, out[7]);
    } else if (rc == 2 || rc == 4) {
        T->pipeline_drops++;
    } else if (rc == 0) {
        int eport = (int)F[T->s_es];
        i64 prio = T->prios > 1 ? F[T->s_prio] : 0;
        if (prio >= T->prios) {
            T->pipeline_drops++;
        } else if (eport < 0 || eport >= MAXP || prio < 0) {
            res[2] = 1; /* not covered here: the Python path decides */
            res[3] = rc;
            memcpy(Fc, F, sizeof(i64) * (size_t)T->nslots);
            free_pkt(T, P);
            return 1;
        } else {
            F[T->s_enq_ts] = us & T->m_enq_ts;
            port_t *pp = &T->ports[eport];
            link_for_new_port(T, pp);
            queue *q = &pp->q[prio];
            if (!q->exists) q = make_queue(T, eport, (int)prio, pp->new_depth);
            if (!q->n && q->depth > 0 && (!pp->has_link || (!pp->backlog && !link_busy(pp, now)))) {
                F[T->s_enq_qd] = 0; /* TrafficManager.may_pass: straight through egress */
                if (pp->has_link) {
                    link_start(pp, now);
                    link_send(pp, len);
                }
                if (egress(T, F, data, len, (i32)out[1], eport, (int)prio, 0, now, out)) {
                    T->held = fill_pkt(P, data, (i32)out[1], port);
                    T->held_port = eport;
                    res[2] = 2;
                    finish(T, res);
                    return 2;
                }
            } else {
                fill_pkt(P, data, (i32)out[1], port);
                i64 depth = enqueue(T, pp, q, P, now);
                if (depth >= 0) {
                    P->F[T->s_enq_qd] = depth;
                    enq = eport;
                    P = NULL; /* the queue's now */
                }
            }
        }
    } else if (rc == -1) {
        T->aborts++;
        T->last_abort = out[0];
    } else {
        res[2] = 1;
        res[3] = rc;
        memcpy(Fc, F, sizeof(i64) * (size_t)T->nslots);
        free_pkt(T, P);
        return 1;
    }
    free_pkt(T, P);
    if (T->backlog && service(T, now, out)) {
        res[2] = 2;
        if (enq >= 0) {
            res[4] = 1;
            res[5] = enq;
        }
        finish(T, res);
        return 2;
    }
    if (enq >= 0 && T->backlog) {
        port_t *pp = &T->ports[enq];
        if (pp->backlog > pp->peak) pp->peak = pp->backlog;
    }
    finish(T, res);
    return 0;
}

/* DataPlane.poll: service, then the next deadline. */
int hop_service(hop_t *T, i64 now, i64 *out, i64 *res) {
    T->nout = 0;
    T->arena_len = 0;
    res[0] = res[2] = res[4] = 0;
    res[1] = res[5] = -1;
    res[6] = T->gen;
    int rc = service(T, now, out);
    if (rc) res[2] = 2;
    finish(T, res);
    return rc ? 2 : 0;
}
