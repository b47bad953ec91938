/* The switch-to-switch part of a simulated fabric in C (appended to hop.c, one library):
 * the switches' hops, the wires between switch ports and their far ends, and a binary heap
 * of the events that belong to them, so a cell crosses the fabric's switches without
 * returning to Python at each hop. cellfabric.sim.cfabric drives it; cellfabric.sim.engine
 * merges this heap with its own by (time, sequence), the sequence numbers coming from the
 * engine's one counter, so events run in exactly the order the Python path runs them.
 *
 * Two kinds of event: a switch's queue-service deadline (SimSwitch._schedule / _poll: a
 * wake-up made stale by a newer one still pops, and counts, but does nothing) and a frame
 * arriving at the end of a switch's wire (net.Wire.transmit / _arrive). Whatever C does not
 * own stops a run and is handed to Python, at its turn: a frame for a host or for a switch
 * whose hop is not active in C, a deadline of such a switch, a hop result that needs the
 * Python path (a packet-in, a packet leaving the C hop). */

#define FAB_NEVER (1LL << 62)

/* what fab_run hands to Python (io[9..11] say for what) */
enum { ACT_NONE = 0, ACT_DELIVER = 1, ACT_POLL = 2, ACT_POST_ARRIVE = 3, ACT_POST_SERVICE = 4,
       ACT_ENDPOINT = 5 };
/* io: the state shared with Python across calls */
enum { IO_NOW = 0, IO_SEQ = 1, IO_RAN = 2, IO_BOUND_T = 3, IO_BOUND_SEQ = 4, IO_UNTIL = 5,
       IO_TOP_T = 6, IO_TOP_SEQ = 7, IO_BUDGET = 8, IO_A = 9, IO_B = 10, IO_LEN = 11,
       IO_PENDING = 12 };

/* 32 bytes: the heap's sift reads two of them per level, mostly from outside the cache. */
typedef struct {
    i64 t, seq;
    union {
        uint8_t *frame; /* an arrival's: owned by the event until it arrives */
        i64 arg;        /* a deadline's: the time it was made for */
    } u;
    i32 a;   /* the wire (an arrival) or the switch (a deadline) */
    i32 len; /* the frame's length; -1: a switch's deadline; -2: an endpoint's timer */
} ev_t;

/* Endpoints: what sits at a wire's far end other than a switch (a simulator's hosts, in a
 * library of their own that knows nothing of this one but these two callbacks and the two
 * fab_ep_* functions). A callback returns 0, or a nonzero code fab_run stops at and hands to
 * Python (ACT_ENDPOINT, io[IO_A] = code - 1). */
typedef int (*ep_deliver_fn)(void *ctx, int ep, int port, const uint8_t *data, i32 len,
                             i64 now);
typedef int (*ep_timer_fn)(void *ctx, int ep, i64 arg, i64 now);

typedef struct {
    hop_t *T;
    i64 *F, *out, *res;
    i64 cpu_port, poll_at, received;
    int on; /* the switch's hop is active (adopted): C may run it */
    i32 wire[MAXP]; /* wire index per egress port, -1: none (the frame is dropped) */
} fsw_t;

typedef struct {
    i64 delay, rate, frames, bytes, dropped;
    int up, dst_sw, dst_port; /* dst_sw -1: the far end is Python's (a host) */
    int ep, ep_port;          /* or an endpoint's (ep >= 0, with the callbacks set) */
} wire_t;

typedef struct {
    fsw_t *sw;
    wire_t *w;
    int nsw, nw;
    ev_t *heap;
    i64 n, cap;
    i64 now, seq;
    uint8_t *handed; /* the frame of the last event handed to Python (freed at the next run) */
    i32 handed_len;
    i64 *io;
    ep_deliver_fn ep_deliver;
    ep_timer_fn ep_timer;
    void *ep_ctx;
} fab_t;

fab_t *fab_new(int nsw, int nw, i64 *io) {
    fab_t *X = calloc(1, sizeof(fab_t));
    if (!X) return NULL;
    X->sw = calloc((size_t)(nsw ? nsw : 1), sizeof(fsw_t));
    X->w = calloc((size_t)(nw ? nw : 1), sizeof(wire_t));
    if (!X->sw || !X->w) abort();
    X->nsw = nsw;
    X->nw = nw;
    X->io = io;
    for (int i = 0; i < nsw; i++) {
        X->sw[i].poll_at = -1;
        X->sw[i].cpu_port = -1;
        for (int p = 0; p < MAXP; p++) X->sw[i].wire[p] = -1;
    }
    io[IO_TOP_T] = FAB_NEVER;
    io[IO_TOP_SEQ] = 0;
    return X;
}

