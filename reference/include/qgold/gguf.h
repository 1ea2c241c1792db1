/* GGUF model files: a validating reader of the container (spec: ../shared/specs/gguf.md).
 *
 * Versions 2 and 3, little-endian. qg_gguf_open_* parse and validate the whole header (key-values,
 * tensor infos, alignment, every tensor's byte range) without reading tensor data; tensor bytes are then
 * read on demand (qg_gguf_read_rows), a bounded range at a time, so a file larger than memory can be
 * checked tensor by tensor. Nothing is read through an unchecked size: every count, length and product
 * is checked against the file's size and for 64-bit overflow before it is used.
 *
 * Every validation rule of the spec is a named error (errors.h, range 500..599); on failure the reader
 * stores the code, the byte offset where it was found and a one-line message (qg_gguf.msg, which
 * starts with "at byte N:"). Functions return a qg_status, 0 on success.
 */
#ifndef QGOLD_GGUF_H
#define QGOLD_GGUF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Key-value types of the container. */
enum {
    QG_GGUF_U8 = 0, QG_GGUF_I8 = 1, QG_GGUF_U16 = 2, QG_GGUF_I16 = 3, QG_GGUF_U32 = 4, QG_GGUF_I32 = 5,
    QG_GGUF_F32 = 6, QG_GGUF_BOOL = 7, QG_GGUF_STRING = 8, QG_GGUF_ARRAY = 9, QG_GGUF_U64 = 10,
    QG_GGUF_I64 = 11, QG_GGUF_F64 = 12
};

/* Caps of the spec: larger values are errors, not allocations. */
enum {
    QG_GGUF_MAX_NAME = 64,          /* tensor name bytes */
    QG_GGUF_MAX_DEPTH = 8,          /* array nesting levels (an array of arrays is depth 2) */
    QG_GGUF_DEFAULT_ALIGNMENT = 32,
};
#define QG_GGUF_MAX_STRING ((uint64_t)1 << 20)     /* string bytes */
#define QG_GGUF_MAX_ARRAY ((uint64_t)1 << 32)      /* array elements */
#define QG_GGUF_MAX_COUNT ((uint64_t)1 << 20)      /* tensors, key-values */

/* ggml tensor type ids that qgold checks (others are listed and skipped by name). */
enum { QG_GGML_F32 = 0, QG_GGML_F16 = 1, QG_GGML_Q4_K = 12, QG_GGML_Q5_K = 13, QG_GGML_Q6_K = 14, QG_GGML_Q8_K = 15, QG_GGML_BF16 = 30 };

typedef struct {
    uint32_t id;
    const char *name;      /* ggml's name: "Q4_K", "F16", ... */
    uint32_t block_elems;  /* elements per block (1 for plain types) */
    uint32_t block_bytes;  /* bytes per block */
} qg_ggml_type;

/* The type of an id, or NULL when qgold does not know it (its size cannot be computed). */
const qg_ggml_type *qg_ggml_type_of(uint32_t id);
/* Whether qgold checks tensors of this type (F32, F16, BF16, Q4_K, Q5_K, Q6_K, Q8_K). */
int qg_ggml_type_covered(uint32_t id);
/* "u8", "string", "array", ...; "?" for an unknown value type. */
const char *qg_gguf_vtype_name(uint32_t t);

typedef struct {
    char *key;             /* NUL-terminated copy (a NUL inside the key is kept as written, the copy stops there) */
    uint32_t type;         /* QG_GGUF_* */
    uint64_t offset;       /* byte offset of the key's length field */
    union {
        uint64_t u;        /* unsigned integers and bool */
        int64_t i;         /* signed integers */
        double f;          /* f32, f64 */
    } v;
    uint64_t len;          /* string: byte length; array: element count */
    uint32_t elem_type;    /* array: element type (QG_GGUF_ARRAY for nested arrays) */
    uint64_t data_offset;  /* string: first byte; array: first element */
    char preview[96];      /* string: its first bytes; array: its first elements, rendered */
} qg_gguf_kv;

typedef struct {
    char name[QG_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    uint64_t ne[4];        /* ne[0] is the row length; dimensions past n_dims are 1 */
    uint32_t type;         /* ggml type id */
    uint64_t offset;       /* from the start of the data section, as stored */
    uint64_t info_offset;  /* byte offset of this tensor's info (its name) in the file */
    uint64_t nelem;        /* ne[0] * ne[1] * ne[2] * ne[3] */
    uint64_t rows;         /* nelem / ne[0] */
    uint64_t row_bytes;    /* ne[0] / block_elems * block_bytes */
    uint64_t nbytes;       /* rows * row_bytes */
    uint64_t file_offset;  /* data_start + offset: where the bytes are in the file */
} qg_gguf_tensor;

typedef struct {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    uint64_t n_kv_parsed;  /* key-values holding an allocated key (n_kv after a successful open) */
    qg_gguf_kv *kv;
    qg_gguf_tensor *tensors;
    uint64_t alignment;    /* general.alignment, or 32 */
    uint64_t data_start;   /* file offset of the data section */
    uint64_t file_size;
    /* the last error */
    int err;
    uint64_t err_offset;
    char msg[320];
    /* where the bytes come from */
    int fd;                /* -1 for a memory buffer */
    const uint8_t *mem;
} qg_gguf;

/* Opens and validates a file (read through pread, in bounded pieces). On failure g->err, g->err_offset
 * and g->msg describe the first violated rule and the reader holds nothing (qg_gguf_close is still
 * allowed). */
int qg_gguf_open_file(qg_gguf *g, const char *path);
/* The same over len bytes in memory (the buffer must outlive g). */
int qg_gguf_open_mem(qg_gguf *g, const void *buf, size_t len);
void qg_gguf_close(qg_gguf *g);

/* The tensor of a name, or NULL. */
const qg_gguf_tensor *qg_gguf_find(const qg_gguf *g, const char *name);
/* The key-value of a key, or NULL. */
const qg_gguf_kv *qg_gguf_find_kv(const qg_gguf *g, const char *key);

/* Rows row0 .. row0+nrows-1 of tensor t (nrows * t->row_bytes bytes) into dst. QG_ERR_argument_invalid
 * for rows outside the tensor, QG_ERR_io_failed when the read fails (g->msg says why). */
int qg_gguf_read_rows(qg_gguf *g, const qg_gguf_tensor *t, uint64_t row0, uint64_t nrows, void *dst);
/* Any byte range of the file (bounds checked). */
int qg_gguf_read_at(qg_gguf *g, uint64_t offset, void *dst, size_t n);

/* The spec's per-block rule for K-quant tensors (ggml's validate_row_data): d (and dmin for Q4_K and
 * Q5_K) finite. Over nblocks blocks of `type` at `blocks`: *count gets the number of blocks violating
 * it, *first the index of the first (unchanged when none). Other types: always 0 blocks. */
void qg_gguf_nonfinite_blocks(uint32_t type, const uint8_t *blocks, uint64_t nblocks, uint64_t *first, uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
