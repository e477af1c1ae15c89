/* SPDX-License-Identifier: Apache-2.0 */
/* Run files of the primary-key index: immutable, sorted by key hash, 4 KiB pages of Rice-coded
 * hash deltas and bit-packed locations, a header page and fence pointers, written to a temporary
 * name, fsynced and renamed into place (docs/internals/pkindex.md "Run files"). */
#include "eng_pkindex_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_MAGIC   "FIRNPKR1"
#define RUN_VERSION 1u
/* Hash-delta quotients from ESC up are written as ESC one bits and the raw 64-bit delta. */
#define RICE_ESC 48u
/* Pages the writer and the merge iterator move per system call. */
#define WRITE_PAGES 16u
#define ITER_PAGES  8u

uint64_t firn__pkrun_fail_after_pages;

/* ---- little-endian bit I/O over a page (PK_PAGE_PAD bytes of slack after it) ---------------- */

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void st64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint64_t low_bits(uint64_t v, unsigned n)
{
    return n >= 64 ? v : v & ((1ull << n) - 1);
}

/* ORs the low n bits of v at bit position *pos (bits beyond are zero in the page). */
static void put_bits(uint8_t *p, size_t *pos, uint64_t v, unsigned n)
{
    while (n > 0) {
        unsigned take = n > 56 ? 56 : n;
        uint8_t *at = p + (*pos >> 3);
        st64(at, ld64(at) | low_bits(v, take) << (*pos & 7));
        v = take == 64 ? 0 : v >> take;
        n -= take;
        *pos += take;
    }
}

static uint64_t get_bits(const uint8_t *p, size_t *pos, unsigned n)
{
    uint64_t v = 0;
    unsigned got = 0;
    while (got < n) {
        unsigned take = n - got > 56 ? 56 : n - got;
        uint64_t w = ld64(p + (*pos >> 3)) >> (*pos & 7);
        v |= low_bits(w, take) << got;
        got += take;
        *pos += take;
    }
    return v;
}

/* Counts leading one bits (up to RICE_ESC) and consumes them and, below RICE_ESC, the zero. */
static unsigned get_unary(const uint8_t *p, size_t *pos)
{
    uint64_t w = ld64(p + (*pos >> 3)) >> (*pos & 7);
    uint64_t inv = ~w;
    unsigned ones = inv ? (unsigned)__builtin_ctzll(inv) : 64;
    if (ones >= RICE_ESC) {
        *pos += RICE_ESC;
        return RICE_ESC;
    }
    *pos += ones + 1;
    return ones;
}

static unsigned bits_for(uint64_t max)
{
    return max ? 64u - (unsigned)__builtin_clzll(max) : 0u;
}

/* Rice parameter for n uniformly spread 64-bit hashes: about log2(0.69 * mean gap). */
static uint8_t rice_k(uint64_t n)
{
    if (n < 2)
        return 63;
    double gap = 18446744073709551616.0 / (double)n * 0.69;
    unsigned k = 0;
    while (k < 63 && (double)(1ull << (k + 1)) <= gap)
        k++;
    return (uint8_t)k;
}

static uint32_t page_crc(const uint8_t *page)
{
    return firn__pk_crc32(0, page + 4, PK_PAGE - 4);
}

firn_rc firn__pkrun_check_page(const uint8_t *bytes, const char *path, uint32_t page, firn_err *err)
{
    if (ld32(bytes) != page_crc(bytes))
        return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\": page %u fails its checksum",
                            path, page);
    return FIRN_OK;
}

/* ---- writer ------------------------------------------------------------------------------- */

struct firn__pkrun_writer {
    char *tmp;
    char *final;
    char *dir;
    int fd;
    uint32_t id;
    firn__pkrun_shape shape;
    uint8_t k, fb, pb;
    unsigned fixed; /* bits of an entry's fields: c (when has_c), file1, pos */
    uint8_t *out;   /* WRITE_PAGES pages waiting for write(); page 0 of the file is skipped */
    uint32_t out_n;
    uint8_t page[PK_PAGE + PK_PAGE_PAD];
    size_t bitpos;
    uint32_t page_n;
    uint32_t n_anchors;
    uint8_t anchors[PK_PAGE_MAX_ENTRIES / PK_ANCHOR_EVERY * PK_ANCHOR_BYTES];
    uint64_t prev_h;
    pk_entry last;
    uint64_t *fences;
    size_t fences_cap;
    uint32_t n_pages;
    uint64_t n_entries, n_tombs;
    uint32_t body_crc; /* crc32 of the file's bytes after the header page, so far */
};

char *firn__pk_path(const char *dir, const char *name)
{
    firn_buf b;
    firn_buf_init(&b, 8192);
    firn_rc_ignore(firn_buf_appendf(&b, "%s/%s", dir, name));
    return (char *)firn_buf_take(&b, NULL);
}

firn_rc firn__pk_write_all(int fd, const void *p, size_t len, const char *path, firn_err *err)
{
    const uint8_t *b = p;
    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write \"%s\"", path);
        b += n;
        len -= (size_t)n;
    }
    return FIRN_OK;
}