void fab_free(fab_t *X) {
    if (!X) return;
    for (i64 k = 0; k < X->n; k++)
        if (X->heap[k].len >= 0) free(X->heap[k].u.frame);
    free(X->handed);
    free(X->heap);
    free(X->sw);
    free(X->w);
    free(X);
}

/* -- set-up and reads ------------------------------------------------------------------ */

void fab_wire(fab_t *X, int w, int src_sw, int src_port, int dst_sw, int dst_port, i64 delay,
              i64 rate, int up, i64 frames, i64 bytes, i64 dropped) {
    wire_t *W = &X->w[w];
    W->delay = delay;
    W->rate = rate;
    W->up = up;
    W->frames = frames;
    W->bytes = bytes;
    W->dropped = dropped;
    W->dst_sw = dst_sw;
    W->dst_port = dst_port;
    W->ep = -1;
    if (src_sw >= 0 && src_port >= 0 && src_port < MAXP) X->sw[src_sw].wire[src_port] = w;
}

void fab_set_up(fab_t *X, int w, int up) { X->w[w].up = up; }

/* a wire's figure: 0 up, 1 frames, 2 bytes, 3 dropped */
i64 fab_wire_get(fab_t *X, int w, int what) {
    wire_t *W = &X->w[w];
    return what == 0 ? W->up : what == 1 ? W->frames : what == 2 ? W->bytes : W->dropped;
}

/* Endpoints: the callbacks, and wire w's far end as endpoint ep's port (dst_sw -1) */
void fab_set_endpoints(fab_t *X, void *deliver, void *timer, void *ctx) {
    X->ep_deliver = (ep_deliver_fn)deliver;
    X->ep_timer = (ep_timer_fn)timer;
    X->ep_ctx = ctx;
}

void fab_wire_endpoint(fab_t *X, int w, int ep, int port) {
    X->w[w].ep = ep;
    X->w[w].ep_port = port;
}

void fab_set_hop(fab_t *X, int i, hop_t *T, i64 *F, i64 *out, i64 *res, i64 cpu_port) {
    fsw_t *s = &X->sw[i];
    s->T = T;
    s->F = F;
    s->out = out;
    s->res = res;
    s->cpu_port = cpu_port;
}

void fab_set_on(fab_t *X, int i, int on) { X->sw[i].on = on && X->sw[i].T != NULL; }
i64 fab_received(fab_t *X, int i) { return X->sw[i].received; }
i64 fab_poll_at(fab_t *X, int i) { return X->sw[i].poll_at; }
void fab_set_poll_at(fab_t *X, int i, i64 t) { X->sw[i].poll_at = t; }
uint8_t *fab_handed(fab_t *X) { return X->handed; }

/* -- the heap: (t, seq) order, as the engine's heapq of tuples ----------------------------- */

static int ev_before(const ev_t *a, const ev_t *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* Engine.at: the next sequence number, never before now */
static void ev_push(fab_t *X, i64 t, int a, i64 arg, uint8_t *frame, i32 len) {
    if (X->n == X->cap) {
        X->cap = X->cap ? 2 * X->cap : 1024;
        X->heap = xrealloc(X->heap, sizeof(ev_t) * (size_t)X->cap);
    }
    ev_t e = {.t = t > X->now ? t : X->now, .seq = ++X->seq, .a = a, .len = len};
    if (len >= 0) e.u.frame = frame;
    else e.u.arg = arg;
    i64 k = X->n++;
    while (k > 0) {
        i64 up = (k - 1) >> 1;
        if (!ev_before(&e, &X->heap[up])) break;
        X->heap[k] = X->heap[up];
        k = up;
    }
    X->heap[k] = e;
}

static ev_t ev_pop(fab_t *X) {
    ev_t top = X->heap[0];
    ev_t last = X->heap[--X->n];
    i64 k = 0, n = X->n;
    for (;;) {
        i64 c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && ev_before(&X->heap[c + 1], &X->heap[c])) c++;
        if (!ev_before(&X->heap[c], &last)) break;
        X->heap[k] = X->heap[c];
        k = c;
    }
    if (n) X->heap[k] = last;
    return top;
}

