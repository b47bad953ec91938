/* The simulated end hosts in C: hosts.sender.Sender and hosts.receiver.Receiver as
 * cellfabric.sim.hostsim drives them (Program, SimHost, HostWire), for the runs
 * cellfabric.sim.chosts.refusal admits (rate control "none", no INT, no credits, no
 * failures, no offered load; any number of NIC and NVLink ports per host). The Python hosts are the reference: every
 * step here is the Python code's, in its order, with its float arithmetic, so a run's
 * metrics.json is the same either way (tests/sim/test_sim_chosts.py).
 *
 * The fabric (p4sim's fabric.c) owns the clock, the sequence counter and the heap: a frame
 * for a host reaches hc_deliver, a program's wake-up hc_timer, and what a host sends goes
 * back through the two functions hc_bind gives (an arrival event on the host's wire, a
 * wake-up event). Both callbacks return 0, or 1 + the id of a sender that has just finished
 * (Python then runs the harness's on_done for it). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;
typedef int32_t i32;

/* fabric.c's entry points for endpoints */
typedef void (*push_timer_fn)(void *X, i64 t, int ep, i64 arg);
typedef void (*push_frame_fn)(void *X, i64 t, int w, const uint8_t *data, i32 len);

#define SEND_BUFFER_BYTES (4 << 20) /* hostsim.SEND_BUFFER_BYTES */
#define MAX_FRAME 9216

/* layout constants from hosts.wire / hosts.cells (hc_layout; derived there, not here) */
enum { L_ROCE_PORT, L_INT_DSCP, L_OP_ACK, L_OP_CNP, L_PAD_BYTE, L_PAD_SHIFT, L_PSN_WORD,
       L_BECN, L_OPCODE, L_SACK_VERSION, L_SACK_INT, L_SACK_GRANT, L_NAK, L_BITMAP,
       L_TTL, L_DF, L_OP_FIRST, L_OP_MIDDLE, L_OP_LAST_IMM, L_OP_ONLY_IMM, L_ECN_CE,
       L_COUNT };
static i64 LAY[L_COUNT];

static void *xcalloc(size_t n, size_t s) {
    void *p = calloc(n ? n : 1, s);
    if (!p) abort();
    return p;
}
static void *xrealloc(void *p, size_t s) {
    p = realloc(p, s ? s : 1);
    if (!p) abort();
    return p;
}

/* -- small helpers ------------------------------------------------------------------------ */

/* CRC-32 (zlib's) eight bytes per step: CRC[k][b] is byte b's remainder followed by k zero
 * bytes, so eight table reads replace eight dependent byte steps (the receivers' checksum
 * over every message byte was the hosts' largest cost at k=8) */
