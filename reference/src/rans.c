/* READ ME FIRST: rANS-compressed int8 weight tiles, container version 2, the reference (spec: reference/spec/rans.md).
 *
 * What the format is. W (M x K int8 codes, handled as bytes) is cut into 256 x 256 tiles. A tile's bytes
 * b[r][c] (0 outside the matrix) go through a predictor (mod 256) to symbols e[r][c]; row r of the tile is
 * rANS lane r and codes e[r][0..255] in column order. Lanes are grouped into 8 warps of 32; each warp has
 * one stream of 16-bit words. One global 12-bit frequency table (sum 4096) serves all tiles.
 *
 *   file:    header (64) | freq[256] u16 | tile meta (32 per tile) | scales f32[M] | payloads
 *   payload: init_state u32[256] | warp_end u32[8] | words u16[warp_end[7]] | zero bytes to a multiple of 16
 *
 * Invariants. Lane states live in [L, 2^31), L = 2^15. Encoding starts every lane at L and a correct
 * decode ends every lane at L. With x < 2^31 and freq <= 4096 every intermediate fits in uint32:
 * the decoder's freq * (x >> 12) < 4096 * 2^19 = 2^31, and the encoder renormalizes to x < 2^19 * freq
 * first, so (x / freq) * 4096 + ... < 2^31. A symbol emits at most one word, so a warp stream holds at
 * most 32 * 256 words and a payload at most QG_RANS_PAYLOAD_MAX bytes.
 *
 * Word order. The encoder of warp w runs t = 255..0 and, inside, l = 31..0, appending emitted words to a
 * list; the stream is the list reversed. So the decoder, which runs t = 0..255 and after each step lets
 * the lanes below L take one word each with the lower lane first, reads exactly the words in reverse
 * emission order, which is what rANS's last-in-first-out needs.
 *
 * Validation. qg_rans_check proves every offset, size and state before anything is decoded (all
 * arithmetic in uint64 and in the subtract-then-compare form, so nothing overflows); the decoder
 * still bounds every word read by its warp's segment. Fields are read byte by byte, little-endian.
 * With flag bit 0 the header's bytes 56-63 hold the CRC-32 of the whole file (those 8 bytes counted as
 * zero) and its complement; it is verified right after the few fields needed to find it (magic,
 * version, file_size against the length), so a damaged byte anywhere is reported as such before any
 * field it may have changed is used. A cut file is reported as truncated before that, since it cannot
 * match.
 *
 * Fused product. int8 x fp16 products are exact in float32, so only the summation order matters; it is
 * pinned (per tile column partials from 0.0f, ascending columns; partials summed ascending from 0.0f;
 * then one multiply by the row scale), which every implementation reproduces bit for bit.
 */
#include "qgold/rans.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "the rANS reference needs float32 expressions evaluated in float32 (FLT_EVAL_METHOD == 0)"
#endif

enum {
    T = QG_RANS_TILE,
    TILE_BYTES = QG_RANS_TILE * QG_RANS_TILE,
    WARPS = 8,
    WARP_LANES = 32,
    TABLE_END = QG_RANS_TABLE_END,        /* 576: header plus frequency table */
    WORDS_AT = QG_RANS_PAYLOAD_FIXED,     /* words start 1056 bytes into a payload */
    WARP_END_AT = 4 * 256,                /* warp_end[8] at byte 1024 of a payload */
};

static const uint32_t STATE_HI = 1u << 31;

/* ---- little-endian fields ---------------------------------------------------------------------- */

static uint16_t ld_u16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] | ((unsigned)p[1] << 8)); }
static uint32_t ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t ld_u64(const uint8_t *p) { return (uint64_t)ld_u32(p) | ((uint64_t)ld_u32(p + 4) << 32); }
static void st_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}
static void st_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xFFu);
}
static void st_u64(uint8_t *p, uint64_t v)
{
    st_u32(p, (uint32_t)(v & 0xFFFFFFFFu));
    st_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t round16(uint64_t n) { return (n + 15u) & ~(uint64_t)15u; }
static uint32_t tiles_of(uint32_t n) { return (uint32_t)(((uint64_t)n + T - 1) / T); }
static int as_i8(uint8_t b) { return b < 0x80u ? (int)b : (int)b - 256; }

/* ---- checksum, normalization, predictors ------------------------------------------------------- */

uint32_t qg_rans_adler32(const uint8_t *p, size_t n)
{
    /* a = 1 + sum of bytes, b = sum of the running a values, both mod 65521 (zlib). */
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return (b << 16) | a;
}

/* CRC-32 four bits at a time: CRC_NIBBLE[i] is the CRC register after shifting the 4-bit value i
 * through the reflected polynomial 0xEDB88320 (i.e. the zlib byte table's entries 0, 16, 32, ...). */
static const uint32_t CRC_NIBBLE[16] = {0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
                                        0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
                                        0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

uint32_t qg_rans_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc; /* zlib's convention: the register is kept inverted between calls */
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ CRC_NIBBLE[crc & 15u];
        crc = (crc >> 4) ^ CRC_NIBBLE[crc & 15u];
    }
    return ~crc;
}

