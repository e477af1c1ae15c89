/* SPDX-License-Identifier: Apache-2.0 */
/* Position bitmaps as Roaring containers and their portable serialization (RoaringFormatSpec,
 * 64-bit "portable" layout as Iceberg Java's RoaringPositionBitmap writes it), hand-written:
 * array and bitset containers in memory, run containers on the wire. */
#include "firn/puffin.h"

#include <stdlib.h>
#include <string.h>

#define ARRAY_MAX     4096 /* an array container holds at most this many values */
#define BITSET_WORDS  1024 /* 65536 bits */
#define COOKIE_NO_RUN 12346u
#define COOKIE_RUN    12347u
#define NO_OFFSET_MIN 4 /* with runs, offsets are written only from this many containers on */
#define GAP_FILL_MAX  1024u

typedef struct container {
    uint64_t key;   /* pos >> 16 */
    uint32_t card;  /* values in the container, 1..65536 */
    uint32_t cap;   /* array capacity */
    uint16_t *vals; /* sorted values when card <= ARRAY_MAX, else NULL */
    uint64_t *bits; /* BITSET_WORDS words when card > ARRAY_MAX, else NULL */
} container;

struct firn_bitmap64 {
    container *c;
    size_t n, cap;
};

firn_bitmap64 *firn_bitmap64_new(void)
{
    return firn_calloc(1, sizeof(firn_bitmap64));
}

void firn_bitmap64_free(firn_bitmap64 *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        firn_free(b->c[i].vals);
        firn_free(b->c[i].bits);
    }
    firn_free(b->c);
    firn_free(b);
}

/* Index of the container with key, or where it would go (*found false). */
static size_t find(const firn_bitmap64 *b, uint64_t key, bool *found)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->c[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < b->n && b->c[lo].key == key;
    return lo;
}

static container *get_or_insert(firn_bitmap64 *b, uint64_t key)
{
    bool found = false;
    size_t i = b->n; /* positions mostly arrive in ascending order: try the end first */
    if (b->n == 0 || b->c[b->n - 1].key < key)
        found = false;
    else
        i = find(b, key, &found);
    if (found)
        return &b->c[i];
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 4;
        b->c = firn_reallocarray(b->c, b->cap, sizeof(container));
    }
    memmove(&b->c[i + 1], &b->c[i], (b->n - i) * sizeof(container));
    b->n++;
    memset(&b->c[i], 0, sizeof(container));
    b->c[i].key = key;
    return &b->c[i];
}

/* Position of v in a sorted array, or where it would go. */
static size_t array_find(const uint16_t *vals, uint32_t n, uint16_t v, bool *found)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vals[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < n && vals[lo] == v;
    return lo;
}

static void to_bitset(container *c)
{
    c->bits = firn_calloc(BITSET_WORDS, sizeof(uint64_t));
    for (uint32_t i = 0; i < c->card; i++)
        c->bits[c->vals[i] >> 6] |= (uint64_t)1 << (c->vals[i] & 63);
    firn_free(c->vals);
    c->vals = NULL;
    c->cap = 0;
}

/* Converts a bitset of ARRAY_MAX or fewer members back to an array (keeps the invariant). */
static void to_array(container *c)
{
    uint16_t *vals = firn_calloc(c->card ? c->card : 1, sizeof(uint16_t));
    uint32_t n = 0;
    for (uint32_t w = 0; w < BITSET_WORDS; w++) {
        for (uint64_t x = c->bits[w]; x; x &= x - 1)
            vals[n++] = (uint16_t)(w * 64 + (uint32_t)__builtin_ctzll(x));
    }
    FIRN_ASSERT(n == c->card);
    firn_free(c->bits);
    c->bits = NULL;
    c->vals = vals;
    c->cap = c->card ? c->card : 1;
}

static void container_add(container *c, uint16_t v)
{
    if (c->bits) {
        uint64_t m = (uint64_t)1 << (v & 63);
        if (!(c->bits[v >> 6] & m)) {
            c->bits[v >> 6] |= m;
            c->card++;
        }
        return;
    }
    bool found;
    size_t at = array_find(c->vals, c->card, v, &found);
    if (found)
        return;
    if (c->card == ARRAY_MAX) {
        to_bitset(c);
        container_add(c, v);
        return;
    }
    if (c->card == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 4;
        if (c->cap > ARRAY_MAX)
            c->cap = ARRAY_MAX;
        c->vals = firn_reallocarray(c->vals, c->cap, sizeof(uint16_t));
    }
    memmove(&c->vals[at + 1], &c->vals[at], (c->card - at) * sizeof(uint16_t));
    c->vals[at] = v;
    c->card++;
}

