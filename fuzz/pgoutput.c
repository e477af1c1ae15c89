/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target of the pgoutput decoder and transaction assembler. Input: one flags byte, then
 * either one pgoutput message (decoded, re-encoded and decoded again: both encodings must be
 * equal) or, with flag 0x10, a sequence of messages "u16 length, bytes" fed to a session with a
 * tiny memory budget (so streamed transactions spill), draining every event.
 * Flags: bits 0-1 protocol version - 1, 0x04 inside a stream block, 0x08 parallel abort. */
#include "source/pg/pgo_int.h"

#include <stdlib.h>
#include <string.h>

static void one_message(const uint8_t *p, size_t len, const firn_pgo_proto_opts *o)
{
    firn_pgo_msg m, again;
    firn_pgo_msg_init(&m);
    firn_pgo_msg_init(&again);
    firn_buf enc;
    firn_buf_init(&enc, len + 64);
    firn_err err = {0};
    if (firn_pgo_msg_decode(&m, p, len, o, &err) == FIRN_OK) {
        if (firn_pgo_msg_encode(&enc, &m, o, &err) != FIRN_OK || enc.len != len ||
            memcmp(enc.data, p, len) != 0)
            abort(); /* a decodable message must re-encode to the same bytes */
        if (firn_pgo_msg_decode(&again, enc.data, enc.len, o, &err) != FIRN_OK)
            abort();
    } else if (err.code != FIRN_ERR_PROTOCOL) {
        abort();
    }
    firn_buf_deinit(&enc);
    firn_pgo_msg_deinit(&again);
    firn_pgo_msg_deinit(&m);
}

static void session(const uint8_t *p, size_t len, uint32_t version)
{
    firn__pgo_sess s;
    firn__pgo_sess_init(&s, version, 256, NULL);
    firn_err err = {0};
    size_t off = 0;
    while (off + 2 <= len) {
        const size_t n = (size_t)p[off] << 8 | p[off + 1];
        off += 2;
        if (n > len - off)
            break;
        if (firn__pgo_sess_feed(&s, p + off, n, &err) != FIRN_OK)
            break;
        off += n;
        firn_pgo_event ev;
        do {
            if (firn__pgo_sess_next(&s, &ev, &err) != FIRN_OK)
                goto out;
            if (ev.type == FIRN_PGO_UPDATE)
                (void)firn_pgo_toast_from_old(ev.msg);
        } while (ev.type != 0);
    }
out:
    firn__pgo_sess_deinit(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t flags = data[0];
    const firn_pgo_proto_opts o = {(uint32_t)(flags & 3) + 1, (flags & 4) != 0, (flags & 8) != 0};
    if (flags & 0x10)
        session(data + 1, size - 1, o.proto_version);
    else
        one_message(data + 1, size - 1, &o);
    return 0;
}