/* The container CRC: the buffer with its checksum field (bytes 56-63) counted as zero. len >= 64. */
static uint32_t container_crc(const uint8_t *buf, size_t len)
{
    static const uint8_t zero[8] = {0};
    uint32_t crc = qg_rans_crc32(0, buf, QG_RANS_CRC_AT);
    crc = qg_rans_crc32(crc, zero, 8);
    return qg_rans_crc32(crc, buf + QG_RANS_CRC_AT + 8, len - (QG_RANS_CRC_AT + 8));
}

int qg_rans_seal(uint8_t *buf, size_t len)
{
    if (buf == NULL || len < QG_RANS_HEADER) return QG_ERR_argument_invalid;
    const uint32_t crc = (buf[9] & 1u) ? container_crc(buf, len) : 0u;
    st_u32(buf + QG_RANS_CRC_AT, crc);
    st_u32(buf + QG_RANS_CRC_AT + 4, (buf[9] & 1u) ? ~crc : 0u);
    return QG_ERR_ok;
}

/* floor(c * 4096 / n) and (c * 4096) mod n for c <= n, by 12 doubling steps so that nothing overflows
 * even when n is close to 2^64. */
static void scaled_div(uint64_t c, uint64_t n, uint64_t *q, uint64_t *r)
{
    uint64_t qq = c / n, rr = c % n;
    for (int i = 0; i < QG_RANS_SCALE_BITS; i++) {
        qq <<= 1;
        if (rr >= n - rr) { /* 2 * rr >= n */
            rr -= n - rr;
            qq += 1;
        } else {
            rr <<= 1;
        }
    }
    *q = qq;
    *r = rr;
}

int qg_rans_normalize(const uint64_t counts[256], uint16_t freq[256])
{
    if (counts == NULL || freq == NULL) return QG_ERR_argument_invalid;
    uint64_t n = 0;
    for (int s = 0; s < 256; s++) {
        if (counts[s] > UINT64_MAX - n) return QG_ERR_argument_invalid; /* total must fit in 64 bits */
        n += counts[s];
    }
    memset(freq, 0, 256 * sizeof freq[0]);
    if (n == 0) {
        freq[0] = QG_RANS_M_SCALE;
        return QG_ERR_ok;
    }
    uint64_t f[256], rem[256];
    uint64_t sum = 0;
    for (int s = 0; s < 256; s++) {
        f[s] = rem[s] = 0;
        if (counts[s] == 0) continue;
        scaled_div(counts[s], n, &f[s], &rem[s]);
        if (f[s] == 0) f[s] = 1;
        sum += f[s];
    }
    /* Short: +1 to the present symbol with the largest remainder (lower symbol on ties), once each. The
     * floors lose less than 1 per present symbol, so the deficit is below their number. */
    uint8_t bumped[256] = {0};
    while (sum < QG_RANS_M_SCALE) {
        int best = -1;
        for (int s = 0; s < 256; s++)
            if (counts[s] != 0 && !bumped[s] && (best < 0 || rem[s] > rem[best])) best = s;
        if (best < 0) return QG_ERR_generic; /* unreachable by the bound above */
        bumped[best] = 1;
        f[best]++;
        sum++;
    }
    /* Over (only through the max(1, .) floors): -1 from the largest entry (lower symbol on ties). */
    while (sum > QG_RANS_M_SCALE) {
        int best = 0;
        for (int s = 1; s < 256; s++)
            if (f[s] > f[best]) best = s;
        if (f[best] <= 1) return QG_ERR_generic; /* unreachable: 256 entries of 1 sum to 256 */
        f[best]--;
        sum--;
    }
    for (int s = 0; s < 256; s++) freq[s] = (uint16_t)f[s];
    return QG_ERR_ok;
}