void firn_bitmap64_add(firn_bitmap64 *b, uint64_t pos)
{
    container_add(get_or_insert(b, pos >> 16), (uint16_t)pos);
}

/* Sets bits [lo, hi] (inclusive, within one container) of a bitset container. */
static void bitset_set_range(container *c, uint32_t lo, uint32_t hi)
{
    for (uint32_t v = lo; v <= hi;) {
        if ((v & 63) == 0 && v + 63 <= hi) {
            c->card += 64 - (uint32_t)__builtin_popcountll(c->bits[v >> 6]);
            c->bits[v >> 6] = ~(uint64_t)0;
            v += 64;
            continue;
        }
        uint64_t m = (uint64_t)1 << (v & 63);
        if (!(c->bits[v >> 6] & m)) {
            c->bits[v >> 6] |= m;
            c->card++;
        }
        v++;
    }
}

void firn_bitmap64_add_range(firn_bitmap64 *b, uint64_t lo, uint64_t hi)
{
    while (lo < hi) {
        uint64_t end = ((lo >> 16) + 1) << 16; /* end of lo's container */
        if (end > hi || end == 0)
            end = hi;
        container *c = get_or_insert(b, lo >> 16);
        uint32_t first = (uint32_t)(lo & 0xFFFF), last = (uint32_t)((end - 1) & 0xFFFF);
        if (!c->bits && c->card + (last - first + 1) > ARRAY_MAX)
            to_bitset(c);
        if (c->bits) {
            bitset_set_range(c, first, last);
            if (c->card <= ARRAY_MAX)
                to_array(c);
        } else {
            for (uint32_t v = first; v <= last; v++)
                container_add(c, (uint16_t)v);
        }
        lo = end;
    }
}

static bool container_has(const container *c, uint16_t v)
{
    if (c->bits)
        return (c->bits[v >> 6] >> (v & 63)) & 1;
    bool found;
    array_find(c->vals, c->card, v, &found);
    return found;
}

bool firn_bitmap64_contains(const firn_bitmap64 *b, uint64_t pos)
{
    bool found;
    size_t i = find(b, pos >> 16, &found);
    return found && container_has(&b->c[i], (uint16_t)pos);
}

uint64_t firn_bitmap64_cardinality(const firn_bitmap64 *b)
{
    uint64_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += b->c[i].card;
    return n;
}

static void container_or(container *dst, const container *src)
{
    if (src->bits && !dst->bits)
        to_bitset(dst);
    if (dst->bits && src->bits) {
        uint32_t card = 0;
        for (uint32_t w = 0; w < BITSET_WORDS; w++) {
            dst->bits[w] |= src->bits[w];
            card += (uint32_t)__builtin_popcountll(dst->bits[w]);
        }
        dst->card = card;
        return;
    }
    for (uint32_t i = 0; i < src->card; i++)
        container_add(dst, src->vals[i]);
}

void firn_bitmap64_or(firn_bitmap64 *dst, const firn_bitmap64 *src)
{
    for (size_t i = 0; i < src->n; i++)
        container_or(get_or_insert(dst, src->c[i].key), &src->c[i]);
}

void firn_bitmap64_foreach(const firn_bitmap64 *b, bool (*fn)(void *ctx, uint64_t pos), void *ctx)
{
    for (size_t i = 0; i < b->n; i++) {
        const container *c = &b->c[i];
        uint64_t base = c->key << 16;
        if (!c->bits) {
            for (uint32_t k = 0; k < c->card; k++) {
                if (!fn(ctx, base | c->vals[k]))
                    return;
            }
            continue;
        }
        for (uint32_t w = 0; w < BITSET_WORDS; w++) {
            for (uint64_t x = c->bits[w]; x; x &= x - 1) {
                if (!fn(ctx, base | (w * 64 + (uint32_t)__builtin_ctzll(x))))
                    return;
            }
        }
    }
}

/* ---- serialization ------------------------------------------------------------------------ */

