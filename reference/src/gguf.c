/* GGUF container reader (spec: ../shared/specs/gguf.md; API: qgold/gguf.h).
 *
 * READ ME FIRST. A GGUF file is a header (magic, version, counts), key-values, tensor infos, padding to
 * ALIGNMENT, then the tensor data. Everything is little-endian and unaligned, so fields are assembled
 * from bytes. The reader walks the header once through a small buffered cursor; every length, count
 * and product is compared with the bytes left in the file (or the spec's cap) *before* it is used, in
 * 64-bit arithmetic whose overflow is checked, so no input can make it allocate or read more than the
 * file holds. Tensor data are never read here: the caller reads row ranges on demand.
 *
 * Invariants after a successful open: every tensor has 1..4 nonzero dimensions whose product fits 64
 * bits, a known ggml type whose block divides ne[0], an offset that is a multiple of ALIGNMENT, and a
 * byte range [file_offset, file_offset + nbytes) inside the file and disjoint from every other tensor's;
 * names are unique.
 */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "qgold/gguf.h"

#include "qgold/errors.h"
#include "qgold/kquants_layout.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ggml's type table (ids, names, block geometry), as the format defines them. */
static const qg_ggml_type k_types[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 40},
    {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},  {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},       {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},   {41, "Q1_0", 128, 18},
};

const qg_ggml_type *qg_ggml_type_of(uint32_t id)
{
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].id == id) return &k_types[i];
    return NULL;
}

int qg_ggml_type_covered(uint32_t id)
{
    return id == QG_GGML_F32 || id == QG_GGML_F16 || id == QG_GGML_BF16 || (id >= QG_GGML_Q4_K && id <= QG_GGML_Q8_K);
}

static const char *const k_vtype_names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *qg_gguf_vtype_name(uint32_t t) { return t < 13 ? k_vtype_names[t] : "?"; }