int qg_rans_predict(const uint8_t *tile, int mode, uint8_t *sym)
{
    if (tile == NULL || sym == NULL) return QG_ERR_argument_invalid;
    if (mode < 0 || mode > 3) return QG_ERR_rans_predictor_invalid;
    for (int r = 0; r < T; r++)
        for (int c = 0; c < T; c++) {
            const unsigned b = tile[r * T + c];
            const unsigned left = c > 0 ? tile[r * T + c - 1] : 0u;
            const unsigned up = r > 0 ? tile[(r - 1) * T + c] : 0u;
            const unsigned diag = (r > 0 && c > 0) ? tile[(r - 1) * T + c - 1] : 0u;
            unsigned e = b;
            if (mode == 1) e = b - left;
            else if (mode == 2) e = b - up;
            else if (mode == 3) e = b - left - up + diag;
            sym[r * T + c] = (uint8_t)(e & 0xFFu); /* unsigned wrap-around is arithmetic mod 256 */
        }
    return QG_ERR_ok;
}

int qg_rans_unpredict(uint8_t *tile, int mode)
{
    if (tile == NULL) return QG_ERR_argument_invalid;
    if (mode < 0 || mode > 3) return QG_ERR_rans_predictor_invalid;
    if (mode == 0) return QG_ERR_ok;
    /* Row-major and in place: every neighbour a position needs is already a byte again. */
    for (int r = 0; r < T; r++)
        for (int c = 0; c < T; c++) {
            const unsigned left = c > 0 ? tile[r * T + c - 1] : 0u;
            const unsigned up = r > 0 ? tile[(r - 1) * T + c] : 0u;
            const unsigned diag = (r > 0 && c > 0) ? tile[(r - 1) * T + c - 1] : 0u;
            unsigned b = tile[r * T + c];
            if (mode == 1) b += left;
            else if (mode == 2) b += up;
            else b = b + left + up - diag;
            tile[r * T + c] = (uint8_t)(b & 0xFFu);
        }
    return QG_ERR_ok;
}

int qg_rans_auto_predictor(const uint8_t *tile)
{
    uint8_t *e = malloc(TILE_BYTES);
    if (e == NULL || tile == NULL) {
        free(e);
        return 0;
    }
    int best = 0;
    uint64_t best_score = 0;
    for (int mode = 0; mode < 4; mode++) {
        uint64_t h[256] = {0}, score = 0;
        (void)qg_rans_predict(tile, mode, e);
        for (size_t i = 0; i < TILE_BYTES; i++) h[e[i]]++;
        for (int s = 0; s < 256; s++) score += h[s] * h[s];
        if (mode == 0 || score > best_score) { /* strictly larger: ties stay with the lower mode */
            best = mode;
            best_score = score;
        }
    }
    free(e);
    return best;
}

/* ---- the coder ----------------------------------------------------------------------------------- */

int qg_rans_encode_tile(const uint8_t *sym, const uint16_t freq[256], uint8_t *payload, size_t *payload_len)
{
    if (sym == NULL || freq == NULL || payload == NULL || payload_len == NULL) return QG_ERR_argument_invalid;
    uint32_t cum[256], acc = 0;
    for (int s = 0; s < 256; s++) {
        cum[s] = acc;
        acc += freq[s];
    }
    if (acc != QG_RANS_M_SCALE) return QG_ERR_rans_bad_table;
    for (size_t i = 0; i < TILE_BYTES; i++)
        if (freq[sym[i]] == 0) return QG_ERR_rans_symbol_not_in_table;

    uint16_t list[WARP_LANES * T];
    uint32_t total = 0;
    memset(payload, 0, QG_RANS_PAYLOAD_FIXED);
    for (int w = 0; w < WARPS; w++) {
        uint32_t x[WARP_LANES];
        size_t nlist = 0;
        for (int l = 0; l < WARP_LANES; l++) x[l] = QG_RANS_L;
        for (int t = T - 1; t >= 0; t--)
            for (int l = WARP_LANES - 1; l >= 0; l--) {
                const uint8_t s = sym[(WARP_LANES * w + l) * T + t];
                const uint32_t f = freq[s];
                if (x[l] >= (uint32_t)(1u << 19) * f) { /* x_max = (L >> 12) << 16 times f */
                    list[nlist++] = (uint16_t)(x[l] & 0xFFFFu);
                    x[l] >>= 16;
                }
                x[l] = (x[l] / f) * QG_RANS_M_SCALE + (x[l] % f) + cum[s];
            }
        for (int l = 0; l < WARP_LANES; l++) st_u32(payload + 4 * (WARP_LANES * w + l), x[l]);
        for (size_t k = 0; k < nlist; k++) st_u16(payload + WORDS_AT + 2 * (total + k), list[nlist - 1 - k]);
        total += (uint32_t)nlist;
        st_u32(payload + WARP_END_AT + 4 * w, total);
    }
    const size_t end = WORDS_AT + 2 * (size_t)total, size = (size_t)round16(end);
    memset(payload + end, 0, size - end);
    *payload_len = size;
    return QG_ERR_ok;
}