firn_rc firn__pkrun_writer_open(const char *dir,
                                uint32_t id,
                                const firn__pkrun_shape *shape,
                                firn__pkrun_writer **out,
                                firn_err *err)
{
    char name[64];
    snprintf(name, sizeof(name), "run-%08u.pkr", id);
    firn__pkrun_writer *w = firn_calloc(1, sizeof(*w));
    w->final = firn__pk_path(dir, name);
    snprintf(name, sizeof(name), "run-%08u.tmp", id);
    w->tmp = firn__pk_path(dir, name);
    w->dir = firn_strdup(dir);
    w->id = id;
    w->shape = *shape;
    w->k = rice_k(shape->n_upper);
    w->fb = (uint8_t)bits_for(shape->max_file1);
    w->pb = (uint8_t)bits_for(shape->max_pos);
    w->fixed = (shape->has_c ? 32u : 0u) + w->fb + w->pb;
    w->out = firn_malloc((size_t)WRITE_PAGES * PK_PAGE);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        firn_rc rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not create \"%s\"", w->tmp);
        w->fd = -1;
        firn__pkrun_writer_abort(w);
        return rc;
    }
    /* The header page is written last, in place. */
    if (lseek(w->fd, PK_PAGE, SEEK_SET) < 0) {
        firn_rc rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not seek \"%s\"", w->tmp);
        firn__pkrun_writer_abort(w);
        return rc;
    }
    *out = w;
    return FIRN_OK;
}

void firn__pkrun_writer_abort(firn__pkrun_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    firn_free(w->tmp);
    firn_free(w->final);
    firn_free(w->dir);
    firn_free(w->out);
    firn_free(w->fences);
    firn_free(w);
}

static firn_rc flush_out(firn__pkrun_writer *w, firn_err *err)
{
    if (w->out_n == 0)
        return FIRN_OK;
    FIRN_TRY(firn__pk_write_all(w->fd, w->out, (size_t)w->out_n * PK_PAGE, w->tmp, err));
    w->out_n = 0;
    return FIRN_OK;
}

static firn_rc emit_page(firn__pkrun_writer *w, firn_err *err)
{
    if (firn__pkrun_fail_after_pages && --firn__pkrun_fail_after_pages == 0)
        return firn_err_set(err, FIRN_ERR_IO, "could not write \"%s\": injected failure", w->tmp);
    w->page[4] = (uint8_t)w->page_n;
    w->page[5] = (uint8_t)(w->page_n >> 8);
    w->page[6] = (uint8_t)w->n_anchors;
    /* Anchors sit at the end of the page, the first one last. */
    for (uint32_t a = 0; a < w->n_anchors; a++)
        memcpy(w->page + PK_PAGE - (size_t)(a + 1) * PK_ANCHOR_BYTES,
               w->anchors + (size_t)a * PK_ANCHOR_BYTES, PK_ANCHOR_BYTES);
    st32(w->page, page_crc(w->page));
    w->body_crc = firn__pk_crc32(w->body_crc, w->page, PK_PAGE);
    memcpy(w->out + (size_t)w->out_n * PK_PAGE, w->page, PK_PAGE);
    w->out_n++;
    w->n_pages++;
    w->page_n = 0;
    w->n_anchors = 0;
    if (w->out_n == WRITE_PAGES)
        return flush_out(w, err);
    return FIRN_OK;
}

static void start_page(firn__pkrun_writer *w, const pk_entry *e)
{
    memset(w->page, 0, sizeof(w->page));
    st64(w->page + 8, e->h);
    w->bitpos = (size_t)PK_PAGE_HEAD * 8;
    if (w->n_pages + 1 > w->fences_cap) {
        w->fences_cap = w->fences_cap ? w->fences_cap * 2 : 64;
        w->fences = firn_reallocarray(w->fences, w->fences_cap, sizeof(uint64_t));
    }
    w->fences[w->n_pages] = e->h;
}

/* put_bits of n <= 56 bits whose value v has no bits above them: one load and store. */
static inline void put_short(uint8_t *p, size_t *pos, uint64_t v, unsigned n)
{
    uint8_t *at = p + (*pos >> 3);
    st64(at, ld64(at) | v << (*pos & 7));
    *pos += n;
}

/* Writes delta (quotient q = delta >> k) Rice-coded: q ones, a zero, the low k bits; from
 * RICE_ESC on, RICE_ESC ones and the raw 64 bits. */
static void put_delta(firn__pkrun_writer *w, uint64_t delta, uint64_t q)
{
    if (q < RICE_ESC) {
        uint64_t ones = (1ull << q) - 1; /* q ones, a zero */
        unsigned n = (unsigned)q + 1 + w->k;
        if (n <= 56) { /* one store: the same bits in the same order */
            put_short(w->page, &w->bitpos, ones | low_bits(delta, w->k) << (q + 1), n);
        } else {
            put_bits(w->page, &w->bitpos, ones, (unsigned)q + 1);
            put_bits(w->page, &w->bitpos, delta, w->k);
        }
    } else {
        put_bits(w->page, &w->bitpos, (1ull << RICE_ESC) - 1, RICE_ESC);
        put_bits(w->page, &w->bitpos, delta, 64);
    }
}

