/* Fuzz target: the GGUF reader on arbitrary bytes. Oracle: never crash, never read outside the input;
 * the result is success or a named GGUF error (alloc_failed allowed) whose message starts with the byte
 * offset, which lies inside the input; on success the open file keeps its invariants (every tensor's
 * range inside the input, aligned, rows * row_bytes bytes, unique names, no overlap), every tensor can be
 * read row range by row range, and covered tensors decode on the reference. A violated oracle aborts
 * (libFuzzer and the replay test both report it). */
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/gguf.h"
#include "qgold/kquants.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qg_gguf g;
    const int rc = qg_gguf_open_mem(&g, data, size);
    require(rc == 0 || (rc >= 500 && rc <= 599) || rc == QG_ERR_alloc_failed);
    if (rc != 0) {
        require(g.err == rc && g.err_offset <= size && strncmp(g.msg, "at byte ", 8) == 0);
        qg_gguf_close(&g);
        return 0;
    }
    require(g.alignment > 0 && g.alignment % 8 == 0 && g.data_start % g.alignment == 0);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const qg_gguf_tensor *t = &g.tensors[i];
        const qg_ggml_type *ty = qg_ggml_type_of(t->type);
        require(ty != NULL && t->n_dims >= 1 && t->n_dims <= 4 && t->ne[0] % ty->block_elems == 0);
        require(t->nbytes == t->rows * t->row_bytes && t->file_offset + t->nbytes <= size && t->offset % g.alignment == 0);
        require(qg_gguf_find(&g, t->name) != NULL);
        for (uint64_t j = 0; j < i; j++) {
            const qg_gguf_tensor *u = &g.tensors[j];
            require(strcmp(u->name, t->name) != 0);
            require(u->offset + u->nbytes <= t->offset || t->offset + t->nbytes <= u->offset);
        }
        /* a row range past the tensor is refused */
        uint8_t one;
        require(qg_gguf_read_rows(&g, t, t->rows, 1, &one) == QG_ERR_argument_invalid);
        uint8_t *raw = malloc((size_t)t->nbytes);
        if (raw == NULL) continue;
        require(qg_gguf_read_rows(&g, t, 0, t->rows, raw) == 0);
        require(memcmp(raw, data + t->file_offset, (size_t)t->nbytes) == 0);
        uint64_t first = 0, count = 0;
        qg_gguf_nonfinite_blocks(t->type, raw, t->nbytes / ty->block_bytes, &first, &count);
        require(count == 0 || first < t->nbytes / ty->block_bytes);
        /* covered K-quant tensors decode (bounded, so a fuzz input cannot make this slow) */
        if (t->type >= QG_GGML_Q4_K && t->type <= QG_GGML_Q8_K && t->nelem <= ((uint64_t)1 << 16)) {
            float *y = malloc((size_t)t->nelem * sizeof(float));
            if (y) require(qg_kq_dequant_f32_ref((qg_ktype)(t->type - QG_GGML_Q4_K), raw, (size_t)t->nbytes, (size_t)t->rows, (size_t)t->ne[0], y) == 0);
            free(y);
        }
        free(raw);
    }
    qg_gguf_close(&g);
    return 0;
}
