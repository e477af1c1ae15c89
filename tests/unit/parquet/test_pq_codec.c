/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet page compression: the raw-block zstd frame (decoded by libzstd one-shot and streaming,
 * and by firn's reader), the per-chunk rule that stores pages zstd cannot shrink as such frames,
 * and a file whose column turns compressible again. pyarrow and DuckDB read such files in
 * tests/interop/test_parquet_roundtrip.py. */
#include "parquet/pq_int.h"
#include "t.h"

#include <zstd.h>

#define BLOCK ((size_t)128 << 10)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* len bytes that zstd (level 1) shrinks by a few percent only, yet does shrink (4 % at 30 000
 * bytes; it stores random bytes, or bytes that would shrink by a Huffman table alone, as raw
 * blocks itself): of every 1000 bytes 940 random and 60 of a repeating pattern. */
static void fill_poor(uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = i % 1000 < 940 ? (uint8_t)rnd() : (uint8_t) "0123456789"[i % 10];
}

/* len bytes that zstd shrinks to a small fraction: a short text with a counter. */
static void fill_good(uint8_t *p, size_t len, unsigned salt)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)("the quick brown fox "[i % 20] + (i / 4096 + salt) % 3);
}

/* Decodes frame (one zstd frame of want_len bytes) with libzstd one-shot and streaming (as
 * zstd-jni does for parquet-mr) and with firn's page decoder; each must give back want. */
static void check_decodes(const firn_buf *frame, const uint8_t *want, size_t want_len)
{
    T_EQ_UINT(ZSTD_getFrameContentSize(frame->data, frame->len), want_len);
    T_EQ_UINT(ZSTD_findFrameCompressedSize(frame->data, frame->len), frame->len);
    uint8_t *got = firn_malloc(want_len + 16);
    size_t n = ZSTD_decompress(got, want_len + 16, frame->data, frame->len);
    T_FALSE(ZSTD_isError(n));
    T_EQ_UINT(n, want_len);
    T_EQ_MEM(got, want, want_len);

    memset(got, 0xAB, want_len + 16);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_inBuffer in = {frame->data, frame->len, 0};
    ZSTD_outBuffer out = {got, want_len + 16, 0};
    size_t left = 1;
    while (left != 0 && in.pos < in.size) {
        left = ZSTD_decompressStream(d, &out, &in);
        T_FALSE(ZSTD_isError(left));
    }
    T_EQ_UINT(left, 0);
    T_EQ_UINT(out.pos, want_len);
    T_EQ_MEM(got, want, want_len);
    ZSTD_freeDCtx(d);

    firn_err err = {0};
    memset(got, 0xAB, want_len + 16);
    T_OK_ERR(firn__pq_decompress(FIRN_PQ_ZSTD, frame->data, frame->len, got, want_len, &err), &err);
    T_EQ_MEM(got, want, want_len);
    firn_free(got);
}

/* Whether frame is the raw-block frame of len bytes: every block header says Raw_Block, the
 * last one alone says last, and the payload is the page's bytes in order. */
static bool is_raw_frame(const firn_buf *frame, const uint8_t *src, size_t len)
{
    if (frame->len != firn__pq_zstd_raw_size(len) || frame->len < 6)
        return false;
    const uint8_t *p = frame->data;
    const unsigned fcs_flag = p[4] >> 6;
    if ((p[4] & 0x20) == 0)
        return false;
    size_t at = 5 + (fcs_flag == 0 ? 1 : (size_t)1 << fcs_flag);
    size_t done = 0;
    for (;;) {
        if (at + 3 > frame->len)
            return false;
        const uint32_t h = (uint32_t)p[at] | (uint32_t)p[at + 1] << 8 | (uint32_t)p[at + 2] << 16;
        const size_t n = h >> 3;
        if (((h >> 1) & 3) != 0 || n > BLOCK || at + 3 + n > frame->len ||
            (n && memcmp(p + at + 3, src + done, n) != 0))
            return false;
        at += 3 + n;
        done += n;
        if (h & 1)
            return at == frame->len && done == len;
    }
}

/* Sizes around every edge of the frame: empty, the 1-, 2- and 4-byte Frame_Content_Size
 * forms, one block exactly full, one byte into a second block, several blocks. */