/* An anchor for the entry of hash h about to be written: its hash and where its fields start. */
static void put_anchor(firn__pkrun_writer *w, uint64_t h)
{
    uint8_t *a = w->anchors + (size_t)w->n_anchors++ * PK_ANCHOR_BYTES;
    st64(a, h);
    a[8] = (uint8_t)w->bitpos;
    a[9] = (uint8_t)(w->bitpos >> 8);
    a[10] = (uint8_t)(w->bitpos >> 16);
    a[11] = (uint8_t)w->page_n;
    a[12] = (uint8_t)(w->page_n >> 8);
}

/* Writes e's hash delta (and anchor) to the current page, or starts a new page with e when the
 * page is full or e (and its anchor) would not fit. */
static firn_rc put_hash(firn__pkrun_writer *w, const pk_entry *e, firn_err *err)
{
    if (w->page_n > 0) {
        uint64_t delta = e->h - w->prev_h;
        uint64_t q = delta >> w->k;
        size_t bits = w->fixed + (q < RICE_ESC ? q + 1 + w->k : RICE_ESC + 64);
        bool anchor = w->page_n % PK_ANCHOR_EVERY == 0;
        size_t anchors = w->n_anchors + (anchor ? 1 : 0);
        if (w->page_n < PK_PAGE_MAX_ENTRIES &&
            w->bitpos + bits + anchors * PK_ANCHOR_BYTES * 8 <= (size_t)PK_PAGE * 8) {
            put_delta(w, delta, q);
            if (anchor)
                put_anchor(w, e->h);
            return FIRN_OK;
        }
        FIRN_TRY(emit_page(w, err));
    }
    start_page(w, e);
    return FIRN_OK;
}

firn_rc firn__pkrun_writer_add(firn__pkrun_writer *w, const pk_entry *e, firn_err *err)
{
    if (w->n_entries > 0)
        FIRN_ASSERT(pk_entry_cmp(&w->last, e->h, e->c) < 0);
    FIRN_ASSERT(e->file1 <= w->shape.max_file1 && e->pos <= w->shape.max_pos);
    FIRN_ASSERT(w->shape.has_c || e->c == 0);
    FIRN_TRY(put_hash(w, e, err));
    if (w->shape.has_c)
        put_short(w->page, &w->bitpos, e->c, 32);
    if (w->fb + w->pb <= 56) { /* file1 then pos, as one store */
        put_short(w->page, &w->bitpos, (uint64_t)e->file1 | (uint64_t)e->pos << w->fb,
                  (unsigned)w->fb + w->pb);
    } else {
        put_bits(w->page, &w->bitpos, e->file1, w->fb);
        put_bits(w->page, &w->bitpos, e->pos, w->pb);
    }
    w->page_n++;
    w->prev_h = e->h;
    w->last = *e;
    w->n_entries++;
    if (e->file1 == PK_TOMB)
        w->n_tombs++;
    return FIRN_OK;
}

/* The writer's shape as add_on_page's loop keeps it in registers. */
typedef struct fast_shape {
    uint64_t dlim_m1; /* the hash delta minus 1 below this: no escape, a code of <= 56 bits */
    unsigned k, fb, fpb;
    uint32_t max_file1, max_pos;
} fast_shape;

/* One entry of add_on_page's segment: its Rice code and fields at *pos when its hash is above
 * prev_h by less than dlim (no escape, a code of at most 56 bits) and they fit below limit;
 * false (nothing written) otherwise. An equal or lower hash takes firn__pkrun_writer_add, which
 * checks the order. */
static inline __attribute__((always_inline)) bool add_fast(uint8_t *page,
                                                           size_t *pos,
                                                           const pk_entry *x,
                                                           uint64_t prev_h,
                                                           fast_shape fs,
                                                           bool has_c,
                                                           size_t limit)
{
    uint64_t delta = x->h - prev_h;
    if (delta - 1 >= fs.dlim_m1)
        return false;
    uint64_t q = delta >> fs.k;
    if (*pos + q > limit) /* limit: the page's room less the code's 1 + k bits */
        return false;
    FIRN_ASSERT(x->file1 <= fs.max_file1 && x->pos <= fs.max_pos);
    FIRN_ASSERT(has_c || x->c == 0);
    put_short(page, pos, ((1ull << q) - 1) | (delta & ((1ull << fs.k) - 1)) << (q + 1),
              (unsigned)q + 1 + fs.k);
    if (has_c)
        put_short(page, pos, x->c, 32);
    put_short(page, pos, (uint64_t)x->file1 | (uint64_t)x->pos << fs.fb, fs.fpb);
    return true;
}

/* Appends entries of e[0..n) to the current page while each takes the common path: a Rice code
 * and fields of one store each, room on the page (anchor included); the writer's state stays in
 * locals meanwhile. The page's checks are hoisted out of the loop, a run of entries up to the
 * next anchor at a time: the entry limit, the anchors' room, the escape and code length (one
 * range check of the hash delta, which also keeps the order). Returns how many were written
 * (0: e[0] needs firn__pkrun_writer_add). has_c: the shape's, a constant in each
 * instance. */
