/* p4sim native data plane: the fixed part of every generated program (see cgen.py).
 * Values are evaluated as signed 128-bit integers, which hold every intermediate result of the
 * BMv2 JSON expressions the generator accepts (fields and action data of at most 63 bits), and
 * are truncated when stored, as BMv2 (and the Python path) do. */
#include <stdint.h>
#include <string.h>
#include <setjmp.h>

typedef __int128 i128;
typedef int64_t i64;
typedef int32_t i32;

/* A packet meets a dozen tables of a switch whose state has mostly left the cache since its
 * last packet: what a search and a hit or miss read comes first, in one cache line (the
 * context is allocated 64-byte aligned: runtime.NativeState). */
typedef struct __attribute__((aligned(64))) {
    i32 n;          /* entries, in the order the Python table is searched */
    i32 hsize;      /* the index's size, a power of two; 0: search the entries in order */
    i32 nruns;
    i32 def_act;    /* -1: no default action */
    i64 *m;         /* n * nkeys * 3: is_range, a, b (k & a == b, or a <= k <= b) */
    i32 *act;       /* action id, or -1: the entry is a group (goff, gcnt) */
    i64 *data;      /* n * maxdata */
    i64 *def_data;
    i32 *hidx;      /* open-addressing index of the entries by (run, key values), -1 empty */
    i64 *runs;      /* runs of entries, 2 + nk each: start, scanned (1) or hashed (0), the
                     * masks; then n (tbl_index) */
    i32 *goff, *gcnt;
    i32 *gact;      /* live group members' action ids */
    i64 *gdata;     /* and their data, maxdata each */
    i64 *pk, *by;   /* direct counter increments since the last flush */
} tbl_t;

/* The Mersenne Twister (MT19937) of Python's random.Random, drawn here without a call back
 * into Python: p4sim.switch.native.crandom.SharedRandom keeps its state in this layout (624
 * words, then the position of the next word: CPython's getstate() order) and the generated
 * code draws from the same memory, so both paths take turns on one stream. The functions
 * follow CPython's definitions draw for draw (getrandbits, _randbelow_with_getrandbits). */
#define MT_N 624
#define MT_M 397
typedef struct { uint32_t mt[MT_N]; uint32_t pos; } mt_t;

static void mt_refill(mt_t *s) {
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % MT_N] & 0x7fffffffu);
        s->mt[i] = s->mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
}
static inline uint32_t mt_next(mt_t *s) {
    /* The position is read once into a local: if two threads ever drew from one generator at
     * once (never meant to happen) the draws would be wrong, but no index leaves the array. */
    uint32_t i = s->pos;
    if (i >= MT_N) { mt_refill(s); i = 0; }
    uint32_t y = s->mt[i];
    s->pos = i + 1;
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}
/* getrandbits(k), 0 <= k <= 128: 32-bit words least significant first, the last (most
 * significant) one keeping its top k % 32 bits; k == 0 draws nothing. */
static inline unsigned __int128 mt_bits(mt_t *s, int k) {
    unsigned __int128 v = 0;
    for (int sh = 0; k > 0; sh += 32, k -= 32) {
        uint32_t w = mt_next(s);
        if (k < 32) w >>= 32 - k;
        v |= (unsigned __int128)w << sh;
    }
    return v;
}
/* randint(lo, hi) for lo <= hi: lo + randbelow(n), n = hi - lo + 1 <= 2**64, drawing k =
 * n.bit_length() bits until the value is below n (a power of two n rejects half the draws,
 * as in Python). */
static inline i64 mt_randint(mt_t *s, i64 lo, i64 hi) {
    unsigned __int128 n = (unsigned __int128)((i128)hi - (i128)lo) + 1, r;
    int k = 0;
    while ((n >> k) != 0) k++;
    do r = mt_bits(s, k); while (r >= n);
    return (i64)((i128)lo + (i128)r);
}

typedef struct {
    i64 (*randint)(i64, i64);  /* a Python generator's randint, called back (mt NULL) */
    mt_t *mt;                  /* else the shared generator's state, drawn from here */
    i32 counted;    /* a direct counter moved since the last flush */
    i32 abort_code;
    jmp_buf jb;
} rt_t;

typedef struct {
    i64 *F;
    const uint8_t *data;
    i32 len, pos, exit, has_clone;
    i64 clone_session, clone_fl, length;
} pkt_t;

/* Abort codes: the exception the Python path raises at the same point. */
#define AB_INDEX 1
#define AB_ZERODIV 2
#define AB_SHIFT 3
#define AB_ASSERT 4

static void nat_abort(rt_t *R, int code) { R->abort_code = code; longjmp(R->jb, 1); }

static inline i64 nat_randint(rt_t *R, i64 lo, i64 hi) {
    return R->mt ? mt_randint(R->mt, lo, hi) : R->randint(lo, hi);
}