/* The frame of the event that (most likely) runs next, written when it left its last switch
 * and since gone cold: its loads overlap this event's work instead of stalling the parser and
 * the deparser's copy of the payload. */
static inline void prefetch_frame(const ev_t *e) {
    for (i32 o = 0; o < e->len && o < 4096; o += 64) __builtin_prefetch(e->u.frame + o);
}

/* Every entry point takes the clock and the sequence counter from io and gives them back with
 * the heap's top, so Python's merge loop reads where C stands without a call. */
static void enter(fab_t *X) {
    X->now = X->io[IO_NOW];
    X->seq = X->io[IO_SEQ];
}

static void leave(fab_t *X) {
    i64 *io = X->io;
    io[IO_NOW] = X->now;
    io[IO_SEQ] = X->seq;
    io[IO_TOP_T] = X->n ? X->heap[0].t : FAB_NEVER;
    io[IO_TOP_SEQ] = X->n ? X->heap[0].seq : 0;
    io[IO_PENDING] = X->n;
}

/* -- what the Python path's Wire and SimSwitch do ----------------------------------------- */

/* A frame onto wire w, arriving at t: counted, copied (the caller's buffer is reused) and
 * owned by its event until it arrives. */
static void wire_push(fab_t *X, i64 t, int w, const uint8_t *data, i32 len) {
    wire_t *W = &X->w[w];
    W->frames++;
    W->bytes += len;
    uint8_t *copy = pool_get((size_t)len);
    memcpy(copy, data, (size_t)len);
    ev_push(X, t, w, 0, copy, len);
}

/* net.Wire.transmit: serialization (bytes x 8 / rate, rounded up) and the delay; the frame is
 * copied (the caller's buffer is reused) and owned by the event until it arrives. */
static void transmit(fab_t *X, int w, const uint8_t *data, i32 len) {
    wire_t *W = &X->w[w];
    if (!W->up) {
        W->dropped++;
        return;
    }
    i64 ser = W->rate ? ((i64)len * 8 * NSEC + W->rate - 1) / W->rate : 0;
    wire_push(X, X->now + ser + W->delay, w, data, len);
}

/* SimSwitch._schedule: a new deadline replaces the pending one when it is earlier (or the
 * pending one has passed); the one replaced still pops, and is skipped then. */
static void schedule(fab_t *X, int i, i64 deadline) {
    fsw_t *s = &X->sw[i];
    if (deadline < X->now) deadline = X->now;
    if (s->poll_at < 0 || deadline < s->poll_at || s->poll_at < X->now) {
        s->poll_at = deadline;
        ev_push(X, deadline, i, deadline, NULL, -1);
    }
}

/* cellfabric.sim.hop's _hop_receive / _hop_poll: the hop, its frames onto their wires in
 * order, then the next deadline. A result that needs Python (the hop stopped for the Python
 * path, or a frame for the CPU port) is left in the hop's res and arena: ACT_POST_*. */
static int hop_step(fab_t *X, int i, int arrival, int port, const uint8_t *data, i32 len) {
    fsw_t *s = &X->sw[i];
    hop_t *T = s->T;
    i64 *res = s->res;
    int rc;
    if (arrival) {
        s->received++;
        rc = hop_arrive(T, data, len, port, X->now, s->F, s->out, res);
    } else {
        rc = hop_service(T, X->now, s->out, res);
    }
    int n = (int)res[0];
    int post = arrival ? ACT_POST_ARRIVE : ACT_POST_SERVICE;
    if (rc) return post;
    for (int k = 0; k < n; k++)
        if (T->oport[k] == s->cpu_port) return post;
    for (int k = 0; k < n; k++) {
        int p = T->oport[k];
        int w = p >= 0 && p < MAXP ? s->wire[p] : -1;
        if (w >= 0) transmit(X, w, T->arena + T->ooff[k], T->olen[k]);
    }
    if (res[1] >= 0) schedule(X, i, res[1]);
    return 0;
}

/* -- what endpoints call, from inside their callbacks (or between fab_sync_in and _out) --- */

/* an endpoint's wake-up at t (never before now), handed back with arg */
void fab_ep_timer(fab_t *X, i64 t, int ep, i64 arg) { ev_push(X, t, ep, arg, NULL, -2); }