/* Tile (i, j)'s bytes, 0 outside the matrix. */
static void fill_tile(const uint8_t *w, uint32_t M, uint32_t K, uint32_t ti, uint32_t tj, uint8_t *tile)
{
    memset(tile, 0, TILE_BYTES);
    const uint64_t r0 = (uint64_t)ti * T, c0 = (uint64_t)tj * T;
    const uint64_t nr = M - r0 < T ? M - r0 : T, nc = K - c0 < T ? K - c0 : T;
    for (uint64_t r = 0; r < nr; r++) memcpy(tile + r * T, w + (r0 + r) * K + c0, (size_t)nc);
}

int qg_rans_encode(const uint8_t *w, const float *scales, uint32_t M, uint32_t K, const uint8_t *modes, int checksums,
                   uint8_t **out, size_t *out_len)
{
    if (out == NULL || out_len == NULL) return QG_ERR_argument_invalid;
    *out = NULL;
    *out_len = 0;
    if (checksums != 0 && checksums != 1) return QG_ERR_argument_invalid;
    if ((uint64_t)M * K > 0 && w == NULL) return QG_ERR_argument_invalid;
    if (M > 0 && scales == NULL) return QG_ERR_argument_invalid;
    const uint32_t tr = tiles_of(M), tc = tiles_of(K);
    const uint64_t n = (uint64_t)tr * tc;
    if (modes != NULL)
        for (uint64_t k = 0; k < n; k++)
            if (modes[k] > 3 && modes[k] != QG_RANS_AUTO) return QG_ERR_rans_predictor_invalid;
    const uint64_t meta_off = TABLE_END, scales_off = meta_off + 32 * n;
    const uint64_t prefix = round16(scales_off + 4 * (uint64_t)M);
    if (prefix > SIZE_MAX / 2) return QG_ERR_alloc_failed;

    int rc = QG_ERR_ok;
    uint8_t *tile = malloc(TILE_BYTES), *sym = malloc(TILE_BYTES), *payload = malloc(QG_RANS_PAYLOAD_MAX);
    uint8_t *mode_of = malloc(n > 0 ? (size_t)n : 1), *buf = calloc((size_t)prefix, 1);
    size_t cap = (size_t)prefix, len = (size_t)prefix;
    uint64_t counts[256] = {0};
    uint16_t freq[256];
    if (tile == NULL || sym == NULL || payload == NULL || mode_of == NULL || buf == NULL) {
        rc = QG_ERR_alloc_failed;
        goto done;
    }
    /* Pass 1: modes and the summed histogram of every tile's 65536 symbols (padding included). */
    for (uint64_t k = 0; k < n; k++) {
        fill_tile(w, M, K, (uint32_t)(k / tc), (uint32_t)(k % tc), tile);
        const uint8_t req = modes != NULL ? modes[k] : QG_RANS_AUTO;
        mode_of[k] = (uint8_t)(req == QG_RANS_AUTO ? qg_rans_auto_predictor(tile) : req);
        (void)qg_rans_predict(tile, mode_of[k], sym);
        for (size_t i = 0; i < TILE_BYTES; i++) counts[sym[i]]++;
    }
    if ((rc = qg_rans_normalize(counts, freq)) != QG_ERR_ok) goto done;
    /* Pass 2: payloads in tile order with no gaps. */
    for (uint64_t k = 0; k < n; k++) {
        fill_tile(w, M, K, (uint32_t)(k / tc), (uint32_t)(k % tc), tile);
        (void)qg_rans_predict(tile, mode_of[k], sym);
        size_t plen = 0;
        if ((rc = qg_rans_encode_tile(sym, freq, payload, &plen)) != QG_ERR_ok) goto done;
        if (plen > SIZE_MAX / 2 - len) { /* the container would not fit in memory: no wrap-around below */
            rc = QG_ERR_alloc_failed;
            goto done;
        }
        if (len + plen > cap) {
            size_t ncap = cap <= SIZE_MAX / 4 && cap * 2 > len + plen ? cap * 2 : len + plen;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                rc = QG_ERR_alloc_failed;
                goto done;
            }
            buf = nb;
            cap = ncap;
        }
        memcpy(buf + len, payload, plen);
        uint8_t *m = buf + meta_off + 32 * k;
        st_u64(m + 0, len);
        st_u64(m + 8, plen);
        st_u32(m + 16, checksums ? qg_rans_adler32(tile, TILE_BYTES) : 0u);
        m[20] = mode_of[k]; /* bytes 21..31 stay 0 */
        len += plen;
    }
    memcpy(buf, "RANS", 4);
    st_u16(buf + 4, QG_RANS_VERSION);
    st_u16(buf + 6, QG_RANS_HEADER);
    buf[8] = QG_RANS_SCALE_BITS;
    buf[9] = (uint8_t)checksums;
    st_u16(buf + 10, T);
    st_u16(buf + 12, T);
    st_u16(buf + 14, T);
    st_u32(buf + 16, M);
    st_u32(buf + 20, K);
    st_u32(buf + 24, tr);
    st_u32(buf + 28, tc);
    st_u64(buf + 32, scales_off);
    st_u64(buf + 40, meta_off);
    st_u64(buf + 48, len);
    for (int s = 0; s < 256; s++) st_u16(buf + QG_RANS_HEADER + 2 * s, freq[s]);
    for (uint32_t r = 0; r < M; r++) {
        uint32_t bits;
        memcpy(&bits, &scales[r], 4);
        st_u32(buf + scales_off + 4 * (uint64_t)r, bits);
    }
    (void)qg_rans_seal(buf, len); /* last: the CRC covers every other byte as written */
    *out = buf;
    *out_len = len;
    buf = NULL;