static inline __attribute__((always_inline)) size_t
add_on_page_as(firn__pkrun_writer *w, const pk_entry *e, size_t n, bool has_c)
{
    const unsigned k = w->k;
    if (w->page_n == 0 || w->fb + w->pb > 56 || k > 55)
        return 0;
    /* The fast path's quotients: below RICE_ESC, and a code (q + 1 + k bits) of at most 56. */
    const uint64_t q_end = RICE_ESC < 56 - k ? RICE_ESC : 56 - k;
    const fast_shape fs = {(q_end << k) - 1, k, w->fb, (unsigned)w->fb + w->pb, w->shape.max_file1,
                           w->shape.max_pos};
    const size_t fixed = w->fixed;
    const size_t room = (size_t)PK_PAGE * 8 - fixed - 1 - k;
    uint8_t *page = w->page;
    size_t pos = w->bitpos;
    uint32_t page_n = w->page_n;
    uint32_t n_anchors = w->n_anchors;
    uint64_t prev_h = w->prev_h, tombs = 0;
    size_t i = 0;
    while (i < n && page_n < PK_PAGE_MAX_ENTRIES) {
        uint32_t seg = PK_ANCHOR_EVERY - page_n % PK_ANCHOR_EVERY;
        size_t end = n - i < seg ? n : i + seg;
        size_t j = i;
        if (page_n % PK_ANCHOR_EVERY == 0) {
            size_t limit = room - (size_t)(n_anchors + 1) * PK_ANCHOR_BYTES * 8;
            if (!add_fast(page, &pos, &e[j], prev_h, fs, has_c, limit))
                break;
            /* The anchor: the hash, where its fields start, its index on the page. */
            size_t fields_at = pos - fixed;
            w->bitpos = fields_at;
            w->page_n = page_n;
            put_anchor(w, e[j].h);
            n_anchors++;
            prev_h = e[j].h;
            tombs += e[j].file1 == PK_TOMB;
            j++;
        }
        size_t limit = room - (size_t)n_anchors * PK_ANCHOR_BYTES * 8;
        for (; j < end; j++) {
            if (!add_fast(page, &pos, &e[j], prev_h, fs, has_c, limit))
                break;
            prev_h = e[j].h;
            tombs += e[j].file1 == PK_TOMB;
        }
        page_n += (uint32_t)(j - i);
        i = j;
        if (j < end)
            break;
    }
    if (i > 0) {
        w->bitpos = pos;
        w->page_n = page_n;
        w->prev_h = prev_h;
        w->last = e[i - 1];
        w->n_entries += i;
        w->n_tombs += tombs;
    }
    return i;
}

static size_t add_on_page(firn__pkrun_writer *w, const pk_entry *e, size_t n)
{
    return w->shape.has_c ? add_on_page_as(w, e, n, true) : add_on_page_as(w, e, n, false);
}

firn_rc firn__pkrun_writer_add_n(firn__pkrun_writer *w, const pk_entry *e, size_t n, firn_err *err)
{
    size_t i = 0;
    while (i < n) {
        size_t done = add_on_page(w, e + i, n - i);
        i += done;
        if (done == 0) {
            FIRN_TRY(firn__pkrun_writer_add(w, &e[i], err));
            i++;
        }
    }
    return FIRN_OK;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: some file systems refuse fsync on folders */
        close(fd);
    }
}

static void build_header(const firn__pkrun_writer *w, uint32_t fence_crc, uint8_t *hdr)
{
    memset(hdr, 0, PK_PAGE);
    memcpy(hdr, RUN_MAGIC, 8);
    st32(hdr + 8, RUN_VERSION);
    st64(hdr + 16, w->n_entries);
    st64(hdr + 24, w->n_tombs);
    st32(hdr + 32, w->n_pages);
    hdr[36] = w->k;
    hdr[37] = w->fb;
    hdr[38] = w->pb;
    hdr[39] = w->shape.has_c ? 1 : 0;
    st64(hdr + 40, w->fences[0]);
    st64(hdr + 48, w->last.h);
    st32(hdr + 56, fence_crc);
    st32(hdr + 60, w->id);
    st64(hdr + 64, (uint64_t)PK_PAGE * (1u + w->n_pages) + 8ull * w->n_pages);
    st32(hdr + 72, w->shape.level);
    st32(hdr + 12, firn__pk_crc32(0, hdr + 16, PK_PAGE - 16));
}

/* Fences after the pages, then the header page in place. No fsync: a run only needs to be
 * durable once a checkpoint refers to it (firn__pkrun_sync). */