/* Bytes of a fixed-size value type; 0 for string, array and unknown types. */
static uint64_t vtype_size(uint32_t t)
{
    static const uint8_t sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

/* ---- errors ------------------------------------------------------------------------------------- */

static int fail(qg_gguf *g, int code, uint64_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int fail(qg_gguf *g, int code, uint64_t at, const char *fmt, ...)
{
    if (g->err != 0) return g->err; /* the first error wins */
    g->err = code;
    g->err_offset = at;
    int n = snprintf(g->msg, sizeof g->msg, "at byte %llu: ", (unsigned long long)at);
    if (n < 0 || (size_t)n >= sizeof g->msg) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->msg + n, sizeof g->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- raw reads ---------------------------------------------------------------------------------- */

int qg_gguf_read_at(qg_gguf *g, uint64_t offset, void *dst, size_t n)
{
    if (offset > g->file_size || n > g->file_size - offset) {
        snprintf(g->msg, sizeof g->msg, "read of %zu bytes at %llu runs past the end of the file (%llu bytes)", n,
                 (unsigned long long)offset, (unsigned long long)g->file_size);
        return QG_ERR_argument_invalid;
    }
    if (g->fd < 0) {
        if (n) memcpy(dst, g->mem + offset, n);
        return 0;
    }
    uint8_t *p = dst;
    while (n > 0) {
        const size_t piece = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        ssize_t r = pread(g->fd, p, piece, (off_t)offset);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(g->msg, sizeof g->msg, "reading %zu bytes at %llu: %s", n, (unsigned long long)offset,
                     r < 0 ? strerror(errno) : "the file shrank while being read");
            return QG_ERR_io_failed;
        }
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return 0;
}

int qg_gguf_read_rows(qg_gguf *g, const qg_gguf_tensor *t, uint64_t row0, uint64_t nrows, void *dst)
{
    if (t == NULL || dst == NULL || row0 > t->rows || nrows > t->rows - row0) return QG_ERR_argument_invalid;
    /* nrows * row_bytes <= nbytes, which fits: checked at open */
    const uint64_t n = nrows * t->row_bytes;
    if (n > SIZE_MAX) return QG_ERR_argument_invalid;
    return qg_gguf_read_at(g, t->file_offset + row0 * t->row_bytes, dst, (size_t)n);
}

/* ---- the header cursor: a 64 KiB window over the file ------------------------------------------- */

enum { CUR_BUF = 1 << 16 };

typedef struct {
    qg_gguf *g;
    uint64_t pos;       /* next byte to parse */
    uint64_t buf_start; /* file offset of buf[0] */
    size_t buf_len;
    uint8_t buf[CUR_BUF];
} cursor;

/* n <= CUR_BUF bytes at the cursor into dst (what = the field's name for the truncation error). */
static int cur_get(cursor *c, void *dst, size_t n, const char *what)
{
    qg_gguf *g = c->g;
    if (c->pos > g->file_size || n > g->file_size - c->pos)
        return fail(g, QG_ERR_gguf_truncated, c->pos, "%s (%zu bytes) runs past the end of the file (%llu bytes)", what, n,
                    (unsigned long long)g->file_size);
    if (c->pos < c->buf_start || c->pos + n > c->buf_start + c->buf_len) {
        uint64_t left = g->file_size - c->pos;
        size_t want = left < CUR_BUF ? (size_t)left : CUR_BUF;
        int rc = qg_gguf_read_at(g, c->pos, c->buf, want);
        if (rc != 0) {
            char why[sizeof g->msg];
            memcpy(why, g->msg, sizeof why);
            return fail(g, rc, c->pos, "%s", why);
        }
        c->buf_start = c->pos;
        c->buf_len = want;
    }
    memcpy(dst, c->buf + (c->pos - c->buf_start), n);
    c->pos += n;
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what)
{
    uint8_t b[4];
    int rc = cur_get(c, b, 4, what);
    if (rc == 0) *v = (uint32_t)le(b, 4);
    return rc;
}

static int cur_u64(cursor *c, uint64_t *v, const char *what)
{
    uint8_t b[8];
    int rc = cur_get(c, b, 8, what);
    if (rc == 0) *v = le(b, 8);
    return rc;
}

/* Moves the cursor over n bytes, which must lie in the file. */
static int cur_skip(cursor *c, uint64_t n, const char *what)
{
    qg_gguf *g = c->g;
    if (c->pos > g->file_size || n > g->file_size - c->pos)
        return fail(g, QG_ERR_gguf_truncated, c->pos, "%s (%llu bytes) runs past the end of the file (%llu bytes)", what,
                    (unsigned long long)n, (unsigned long long)g->file_size);
    c->pos += n;
    return 0;
}

/* A string's length field, checked against the cap and the file. */
static int cur_strlen(cursor *c, uint64_t *len, const char *what)
{
    const uint64_t at = c->pos;
    int rc = cur_u64(c, len, what);
    if (rc) return rc;
    if (*len > QG_GGUF_MAX_STRING)
        return fail(c->g, QG_ERR_gguf_string_too_long, at, "%s has length %llu, more than the cap of %llu bytes", what,
                    (unsigned long long)*len, (unsigned long long)QG_GGUF_MAX_STRING);
    if (*len > c->g->file_size - c->pos)
        return fail(c->g, QG_ERR_gguf_truncated, c->pos, "%s (%llu bytes) runs past the end of the file (%llu bytes)", what,
                    (unsigned long long)*len, (unsigned long long)c->g->file_size);
    return 0;
}

/* The first min(len, cap - 1) bytes of a string into out (NUL-terminated), the cursor past all of it. */
static int cur_string(cursor *c, char *out, size_t cap, uint64_t *len_out, const char *what)
{
    uint64_t len;
    int rc = cur_strlen(c, &len, what);
    if (rc) return rc;
    if (len_out) *len_out = len;
    uint64_t keep = len < cap - 1 ? len : cap - 1;
    size_t got = 0;
    while (got < keep) {
        size_t piece = keep - got > CUR_BUF ? CUR_BUF : (size_t)(keep - got);
        if ((rc = cur_get(c, out + got, piece, what)) != 0) return rc;
        got += piece;
    }
    out[keep] = '\0';
    return cur_skip(c, len - keep, what);
}

/* ---- values ------------------------------------------------------------------------------------- */

static void append(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(dst);
    if (n + 1 < cap) snprintf(dst + n, cap - n, "%s", s);
}

/* A scalar of fixed-size type t: its value into u, i, f (as the type is unsigned, signed or float) and rendered into text. */
static int cur_scalar(cursor *c, uint32_t t, uint64_t *u, int64_t *i, double *f, char *text, size_t tcap)
{
    uint8_t b[8];
    const uint64_t n = vtype_size(t);
    int rc = cur_get(c, b, (size_t)n, "a value");
    if (rc) return rc;
    uint64_t v = le(b, (int)n);
    *u = v;
    *i = 0;
    *f = 0;
    switch (t) {
    case QG_GGUF_I8: *i = (int8_t)(uint8_t)v; break;
    case QG_GGUF_I16: *i = (int16_t)(uint16_t)v; break;
    case QG_GGUF_I32: *i = (int32_t)(uint32_t)v; break;
    case QG_GGUF_I64: memcpy(i, &v, 8); break;
    case QG_GGUF_F32: {
        uint32_t w = (uint32_t)v;
        float x;
        memcpy(&x, &w, 4);
        *f = x;
        break;
    }
    case QG_GGUF_F64: memcpy(f, &v, 8); break;
    default: break;
    }
    if (text) {
        if (t == QG_GGUF_F32 || t == QG_GGUF_F64) snprintf(text, tcap, "%.9g", *f);
        else if (t == QG_GGUF_BOOL) snprintf(text, tcap, "%s", v == 0 ? "false" : v == 1 ? "true" : "bool?");
        else if (t == QG_GGUF_I8 || t == QG_GGUF_I16 || t == QG_GGUF_I32 || t == QG_GGUF_I64) snprintf(text, tcap, "%lld", (long long)*i);
        else snprintf(text, tcap, "%llu", (unsigned long long)v);
    }
    return 0;
}

/* An array body (element type, count, elements) at depth `depth` (1 = the key's own array). preview
 * (may be NULL) receives its first elements rendered. */
static int cur_array(cursor *c, int depth, uint32_t *elem_type, uint64_t *count, uint64_t *data_offset, char *preview, size_t pcap)
{
    qg_gguf *g = c->g;
    if (depth > QG_GGUF_MAX_DEPTH)
        return fail(g, QG_ERR_gguf_nesting_too_deep, c->pos, "arrays nest deeper than %d levels", QG_GGUF_MAX_DEPTH);
    const uint64_t type_at = c->pos;
    uint32_t et;
    uint64_t n;
    int rc = cur_u32(c, &et, "an array element type");
    if (rc) return rc;
    if (et > QG_GGUF_F64) return fail(g, QG_ERR_gguf_value_type_unknown, type_at, "array element type %u is not 0..12", et);
    const uint64_t count_at = c->pos;
    if ((rc = cur_u64(c, &n, "an array count")) != 0) return rc;
    if (n > QG_GGUF_MAX_ARRAY)
        return fail(g, QG_ERR_gguf_array_too_long, count_at, "array of %llu elements, more than the cap of 2^32", (unsigned long long)n);
    if (elem_type) *elem_type = et;
    if (count) *count = n;
    if (data_offset) *data_offset = c->pos;
    if (preview) preview[0] = '\0';
    const uint64_t sz = vtype_size(et);
    const uint64_t shown = 4;
    if (sz > 0) {
        /* n <= 2^32 and sz <= 8: the product fits; the whole array must lie in the file */
        if (n * sz > g->file_size - c->pos)
            return fail(g, QG_ERR_gguf_truncated, c->pos, "an array of %llu %s (%llu bytes) runs past the end of the file (%llu bytes)",
                        (unsigned long long)n, qg_gguf_vtype_name(et), (unsigned long long)(n * sz), (unsigned long long)g->file_size);
        uint64_t i = 0;
        for (; i < n && i < shown && preview; i++) {
            uint64_t u;
            int64_t s;
            double f;
            char t[40];
            if ((rc = cur_scalar(c, et, &u, &s, &f, t, sizeof t)) != 0) return rc;
            append(preview, pcap, i ? ", " : "");
            append(preview, pcap, t);
        }
        if (n - i > 0 && (rc = cur_skip(c, (n - i) * sz, "array elements")) != 0) return rc;
    } else if (et == QG_GGUF_STRING) {
        for (uint64_t i = 0; i < n; i++) {
            char s[24];
            if ((rc = cur_string(c, s, sizeof s, NULL, "an array string")) != 0) return rc;
            if (preview && i < shown) {
                append(preview, pcap, i ? ", \"" : "\"");
                append(preview, pcap, s);
                append(preview, pcap, "\"");
            }
        }
    } else { /* nested arrays: each element is an array body of its own */
        for (uint64_t i = 0; i < n; i++) {
            uint32_t sub_t;
            uint64_t sub_n;
            if ((rc = cur_array(c, depth + 1, &sub_t, &sub_n, NULL, NULL, 0)) != 0) return rc;
            if (preview && i < shown) {
                char t[48];
                snprintf(t, sizeof t, "%s[%llu x %s]", i ? ", " : "", (unsigned long long)sub_n, qg_gguf_vtype_name(sub_t));
                append(preview, pcap, t);
            }
        }
    }
    if (preview && n > shown) append(preview, pcap, ", ...");
    return 0;
}

/* ---- open --------------------------------------------------------------------------------------- */

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap) return 0;
    uint64_t n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem); /* n <= 2^21 entries of < 512 bytes */
    if (q == NULL) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int parse_kvs(qg_gguf *g, cursor *c)
{
    uint64_t cap = 0;
    for (uint64_t k = 0; k < g->n_kv; k++) {
        if (grow((void **)&g->kv, &cap, k + 1, sizeof *g->kv) != 0)
            return fail(g, QG_ERR_alloc_failed, c->pos, "no memory for key-value %llu", (unsigned long long)k);
        qg_gguf_kv *kv = &g->kv[k];
        memset(kv, 0, sizeof *kv);
        g->n_kv_parsed = k + 1;
        kv->offset = c->pos;
        uint64_t klen;
        int rc = cur_strlen(c, &klen, "a key");
        if (rc) return rc;
        if ((kv->key = malloc((size_t)klen + 1)) == NULL) return fail(g, QG_ERR_alloc_failed, c->pos, "no memory for a key");
        c->pos -= 8; /* re-read through cur_string, which copies it whole (klen < cap) */
        if ((rc = cur_string(c, kv->key, (size_t)klen + 1, NULL, "a key")) != 0) return rc;
        const uint64_t type_at = c->pos;
        if ((rc = cur_u32(c, &kv->type, "a value type")) != 0) return rc;
        if (kv->type > QG_GGUF_F64)
            return fail(g, QG_ERR_gguf_value_type_unknown, type_at, "key '%s': value type %u is not 0..12", kv->key, kv->type);
        if (kv->type == QG_GGUF_STRING) {
            kv->data_offset = c->pos + 8;
            rc = cur_string(c, kv->preview, sizeof kv->preview, &kv->len, "a string value");
        } else if (kv->type == QG_GGUF_ARRAY) {
            rc = cur_array(c, 1, &kv->elem_type, &kv->len, &kv->data_offset, kv->preview, sizeof kv->preview);
        } else {
            kv->data_offset = c->pos;
            uint64_t u;
            int64_t i;
            double f;
            rc = cur_scalar(c, kv->type, &u, &i, &f, kv->preview, sizeof kv->preview);
            if (kv->type == QG_GGUF_F32 || kv->type == QG_GGUF_F64) kv->v.f = f;
            else if (kv->type == QG_GGUF_I8 || kv->type == QG_GGUF_I16 || kv->type == QG_GGUF_I32 || kv->type == QG_GGUF_I64) kv->v.i = i;
            else kv->v.u = u;
        }
        if (rc) return rc;
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (kv->type != QG_GGUF_U32 || kv->v.u == 0 || kv->v.u % 8 != 0)
                return fail(g, QG_ERR_gguf_alignment_invalid, kv->data_offset, "general.alignment is %s %s, not a u32 positive multiple of 8",
                            qg_gguf_vtype_name(kv->type), kv->preview);
            g->alignment = kv->v.u;
        }
    }
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    const qg_gguf_tensor *x = *(const qg_gguf_tensor *const *)a, *y = *(const qg_gguf_tensor *const *)b;
    int r = strcmp(x->name, y->name);
    return r ? r : (x->info_offset > y->info_offset) - (x->info_offset < y->info_offset);
}