done:
    free(tile);
    free(sym);
    free(payload);
    free(mode_of);
    free(buf);
    return rc;
}

/* ---- validation ---------------------------------------------------------------------------------- */

typedef struct {
    uint64_t off, size;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

/* [off, off + size) inside [0, len), written without overflow. */
static int inside(uint64_t off, uint64_t size, uint64_t len) { return off <= len && size <= len - off; }
static int disjoint(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return an == 0 || bn == 0 || a >= b + bn || b >= a + an; /* operands are inside the file: no overflow */
}

void qg_rans_tile_meta_at(const uint8_t *buf, const qg_rans_header *h, size_t index, qg_rans_tile_meta *t)
{
    const uint8_t *m = buf + h->meta_offset + 32 * (uint64_t)index;
    t->data_offset = ld_u64(m);
    t->data_size = ld_u64(m + 8);
    t->checksum = ld_u32(m + 16);
    t->predictor = m[20];
}

int qg_rans_check(const uint8_t *buf, size_t len, qg_rans_header *hout)
{
    if (buf == NULL && len > 0) return QG_ERR_argument_invalid;
    /* Steps 1-4 of the spec's order: what a cut file or a file of another kind or version looks like,
     * decided from the magic, the version and file_size only (the fields that locate the checksum). */
    if (len < 4) return len == 0 || memcmp(buf, "RANS", len) == 0 ? QG_ERR_rans_container_truncated : QG_ERR_rans_bad_magic;
    if (memcmp(buf, "RANS", 4) != 0) return QG_ERR_rans_bad_magic;
    if (len < QG_RANS_HEADER) return QG_ERR_rans_container_truncated;
    if (ld_u16(buf + 4) != QG_RANS_VERSION) return QG_ERR_rans_bad_header;
    if (ld_u64(buf + 48) > (uint64_t)len || len < TABLE_END) return QG_ERR_rans_container_truncated;
    /* Step 5: with flag bit 0, every byte of the buffer is covered before any other field is trusted. */
    const int sealed = (buf[9] & 1u) != 0;
    if (sealed) {
        const uint32_t crc = container_crc(buf, len);
        if (ld_u32(buf + QG_RANS_CRC_AT) != crc || ld_u32(buf + QG_RANS_CRC_AT + 4) != ~crc)
            return QG_ERR_rans_container_checksum;
    }
    qg_rans_header h;
    memset(&h, 0, sizeof h);
    h.M = ld_u32(buf + 16);
    h.K = ld_u32(buf + 20);
    h.tiles_r = ld_u32(buf + 24);
    h.tiles_c = ld_u32(buf + 28);
    h.flags = buf[9];
    h.scales_offset = ld_u64(buf + 32);
    h.meta_offset = ld_u64(buf + 40);
    h.file_size = ld_u64(buf + 48);
    /* Step 6; file_size <= len is known, so != is "below". */
    if (ld_u16(buf + 6) != QG_RANS_HEADER || buf[8] != QG_RANS_SCALE_BITS || (h.flags & ~1u) != 0 || ld_u16(buf + 10) != T ||
        ld_u16(buf + 12) != T || ld_u16(buf + 14) != T || h.tiles_r != tiles_of(h.M) || h.tiles_c != tiles_of(h.K) ||
        (!sealed && ld_u64(buf + QG_RANS_CRC_AT) != 0) || h.file_size != (uint64_t)len)
        return QG_ERR_rans_bad_header;

    uint32_t sum = 0;
    for (int s = 0; s < 256; s++) {
        h.freq[s] = ld_u16(buf + QG_RANS_HEADER + 2 * s);
        if (h.freq[s] > QG_RANS_M_SCALE) return QG_ERR_rans_bad_table;
        sum += h.freq[s]; /* 32-bit sum: 256 * 4096 cannot wrap */
    }
    if (sum != QG_RANS_M_SCALE) return QG_ERR_rans_bad_table;

    const uint64_t n = (uint64_t)h.tiles_r * h.tiles_c, L64 = len;
    /* The metadata array and the scales: aligned, inside the file, after the table, not overlapping. */
    if (h.meta_offset % 8 != 0 || h.meta_offset < TABLE_END || n > L64 / 32 || !inside(h.meta_offset, 32 * n, L64))
        return QG_ERR_rans_bad_tile_meta;
    if (h.scales_offset % 4 != 0 || h.scales_offset < TABLE_END || !inside(h.scales_offset, 4 * (uint64_t)h.M, L64) ||
        !disjoint(h.meta_offset, 32 * n, h.scales_offset, 4 * (uint64_t)h.M))
        return QG_ERR_rans_bad_tile_meta;

    span *sp = malloc((n > 0 ? (size_t)n : 1) * sizeof *sp);
    if (sp == NULL) return QG_ERR_alloc_failed;
    int rc = QG_ERR_ok;
    for (uint64_t k = 0; k < n && rc == QG_ERR_ok; k++) {
        const uint8_t *m = buf + h.meta_offset + 32 * k;
        qg_rans_tile_meta t;
        qg_rans_tile_meta_at(buf, &h, (size_t)k, &t);
        int bad = t.data_offset % 16 != 0 || t.predictor > 3 || t.data_size < QG_RANS_PAYLOAD_FIXED ||
                  !inside(t.data_offset, t.data_size, L64) || t.data_offset < TABLE_END ||
                  ((h.flags & 1u) == 0 && t.checksum != 0) ||
                  !disjoint(t.data_offset, t.data_size, h.meta_offset, 32 * n) ||
                  !disjoint(t.data_offset, t.data_size, h.scales_offset, 4 * (uint64_t)h.M);
        for (int i = 21; i < 32; i++) bad |= m[i] != 0;
        if (!bad) {
            const uint8_t *we = buf + t.data_offset + WARP_END_AT;
            uint32_t prev = 0;
            for (int wi = 0; wi < WARPS; wi++) {
                const uint32_t e = ld_u32(we + 4 * wi);
                bad |= e < prev;
                prev = e;
            }
            bad |= round16(QG_RANS_PAYLOAD_FIXED + 2 * (uint64_t)prev) != t.data_size;
        }
        if (bad) rc = QG_ERR_rans_bad_tile_meta;
        sp[k].off = t.data_offset;
        sp[k].size = t.data_size;
    }
    if (rc == QG_ERR_ok && n > 1) {
        qsort(sp, (size_t)n, sizeof *sp, span_cmp);
        for (uint64_t k = 0; k + 1 < n; k++)
            if (sp[k].size > sp[k + 1].off - sp[k].off) rc = QG_ERR_rans_bad_tile_meta; /* off sorted: no wrap */
    }
    free(sp);
    if (rc != QG_ERR_ok) return rc;
    for (uint64_t k = 0; k < n; k++) {
        qg_rans_tile_meta t;
        qg_rans_tile_meta_at(buf, &h, (size_t)k, &t);
        for (int l = 0; l < T; l++) {
            const uint32_t x = ld_u32(buf + t.data_offset + 4 * l);
            if (x < QG_RANS_L || x >= STATE_HI) return QG_ERR_rans_bad_state;
        }
    }
    if (hout != NULL) *hout = h;
    return QG_ERR_ok;
}

/* ---- decoding ------------------------------------------------------------------------------------ */

int qg_rans_decode_tile_ref(const uint8_t *buf, size_t len, const qg_rans_header *h, size_t index, uint8_t *tile)
{
    if (buf == NULL || h == NULL || tile == NULL) return QG_ERR_argument_invalid;
    if ((uint64_t)index >= (uint64_t)h->tiles_r * h->tiles_c) return QG_ERR_argument_invalid;
    qg_rans_tile_meta t;
    qg_rans_tile_meta_at(buf, h, index, &t);
    /* Re-proved cheaply so that a caller's stale header cannot lead to an over-read. */
    if (!inside(t.data_offset, t.data_size, len) || t.data_size < QG_RANS_PAYLOAD_FIXED || t.predictor > 3)
        return QG_ERR_rans_bad_tile_meta;
    const uint8_t *p = buf + t.data_offset;
    uint32_t we[WARPS], prev = 0;
    for (int w = 0; w < WARPS; w++) {
        we[w] = ld_u32(p + WARP_END_AT + 4 * w);
        if (we[w] < prev) return QG_ERR_rans_bad_tile_meta;
        prev = we[w];
    }
    const uint64_t words_end = QG_RANS_PAYLOAD_FIXED + 2 * (uint64_t)we[WARPS - 1];
    if (words_end > t.data_size) return QG_ERR_rans_bad_tile_meta;

    uint8_t slot_sym[QG_RANS_M_SCALE];
    uint32_t cum[256], acc = 0;
    for (int s = 0; s < 256; s++) {
        cum[s] = acc;
        for (uint32_t k = 0; k < h->freq[s] && acc + k < QG_RANS_M_SCALE; k++) slot_sym[acc + k] = (uint8_t)s;
        acc += h->freq[s];
    }
    if (acc != QG_RANS_M_SCALE) return QG_ERR_rans_bad_table;

    for (int w = 0; w < WARPS; w++) {
        uint32_t x[WARP_LANES];
        uint32_t pos = w > 0 ? we[w - 1] : 0u;
        const uint32_t end = we[w];
        for (int l = 0; l < WARP_LANES; l++) {
            x[l] = ld_u32(p + 4 * (WARP_LANES * w + l));
            if (x[l] < QG_RANS_L || x[l] >= STATE_HI) return QG_ERR_rans_bad_state;
        }
        for (int c = 0; c < T; c++) {
            for (int l = 0; l < WARP_LANES; l++) {
                const uint32_t slot = x[l] & (QG_RANS_M_SCALE - 1);
                const uint8_t s = slot_sym[slot];
                tile[(WARP_LANES * w + l) * T + c] = s;
                x[l] = h->freq[s] * (x[l] >> QG_RANS_SCALE_BITS) + slot - cum[s];
            }
            for (int l = 0; l < WARP_LANES; l++) /* lower lane takes its word first */
                if (x[l] < QG_RANS_L) {
                    if (pos >= end) return QG_ERR_rans_truncated;
                    x[l] = (x[l] << 16) | ld_u16(p + WORDS_AT + 2 * (uint64_t)pos);
                    pos++;
                }
        }
        if (pos != end) return QG_ERR_rans_trailing_data;
        for (int l = 0; l < WARP_LANES; l++)
            if (x[l] != QG_RANS_L) return QG_ERR_rans_corrupt;
    }
    for (uint64_t i = words_end; i < t.data_size; i++)
        if (p[i] != 0) return QG_ERR_rans_corrupt;
    (void)qg_rans_unpredict(tile, t.predictor);
    const uint64_t ti = index / h->tiles_c, tj = index % h->tiles_c;
    const uint64_t nr = h->M - ti * T < T ? h->M - ti * T : T, nc = h->K - tj * T < T ? h->K - tj * T : T;
    for (uint64_t r = 0; r < T; r++)
        for (uint64_t c = (r < nr ? nc : 0); c < T; c++)
            if (tile[r * T + c] != 0) return QG_ERR_rans_corrupt;
    if ((h->flags & 1u) != 0 && qg_rans_adler32(tile, TILE_BYTES) != t.checksum) return QG_ERR_rans_checksum;
    return QG_ERR_ok;
}

int qg_rans_decode_ref(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len)
{
    qg_rans_header h;
    int rc = qg_rans_check(buf, len, &h);
    if (rc != QG_ERR_ok) return rc;
    const uint64_t MK = (uint64_t)h.M * h.K;
    if ((uint64_t)w_len != MK) return QG_ERR_rans_size_mismatch;
    if (w == NULL && MK > 0) return QG_ERR_argument_invalid;
    uint8_t *tile = malloc(TILE_BYTES);
    if (tile == NULL) return QG_ERR_alloc_failed;
    const uint64_t n = (uint64_t)h.tiles_r * h.tiles_c;
    for (uint64_t k = 0; k < n && rc == QG_ERR_ok; k++) {
        rc = qg_rans_decode_tile_ref(buf, len, &h, (size_t)k, tile);
        if (rc != QG_ERR_ok) break;
        const uint64_t r0 = (k / h.tiles_c) * T, c0 = (k % h.tiles_c) * T;
        const uint64_t nr = h.M - r0 < T ? h.M - r0 : T, nc = h.K - c0 < T ? h.K - c0 : T;
        for (uint64_t r = 0; r < nr; r++) memcpy(w + (r0 + r) * h.K + c0, tile + r * T, (size_t)nc);
    }
    free(tile);
    return rc;
}

int qg_rans_scales(const uint8_t *buf, size_t len, float *scales, size_t n)
{
    qg_rans_header h;
    int rc = qg_rans_check(buf, len, &h);
    if (rc != QG_ERR_ok) return rc;
    if (n != h.M) return QG_ERR_rans_size_mismatch;
    if (scales == NULL && n > 0) return QG_ERR_argument_invalid;
    for (size_t r = 0; r < n; r++) scales[r] = qg_f32_from_bits(ld_u32(buf + h.scales_offset + 4 * (uint64_t)r));
    return QG_ERR_ok;
}

/* ---- the fused product --------------------------------------------------------------------------- */

/* p_j for the rows [0, nr) of one tile column: p = 0.0f, then p += float(q) * float(x) for c ascending
 * over the matrix columns of the tile (each product exact). q[r * stride + c]. */
static void tile_partials(const uint8_t *q, size_t stride, size_t nr, size_t nc, const uint16_t *x, size_t xstride,
                          size_t batch, float *t)
{
    for (size_t r = 0; r < nr; r++)
        for (size_t b = 0; b < batch; b++) {
            const uint16_t *xb = x + b * xstride;
            float p = 0.0f;
            for (size_t c = 0; c < nc; c++) p = p + (float)as_i8(q[r * stride + c]) * qg_f16_to_f32(xb[c]);
            t[r * QG_RANS_MAX_BATCH + b] = t[r * QG_RANS_MAX_BATCH + b] + p;
        }
}

static int gemv_args(const uint16_t *x, size_t batch, const float *y_f32, const uint16_t *y_f16)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    return QG_ERR_ok;
}