static firn_rc write_tail(firn__pkrun_writer *w, uint32_t *out_file_crc, firn_err *err)
{
    FIRN_TRY(emit_page(w, err));
    FIRN_TRY(flush_out(w, err));
    uint32_t fcrc = 0;
    uint8_t chunk[512];
    for (uint32_t p = 0; p < w->n_pages;) {
        size_t n = 0;
        for (; n < sizeof(chunk) / 8 && p < w->n_pages; n++, p++)
            st64(chunk + n * 8, w->fences[p]);
        fcrc = firn__pk_crc32(fcrc, chunk, n * 8);
        w->body_crc = firn__pk_crc32(w->body_crc, chunk, n * 8);
        FIRN_TRY(firn__pk_write_all(w->fd, chunk, n * 8, w->tmp, err));
    }
    uint8_t *hdr = firn_malloc(PK_PAGE);
    build_header(w, fcrc, hdr);
    *out_file_crc = firn__pk_crc32_combine(firn__pk_crc32(0, hdr, PK_PAGE), w->body_crc,
                                           (uint64_t)w->n_pages * (PK_PAGE + 8));
    firn_rc rc = FIRN_OK;
    if (pwrite(w->fd, hdr, PK_PAGE, 0) != PK_PAGE)
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not write \"%s\"", w->tmp);
    firn_free(hdr);
    return rc;
}

firn_rc firn__pkrun_writer_finish(firn__pkrun_writer *w, firn__pkrun **out, firn_err *err)
{
    *out = NULL;
    if (w->n_entries == 0) {
        firn__pkrun_writer_abort(w);
        return FIRN_OK;
    }
    uint32_t file_crc = 0;
    firn_rc rc = write_tail(w, &file_crc, err);
    if (rc == FIRN_OK) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0)
            rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not close \"%s\"", w->tmp);
        else if (rename(w->tmp, w->final) != 0)
            rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not rename \"%s\"", w->tmp);
        if (rc)
            unlink(w->tmp);
    }
    if (rc == FIRN_OK) {
        rc = firn__pkrun_open(w->final, out, err);
        if (rc) {
            unlink(w->final);
        } else {
            (*out)->has_file_crc = true;
            (*out)->file_crc = file_crc;
        }
    }
    firn__pkrun_writer_abort(w);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------------ */

firn_rc firn__pk_read_at(int fd, void *p, size_t len, uint64_t off, const char *path, firn_err *err)
{
    uint8_t *b = p;
    while (len > 0) {
        ssize_t n = pread(fd, b, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not read \"%s\"", path);
        if (n == 0)
            return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\" is truncated", path);
        b += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return FIRN_OK;
}

static firn_rc parse_header(firn__pkrun *r, const uint8_t *hdr, uint64_t size, firn_err *err)
{
    if (memcmp(hdr, RUN_MAGIC, 8) != 0 || ld32(hdr + 8) != RUN_VERSION ||
        ld32(hdr + 12) != firn__pk_crc32(0, hdr + 16, PK_PAGE - 16))
        return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\" has a damaged header", r->path);
    r->n_entries = ld64(hdr + 16);
    r->n_tombs = ld64(hdr + 24);
    r->n_pages = ld32(hdr + 32);
    r->k = hdr[36];
    r->fb = hdr[37];
    r->pb = hdr[38];
    r->has_c = hdr[39];
    r->min_h = ld64(hdr + 40);
    r->max_h = ld64(hdr + 48);
    r->id = ld32(hdr + 60);
    r->file_bytes = ld64(hdr + 64);
    r->level = ld32(hdr + 72);
    uint64_t want = (uint64_t)PK_PAGE * (1u + (uint64_t)r->n_pages) + 8ull * r->n_pages;
    if (r->file_bytes != want || size != want || r->n_pages == 0 || r->k > 63 || r->fb > 32 ||
        r->pb > 32 || r->has_c > 1 || r->n_entries < r->n_pages ||
        r->n_entries > (uint64_t)r->n_pages * PK_PAGE_MAX_ENTRIES)
        return firn_err_set(err, FIRN_ERR_PARSE,
                            "index run \"%s\" is incomplete (%llu bytes, %llu expected)", r->path,
                            (unsigned long long)size, (unsigned long long)want);
    return FIRN_OK;
}

static firn_rc read_fences(firn__pkrun *r, uint32_t want_crc, firn_err *err)
{
    size_t bytes = (size_t)r->n_pages * 8;
    uint8_t *raw = firn_malloc(bytes);
    firn_rc rc =
        firn__pk_read_at(r->fd, raw, bytes, (uint64_t)PK_PAGE * (1u + r->n_pages), r->path, err);
    if (rc == FIRN_OK && firn__pk_crc32(0, raw, bytes) != want_crc)
        rc = firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\" has damaged fences", r->path);
    if (rc == FIRN_OK) {
        r->fences = firn_calloc(r->n_pages, sizeof(uint64_t));
        for (uint32_t p = 0; p < r->n_pages; p++) {
            r->fences[p] = ld64(raw + (size_t)p * 8);
            if (p > 0 && r->fences[p] < r->fences[p - 1])
                rc = firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\" has unsorted fences",
                                  r->path);
        }
    }
    firn_free(raw);
    return rc;
}

