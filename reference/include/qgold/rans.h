/* rANS-compressed int8 weight tiles, container version 2: the reference (spec: reference/spec/rans.md).
 *
 * A matrix W of M x K int8 codes (handled as their bytes, (uint8_t) w) with one float32 scale per row
 * is cut into 256 x 256 tiles; each tile is coded by 256 interleaved rANS lanes (lane = row in the
 * tile) under one global 12-bit frequency table, after one of four predictors. Encoding, decoding and
 * the fused product are pinned bit for bit.
 *
 * Every reader validates the whole container (qg_rans_check: with flag bit 0 the CRC-32 of every byte of
 * the file first, then the structure) before it decodes anything; decode-time errors (truncated,
 * trailing_data, corrupt, checksum) are found while decoding. On an error the outputs are not valid
 * (they may have been partly written).
 */
#ifndef QGOLD_RANS_H
#define QGOLD_RANS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    QG_RANS_TILE = 256,          /* tile rows = tile cols = lanes per tile */
    QG_RANS_SCALE_BITS = 12,
    QG_RANS_M_SCALE = 4096,      /* sum of the frequency table */
    QG_RANS_L = 1 << 15,         /* lower end of the state interval [L, 2^31) */
    QG_RANS_VERSION = 2,         /* container version (u16 at byte 4) */
    QG_RANS_HEADER = 64,
    QG_RANS_TABLE_END = 576,     /* header + freq[256]: no container is shorter */
    QG_RANS_CRC_AT = 56,         /* container checksum field: CRC-32 (u32 at 56) and its complement (u32 at 60) */
    QG_RANS_META = 32,           /* bytes per tile metadata entry */
    QG_RANS_PAYLOAD_FIXED = 1056,/* init_state[256] + warp_end[8] */
    QG_RANS_AUTO = 255,          /* predictor request: pick per the reference policy */
    QG_RANS_MAX_BATCH = 16,
    QG_RANS_PAYLOAD_MAX = 1056 + 2 * 256 * 256, /* one word per symbol at most; a multiple of 16 */
};

/* The parsed, validated header and table. */
typedef struct {
    uint32_t M, K, tiles_r, tiles_c;
    uint8_t flags; /* bit 0: checksums present (tile Adler-32 and the container CRC-32) */
    uint64_t scales_offset, meta_offset, file_size;
    uint16_t freq[256];
} qg_rans_header;

/* One tile's metadata entry, parsed. */
typedef struct {
    uint64_t data_offset, data_size;
    uint32_t checksum;
    uint8_t predictor;
} qg_rans_tile_meta;

/* zlib's Adler-32 of n bytes (initial value 1). */
uint32_t qg_rans_adler32(const uint8_t *p, size_t n);

/* zlib's CRC-32 (reflected polynomial 0xEDB88320, pre- and post-inverted), continued from `crc` over n
 * bytes: qg_rans_crc32(0, "123456789", 9) = 0xCBF43926, and crc32(crc32(0, a), b) = crc32(0, a b). */
uint32_t qg_rans_crc32(uint32_t crc, const uint8_t *p, size_t n);

/* Rewrites the container checksum field (bytes 56-63) of len >= 64 bytes after a deliberate edit: the
 * CRC-32 of the buffer (bytes 56-63 counted as zero) and its complement when flag bit 0 is set, zeros
 * otherwise. For tools and tests that build or edit containers; argument_invalid for len < 64. */
int qg_rans_seal(uint8_t *buf, size_t len);

/* Normalizes a histogram to a table summing to 4096 (spec: integer only, pinned tie rules).
 * All counts 0: freq[0] = 4096 (the empty-container table). */
int qg_rans_normalize(const uint64_t counts[256], uint16_t freq[256]);

/* The predictor the "auto" policy picks for one 65536-byte tile (row-major): the mode with the largest
 * sum over symbols of count^2, ties to the lower mode. */
int qg_rans_auto_predictor(const uint8_t *tile);

/* The predictor of `mode` (0 none, 1 left, 2 up, 3 gradient; mod 256, neighbours outside the tile = 0):
 * tile bytes -> symbols, and back in place. 65536 bytes each, row-major. rans_predictor_invalid for a
 * mode outside 0..3. */
int qg_rans_predict(const uint8_t *tile, int mode, uint8_t *sym);
int qg_rans_unpredict(uint8_t *tile, int mode);

/* Codes one tile's 65536 symbols (row-major, lane = row) under `freq` (sum 4096) into a payload of
 * QG_RANS_PAYLOAD_MAX bytes capacity; *payload_len gets its size (a multiple of 16). A symbol whose
 * frequency is 0: rans_symbol_not_in_table. */
int qg_rans_encode_tile(const uint8_t *sym, const uint16_t freq[256], uint8_t *payload, size_t *payload_len);

/* Encodes W (M * K bytes, row-major) and scales (M floats). modes: tiles_r * tiles_c requests (0..3 or
 * QG_RANS_AUTO), or NULL for all auto. checksums: 0 or 1. On success *out is a malloc'd container of
 * *out_len bytes in the pinned writer layout (free() it). M = 0 or K = 0 gives the empty container. */
int qg_rans_encode(const uint8_t *w, const float *scales, uint32_t M, uint32_t K, const uint8_t *modes, int checksums,
                   uint8_t **out, size_t *out_len);

/* Validation of a container, in the spec's order: a cut file (rans_container_truncated), the magic
 * (rans_bad_magic), the version, then with flag bit 0 the container CRC-32 (rans_container_checksum),
 * then the structure: header fields, table, every tile's metadata and init states (rans_bad_header,
 * rans_bad_table, rans_bad_tile_meta, rans_bad_state). Fills *h (may be NULL). */
int qg_rans_check(const uint8_t *buf, size_t len, qg_rans_header *h);

/* Metadata of tile `index` (i * tiles_c + j) of a container that passed qg_rans_check. */
void qg_rans_tile_meta_at(const uint8_t *buf, const qg_rans_header *h, size_t index, qg_rans_tile_meta *t);

/* Decodes one tile of a checked container into 65536 bytes (row-major, padding included), undoing its
 * predictor, with every decode-time check (truncated, trailing_data, corrupt, checksum). */
int qg_rans_decode_tile_ref(const uint8_t *buf, size_t len, const qg_rans_header *h, size_t index, uint8_t *tile);

/* Whole container -> W (M * K bytes; w_len must be M * K: rans_size_mismatch otherwise). */
int qg_rans_decode_ref(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len);

/* The container's scales (M floats, copied out, after qg_rans_check). */
int qg_rans_scales(const uint8_t *buf, size_t len, float *scales, size_t n);

/* Fused decode + dequant + GEMV, bit-exact (spec "Fused product"): x is batch x K fp16 bits, y is
 * batch x M (y[b * M + r]); y_f32 and/or y_f16 (either may be NULL, not both). Batch 1..16. */
int qg_rans_gemv_ref(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);

/* The plain int8 W8A16 GEMV on uncompressed weights with exactly the fused product's semantics and
 * order (per 256-column tile partials, summed in ascending tile order, times the row scale). */
int qg_int8_gemv_ref(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                     uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
