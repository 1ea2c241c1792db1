/* golden.gguf.ref: the GGUF reader over every file of golden/gguf (fixtures.md, `### GGUF`).
 *
 * usage: test_gguf_golden GOLDEN_DIR
 *
 * For each case of gguf/index.h5 (read through the loader, so its MANIFEST lines are checked):
 *   - the .gguf file's SHA-256 equals the index's, and the directory holds exactly the indexed files;
 *   - the file opened from disk (pread) and from memory gives the same verdict;
 *   - a valid file opens, lists the indexed tensor names in order, has no non-finite K-quant block, and
 *     each tensor decoded by the reference hashes to the generator's float32 values (raw bytes for
 *     types qgold does not decode): the reader found every tensor's data;
 *   - an invalid file fails with the indexed error name at the indexed byte offset; the per-block
 *     rule (gguf_block_nonfinite) is found by scanning the blocks of an otherwise valid container;
 *   - every prefix of a valid file and every single-byte change of its header is rejected with a
 *     GGUF error or still parses consistently, never an out-of-bounds read (run under ASan).
 */
#include "fixture.h"
#include "qg_test.h"
#include "sha256.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/gguf.h"
#include "qgold/kquants.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b && len >= 0 ? fread(b, 1, (size_t)len, fp) : 0;
    fclose(fp);
    return b;
}

/* SHA-256 of a tensor as fixtures.md defines it: float32 values for covered types, else raw bytes. */
static int tensor_digest(qg_gguf *g, const qg_gguf_tensor *t, unsigned char out[32])
{
    uint8_t *raw = malloc((size_t)t->nbytes);
    float *y = malloc((size_t)t->nelem * sizeof(float));
    int rc = raw && y ? qg_gguf_read_rows(g, t, 0, t->rows, raw) : QG_ERR_alloc_failed;
    const void *p = y;
    size_t n = (size_t)t->nelem * sizeof(float);
    if (rc == 0) {
        switch (t->type) {
        case QG_GGML_F32: memcpy(y, raw, n); break;
        case QG_GGML_F16: rc = qg_fp16_f16_to_f32_ref((const qg_f16 *)(void *)raw, (uint32_t *)(void *)y, (size_t)t->nelem); break;
        case QG_GGML_BF16: rc = qg_fp16_bf16_to_f32_ref((const qg_bf16 *)(void *)raw, (uint32_t *)(void *)y, (size_t)t->nelem); break;
        case QG_GGML_Q4_K: case QG_GGML_Q5_K: case QG_GGML_Q6_K: case QG_GGML_Q8_K:
            rc = qg_kq_dequant_f32_ref((qg_ktype)(t->type - QG_GGML_Q4_K), raw, (size_t)t->nbytes, (size_t)t->rows, (size_t)t->ne[0], y);
            break;
        default: p = raw, n = (size_t)t->nbytes; break;
        }
    }
    if (rc == 0) {
        qg_sha256 s;
        qg_sha256_init(&s);
        qg_sha256_update(&s, p, n);
        qg_sha256_final(&s, out);
    }
    free(raw);
    free(y);
    return rc;
}

/* Whether a code is one a reader may return for bad bytes. */
static int reader_code(int rc) { return rc == 0 || (rc >= 500 && rc <= 599) || rc == QG_ERR_alloc_failed; }