firn_rc firn__pkrun_open(const char *path, firn__pkrun **out, firn_err *err)
{
    *out = NULL;
    firn__pkrun *r = firn_calloc(1, sizeof(*r));
    r->path = firn_strdup(path);
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *hdr = firn_malloc(PK_PAGE);
    firn_rc rc = FIRN_OK;
    struct stat st;
    if (r->fd < 0 || fstat(r->fd, &st) != 0) {
        rc = firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not open \"%s\"", path);
    } else if ((uint64_t)st.st_size < PK_PAGE) {
        rc = firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\" is incomplete", path);
    } else {
        rc = firn__pk_read_at(r->fd, hdr, PK_PAGE, 0, path, err);
        if (rc == FIRN_OK)
            rc = parse_header(r, hdr, (uint64_t)st.st_size, err);
        if (rc == FIRN_OK)
            rc = read_fences(r, ld32(hdr + 56), err);
    }
    firn_free(hdr);
    if (rc) {
        firn__pkrun_close(r, false);
        return rc;
    }
    *out = r;
    return FIRN_OK;
}

firn_rc firn__pkrun_sync(const firn__pkrun *r, firn_err *err)
{
    if (fsync(r->fd) != 0)
        return firn_err_set_errno(err, FIRN_ERR_IO, errno, "could not fsync \"%s\"", r->path);
    return FIRN_OK;
}

void firn__pkrun_fsync_dir(const char *dir)
{
    fsync_dir(dir);
}

void firn__pkrun_close(firn__pkrun *r, bool unlink_file)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    if (unlink_file)
        unlink(r->path);
    firn_free(r->path);
    firn_free(r->fences);
    firn_free(r);
}

uint32_t firn__pkrun_find_page(const firn__pkrun *r, uint64_t h, uint32_t from)
{
    /* Last page p >= from with fences[p] < h, or from. */
    uint32_t lo = from, hi = r->n_pages;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->fences[mid] < h)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Bits of the page before its anchors; 0 when the header is inconsistent. */
static size_t stream_end(const uint8_t *bytes, size_t *out_n)
{
    size_t n = (size_t)bytes[4] | (size_t)bytes[5] << 8;
    size_t anchors = bytes[6];
    *out_n = n;
    if (n == 0 || n > PK_PAGE_MAX_ENTRIES || anchors != (n - 1) / PK_ANCHOR_EVERY)
        return 0;
    return ((size_t)PK_PAGE - anchors * PK_ANCHOR_BYTES) * 8;
}

firn_rc firn__pkrun_decode(
    const firn__pkrun *r, const uint8_t *bytes, pk_entry *out, size_t *out_n, firn_err *err)
{
    firn__pkpage_cur c;
    FIRN_TRY(firn__pkpage_begin(r, bytes, 0, &c, err));
    size_t n = 0;
    while (c.ok) {
        out[n++] = c.e;
        FIRN_TRY(firn__pkpage_step(r, &c, err));
    }
    *out_n = n;
    return FIRN_OK;
}

/* Decodes the fields after the hash of entry c->i (its hash is in c->e.h). */
static firn_rc decode_fields(const firn__pkrun *r, firn__pkpage_cur *c, firn_err *err)
{
    c->lazy = false;
    c->e.c = r->has_c ? (uint32_t)get_bits(c->bytes, &c->bitpos, 32) : 0;
    if (r->fb + r->pb <= 56) { /* file1 then pos, as one load */
        uint64_t v = get_bits(c->bytes, &c->bitpos, (unsigned)r->fb + r->pb);
        c->e.file1 = (uint32_t)low_bits(v, r->fb);
        c->e.pos = (uint32_t)(v >> r->fb);
    } else {
        c->e.file1 = (uint32_t)get_bits(c->bytes, &c->bitpos, r->fb);
        c->e.pos = (uint32_t)get_bits(c->bytes, &c->bitpos, r->pb);
    }
    if (c->bitpos > c->end)
        return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\": page overruns", r->path);
    c->ok = true;
    return FIRN_OK;
}

/* Jumps to the last anchor past the current entry whose hash is below h. */
static void skip_to_anchor(firn__pkpage_cur *c, uint64_t h)
{
    const uint8_t *best = NULL;
    for (uint32_t a = c->next_anchor; a < c->n_anchors; a++) {
        const uint8_t *p = c->bytes + PK_PAGE - (size_t)(a + 1) * PK_ANCHOR_BYTES;
        if (ld64(p) >= h)
            break;
        best = p;
        c->next_anchor = a + 1;
    }
    if (!best)
        return;
    c->e.h = ld64(best);
    c->bitpos = (size_t)best[8] | (size_t)best[9] << 8 | (size_t)best[10] << 16;
    c->i = (uint32_t)best[11] | (uint32_t)best[12] << 8;
}

firn_rc firn__pkpage_begin(
    const firn__pkrun *r, const uint8_t *bytes, uint64_t h, firn__pkpage_cur *c, firn_err *err)
{
    size_t n;
    c->bytes = bytes;
    c->end = stream_end(bytes, &n);
    c->n = (uint32_t)n;
    c->n_anchors = bytes[6];
    c->next_anchor = 0;
    c->i = 0;
    c->ok = false;
    c->bitpos = (size_t)PK_PAGE_HEAD * 8;
    c->e.h = ld64(bytes + 8);
    if (c->end == 0)
        return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\": bad page header", r->path);
    return firn__pkpage_seek(r, c, h, err);
}

