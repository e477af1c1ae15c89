/* SPDX-License-Identifier: Apache-2.0 */
/* Secrets at rest (AES-256-GCM under a key file kept apart from the database), password hashes
 * (PBKDF2-HMAC-SHA256) and random tokens, all through OpenSSL (docs/serve.md "Security"). */
#include "srv_int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NONCE_BYTES 12
#define TAG_BYTES   16
#define PBKDF2_ITER 600000
#define PBKDF2_SALT 16
#define PBKDF2_OUT  32

firn_rc firn__srv_key_load(srv *s, const char *path, firn_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        uint8_t key[SRV_KEY_BYTES];
        if (RAND_bytes(key, sizeof(key)) != 1)
            return firn_err_set(err, FIRN_ERR_INTERNAL, "no random bytes for the key file");
        int w = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w < 0)
            return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno,
                                      "--key-file: cannot create %s: %s", path, strerror(errno));
        bool ok = write(w, key, sizeof(key)) == (ssize_t)sizeof(key) && fsync(w) == 0;
        close(w);
        if (!ok)
            return firn_err_set(err, FIRN_ERR_CONFIG, "--key-file: cannot write %s", path);
        memcpy(s->key, key, sizeof(key));
        OPENSSL_cleanse(key, sizeof(key));
        FIRN_LOG(FIRN_LOG_INFO, "serve",
                 "created the secrets key %s: back it up apart from the data folder; without "
                 "it the stored passwords cannot be read",
                 path);
        return FIRN_OK;
    }
    if (fd < 0)
        return firn_err_set_errno(err, FIRN_ERR_CONFIG, errno, "--key-file: cannot read %s: %s",
                                  path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && (sb.st_mode & 077))
        FIRN_LOG(FIRN_LOG_WARN, "serve", "the key file %s is readable by others; chmod 600 it",
                 path);
    ssize_t n = read(fd, s->key, sizeof(s->key));
    uint8_t extra;
    ssize_t more = read(fd, &extra, 1);
    close(fd);
    if (n != (ssize_t)sizeof(s->key) || more != 0)
        return firn_err_set(err, FIRN_ERR_CONFIG,
                            "--key-file: %s must hold exactly %d bytes (firn serve creates it "
                            "when it is missing)",
                            path, SRV_KEY_BYTES);
    return FIRN_OK;
}

uint8_t *firn__srv_seal(srv *s, const char *aad, const void *plain, size_t len, size_t *out_len)
{
    uint8_t *out = firn_malloc(NONCE_BYTES + len + TAG_BYTES);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    bool ok =
        ctx && RAND_bytes(out, NONCE_BYTES) == 1 &&
        EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, s->key, out) == 1 &&
        EVP_EncryptUpdate(ctx, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) == 1 &&
        EVP_EncryptUpdate(ctx, out + NONCE_BYTES, &n, plain, (int)len) == 1 &&
        EVP_EncryptFinal_ex(ctx, out + NONCE_BYTES + n, &fin) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, out + NONCE_BYTES + len) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        firn_free(out);
        return NULL;
    }
    *out_len = NONCE_BYTES + len + TAG_BYTES;
    return out;
}

char *firn__srv_open(srv *s, const char *aad, const void *sealed, size_t len, size_t *out_len)
{
    if (len < NONCE_BYTES + TAG_BYTES)
        return NULL;
    const uint8_t *in = sealed;
    size_t clen = len - NONCE_BYTES - TAG_BYTES;
    char *out = firn_malloc(clen + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    uint8_t tag[TAG_BYTES];
    memcpy(tag, in + NONCE_BYTES + clen, TAG_BYTES);
    bool ok = ctx && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, s->key, in) == 1 &&
              EVP_DecryptUpdate(ctx, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) == 1 &&
              EVP_DecryptUpdate(ctx, (uint8_t *)out, &n, in + NONCE_BYTES, (int)clen) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, tag) == 1 &&
              EVP_DecryptFinal_ex(ctx, (uint8_t *)out + n, &fin) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        OPENSSL_cleanse(out, clen + 1);
        firn_free(out);
        return NULL;
    }
    out[clen] = '\0';
    *out_len = clen;
    return out;
}

void firn__srv_random_hex(char *out, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    uint8_t b[64];
    if (n > sizeof(b))
        n = sizeof(b);
    if (RAND_bytes(b, (int)n) != 1)
        abort(); /* no randomness: nothing safe to hand out */
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
    OPENSSL_cleanse(b, sizeof(b));
}

void firn__srv_sha256_hex(const char *text, char out[65])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256((const uint8_t *)text, strlen(text), md);
    for (size_t i = 0; i < sizeof(md); i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

static bool derive(
    const char *password, const uint8_t *salt, size_t salt_len, int iter, uint8_t out[PBKDF2_OUT])
{
    return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iter,
                             EVP_sha256(), PBKDF2_OUT, out) == 1;
}

char *firn__srv_password_hash(const char *password)
{
    uint8_t salt[PBKDF2_SALT], dk[PBKDF2_OUT];
    if (RAND_bytes(salt, sizeof(salt)) != 1 ||
        !derive(password, salt, sizeof(salt), PBKDF2_ITER, dk))
        return NULL;
    unsigned char salt64[32], dk64[64];
    EVP_EncodeBlock(salt64, salt, sizeof(salt));
    EVP_EncodeBlock(dk64, dk, sizeof(dk));
    OPENSSL_cleanse(dk, sizeof(dk));
    firn_buf b;
    firn_buf_init(&b, SRV_BUF_MAX);
    if (firn_buf_appendf(&b, "pbkdf2-sha256$%d$%s$%s", PBKDF2_ITER, (char *)salt64, (char *)dk64) ||
        firn_buf_append(&b, "", 1)) {
        firn_buf_deinit(&b);
        return NULL;
    }
    return (char *)firn_buf_take(&b, NULL);
}

bool firn__srv_password_check(const char *password, const char *stored)
{
    const char *prefix = "pbkdf2-sha256$";
    if (strncmp(stored, prefix, strlen(prefix)) != 0)
        return false;
    const char *p = stored + strlen(prefix);
    const char *d1 = strchr(p, '$');
    const char *d2 = d1 ? strchr(d1 + 1, '$') : NULL;
    if (!d1 || !d2)
        return false;
    int64_t iter = 0;
    if (firn_parse_i64(p, (size_t)(d1 - p), &iter, NULL) || iter < 1 || iter > 100000000)
        return false;
    uint8_t salt[48], want[64], got[PBKDF2_OUT];
    int slen = EVP_DecodeBlock(salt, (const uint8_t *)d1 + 1, (int)(d2 - d1 - 1));
    int wlen = EVP_DecodeBlock(want, (const uint8_t *)d2 + 1, (int)strlen(d2 + 1));
    /* EVP_DecodeBlock counts the padding as bytes: 16 -> 18, 32 -> 33 */
    if (slen < PBKDF2_SALT || wlen < PBKDF2_OUT ||
        !derive(password, salt, PBKDF2_SALT, (int)iter, got))
        return false;
    bool ok = CRYPTO_memcmp(got, want, PBKDF2_OUT) == 0;
    OPENSSL_cleanse(got, sizeof(got));
    return ok;
}

bool firn__srv_str_eq_ct(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return false;
    return CRYPTO_memcmp(a, b, la) == 0;
}