/* a frame onto wire w that an endpoint serialized itself: it arrives at t */
void fab_ep_frame(fab_t *X, i64 t, int w, const uint8_t *data, i32 len) {
    wire_push(X, t, w, data, len);
}

/* -- entry points from Python ------------------------------------------------------------- */

/* the clock and counter in from io, and back out with the heap's top: around endpoint calls
 * Python makes (a program's start) */
void fab_sync_in(fab_t *X) { enter(X); }
void fab_sync_out(fab_t *X) { leave(X); }

void fab_transmit(fab_t *X, int w, const uint8_t *data, i32 len) {
    enter(X);
    transmit(X, w, data, len);
    leave(X);
}

void fab_schedule(fab_t *X, int i, i64 deadline) {
    enter(X);
    schedule(X, i, deadline);
    leave(X);
}

/* A frame from Python (a host's wire) into switch i, whose hop is active. 0: done in C. */
int fab_arrive(fab_t *X, int i, int port, const uint8_t *data, i32 len) {
    enter(X);
    int act = hop_step(X, i, 1, port, data, len);
    leave(X);
    return act;
}

/* A deadline of switch i that fired on the Python side (one set before C took over). */
int fab_service(fab_t *X, int i) {
    enter(X);
    int act = hop_step(X, i, 0, 0, NULL, 0);
    leave(X);
    return act;
}

/* Run events while the heap's top is before (io[3], io[4]) (Python's next event), at or
 * before io[5] (the run's end) and fewer than io[8] have run (-1: no limit). io[2]: the
 * events popped (stale deadlines and frames lost on a failed wire included, as the engine
 * counts them). Returns ACT_NONE, or what Python must do for the last event popped. */
int fab_run(fab_t *X) {
    i64 *io = X->io;
    enter(X);
    pool_put(X->handed, (size_t)X->handed_len);
    X->handed = NULL;
    i64 bt = io[IO_BOUND_T], bs = io[IO_BOUND_SEQ], until = io[IO_UNTIL];
    i64 budget = io[IO_BUDGET], ran = 0;
    int act = ACT_NONE;
    while (X->n && ran != budget) {
        ev_t *top = &X->heap[0];
        if (top->t > until || top->t > bt || (top->t == bt && top->seq > bs)) break;
        ev_t e = ev_pop(X);
        X->now = e.t;
        ran++;
        if (X->n) prefetch_frame(&X->heap[0]);
        if (e.len == -2) { /* an endpoint's timer */
            int code = X->ep_timer(X->ep_ctx, e.a, e.u.arg, X->now);
            if (code) {
                act = ACT_ENDPOINT;
                io[IO_A] = code - 1;
                break;
            }
            continue;
        }
        if (e.len < 0) { /* a deadline */
            fsw_t *s = &X->sw[e.a];
            if (e.u.arg != s->poll_at) continue; /* a newer, earlier wake-up replaced it */
            s->poll_at = -1;
            if (!s->on) {
                act = ACT_POLL;
                io[IO_A] = e.a;
                break;
            }
            act = hop_step(X, e.a, 0, 0, NULL, 0);
            if (act) {
                io[IO_A] = e.a;
                break;
            }
            continue;
        }
        wire_t *W = &X->w[e.a];
        if (!W->up) { /* carrier lost while the frame was on the wire */
            W->dropped++;
            pool_put(e.u.frame, (size_t)e.len);
            continue;
        }
        int j = W->dst_sw;
        if (j < 0 && W->ep >= 0 && X->ep_deliver) {
            int code = X->ep_deliver(X->ep_ctx, W->ep, W->ep_port, e.u.frame, e.len, X->now);
            pool_put(e.u.frame, (size_t)e.len);
            if (code) {
                act = ACT_ENDPOINT;
                io[IO_A] = code - 1;
                break;
            }
            continue;
        }
        if (j < 0 || !X->sw[j].on) {
            act = ACT_DELIVER;
            io[IO_A] = e.a;
        } else {
            act = hop_step(X, j, 1, W->dst_port, e.u.frame, e.len);
            io[IO_A] = j;
            io[IO_B] = W->dst_port;
        }
        if (act) {
            X->handed = e.u.frame;
            X->handed_len = e.len;
            io[IO_LEN] = e.len;
            break;
        }
        pool_put(e.u.frame, (size_t)e.len);
    }
    io[IO_RAN] = ran;
    leave(X);
    return act;
}