firn_rc firn__pkpage_seek(const firn__pkrun *r, firn__pkpage_cur *c, uint64_t h, firn_err *err)
{
    uint32_t at = c->i;
    skip_to_anchor(c, h);
    if (c->ok && c->i == at)
        return FIRN_OK; /* no anchor closer: stay */
    return decode_fields(r, c, err);
}

/* Moves c to the next entry and decodes its hash; false past the last entry. */
static bool step_hash(const firn__pkrun *r, firn__pkpage_cur *c)
{
    if (c->i + 1 >= c->n) {
        c->ok = false;
        return false;
    }
    if (c->lazy) /* the fields of the entry left were never decoded */
        c->bitpos = c->fields_at + (r->has_c ? 32 : 0) + r->fb + r->pb;
    c->i++;
    if (c->next_anchor < c->n_anchors && c->i == (c->next_anchor + 1) * (uint32_t)PK_ANCHOR_EVERY)
        c->next_anchor++; /* walking past an anchor */
    unsigned q = get_unary(c->bytes, &c->bitpos);
    uint64_t delta = q == RICE_ESC ? get_bits(c->bytes, &c->bitpos, 64)
                                   : (uint64_t)q << r->k | get_bits(c->bytes, &c->bitpos, r->k);
    c->e.h += delta;
    c->fields_at = c->bitpos;
    return true;
}

firn_rc firn__pkpage_step(const firn__pkrun *r, firn__pkpage_cur *c, firn_err *err)
{
    c->lazy = false;
    return step_hash(r, c) ? decode_fields(r, c, err) : FIRN_OK;
}

firn_rc firn__pkpage_step_hash(const firn__pkrun *r, firn__pkpage_cur *c, firn_err *err)
{
    if (!step_hash(r, c))
        return FIRN_OK;
    if (c->fields_at + (r->has_c ? 32 : 0) + r->fb + r->pb > c->end)
        return firn_err_set(err, FIRN_ERR_PARSE, "index run \"%s\": page overruns", r->path);
    c->lazy = true;
    c->ok = true;
    return FIRN_OK;
}

firn_rc firn__pkpage_fields(const firn__pkrun *r, firn__pkpage_cur *c, firn_err *err)
{
    if (!c->lazy)
        return FIRN_OK;
    c->bitpos = c->fields_at; /* where step_hash left it */
    return decode_fields(r, c, err);
}

/* ---- sequential iteration (merges) -------------------------------------------------------- */

void firn__pkrun_iter_init(firn__pkrun_iter *it, const firn__pkrun *r)
{
    memset(it, 0, sizeof(*it));
    it->run = r;
    it->buf = firn_malloc((size_t)ITER_PAGES * PK_PAGE + PK_PAGE_PAD);
    it->ents = firn_malloc(PK_PAGE_MAX_ENTRIES * sizeof(pk_entry));
}

void firn__pkrun_iter_deinit(firn__pkrun_iter *it)
{
    firn_free(it->buf);
    firn_free(it->ents);
    memset(it, 0, sizeof(*it));
}

firn_rc firn__pkrun_iter_next(firn__pkrun_iter *it, firn_err *err)
{
    if (it->i + 1 < it->n) {
        it->i++;
        return FIRN_OK;
    }
    const firn__pkrun *r = it->run;
    if (it->next_page >= r->n_pages) {
        it->done = true;
        return FIRN_OK;
    }
    if (it->next_page >= it->buf_first + it->buf_n) {
        uint32_t n = r->n_pages - it->next_page;
        n = n > ITER_PAGES ? ITER_PAGES : n;
        FIRN_TRY(firn__pk_read_at(r->fd, it->buf, (size_t)n * PK_PAGE,
                                  (uint64_t)PK_PAGE * (1u + it->next_page), r->path, err));
        memset(it->buf + (size_t)n * PK_PAGE, 0, PK_PAGE_PAD);
        it->buf_first = it->next_page;
        it->buf_n = n;
    }
    const uint8_t *page = it->buf + (size_t)(it->next_page - it->buf_first) * PK_PAGE;
    FIRN_TRY(firn__pkrun_check_page(page, r->path, it->next_page, err));
    /* Pages are decoded in place: the next page's first bytes serve as the read pad. */
    FIRN_TRY(firn__pkrun_decode(r, page, it->ents, &it->n, err));
    it->next_page++;
    it->i = 0;
    return FIRN_OK;
}

/* ---- page cache (CLOCK over fixed 4 KiB frames, allocated in slabs as used) --------------- */

#define FRAME_BYTES     (PK_PAGE + PK_PAGE_PAD)
#define SLAB_FRAMES_MAX 256u
#define FRAME_FREE      UINT64_MAX

struct firn__pkcache {
    size_t n_frames;
    size_t slab_frames;
    size_t n_used; /* frames handed out so far (slabs allocated to cover them) */
    uint8_t **slabs;
    uint64_t *keys;
    int32_t *next;
    uint8_t *ref;
    int32_t *buckets;
    unsigned bucket_bits;
    size_t hand;
    uint64_t reads, hits;
};