static inline i64 wrapu(i128 v, int w) { return (i64)(v & ((((i128)1) << w) - 1)); }
static inline i64 wraps(i128 v, int w) {
    i128 half = ((i128)1) << (w - 1);
    return (i64)(((v + half) & ((((i128)1) << w) - 1)) - half);
}
static inline i128 shl(rt_t *R, i128 a, i128 n) {
    if (n < 0) nat_abort(R, AB_SHIFT);
    if (n >= 127) return 0;  /* only ever stored truncated to <= 63 bits */
    return (i128)((unsigned __int128)a << n);
}
static inline i128 shr(rt_t *R, i128 a, i128 n) {
    if (n < 0) nat_abort(R, AB_SHIFT);
    if (n >= 127) return a < 0 ? -1 : 0;
    return a >> n;
}
static inline i128 fdiv(rt_t *R, i128 a, i128 b) {
    if (b == 0) nat_abort(R, AB_ZERODIV);
    i128 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
static inline i128 fmod_(rt_t *R, i128 a, i128 b) {
    if (b == 0) nat_abort(R, AB_ZERODIV);
    i128 r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
static inline i128 tcm(i128 v, i128 w) {
    i128 half = ((i128)1) << (w - 1);
    return ((v + half) & ((((i128)1) << w) - 1)) - half;
}
static inline i128 satc(i128 v, i128 w) {
    i128 hi = (((i128)1) << (w - 1)) - 1, lo = -(((i128)1) << (w - 1));
    return v > hi ? hi : v < lo ? lo : v;
}
static inline i128 usatc(i128 v, i128 w) {
    i128 hi = (((i128)1) << w) - 1;
    return v > hi ? hi : v < 0 ? 0 : v;
}
/* Python's list indexing: a negative index counts from the end, out of range raises. */
static inline int pyidx(rt_t *R, i128 i, int n) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) nat_abort(R, AB_INDEX);
    return (int)i;
}

/* Big-endian bit field access over a byte buffer. */
static inline uint64_t get_bits(const uint8_t *b, int64_t bitoff, int w) {
    uint64_t v = 0;
    for (int i = 0; i < w; ) {
        int64_t p = bitoff + i;
        int bit = (int)(p & 7), take = 8 - bit;
        if (take > w - i) take = w - i;
        uint64_t byte = b[p >> 3];
        uint64_t chunk = (byte >> (8 - bit - take)) & ((1u << take) - 1);
        v = (v << take) | chunk;
        i += take;
    }
    return v;
}
static inline void put_bits(uint8_t *b, int64_t bitoff, uint64_t v, int w) {
    for (int i = 0; i < w; ) {
        int64_t p = bitoff + i;
        int bit = (int)(p & 7), take = 8 - bit;
        if (take > w - i) take = w - i;
        uint64_t chunk = (v >> (w - i - take)) & ((1u << take) - 1);
        int sh = 8 - bit - take;
        b[p >> 3] = (uint8_t)((b[p >> 3] & ~(((1u << take) - 1) << sh)) | (chunk << sh));
        i += take;
    }
}

/* The same for a field of whole bytes at a byte boundary (most of them): the generator uses
 * these then, whose loops of constant count the compiler unrolls. */
static inline uint64_t get_be(const uint8_t *b, int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) v = (v << 8) | b[i];
    return v;
}
static inline void put_be(uint8_t *b, uint64_t v, int nbytes) {
    for (int i = nbytes - 1; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Hash algorithms, as p4sim.switch.externs defines them (BMv2's). */
static uint32_t crc32_tab[256];
static int crc32_ready;
static uint64_t h_crc32(const uint8_t *b, int n) {
    if (!crc32_ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc32_tab[i] = c;
        }
        crc32_ready = 1;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (int i = 0; i < n; i++) c = crc32_tab[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
static uint64_t h_crc16(const uint8_t *b, int n) {  /* CRC-16/ARC: reflected 0x8005, init 0 */
    uint32_t c = 0;
    for (int i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xA001u : c >> 1;
    }
    return c & 0xFFFF;
}
static uint64_t h_csum16(const uint8_t *b, int n) {
    uint64_t s = 0;
    for (int i = 0; i + 1 < n; i += 2) s += ((uint64_t)b[i] << 8) | b[i + 1];
    if (n & 1) s += (uint64_t)b[n - 1] << 8;
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return ~s & 0xFFFF;
}
static uint64_t h_identity(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n && i < 8; i++) v = (v << 8) | b[i];
    return v;
}
static uint64_t h_xor16(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i += 2) v ^= ((uint64_t)b[i] << 8) | (i + 1 < n ? b[i + 1] : 0);
    return v;
}
static uint64_t h_xor32(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i += 4) {
        uint64_t w = 0;
        for (int k = 0; k < 4; k++) w = (w << 8) | (i + k < n ? b[i + k] : 0);
        v ^= w;
    }
    return v;
}

/* The index (tbl_index) gives the entry the linear scan gives, with fewer comparisons. The
 * entries, in search order, are cut into runs of consecutive entries with the same masks (a
 * run per prefix length in an LPM table, one run in an exact table). Within a run an entry
 * matches a key exactly when its values equal the key under the run's masks, so a hash of
 * (run, masked key) finds the run's only candidate; of entries with the same values in a run
 * only the first is indexed (the later ones can never be the first match). Runs are probed
 * in order, so the first run holding a match holds the first matching entry. Range matchers
 * have no single masked value: entries with one form runs that are scanned. */
static inline uint64_t run_hash(int r, const i64 *key, int nk) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uint32_t)r * 0xD6E8FEB86659FD93ull);
    for (int k = 0; k < nk; k++) {
        h ^= (uint64_t)key[k];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h;
}

