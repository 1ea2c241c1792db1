/* SHA-256 (FIPS 180-4), for the content hashes of golden/MANIFEST. */
#ifndef QGOLD_SHA256_H
#define QGOLD_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t len; /* bytes so far */
    unsigned char buf[64];
    size_t fill;
} qg_sha256;

void qg_sha256_init(qg_sha256 *s);
void qg_sha256_update(qg_sha256 *s, const void *data, size_t n);
void qg_sha256_final(qg_sha256 *s, unsigned char out[32]);
/* Lower-case hex of a digest; `hex` holds 65 bytes. */
void qg_sha256_hex(const unsigned char d[32], char hex[65]);

#endif