/* Number of runs of consecutive values in a container. */
static uint32_t count_runs(const container *c)
{
    uint32_t runs = 0;
    if (!c->bits) {
        for (uint32_t i = 0; i < c->card; i++)
            runs += i == 0 || c->vals[i] != (uint16_t)(c->vals[i - 1] + 1);
        return runs;
    }
    uint64_t carry = 0; /* top bit of the previous word */
    for (uint32_t w = 0; w < BITSET_WORDS; w++) {
        uint64_t x = c->bits[w];
        runs += (uint32_t)__builtin_popcountll(x & ~((x << 1) | carry));
        carry = x >> 63;
    }
    return runs;
}

/* Serialized body size of a container in its chosen form; *run says whether it is a run one. */
static size_t body_size(const container *c, uint32_t *out_runs, bool *run)
{
    uint32_t runs = count_runs(c);
    size_t run_bytes = 2 + 4 * (size_t)runs;
    size_t plain = c->card <= ARRAY_MAX ? 2 * (size_t)c->card : 8 * BITSET_WORDS;
    *out_runs = runs;
    *run = run_bytes < plain;
    return *run ? run_bytes : plain;
}

typedef struct run_writer {
    firn_buf *out;
    firn_rc rc;
    bool open;
    uint32_t start, last;
} run_writer;

static void run_flush(run_writer *r)
{
    if (!r->open || r->rc)
        return;
    r->rc = firn_wr_le16(r->out, (uint16_t)r->start);
    if (!r->rc)
        r->rc = firn_wr_le16(r->out, (uint16_t)(r->last - r->start));
}

static void run_push(run_writer *r, uint32_t v)
{
    if (r->open && v == r->last + 1) {
        r->last = v;
        return;
    }
    run_flush(r);
    r->open = true;
    r->start = r->last = v;
}

static firn_rc put_run_body(const container *c, uint32_t runs, firn_buf *out)
{
    FIRN_TRY(firn_wr_le16(out, (uint16_t)runs));
    run_writer r = {out, FIRN_OK, false, 0, 0};
    if (!c->bits) {
        for (uint32_t i = 0; i < c->card; i++)
            run_push(&r, c->vals[i]);
    } else {
        for (uint32_t w = 0; w < BITSET_WORDS; w++) {
            for (uint64_t x = c->bits[w]; x; x &= x - 1)
                run_push(&r, w * 64 + (uint32_t)__builtin_ctzll(x));
        }
    }
    run_flush(&r);
    return r.rc;
}

static firn_rc put_plain_body(const container *c, firn_buf *out)
{
    if (c->card <= ARRAY_MAX) {
        if (!c->bits) {
            for (uint32_t i = 0; i < c->card; i++)
                FIRN_TRY(firn_wr_le16(out, c->vals[i]));
            return FIRN_OK;
        }
        for (uint32_t w = 0; w < BITSET_WORDS; w++) {
            for (uint64_t x = c->bits[w]; x; x &= x - 1)
                FIRN_TRY(firn_wr_le16(out, (uint16_t)(w * 64 + (uint32_t)__builtin_ctzll(x))));
        }
        return FIRN_OK;
    }
    for (uint32_t w = 0; w < BITSET_WORDS; w++)
        FIRN_TRY(firn_wr_le64(out, c->bits[w]));
    return FIRN_OK;
}

/* Writes the 32-bit portable bitmap of containers c[0..n) (one high-32 key). */
static firn_rc put_bitmap32(const container *c, size_t n, firn_buf *out)
{
    if (n == 0) {
        FIRN_TRY(firn_wr_le32(out, COOKIE_NO_RUN));
        return firn_wr_le32(out, 0);
    }
    uint32_t *runs = firn_calloc(n, sizeof(uint32_t));
    bool *is_run = firn_calloc(n, sizeof(bool));
    size_t *sizes = firn_calloc(n, sizeof(size_t));
    bool any_run = false;
    for (size_t i = 0; i < n; i++) {
        sizes[i] = body_size(&c[i], &runs[i], &is_run[i]);
        any_run |= is_run[i];
    }
    bool offsets = !any_run || n >= NO_OFFSET_MIN;
    size_t head = (any_run ? 4 + (n + 7) / 8 : 8) + 4 * n + (offsets ? 4 * n : 0);
    firn_rc rc = FIRN_OK;
    if (any_run) {
        rc = firn_wr_le32(out, COOKIE_RUN | (uint32_t)(n - 1) << 16);
        for (size_t i = 0; !rc && i < (n + 7) / 8; i++) {
            uint8_t flags = 0;
            for (size_t k = 0; k < 8 && i * 8 + k < n; k++)
                flags |= (uint8_t)(is_run[i * 8 + k] << k);
            rc = firn_wr_u8(out, flags);
        }
    } else {
        rc = firn_wr_le32(out, COOKIE_NO_RUN);
        if (!rc)
            rc = firn_wr_le32(out, (uint32_t)n);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        rc = firn_wr_le16(out, (uint16_t)c[i].key);
        if (!rc)
            rc = firn_wr_le16(out, (uint16_t)(c[i].card - 1));
    }
    for (size_t i = 0, at = head; !rc && offsets && i < n; at += sizes[i++])
        rc = firn_wr_le32(out, (uint32_t)at);
    for (size_t i = 0; !rc && i < n; i++)
        rc = is_run[i] ? put_run_body(&c[i], runs[i], out) : put_plain_body(&c[i], out);
    firn_free(sizes);
    firn_free(is_run);
    firn_free(runs);
    return rc;
}