T_TEST(raw_frame_sizes_decode)
{
    static const size_t sizes[] = {0,         1,     255,       256,       65791,         65792,
                                   BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 3 * BLOCK + 77};
    static const size_t blocks[] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 4};
    static const size_t fcs[] = {1, 1, 1, 2, 2, 4, 4, 4, 4, 4, 4};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const size_t len = sizes[k];
        uint8_t *src = firn_malloc(len + 1);
        fill_poor(src, len);
        firn_buf frame;
        firn_buf_init(&frame, (size_t)1 << 24);
        T_OK(firn_buf_append(&frame, "x", 1)); /* appends behind what out holds */
        firn_buf_reset(&frame);
        T_OK(firn__pq_zstd_raw_frame(&frame, len ? src : NULL, len));
        T_EQ_UINT(frame.len, 4 + 1 + fcs[k] + 3 * blocks[k] + len);
        T_EQ_UINT(frame.len, firn__pq_zstd_raw_size(len));
        T_EQ_INT(frame.data[frame.len], 0);
        T_TRUE(is_raw_frame(&frame, src, len));
        check_decodes(&frame, src, len);
        firn_buf_deinit(&frame);
        firn_free(src);
    }
}

/* The exact bytes of two frames, checked by hand against RFC 8878: magic, Frame_Header_Descriptor
 * (Single_Segment 0x20, FCS_Field_Size in the top bits), Frame_Content_Size, block headers
 * (Block_Size << 3 | Block_Type 0 << 1 | Last_Block). The empty frame is the one libzstd writes. */
T_TEST(raw_frame_bytes)
{
    firn_buf frame;
    firn_buf_init(&frame, 1 << 20);
    T_OK(firn__pq_zstd_raw_frame(&frame, NULL, 0));
    static const uint8_t empty[] = {0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x00, 0x01, 0x00, 0x00};
    T_EQ_UINT(frame.len, sizeof(empty));
    T_EQ_MEM(frame.data, empty, sizeof(empty));
    uint8_t zs[64];
    const size_t zn = ZSTD_compress(zs, sizeof(zs), "", 0, 1);
    T_EQ_UINT(zn, sizeof(empty));
    T_EQ_MEM(zs, empty, sizeof(empty));

    firn_buf_reset(&frame);
    T_OK(firn__pq_zstd_raw_frame(&frame, "abc", 3));
    static const uint8_t abc[] = {0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x03,
                                  0x19, 0x00, 0x00, 'a',  'b',  'c'};
    T_EQ_UINT(frame.len, sizeof(abc));
    T_EQ_MEM(frame.data, abc, sizeof(abc));

    /* 128 KiB + 1 with the 4-byte size: a full block not last (0x100000 = 131072 << 3), then
     * one byte, last */
    uint8_t *src = firn_malloc(BLOCK + 1);
    fill_poor(src, BLOCK + 1);
    firn_buf_reset(&frame);
    T_OK(firn__pq_zstd_raw_frame(&frame, src, BLOCK + 1));
    static const uint8_t head[] = {0x28, 0xB5, 0x2F, 0xFD, 0xA0, 0x01,
                                   0x00, 0x02, 0x00, 0x00, 0x00, 0x10};
    T_EQ_MEM(frame.data, head, sizeof(head));
    static const uint8_t second[] = {0x09, 0x00, 0x00};
    T_EQ_MEM(frame.data + sizeof(head) + BLOCK, second, sizeof(second));
    firn_free(src);
    firn_buf_deinit(&frame);
}

typedef struct seq {
    firn_buf out;
    pq_squeeze sq;
    pq_codec *codec;
} seq;

/* Compresses one page of len bytes (good or poor) under seq's history; returns whether it went
 * out raw, after checking that it decodes. */
static bool page_raw(seq *s, bool good, size_t len, unsigned salt)
{
    firn_err err = {0};
    uint8_t *src = firn_malloc(len + 1);
    if (good)
        fill_good(src, len, salt);
    else
        fill_poor(src, len);
    firn_buf_reset(&s->out);
    T_OK_ERR(firn__pq_compress_page(s->codec, &s->sq, &s->out, src, len, &err), &err);
    check_decodes(&s->out, src, len);
    const bool raw = is_raw_frame(&s->out, src, len);
    if (!raw && !good) /* a probe of poor data pays little */
        T_TRUE(s->out.len * 100 > len * (100 - PQ_ZSTD_MIN_SAVING_PCT));
    if (!raw && good)
        T_TRUE(s->out.len * 2 < len);
    firn_free(src);
    return raw;
}

/* Poor pages: a probe, then raw runs of 2, 4, 8, 16, 16 with a probe between. Good data after
 * them: raw until the run ends, then the probe compresses and every page after it is compressed
 * (the run is over). Pages under PQ_ZSTD_RAW_BELOW are raw however good. */