static int cmp_offset(const void *a, const void *b)
{
    const qg_gguf_tensor *x = *(const qg_gguf_tensor *const *)a, *y = *(const qg_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->info_offset > y->info_offset) - (x->info_offset < y->info_offset);
}

/* One tensor info: the rules that need only the tensor itself. */
static int parse_tensor(qg_gguf *g, cursor *c, qg_gguf_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->info_offset = c->pos;
    uint64_t nlen;
    const uint64_t name_at = c->pos;
    int rc = cur_strlen(c, &nlen, "a tensor name");
    if (rc) return rc;
    if (nlen > QG_GGUF_MAX_NAME)
        return fail(g, QG_ERR_gguf_tensor_name_too_long, name_at, "a tensor name of %llu bytes, more than %d", (unsigned long long)nlen,
                    QG_GGUF_MAX_NAME);
    c->pos = name_at;
    if ((rc = cur_string(c, t->name, sizeof t->name, NULL, "a tensor name")) != 0) return rc;
    const uint64_t dims_at = c->pos;
    if ((rc = cur_u32(c, &t->n_dims, "n_dims")) != 0) return rc;
    if (t->n_dims < 1 || t->n_dims > 4)
        return fail(g, QG_ERR_gguf_n_dims_invalid, dims_at, "tensor '%s' has n_dims %u, not 1..4", t->name, t->n_dims);
    uint64_t at[4];
    for (uint32_t d = 0; d < 4; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        at[d] = c->pos;
        if ((rc = cur_u64(c, &t->ne[d], "a dimension")) != 0) return rc;
    }
    const uint64_t type_at = c->pos;
    if ((rc = cur_u32(c, &t->type, "a tensor type")) != 0) return rc;
    const uint64_t off_at = c->pos;
    if ((rc = cur_u64(c, &t->offset, "a tensor offset")) != 0) return rc;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (t->ne[d] == 0) return fail(g, QG_ERR_gguf_dim_zero, at[d], "tensor '%s': dimension %u is 0", t->name, d);
    t->nelem = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (__builtin_mul_overflow(t->nelem, t->ne[d], &t->nelem))
            return fail(g, QG_ERR_gguf_shape_overflow, at[d], "tensor '%s': the element count overflows 64 bits at dimension %u", t->name, d);
    const qg_ggml_type *ty = qg_ggml_type_of(t->type);
    if (ty == NULL) return fail(g, QG_ERR_gguf_type_unknown, type_at, "tensor '%s': type id %u is not a known ggml type", t->name, t->type);
    if (t->ne[0] % ty->block_elems != 0)
        return fail(g, QG_ERR_gguf_ne0_not_multiple, at[0], "tensor '%s': ne0 = %llu is not a multiple of %s's block of %u", t->name,
                    (unsigned long long)t->ne[0], ty->name, ty->block_elems);
    t->rows = t->nelem / t->ne[0];
    t->row_bytes = t->ne[0] / ty->block_elems * ty->block_bytes; /* <= ne0 * 292 / 256 < 2^64 ... checked below */
    if (t->ne[0] / ty->block_elems > UINT64_MAX / ty->block_bytes || __builtin_mul_overflow(t->rows, t->row_bytes, &t->nbytes))
        return fail(g, QG_ERR_gguf_shape_overflow, at[0], "tensor '%s': the byte size overflows 64 bits", t->name);
    if (t->offset % g->alignment != 0)
        return fail(g, QG_ERR_gguf_offset_misaligned, off_at, "tensor '%s': offset %llu is not a multiple of the alignment %llu", t->name,
                    (unsigned long long)t->offset, (unsigned long long)g->alignment);
    return 0;
}