firn_rc firn_bitmap64_serialize(const firn_bitmap64 *b, firn_buf *out)
{
    size_t mark = out->len;
    /* Groups of containers sharing the high 32 bits, with empty bitmaps for small gaps. */
    uint64_t count = 0;
    uint64_t prev = 0;
    bool have_prev = false;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t hi = b->c[i].key >> 16;
        if (have_prev && hi == prev)
            continue;
        uint64_t from = have_prev ? prev + 1 : 0;
        count += (hi - from < GAP_FILL_MAX ? hi - from : 0) + 1;
        prev = hi;
        have_prev = true;
    }
    firn_rc rc = firn_wr_le64(out, count);
    have_prev = false;
    for (size_t i = 0; !rc && i < b->n;) {
        uint64_t hi = b->c[i].key >> 16;
        uint64_t from = have_prev ? prev + 1 : 0;
        for (uint64_t k = from; !rc && hi - from < GAP_FILL_MAX && k < hi; k++) {
            rc = firn_wr_le32(out, (uint32_t)k);
            if (!rc)
                rc = put_bitmap32(NULL, 0, out);
        }
        size_t j = i;
        while (j < b->n && b->c[j].key >> 16 == hi)
            j++;
        if (!rc)
            rc = firn_wr_le32(out, (uint32_t)hi);
        if (!rc)
            rc = put_bitmap32(&b->c[i], j - i, out);
        prev = hi;
        have_prev = true;
        i = j;
    }
    if (rc)
        firn_buf_truncate(out, mark);
    return rc;
}

/* ---- deserialization ---------------------------------------------------------------------- */

/* Appends a container built from the wire; keys arrive strictly ascending. */
static container *append_container(firn_bitmap64 *b, uint64_t key)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 4;
        b->c = firn_reallocarray(b->c, b->cap, sizeof(container));
    }
    container *c = &b->c[b->n++];
    memset(c, 0, sizeof(*c));
    c->key = key;
    return c;
}

static firn_rc read_array(firn_rd *r, container *c, uint32_t card, firn_err *err)
{
    c->vals = firn_calloc(card, sizeof(uint16_t));
    c->cap = card;
    for (uint32_t i = 0; i < card; i++) {
        c->vals[i] = firn_rd_le16(r);
        if (i > 0 && c->vals[i] <= c->vals[i - 1])
            return firn_err_set(err, FIRN_ERR_PARSE, "roaring array container is not ascending");
    }
    c->card = card;
    return FIRN_OK;
}

static firn_rc read_bitset(firn_rd *r, container *c, firn_err *err)
{
    c->bits = firn_calloc(BITSET_WORDS, sizeof(uint64_t));
    uint32_t card = 0;
    for (uint32_t w = 0; w < BITSET_WORDS; w++) {
        c->bits[w] = firn_rd_le64(r);
        card += (uint32_t)__builtin_popcountll(c->bits[w]);
    }
    if (card == 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "roaring bitset container is empty");
    c->card = card;
    if (card <= ARRAY_MAX)
        to_array(c);
    return FIRN_OK;
}