/* Every prefix and every one-byte header change of a valid file: a named error or a consistent parse. */
static void mutate(const char *file, const uint8_t *b, size_t n, const qg_gguf *ok)
{
    uint64_t end = ok->data_start; /* the last byte any tensor needs */
    for (uint64_t i = 0; i < ok->n_tensors; i++)
        if (ok->tensors[i].file_offset + ok->tensors[i].nbytes > end) end = ok->tensors[i].file_offset + ok->tensors[i].nbytes;
    size_t bad_prefix = 0;
    for (size_t len = 0; len < n; len++) {
        qg_gguf g;
        int rc = qg_gguf_open_mem(&g, b, len);
        /* a cut before the last byte a tensor needs must fail; after it (trailing padding) the file is whole */
        if (!reader_code(rc) || (rc == 0 && ok->n_tensors > 0 && len < end)) bad_prefix++;
        qg_gguf_close(&g);
    }
    QG_CHECK(bad_prefix == 0, "%s: %zu prefixes shorter than the last tensor's end parsed or gave a non-GGUF error", file, bad_prefix);
    uint8_t *c = malloc(n);
    size_t odd = 0, hdr = (size_t)(ok->data_start < n ? ok->data_start : n);
    for (size_t i = 0; c && i < hdr; i++) {
        for (int v = 0; v < 2; v++) {
            memcpy(c, b, n);
            c[i] = v ? (uint8_t)(b[i] ^ 0x80) : 0xFF;
            qg_gguf g;
            int rc = qg_gguf_open_mem(&g, c, n);
            if (!reader_code(rc)) odd++;
            /* a file that still parses keeps the invariants of an open file */
            for (uint64_t k = 0; rc == 0 && k < g.n_tensors; k++) {
                const qg_gguf_tensor *t = &g.tensors[k];
                if (t->file_offset + t->nbytes > n || t->offset % g.alignment != 0 || t->nbytes != t->rows * t->row_bytes) odd++;
            }
            qg_gguf_close(&g);
        }
    }
    QG_CHECK(odd == 0, "%s: %zu one-byte header changes broke an invariant or gave a non-GGUF error", file, odd);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_gguf_golden GOLDEN_DIR\n");
        return 2;
    }
    const char *golden = argv[1];
    qg_err e;
    qgh_manifest *m = NULL;
    qgh_file *f = NULL;
    if (qgh_manifest_load(golden, &m, &e) != 0 || qgh_open(golden, "gguf/index.h5", m, &f, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const size_t ncases = qgh_case_count(f);
    char **names = calloc(ncases ? ncases : 1, sizeof *names);
    size_t valid = 0, invalid = 0;
    for (size_t ci = 0; ci < ncases; ci++) {
        const char *cn = qgh_case_name(f, ci);
        qgh_case_info info;
        char file[128], path[1024];
        int64_t offset = -1;
        qgh_array sha = {0};
        if (qgh_read_case_info(f, cn, &info, &e) != 0 || qgh_attr_str(f, cn, "file", file, sizeof file, &e) != 0 ||
            (strcmp(info.expect, "invalid") == 0 && qgh_attr_i64(f, cn, "offset", &offset, &e) != 0) ||
            qgh_read(f, cn, "sha256", QGH_U8, NULL, 1, (const size_t[]){32}, &sha, &e) != 0) {
            QG_CHECK(0, "%s", e.msg);
            continue;
        }
        names[ci] = strdup(file);
        snprintf(path, sizeof path, "%s/gguf/%s", golden, file);
        size_t n = 0;
        uint8_t *b = slurp(path, &n);
        QG_CHECK(b != NULL, "%s: cannot read (regenerate: python generators/regen.py)", path);
        if (b == NULL) {
            qgh_array_free(&sha);
            continue;
        }
        unsigned char d[32];
        qg_sha256 s;
        qg_sha256_init(&s);
        qg_sha256_update(&s, b, n);
        qg_sha256_final(&s, d);
        QG_CHECK(memcmp(d, sha.data, 32) == 0, "%s: content differs from gguf/index.h5 (file edited or damaged; regenerate: python generators/regen.py)", path);
        qgh_array_free(&sha);

        qg_gguf g, gm;
        const int rc = qg_gguf_open_file(&g, path), rcm = qg_gguf_open_mem(&gm, b, n);
        QG_CHECK(rc == rcm && g.err_offset == gm.err_offset, "%s: file and memory readers disagree: %s vs %s", path, qg_error_name(rc),
                 qg_error_name(rcm));
        const int blockrule = strcmp(info.error, "gguf_block_nonfinite") == 0;
        if (strcmp(info.expect, "valid") == 0 || blockrule) {
            QG_CHECK(rc == 0, "%s: expected a valid container, got %s: %s", path, qg_error_name(rc), g.msg);
        }
        if (rc == 0 && strcmp(info.expect, "valid") == 0) {
            valid++;
            char tnames[4096] = "";
            qgh_array th = {0};
            if (qgh_attr_str(f, cn, "tensors", tnames, sizeof tnames, &e) != 0 ||
                qgh_read(f, cn, "tensor_sha256", QGH_U8, NULL, 2, (const size_t[]){(size_t)g.n_tensors, 32}, &th, &e) != 0) {
                QG_CHECK(0, "%s", e.msg);
            } else {
                char *save = NULL, *tok = strtok_r(tnames, ",", &save);
                for (uint64_t i = 0; i < g.n_tensors; i++, tok = strtok_r(NULL, ",", &save)) {
                    const qg_gguf_tensor *t = &g.tensors[i];
                    QG_CHECK(tok && strcmp(tok, t->name) == 0, "%s: tensor %llu is '%s', the index says '%s'", path, (unsigned long long)i, t->name,
                             tok ? tok : "(none)");
                    unsigned char td[32];
                    const int trc = tensor_digest(&g, t, td);
                    QG_CHECK(trc == 0 && memcmp(td, (const uint8_t *)th.data + 32 * i, 32) == 0,
                             "%s: tensor '%s' (%s) decodes to values other than the generator's", path, t->name, qg_ggml_type_of(t->type)->name);
                    uint8_t *raw = malloc((size_t)t->nbytes);
                    uint64_t first = 0, count = 1;
                    if (raw && qg_gguf_read_rows(&g, t, 0, t->rows, raw) == 0)
                        qg_gguf_nonfinite_blocks(t->type, raw, t->nbytes / qg_ggml_type_of(t->type)->block_bytes, &first, &count);
                    QG_CHECK(count == 0, "%s: tensor '%s': %llu non-finite blocks in a valid file", path, t->name, (unsigned long long)count);
                    free(raw);
                }
                QG_CHECK(tok == NULL, "%s: the index names more tensors than the file has", path);
            }
            qgh_array_free(&th);
            mutate(path, b, n, &gm);
        } else if (strcmp(info.expect, "invalid") == 0) {
            invalid++;
            if (blockrule) {
                uint64_t bad = 0;
                for (uint64_t i = 0; rc == 0 && i < g.n_tensors; i++) {
                    const qg_gguf_tensor *t = &g.tensors[i];
                    uint8_t *raw = malloc((size_t)t->nbytes);
                    uint64_t first = 0, count = 0;
                    if (raw && qg_gguf_read_rows(&g, t, 0, t->rows, raw) == 0)
                        qg_gguf_nonfinite_blocks(t->type, raw, t->nbytes / qg_ggml_type_of(t->type)->block_bytes, &first, &count);
                    bad += count;
                    free(raw);
                }
                QG_CHECK(bad > 0, "%s: no block with a non-finite d or dmin found", path);
            } else {
                QG_CHECK(rc != 0 && strcmp(qg_error_name(rc), info.error) == 0, "%s: expected %s, got %s (%s)", path, info.error, qg_error_name(rc),
                         rc ? g.msg : "opened");
                QG_CHECK(offset < 0 || g.err_offset == (uint64_t)offset, "%s: %s at byte %llu, the index says %lld", path, info.error,
                         (unsigned long long)g.err_offset, (long long)offset);
                QG_CHECK(strstr(g.msg, "at byte ") == g.msg, "%s: message does not start with the offset: %s", path, g.msg);
            }
        }
        qg_gguf_close(&g);
        qg_gguf_close(&gm);
        free(b);
    }
    /* the directory holds exactly the indexed files */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/gguf", golden);
    DIR *dp = opendir(dir);
    size_t listed = 0;
    for (struct dirent *de; dp && (de = readdir(dp)) != NULL;) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 5, ".gguf") != 0) continue;
        int found = 0;
        for (size_t i = 0; i < ncases; i++) found |= names[i] && strcmp(names[i], de->d_name) == 0;
        QG_CHECK(found, "%s/%s is not in gguf/index.h5 (a stale file: remove it, or regenerate)", dir, de->d_name);
        listed++;
    }
    if (dp) closedir(dp);
    QG_CHECK(listed == ncases, "%s holds %zu .gguf files, the index %zu", dir, listed, ncases);
    QG_CHECK(valid >= 3 && invalid >= 18, "only %zu valid and %zu invalid files", valid, invalid);
    for (size_t i = 0; i < ncases; i++) free(names[i]);
    free(names);
    qgh_close(f);
    qgh_manifest_free(m);
    printf("%zu valid and %zu invalid GGUF files\n", valid, invalid);
    return qg_test_end("golden.gguf.ref");
}