static void store_rows(const float *t, const float *scale, size_t r0, size_t nr, size_t M, size_t batch, float *y_f32,
                       uint16_t *y_f16)
{
    for (size_t r = 0; r < nr; r++)
        for (size_t b = 0; b < batch; b++) {
            const float y = t[r * QG_RANS_MAX_BATCH + b] * scale[r];
            if (y_f32 != NULL) y_f32[b * M + r0 + r] = y;
            if (y_f16 != NULL) y_f16[b * M + r0 + r] = qg_f32_to_f16(y);
        }
}

int qg_rans_gemv_ref(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    int rc = gemv_args(x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    qg_rans_header h;
    if ((rc = qg_rans_check(buf, len, &h)) != QG_ERR_ok) return rc;
    uint8_t *tile = malloc(TILE_BYTES);
    float *t = malloc(sizeof(float) * T * QG_RANS_MAX_BATCH);
    if (tile == NULL || t == NULL) {
        free(tile);
        free(t);
        return QG_ERR_alloc_failed;
    }
    float scale[T];
    for (uint32_t i = 0; i < h.tiles_r && rc == QG_ERR_ok; i++) {
        const size_t r0 = (size_t)i * T, nr = h.M - r0 < T ? h.M - r0 : T;
        for (size_t k = 0; k < (size_t)T * QG_RANS_MAX_BATCH; k++) t[k] = 0.0f;
        for (uint32_t j = 0; j < h.tiles_c; j++) { /* tile columns ascending: t = ((0 + p_0) + p_1) + ... */
            rc = qg_rans_decode_tile_ref(buf, len, &h, (size_t)i * h.tiles_c + j, tile);
            if (rc != QG_ERR_ok) break;
            const size_t c0 = (size_t)j * T, nc = h.K - c0 < T ? h.K - c0 : T;
            tile_partials(tile, T, nr, nc, x + c0, h.K, batch, t);
        }
        if (rc != QG_ERR_ok) break;
        for (size_t r = 0; r < nr; r++) scale[r] = qg_f32_from_bits(ld_u32(buf + h.scales_offset + 4 * (uint64_t)(r0 + r)));
        store_rows(t, scale, r0, nr, h.M, batch, y_f32, y_f16);
    }
    free(tile);
    free(t);
    return rc;
}

int qg_int8_gemv_ref(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                     uint16_t *y_f16)
{
    int rc = gemv_args(x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if ((M > 0 && K > 0 && w == NULL) || (M > 0 && scales == NULL)) return QG_ERR_argument_invalid;
    float t[T * QG_RANS_MAX_BATCH];
    for (size_t r0 = 0; r0 < M; r0 += T) {
        const size_t nr = M - r0 < T ? M - r0 : T;
        for (size_t k = 0; k < (size_t)T * QG_RANS_MAX_BATCH; k++) t[k] = 0.0f;
        for (size_t c0 = 0; c0 < K; c0 += T) {
            const size_t nc = K - c0 < T ? K - c0 : T;
            tile_partials(w + r0 * K + c0, K, nr, nc, x + c0, K, batch, t);
        }
        store_rows(t, scales + r0, r0, nr, M, batch, y_f32, y_f16);
    }
    return QG_ERR_ok;
}