static firn_rc read_runs(firn_rd *r, container *c, firn_err *err)
{
    uint32_t n_runs = firn_rd_le16(r);
    if (firn_rd_remaining(r) < 4 * (size_t)n_runs)
        return firn_err_set(err, FIRN_ERR_PARSE, "roaring run container is truncated");
    c->bits = firn_calloc(BITSET_WORDS, sizeof(uint64_t));
    int64_t prev_end = -1;
    for (uint32_t i = 0; i < n_runs; i++) {
        uint32_t start = firn_rd_le16(r);
        uint32_t end = start + firn_rd_le16(r);
        if (end > 0xFFFF || (int64_t)start <= prev_end)
            return firn_err_set(err, FIRN_ERR_PARSE, "roaring run %u of container %llu is invalid",
                                (unsigned)i, (unsigned long long)c->key);
        bitset_set_range(c, start, end);
        prev_end = end;
    }
    if (c->card == 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "roaring run container is empty");
    if (c->card <= ARRAY_MAX)
        to_array(c);
    return FIRN_OK;
}

/* Reads one 32-bit portable bitmap whose containers get high bits hi. */
static firn_rc read_bitmap32(firn_rd *r, uint64_t hi, firn_bitmap64 *b, firn_err *err)
{
    uint32_t cookie = firn_rd_le32(r);
    bool has_run = (cookie & 0xFFFF) == COOKIE_RUN;
    size_t n;
    const uint8_t *flags = NULL;
    if (has_run) {
        n = (cookie >> 16) + 1;
        flags = firn_rd_bytes(r, (n + 7) / 8);
    } else if (cookie == COOKIE_NO_RUN) {
        n = firn_rd_le32(r);
    } else {
        return firn_err_set(err, FIRN_ERR_PARSE, "unrecognized roaring cookie %u",
                            (unsigned)cookie);
    }
    if (!firn_rd_ok(r) || n > 65536 || firn_rd_remaining(r) < 4 * n)
        return firn_err_set(err, FIRN_ERR_PARSE, "roaring bitmap header is truncated");
    const uint8_t *desc = firn_rd_bytes(r, 4 * n);
    if (!has_run || n >= NO_OFFSET_MIN)
        (void)firn_rd_bytes(r, 4 * n); /* offsets: containers are read in sequence */
    int64_t prev_key = -1;
    for (size_t i = 0; i < n; i++) {
        if (!firn_rd_ok(r))
            break;
        uint32_t key = (uint32_t)desc[4 * i] | (uint32_t)desc[4 * i + 1] << 8;
        uint32_t card = ((uint32_t)desc[4 * i + 2] | (uint32_t)desc[4 * i + 3] << 8) + 1;
        if ((int64_t)key <= prev_key)
            return firn_err_set(err, FIRN_ERR_PARSE, "roaring container keys are not ascending");
        prev_key = key;
        container *c = append_container(b, hi << 16 | key);
        bool run = has_run && (flags[i / 8] >> (i % 8)) & 1;
        firn_rc rc;
        if (run)
            rc = read_runs(r, c, err);
        else if (card > ARRAY_MAX)
            rc = read_bitset(r, c, err);
        else if (firn_rd_remaining(r) < 2 * (size_t)card)
            rc = firn_err_set(err, FIRN_ERR_PARSE, "roaring array container is truncated");
        else
            rc = read_array(r, c, card, err);
        if (rc)
            return rc;
    }
    if (!firn_rd_ok(r))
        return firn_err_set(err, FIRN_ERR_PARSE, "roaring bitmap is truncated");
    return FIRN_OK;
}

firn_rc firn_bitmap64_deserialize(const void *p, size_t len, firn_bitmap64 **out, firn_err *err)
{
    firn_rd r;
    firn_rd_init(&r, p, len);
    uint64_t count = firn_rd_le64(&r);
    if (!firn_rd_ok(&r) || count > len / 12)
        return firn_err_set(err, FIRN_ERR_PARSE, "invalid roaring bitmap count");
    firn_bitmap64 *b = firn_bitmap64_new();
    firn_rc rc = FIRN_OK;
    int64_t prev = -1;
    for (uint64_t i = 0; !rc && i < count; i++) {
        uint32_t hi = firn_rd_le32(&r);
        if (!firn_rd_ok(&r) || (int64_t)hi <= prev)
            rc = firn_err_set(err, FIRN_ERR_PARSE, "roaring bitmap keys are not ascending");
        else
            rc = read_bitmap32(&r, hi, b, err);
        prev = hi;
    }
    if (!rc && firn_rd_remaining(&r) != 0)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "%zu bytes after the roaring bitmap",
                          firn_rd_remaining(&r));
    if (rc) {
        firn_bitmap64_free(b);
        return rc;
    }
    *out = b;
    return FIRN_OK;
}