static int parse(qg_gguf *g)
{
    cursor *c = calloc(1, sizeof *c);
    if (c == NULL) return fail(g, QG_ERR_alloc_failed, 0, "no memory for the header reader");
    c->g = g;
    int rc;
    uint8_t magic[4];
    if ((rc = cur_get(c, magic, 4, "the magic")) != 0) goto out;
    if (memcmp(magic, "GGUF", 4) != 0) {
        rc = fail(g, QG_ERR_gguf_bad_magic, 0, "the file starts with %02x %02x %02x %02x, not \"GGUF\"", magic[0], magic[1], magic[2], magic[3]);
        goto out;
    }
    if ((rc = cur_u32(c, &g->version, "the version")) != 0) goto out;
    if (g->version != 2 && g->version != 3) {
        const char *hint = g->version == 1 ? " (version 1 has 32-bit counts)"
                           : (g->version == 0x02000000u || g->version == 0x03000000u) ? " (a big-endian file)" : "";
        rc = fail(g, QG_ERR_gguf_bad_version, 4, "version %u%s; qgold reads 2 and 3", g->version, hint);
        goto out;
    }
    if ((rc = cur_u64(c, &g->n_tensors, "tensor_count")) != 0) goto out;
    if ((rc = cur_u64(c, &g->n_kv, "kv_count")) != 0) goto out;
    if (g->n_tensors > QG_GGUF_MAX_COUNT) {
        rc = fail(g, QG_ERR_gguf_count_too_large, 8, "tensor_count %llu exceeds 2^20", (unsigned long long)g->n_tensors);
        goto out;
    }
    if (g->n_kv > QG_GGUF_MAX_COUNT) {
        rc = fail(g, QG_ERR_gguf_count_too_large, 16, "kv_count %llu exceeds 2^20", (unsigned long long)g->n_kv);
        goto out;
    }
    if ((rc = parse_kvs(g, c)) != 0) goto out;
    uint64_t cap = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (grow((void **)&g->tensors, &cap, i + 1, sizeof *g->tensors) != 0) {
            rc = fail(g, QG_ERR_alloc_failed, c->pos, "no memory for tensor info %llu", (unsigned long long)i);
            goto out;
        }
        if ((rc = parse_tensor(g, c, &g->tensors[i])) != 0) goto out;
    }
    /* the data section: the end of the infos rounded up to ALIGNMENT */
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    if (__builtin_add_overflow(c->pos, pad, &g->data_start)) {
        rc = fail(g, QG_ERR_gguf_shape_overflow, c->pos, "the data section start overflows 64 bits");
        goto out;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        qg_gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (__builtin_add_overflow(g->data_start, t->offset, &t->file_offset) || __builtin_add_overflow(t->file_offset, t->nbytes, &end) ||
            end > g->file_size) {
            rc = fail(g, QG_ERR_gguf_tensor_out_of_bounds, t->info_offset,
                      "tensor '%s': %llu bytes at data offset %llu (file offset %llu + %llu) run past the end of the file (%llu bytes)", t->name,
                      (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned long long)g->data_start,
                      (unsigned long long)t->offset, (unsigned long long)g->file_size);
            goto out;
        }
    }
    if (g->n_tensors > 1) {
        const qg_gguf_tensor **idx = malloc((size_t)g->n_tensors * sizeof *idx);
        if (idx == NULL) {
            rc = fail(g, QG_ERR_alloc_failed, c->pos, "no memory to sort the tensors");
            goto out;
        }
        for (uint64_t i = 0; i < g->n_tensors; i++) idx[i] = &g->tensors[i];
        qsort(idx, (size_t)g->n_tensors, sizeof *idx, cmp_name);
        for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++)
            if (strcmp(idx[i - 1]->name, idx[i]->name) == 0)
                rc = fail(g, QG_ERR_gguf_duplicate_tensor, idx[i]->info_offset, "tensor name '%s' appears twice (first at byte %llu)", idx[i]->name,
                          (unsigned long long)idx[i - 1]->info_offset);
        if (rc == 0) {
            qsort(idx, (size_t)g->n_tensors, sizeof *idx, cmp_offset);
            for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++)
                if (idx[i]->offset < idx[i - 1]->offset + idx[i - 1]->nbytes) /* no overflow: both ranges are inside the file */
                    rc = fail(g, QG_ERR_gguf_tensor_overlap, idx[i]->info_offset,
                              "tensor '%s' (data offset %llu) overlaps tensor '%s' (data offset %llu, %llu bytes)", idx[i]->name,
                              (unsigned long long)idx[i]->offset, idx[i - 1]->name, (unsigned long long)idx[i - 1]->offset,
                              (unsigned long long)idx[i - 1]->nbytes);
        }
        free(idx);
    }
