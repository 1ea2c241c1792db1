/* A qgold plugin as a user writes one: a Q4_K dequantizer, from the block layout alone.
 * Build: cc -O2 -shared -fPIC -I<prefix>/include example_q4k.c -o example_q4k.so
 * Check: qgold verify --plugin ./example_q4k.so                                                       */
#include <qgold/plugin.h>

#include <string.h>

static float f16_to_f32(uint16_t h) /* IEEE binary16 -> float, exact */
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3FFu, b;
    if (e == 31) b = s | 0x7F800000u | m << 13;            /* inf, NaN */
    else if (e != 0) b = s | (e + 112) << 23 | m << 13;     /* normal */
    else if (m == 0) b = s;                                  /* zero */
    else { e = 113; while (!(m & 0x400u)) { m <<= 1; e--; } b = s | e << 23 | (m & 0x3FFu) << 13; }
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t f32_to_f16(float f) /* round to nearest even, overflow to inf, subnormals kept */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(s | 0x7E00u | (a >> 13 & 0x3FFu));
    if (a >= 0x477FF000u) return (uint16_t)(s | 0x7C00u);   /* >= 65520 */
    if (a < 0x38800000u) {                                   /* subnormal or zero in fp16 */
        if (a < 0x33000000u) return (uint16_t)s;             /* < 2^-25: rounds to 0 */
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u, sh = 126 - (a >> 23), r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        return (uint16_t)(s | (r + (rem > half || (rem == half && (r & 1)))));
    }
    uint32_t r = a - 0x38000000u, lo = r & 0x1FFFu;
    r >>= 13;
    return (uint16_t)(s | (r + (lo > 0x1000u || (lo == 0x1000u && (r & 1)))));
}

/* Q4_K block, 144 bytes: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of codes.
 * Weight e of sub-block s = e/32 is d*sc[s]*q - dmin*m[s]; d*sc, dmin*m and d*sc*q are exact in float. */
static void dequant_block(const uint8_t *b, float *y)
{
    const float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8)), dmin = f16_to_f32((uint16_t)(b[2] | b[3] << 8));
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int s = 0; s < 8; s++) {
        int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        const float ds = d * (float)scale, dm = dmin * (float)min;
        for (int l = 0; l < 32; l++) {
            uint8_t byte = qs[32 * (s / 2) + l];
            int q = s % 2 == 0 ? byte & 15 : byte >> 4;   /* low nibbles first, then high */
            y[32 * s + l] = ds * (float)q - dm;
        }
    }
}

static int check(size_t nbytes, size_t rows, size_t cols)
{
    return cols == 0 || rows == 0 || cols % 256 != 0 || nbytes != rows * (cols / 256) * 144;
}

static int q4k_f32(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
    if (check(nbytes, rows, cols)) return 1;
    for (size_t i = 0; i < nbytes / 144; i++) dequant_block(blocks + 144 * i, y + 256 * i);
    return 0;
}

static int q4k_f16(void *user, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y, void *ws, void *stream)
{
    (void)user, (void)ws, (void)stream;
    float tmp[256];
    if (check(nbytes, rows, cols)) return 1;
    for (size_t i = 0; i < nbytes / 144; i++) {
        dequant_block(blocks + 144 * i, tmp);
        for (int e = 0; e < 256; e++) y[256 * i + e] = f32_to_f16(tmp[e]);
    }
    return 0;
}

static const qgold_plugin_kernel kernels[] = {{
    .struct_size = sizeof(qgold_plugin_kernel), .kind = QGOLD_PLUGIN_KQ_DEQUANT, .backend = QGOLD_PLUGIN_CPU,
    .name = "example_q4k_dequant", .format = "q4_k", .path = "dequant", /* numerics: exact (zeroed) */
    .fn.kq_dequant_f32 = q4k_f32, .fn2.kq_dequant_f16 = q4k_f16,
}};

QGOLD_PLUGIN_EXPORT int qgold_plugin_entry(uint32_t host_abi, qgold_plugin_info *out)
{
    if (host_abi < QGOLD_PLUGIN_ABI_VERSION) return 1; /* an older qgold: refuse */
    *out = (qgold_plugin_info){sizeof *out, QGOLD_PLUGIN_ABI_VERSION, "example", "1.0", 1, kernels};
    return 0;
}