firn__pkcache *firn__pkcache_new(size_t bytes)
{
    firn__pkcache *pc = firn_calloc(1, sizeof(*pc));
    pc->n_frames = bytes / FRAME_BYTES < 4 ? 4 : bytes / FRAME_BYTES;
    pc->slab_frames = pc->n_frames < SLAB_FRAMES_MAX ? pc->n_frames : SLAB_FRAMES_MAX;
    pc->slabs = firn_calloc((pc->n_frames + pc->slab_frames - 1) / pc->slab_frames, sizeof(void *));
    pc->keys = firn_malloc(pc->n_frames * sizeof(uint64_t));
    pc->next = firn_malloc(pc->n_frames * sizeof(int32_t));
    pc->ref = firn_calloc(pc->n_frames, 1);
    for (size_t i = 0; i < pc->n_frames; i++)
        pc->keys[i] = FRAME_FREE;
    pc->bucket_bits = 2;
    while (((size_t)1 << pc->bucket_bits) < pc->n_frames * 2)
        pc->bucket_bits++;
    size_t nb = (size_t)1 << pc->bucket_bits;
    pc->buckets = firn_malloc(nb * sizeof(int32_t));
    for (size_t i = 0; i < nb; i++)
        pc->buckets[i] = -1;
    return pc;
}

void firn__pkcache_free(firn__pkcache *pc)
{
    if (!pc)
        return;
    for (size_t s = 0; s * pc->slab_frames < pc->n_frames; s++)
        firn_free(pc->slabs[s]);
    firn_free(pc->slabs);
    firn_free(pc->keys);
    firn_free(pc->next);
    firn_free(pc->ref);
    firn_free(pc->buckets);
    firn_free(pc);
}

static size_t bucket_of(const firn__pkcache *pc, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - pc->bucket_bits));
}

static uint8_t *frame_data(firn__pkcache *pc, size_t f)
{
    return pc->slabs[f / pc->slab_frames] + (f % pc->slab_frames) * FRAME_BYTES;
}

static void unlink_frame(firn__pkcache *pc, size_t f)
{
    int32_t *at = &pc->buckets[bucket_of(pc, pc->keys[f])];
    while (*at != (int32_t)f) {
        FIRN_ASSERT(*at >= 0);
        at = &pc->next[*at];
    }
    *at = pc->next[f];
    pc->keys[f] = FRAME_FREE;
}

/* A frame to fill: a never-used one while there are, else a free or unreferenced one. */
static size_t take_frame(firn__pkcache *pc)
{
    if (pc->n_used < pc->n_frames) {
        size_t f = pc->n_used++;
        if (f % pc->slab_frames == 0)
            pc->slabs[f / pc->slab_frames] = firn_malloc(pc->slab_frames * FRAME_BYTES);
        return f;
    }
    for (;;) {
        size_t f = pc->hand;
        pc->hand = (pc->hand + 1) % pc->n_frames;
        if (pc->keys[f] == FRAME_FREE)
            return f;
        if (pc->ref[f]) {
            pc->ref[f] = 0;
            continue;
        }
        unlink_frame(pc, f);
        return f;
    }
}

firn_rc firn__pkcache_get(
    firn__pkcache *pc, int fd, uint32_t run_id, uint32_t page, const uint8_t **out, firn_err *err)
{
    uint64_t key = (uint64_t)run_id << 32 | page;
    size_t b = bucket_of(pc, key);
    pc->reads++;
    for (int32_t f = pc->buckets[b]; f >= 0; f = pc->next[f]) {
        if (pc->keys[f] == key) {
            pc->ref[f] = 1;
            pc->hits++;
            *out = frame_data(pc, (size_t)f);
            return FIRN_OK;
        }
    }
    size_t f = take_frame(pc);
    uint8_t *data = frame_data(pc, f);
    char what[64];
    snprintf(what, sizeof(what), "index run %u", run_id);
    firn_rc rc =
        firn__pk_read_at(fd, data, PK_PAGE, (uint64_t)PK_PAGE * (1u + (uint64_t)page), what, err);
    if (rc == FIRN_OK)
        rc = firn__pkrun_check_page(data, what, page, err);
    if (rc)
        return rc; /* the frame stays free */
    memset(data + PK_PAGE, 0, PK_PAGE_PAD);
    pc->keys[f] = key;
    pc->ref[f] = 1;
    pc->next[f] = pc->buckets[b];
    pc->buckets[b] = (int32_t)f;
    *out = data;
    return FIRN_OK;
}

void firn__pkcache_drop_run(firn__pkcache *pc, uint32_t run_id)
{
    for (size_t f = 0; f < pc->n_used; f++) {
        if (pc->keys[f] != FRAME_FREE && (uint32_t)(pc->keys[f] >> 32) == run_id)
            unlink_frame(pc, f);
    }
}

size_t firn__pkcache_bytes(const firn__pkcache *pc)
{
    size_t slabs = (pc->n_used + pc->slab_frames - 1) / pc->slab_frames;
    return slabs * pc->slab_frames * FRAME_BYTES;
}

void firn__pkcache_stats(const firn__pkcache *pc, uint64_t *out_reads, uint64_t *out_hits)
{
    *out_reads = pc->reads;
    *out_hits = pc->hits;
}