static inline int entry_matches(const i64 *m, const i64 *key, int nk) {
    for (int k = 0; k < nk; k++) {
        const i64 *q = m + 3 * k;
        if (q[0]) { if (key[k] < q[1] || key[k] > q[2]) return 0; }
        else if ((key[k] & q[1]) != q[2]) return 0;
    }
    return 1;
}

static inline int has_range(const i64 *m, int nk) {
    for (int k = 0; k < nk; k++) if (m[3 * k]) return 1;
    return 0;
}

static inline int same_masks(const i64 *a, const i64 *b, int nk) {
    for (int k = 0; k < nk; k++) if (a[3 * k + 1] != b[3 * k + 1]) return 0;
    return 1;
}

static inline int same_values(const i64 *a, const i64 *b, int nk) {
    for (int k = 0; k < nk; k++) if (a[3 * k + 2] != b[3 * k + 2]) return 0;
    return 1;
}

/* Cuts the entries into runs and indexes them; hsize is left 0 (search in order) when the
 * runs are too many for probing them to beat the scan. t->runs has room for (2 + nk) n + 1.
 * A run holds its masks: a probe reads the run, one index slot and the entry it verifies. */
static void tbl_index(tbl_t *t, int nk) {
    const int stride = 3 * nk, rs = 2 + nk;
    int nr = 0;
    for (int e = 0; e < t->n; e++) {
        const i64 *m = t->m + (i64)e * stride;
        int scan = has_range(m, nk);
        if (e > 0) {
            const i64 *p = m - stride;
            int pscan = (int)t->runs[rs * (nr - 1) + 1];
            if (scan == pscan && (scan || same_masks(m, p, nk))) continue;
        }
        i64 *run = t->runs + (i64)rs * nr;
        run[0] = e;
        run[1] = scan;
        for (int k = 0; k < nk; k++) run[2 + k] = m[3 * k + 1];
        nr++;
    }
    t->runs[(i64)rs * nr] = t->n;
    t->nruns = nr;
    if (nr * 4 > t->n) {  /* about as many probes as the scan's comparisons */
        t->hsize = 0;
        return;
    }
    i64 key[64];
    const uint64_t mask = (uint64_t)(t->hsize - 1);
    for (int i = 0; i < t->hsize; i++) t->hidx[i] = -1;
    for (int r = 0; r < nr; r++) {
        const i64 *run = t->runs + (i64)rs * r;
        if (run[1]) continue;
        for (int e = (int)run[0]; e < (int)run[rs]; e++) {
            const i64 *m = t->m + (i64)e * stride;
            for (int k = 0; k < nk; k++) key[k] = m[3 * k + 2];
            uint64_t h = run_hash(r, key, nk) & mask;
            int dup = 0;
            for (int o; (o = t->hidx[h]) != -1; h = (h + 1) & mask)
                if (o >= run[0] && same_values(t->m + (i64)o * stride, m, nk)) {
                    dup = 1;
                    break;
                }
            if (!dup) t->hidx[h] = e;
        }
    }
}

static inline int tbl_scan(const tbl_t *t, const i64 *key, int nk, int from, int to) {
    const i64 *m = t->m + (i64)from * 3 * nk;
    for (int e = from; e < to; e++, m += 3 * nk)
        if (entry_matches(m, key, nk)) return e;
    return -1;
}

static int tbl_probe(const tbl_t *t, const i64 *key, int nk) {
    i64 mk[64];
    const int rs = 2 + nk;
    const uint64_t mask = (uint64_t)(t->hsize - 1);
    const i64 *run = t->runs;
    for (int r = 0; r < t->nruns; r++, run += rs) {
        int from = (int)run[0], to = (int)run[rs];
        if (run[1]) {
            int e = tbl_scan(t, key, nk, from, to);
            if (e >= 0) return e;
            continue;
        }
        for (int k = 0; k < nk; k++) mk[k] = key[k] & run[2 + k];
        uint64_t h = run_hash(r, mk, nk) & mask;
        for (int e; (e = t->hidx[h]) != -1; h = (h + 1) & mask)
            if (e >= from && e < to && entry_matches(t->m + (i64)e * 3 * nk, key, nk)) return e;
    }
    return -1;
}

/* A table search: the first entry whose every key field matches (Python's order). Inlined
 * where the generated code calls it with its constant key count: most tables an average
 * packet meets are empty or hold a few entries, and the call costs more than their scan. */
static inline __attribute__((always_inline)) int tbl_find(const tbl_t *t, const i64 *key,
                                                          int nk) {
    if (!t->hsize) return tbl_scan(t, key, nk, 0, t->n);
    return tbl_probe(t, key, nk);
}