T_TEST(poor_pages_go_raw_until_a_probe_pays)
{
    seq s = {0};
    firn_err err = {0};
    firn_buf_init(&s.out, 1 << 24);
    T_OK_ERR(firn__pq_codec_new(FIRN_PQ_ZSTD, 1, &s.codec, &err), &err);
    static const int runs[] = {2, 4, 8, 16, 16};
    T_FALSE(page_raw(&s, false, 30000, 0)); /* the first page is tried */
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        for (int i = 0; i < runs[r]; i++)
            T_TRUE(page_raw(&s, false, 30000, 0));
        T_FALSE(page_raw(&s, false, 30000, 0));
    }
    int raw_good = 0;
    while (page_raw(&s, true, 30000, (unsigned)raw_good))
        raw_good++;
    T_EQ_INT(raw_good, 16);
    for (unsigned i = 0; i < 40; i++)
        T_FALSE(page_raw(&s, true, 30000 + i, i));
    T_EQ_UINT(s.sq.backoff, 0);
    T_TRUE(page_raw(&s, true, PQ_ZSTD_RAW_BELOW - 1, 0));
    T_FALSE(page_raw(&s, true, PQ_ZSTD_RAW_BELOW, 0));
    /* a good page between poor ones ends the doubling: the next poor probe starts at 2 again */
    T_FALSE(page_raw(&s, false, 30000, 0));
    T_TRUE(page_raw(&s, false, 30000, 0));
    T_TRUE(page_raw(&s, false, 30000, 0));
    T_FALSE(page_raw(&s, false, 30000, 0));
    firn__pq_codec_free(s.codec);
    firn_buf_deinit(&s.out);
}

/* Other codecs compress every page (snappy of a short good page is shorter than the page). */
T_TEST(other_codecs_ignore_the_rule)
{
    firn_err err = {0};
    static const firn_pq_codec codecs[] = {FIRN_PQ_SNAPPY, FIRN_PQ_GZIP};
    uint8_t src[100];
    fill_good(src, sizeof(src), 0);
    for (size_t k = 0; k < 2; k++) {
        pq_codec *c;
        T_OK_ERR(firn__pq_codec_new(codecs[k], 0, &c, &err), &err);
        pq_squeeze sq = {.raw_left = 5, .backoff = 4};
        firn_buf a, b;
        firn_buf_init(&a, 1 << 20);
        firn_buf_init(&b, 1 << 20);
        T_OK_ERR(firn__pq_compress_page(c, &sq, &a, src, sizeof(src), &err), &err);
        T_OK_ERR(firn__pq_compress(c, &b, src, sizeof(src), &err), &err);
        T_EQ_UINT(a.len, b.len);
        T_EQ_MEM(a.data, b.data, a.len);
        T_EQ_UINT(sq.raw_left, 5);
        firn_buf_deinit(&a);
        firn_buf_deinit(&b);
        firn__pq_codec_free(c);
    }
}

static firn_rc mem_write(void *ctx, const void *p, size_t len, firn_err *err)
{
    (void)err;
    return firn_buf_append(ctx, p, len);
}

enum { TURN_PAGE = 2000, TURN_POOR_PAGES = 12, TURN_PAGES = 60 };

/* Column v's first pages are random (zstd cannot shrink them), its later pages a counter (zstd
 * shrinks them several times); column w is random for its first page only (dictionary ids of
 * unique values, which do not compress), then a counter in PLAIN. Written through the writer
 * (zstd 1), every page of both chunks is walked, its frame decoded by libzstd against the
 * header's sizes: v's last pages are compressed again; w's first PLAIN page is compressed (the
 * ids' poor result says nothing about PLAIN values); firn's reader gives every value back. */
