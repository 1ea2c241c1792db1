/* Internal: what the optimized CPU SpQR kernels (qgold/kernels_spqr.h) share on every ISA before their
 * vector primitives: the tile and chunk sizes, the call context, and the second-order word of a tile.
 * An ISA file includes it first, defines its primitives on top of it, then includes spqr_rows.h (the
 * drivers).
 */
#ifndef QGOLD_SPQR_TILES_H
#define QGOLD_SPQR_TILES_H

#include "qgold/errors.h"
#include "qgold/kernels_spqr.h"

#include "spqr_checks.h"

#include <stdint.h>

#define QG_INLINE static inline __attribute__((always_inline))

/* A tile row is walked in chunks of CHUNK column tiles, dequantized into a 16 x CCOLS float buffer. */
enum { TILE = QG_SPQR_TILE, MAXB = QG_SPQR_MAX_BATCH, CHUNK = 16, CCOLS = CHUNK * TILE };

typedef struct {
    const qg_spqr_layer *L;
    size_t batch, T, npad; /* npad = 16 T: the length of each x'_b */
    const float *xp;       /* batch x npad gathered activations */
    float *y;              /* batch x m results, copied to the caller's outputs once the layer proved valid */
    uint8_t *bad;          /* per tile row: 1 when a check of spqr_checks.h failed there */
} spqr_ctx;

/* The tile's second-order word (s_s, z_s, s_z, z_z as fp16, low to high): byte b from the fragment of
 * row 2b (a layer whose row 2b + 1 differs fails validation). */
static inline uint64_t spqr_second_order(const uint64_t *w)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) v |= ((w[2 * b] >> 54) & 0xFFu) << (8 * b);
    return v;
}

#endif