out:
    free(c);
    return rc;
}

static int open_common(qg_gguf *g)
{
    g->alignment = QG_GGUF_DEFAULT_ALIGNMENT;
    int rc = parse(g);
    if (rc != 0) {
        const int err = g->err ? g->err : rc;
        const uint64_t at = g->err_offset;
        char msg[sizeof g->msg];
        memcpy(msg, g->msg, sizeof msg);
        const int fd = g->fd;
        g->fd = -1; /* keep the descriptor out of close, then restore the error */
        qg_gguf_close(g);
        if (fd >= 0) close(fd);
        g->err = err;
        g->err_offset = at;
        memcpy(g->msg, msg, sizeof msg);
        return err;
    }
    return 0;
}

int qg_gguf_open_mem(qg_gguf *g, const void *buf, size_t len)
{
    if (g == NULL) return QG_ERR_argument_invalid;
    memset(g, 0, sizeof *g);
    g->fd = -1;
    if (buf == NULL && len > 0) return QG_ERR_argument_invalid;
    g->mem = buf;
    g->file_size = len;
    return open_common(g);
}

int qg_gguf_open_file(qg_gguf *g, const char *path)
{
    if (g == NULL || path == NULL) return QG_ERR_argument_invalid;
    memset(g, 0, sizeof *g);
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g->fd < 0) {
        g->err = QG_ERR_io_failed;
        snprintf(g->msg, sizeof g->msg, "cannot open %s: %s", path, strerror(errno));
        return g->err;
    }
    struct stat st;
    if (fstat(g->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        g->err = QG_ERR_io_failed;
        snprintf(g->msg, sizeof g->msg, "%s is not a regular file", path);
        close(g->fd);
        g->fd = -1;
        return g->err;
    }
    g->file_size = (uint64_t)st.st_size;
#if defined(POSIX_FADV_SEQUENTIAL)
    (void)posix_fadvise(g->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    return open_common(g);
}

void qg_gguf_close(qg_gguf *g)
{
    if (g == NULL) return;
    for (uint64_t k = 0; k < g->n_kv_parsed && g->kv; k++) free(g->kv[k].key);
    free(g->kv);
    free(g->tensors);
    if (g->fd >= 0) close(g->fd);
    g->kv = NULL;
    g->tensors = NULL;
    g->fd = -1;
    g->n_kv = g->n_tensors = g->n_kv_parsed = 0;
}

const qg_gguf_tensor *qg_gguf_find(const qg_gguf *g, const char *name)
{
    for (uint64_t i = 0; g && name && i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

const qg_gguf_kv *qg_gguf_find_kv(const qg_gguf *g, const char *key)
{
    for (uint64_t i = 0; g && key && i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

/* ---- the per-block rule ------------------------------------------------------------------------- */

/* Whether the fp16 bits h are inf or NaN: exponent field all ones. */
static int f16_nonfinite(const uint8_t *p) { return ((p[1] >> 2) & 0x1f) == 0x1f; }

void qg_gguf_nonfinite_blocks(uint32_t type, const uint8_t *blocks, uint64_t nblocks, uint64_t *first, uint64_t *count)
{
    uint64_t n = 0;
    const qg_ggml_type *ty = qg_ggml_type_of(type);
    for (uint64_t b = 0; ty && b < nblocks; b++) {
        const uint8_t *p = blocks + b * ty->block_bytes;
        int bad = 0;
        switch (type) {
        case QG_GGML_Q4_K: bad = f16_nonfinite(p + QG_Q4K_D) || f16_nonfinite(p + QG_Q4K_DMIN); break;
        case QG_GGML_Q5_K: bad = f16_nonfinite(p + QG_Q5K_D) || f16_nonfinite(p + QG_Q5K_DMIN); break;
        case QG_GGML_Q6_K: bad = f16_nonfinite(p + QG_Q6K_D); break;
        case QG_GGML_Q8_K: /* float32 d: exponent bits 23..30 all ones */
            bad = (p[QG_Q8K_D + 3] & 0x7f) == 0x7f && (p[QG_Q8K_D + 2] & 0x80);
            break;
        default: break;
        }
        if (bad && n++ == 0 && first) *first = b;
    }
    if (count) *count = n;
}