T_TEST(column_turns_compressible_again)
{
    firn_err err = {0};
    firn_field *s = firn_field_new(0, "root", FIRN_TYPE_STRUCT, true);
    firn_field_add(s, firn_field_new(1, "v", FIRN_TYPE_LONG, true));
    firn_field_add(s, firn_field_new(2, "w", FIRN_TYPE_LONG, true));
    firn_batch *src = firn_batch_new(s);
    const size_t rows = (size_t)TURN_PAGE * TURN_PAGES;
    for (size_t r = 0; r < rows; r++) {
        const int64_t v = r < (size_t)TURN_PAGE * TURN_POOR_PAGES ? (int64_t)rnd() : (int64_t)r;
        firn_column_append_i64(firn_batch_column(src, 0), v);
        firn_column_append_i64(firn_batch_column(src, 1),
                               r < TURN_PAGE ? (int64_t)rnd() : (int64_t)r);
        T_OK(firn_batch_end_row(src, FIRN_OP_INSERT, 0, NULL));
    }
    firn_pq_options o;
    firn_pq_options_init(&o);
    o.page_rows = TURN_PAGE;
    firn_buf file;
    firn_buf_init(&file, (size_t)1 << 28);
    firn_pq_writer *w;
    T_OK_ERR(firn_pq_writer_new(s, &o, mem_write, &file, &w, &err), &err);
    T_OK_ERR(firn_pq_writer_write(w, src, &err), &err);
    T_OK_ERR(firn_pq_writer_close(w, &err), &err);
    firn_pq_writer_free(w);

    /* walk the pages from just after the magic: [dictionary page] data pages of v, of w */
    size_t at = 4, pages = 0, raw_poor = 0, compressed_tail = 0;
    bool w_first_plain_compressed = false;
    while (pages < 2 * TURN_PAGES) {
        pq_tr r;
        int16_t id;
        uint8_t t;
        int64_t type = -1, usize = -1, csize = -1;
        firn__pq_tr_init(&r, file.data + at, file.len - at);
        firn__pq_tr_struct_begin(&r);
        while (firn__pq_tr_field(&r, &id, &t)) {
            if (id >= 1 && id <= 3) {
                const int64_t v = firn__pq_tr_int(&r, t);
                type = id == 1 ? v : type;
                usize = id == 2 ? v : usize;
                csize = id == 3 ? v : csize;
            } else {
                firn__pq_tr_skip(&r, t);
            }
        }
        firn__pq_tr_struct_end(&r);
        T_TRUE(firn_rd_ok(&r.rd) && usize >= 0 && csize >= 0);
        const uint8_t *body = file.data + at + r.rd.pos;
        T_TRUE(body + csize <= file.data + file.len);
        T_EQ_UINT(ZSTD_getFrameContentSize(body, (size_t)csize), (uint64_t)usize);
        T_EQ_UINT(ZSTD_findFrameCompressedSize(body, (size_t)csize), (uint64_t)csize);
        uint8_t *plain = firn_malloc((size_t)usize + 1);
        T_EQ_UINT(ZSTD_decompress(plain, (size_t)usize + 1, body, (size_t)csize), (uint64_t)usize);
        firn_buf frame = {.data = (uint8_t *)body, .len = (size_t)csize};
        const bool raw = is_raw_frame(&frame, plain, (size_t)usize);
        const size_t data_page = type == 0 && pages < TURN_PAGES ? pages + 1 : 0; /* 1: ids */
        if (type == 0 && pages == TURN_PAGES + 1)
            w_first_plain_compressed = !raw && csize * 3 < usize;
        if (data_page >= 2 && data_page <= TURN_POOR_PAGES && raw)
            raw_poor++;
        if (data_page > TURN_PAGES - 10 && !raw && csize * 3 < usize)
            compressed_tail++;
        firn_free(plain);
        at += r.rd.pos + (size_t)csize;
        pages += type == 0;
    }
    T_TRUE(raw_poor >= 5);
    T_EQ_UINT(compressed_tail, 10);
    T_TRUE(w_first_plain_compressed);

    firn_pq_reader *rd;
    T_OK_ERR(firn_pq_reader_open_mem(file.data, file.len, &rd, &err), &err);
    T_OK_ERR(firn_pq_reader_select(rd, s, &err), &err);
    firn_batch *b = firn_batch_new(s);
    T_OK_ERR(firn_pq_reader_read_row_group(rd, 0, b, &err), &err);
    T_EQ_UINT(firn_batch_rows(b), rows);
    for (size_t c = 0; c < 2; c++)
        T_EQ_MEM(firn_column_values(firn_batch_column(b, c)),
                 firn_column_values(firn_batch_column(src, c)), rows * sizeof(int64_t));
    firn_batch_free(b);
    firn_pq_reader_free(rd);
    firn_buf_deinit(&file);
    firn_batch_free(src);
    firn_field_free(s);
}

T_MAIN(T_CASE(raw_frame_sizes_decode),
       T_CASE(raw_frame_bytes),
       T_CASE(poor_pages_go_raw_until_a_probe_pays),
       T_CASE(other_codecs_ignore_the_rule),
       T_CASE(column_turns_compressible_again))