static uint32_t CRC[8][256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        CRC[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            CRC[k][i] = CRC[0][CRC[k - 1][i] & 0xFF] ^ (CRC[k - 1][i] >> 8);
}
/* zlib.crc32(data, crc) */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, i64 n) {
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        crc = CRC[7][lo & 0xFF] ^ CRC[6][lo >> 8 & 0xFF] ^ CRC[5][lo >> 16 & 0xFF] ^
              CRC[4][lo >> 24] ^ CRC[3][hi & 0xFF] ^ CRC[2][hi >> 8 & 0xFF] ^
              CRC[1][hi >> 16 & 0xFF] ^ CRC[0][hi >> 24];
    }
    for (; n > 0; n--) crc = CRC[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline void wr32(uint8_t *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline void wr16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }

/* wire.psn_unwrap */
static inline i64 psn_unwrap(i64 psn, i64 ref) {
    i64 delta = (psn - ref) & 0xFFFFFF;
    if (delta >= 0x800000) delta -= 0x1000000;
    return ref + delta;
}

/* engine.to_ns */
static inline i64 to_ns(double s) { return (i64)ceil(s * 1e9 - 1e-6); }

static inline double pmax(double a, double b) { return b > a ? b : a; } /* Python max */
static inline double pmin(double a, double b) { return b < a ? b : a; } /* Python min */

/* the RoCE fields a host acts on: cells.parse_roce */
typedef struct {
    const uint8_t *src_mac, *src_ip, *dst_ip, *int_block;
    i32 int_len, body_off, body_end;
    int ecn, opcode, pad, sport;
    i64 qpn, psn;
} roce_t;

static int parse_roce(const uint8_t *b, i32 n, roce_t *f) {
    if (n < 14 + 20 + 8 + 12 + 4) return 0;
    if (rd16(b + 12) != 0x0800 || b[23] != 17 || b[14] >> 4 != 4) return 0;
    int ihl = (b[14] & 0x0F) * 4;
    if (ihl != 20 && (ihl < 20 || 14 + ihl + 8 + 12 + 4 > n)) return 0;
    int sport = rd16(b + 14 + ihl), dport = rd16(b + 14 + ihl + 2);
    if (dport != LAY[L_ROCE_PORT]) return 0;
    int tos = b[15], dscp = tos >> 2;
    i32 bth = 14 + ihl + 8;
    f->int_block = NULL;
    f->int_len = 0;
    if (dscp == LAY[L_INT_DSCP]) {
        i32 len = 4 + b[bth + 1] * 4;
        f->int_block = b + bth;
        f->int_len = bth + len <= n ? len : n - bth;
        bth += len;
    }
    if (bth + 12 + 4 > n) return 0;
    f->src_mac = b + 6;
    f->src_ip = b + 26;
    f->dst_ip = b + 30;
    f->ecn = tos & 3;
    f->sport = sport;
    f->opcode = b[bth];
    f->pad = (b[bth + 1] >> LAY[L_PAD_SHIFT]) & 3;
    f->qpn = rd32(b + bth + 4) & 0xFFFFFF;
    f->psn = rd32(b + bth + 8) & 0xFFFFFF;
    f->body_off = bth + 12;
    f->body_end = n - 4;
    return 1;
}

static int is_last(int op) { return op == LAY[L_OP_LAST_IMM] || op == LAY[L_OP_ONLY_IMM]; }
static int is_data(int op) {
    return op == LAY[L_OP_FIRST] || op == LAY[L_OP_MIDDLE] || is_last(op);
}

static uint16_t ip_checksum(const uint8_t *h) {
    uint32_t total = 0;
    for (int i = 0; i < 20; i += 2) total += rd16(h + i);
    while (total >> 16) total = (total & 0xFFFF) + (total >> 16);
    return (uint16_t)(~total & 0xFFFF);
}

/* -- the hosts, their wires and programs -------------------------------------------------- */

typedef struct { /* hostsim.HostWire */
    double ns_per_byte, free_at;
    i64 delay, frames, dropped;
    int up, w;
} hwire_t;

typedef struct {
    hwire_t *wire;        /* per host port: NIC ports, then NVLink ports */
    uint8_t (*mac)[6];    /* per host port */
    int nwires, receiver; /* receiver: program id, -1 */
    i64 *qpn;
    int *qprog, nsnd;
    i64 unclaimed;
} host_t;

struct snd_t;
struct rcv_t;

typedef struct { /* hostsim.Program with its SimNic ports */
    int sender, host, done;
    i64 wake_at, polls;
    /* the program's ports (SimNic.index) -> the host's (SimNic.host_port), and each one's
     * SimNic.sent / send_errors (a sender's are what its metrics' "ports" list) */
    int nports, *host_port;
    i64 *sent, *send_errors;
    struct snd_t *s;
    struct rcv_t *r;
} prog_t;

typedef struct {
    host_t *host;
    int nhosts;
    prog_t *prog;
    int nprogs, capprogs;
    void *X;
    push_timer_fn push_timer;
    push_frame_fn push_frame;
    i64 now_ns;
    double now;
    uint8_t frame[MAX_FRAME];
} hc_t;

/* SimNic.send -> HostWire.send: serialization from the port's free time, then the delay */
static int port_send(hc_t *H, prog_t *P, int port, const uint8_t *data, i32 len) {
    hwire_t *W = &H->host[P->host].wire[P->host_port[port]];
    int ok = 0;
    if (!W->up) {
        W->dropped++;
    } else {
        double now = (double)H->now_ns;
        double start = W->free_at > now ? W->free_at : now;
        if (!((start - now) / pmax(W->ns_per_byte, 1e-12) > SEND_BUFFER_BYTES)) {
            W->free_at = start + len * W->ns_per_byte;
            W->frames++;
            H->push_frame(H->X, to_ns((W->free_at + (double)W->delay) / 1e9), W->w, data, len);
            ok = 1;
        }
    }
    if (ok) P->sent[port]++;
    else P->send_errors[port]++;
    return ok;
}

/* hosts_transport.c, hosts_sender.c, hosts_receiver.c and hosts_program.c follow (one
 * source: chosts.SOURCES) */
