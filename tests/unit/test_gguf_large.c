/* large.gguf.stream: `qgold gguf check` streams a file far larger than its buffers (opt-in).
 *
 * usage: test_gguf_large QGOLD TMP_DIR [GIB]     (runs only with QG_LARGE=1, else exits 77: skipped)
 *
 * Writes a synthetic GGUF of about GIB GiB (default 8) into a fresh directory under TMP_DIR: the tensor
 * shapes of a 7B-class model (4096-wide Q4_K and Q6_K projections, an F16 embedding, F32 norms), whose
 * K-quant blocks are drawn from a pool quantized by the reference from the pinned stream. One block of
 * the last Q4_K tensor gets d = NaN, so a correct check must stream to the end and name exactly that
 * tensor and block (exit 1, one failed tensor). The check runs as a child process; its peak resident
 * set (getrusage, ru_maxrss) must stay below a ceiling independent of the file size (k_rss_ceiling_mib:
 * the CLI holds one chunk of at most 4 Mi elements, i.e. the raw bytes plus two float32 buffers of
 * 16 MiB, next to the binary), and the rate is printed as file bytes per second. The file is removed.
 */
#include "qg_test.h"

#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/rng.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const long k_rss_ceiling_mib = 256;
enum { POOL_BLOCKS = 4096, COLS = 4096, FFN = 14336, VOCAB = 32000, ALIGN = 32 };

typedef struct {
    char name[64];
    uint32_t type; /* ggml id */
    uint64_t ne0, ne1;
    uint64_t nbytes, offset;
} tinfo;

static void put(FILE *fp, const void *p, size_t n)
{
    if (fwrite(p, 1, n, fp) != n) {
        fprintf(stderr, "write failed: %s\n", strerror(errno));
        exit(1);
    }
}
static void put_u32(FILE *fp, uint32_t v) { put(fp, &v, 4); } /* little-endian hosts (x86-64, aarch64) */
static void put_u64(FILE *fp, uint64_t v) { put(fp, &v, 8); }
static void put_str(FILE *fp, const char *s)
{
    put_u64(fp, strlen(s));
    put(fp, s, strlen(s));
}

static uint64_t row_bytes(uint32_t type, uint64_t ne0)
{
    switch (type) {
    case 0: return ne0 * 4;
    case 1: return ne0 * 2;
    case 12: return ne0 / 256 * 144;
    case 14: return ne0 / 256 * 210;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_gguf_large QGOLD TMP_DIR [GIB]\n");
        return 2;
    }
    const char *large = getenv("QG_LARGE");
    if (large == NULL || strcmp(large, "1") != 0) {
        printf("skipped: set QG_LARGE=1 to write and check a synthetic multi-GiB GGUF file\n");
        return QG_TEST_SKIP;
    }
    const double gib = argc > 3 ? atof(argv[3]) : 8.0;
    const uint64_t target = (uint64_t)(gib * (double)(1ull << 30));

    /* the tensor list: embedding, then layers of 4 Q4_K + 2 Q6_K projections and 2 F32 norms */
    tinfo *t = calloc(4096, sizeof *t);
    size_t n = 0;
    uint64_t total = 0;
    snprintf(t[n].name, sizeof t[n].name, "token_embd.weight");
    t[n].type = 1, t[n].ne0 = COLS, t[n].ne1 = VOCAB, n++;
    for (int layer = 0; total < target && n + 8 < 4096; layer++) {
        static const struct { const char *name; uint32_t type; uint64_t ne0, ne1; } L[] = {
            {"attn_q", 12, COLS, COLS}, {"attn_k", 12, COLS, 1024}, {"attn_v", 14, COLS, 1024}, {"attn_output", 12, COLS, COLS},
            {"ffn_gate", 12, COLS, FFN}, {"ffn_up", 12, COLS, FFN}, {"ffn_down", 14, FFN, COLS}, {"attn_norm", 0, COLS, 1},
        };
        for (size_t i = 0; i < sizeof L / sizeof L[0]; i++, n++) {
            snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s.weight", layer, L[i].name);
            t[n].type = L[i].type, t[n].ne0 = L[i].ne0, t[n].ne1 = L[i].ne1;
        }
        total = 0;
        for (size_t i = 0; i < n; i++) total += row_bytes(t[i].type, t[i].ne0) * t[i].ne1;
    }
    uint64_t off = 0;
    size_t last_q4 = 0;
    for (size_t i = 0; i < n; i++) {
        t[i].nbytes = row_bytes(t[i].type, t[i].ne0) * t[i].ne1;
        t[i].offset = off;
        off += (t[i].nbytes + ALIGN - 1) / ALIGN * ALIGN;
        if (t[i].type == 12) last_q4 = i;
    }

    /* block pools: reference-quantized from the pinned stream */
    qg_rng rng;
    qg_rng_init(&rng, 20261124);
    float *x = malloc((size_t)POOL_BLOCKS * 256 * sizeof(float));
    uint8_t *q4 = malloc((size_t)POOL_BLOCKS * 144), *q6 = malloc((size_t)POOL_BLOCKS * 210);
    uint16_t *h = malloc((size_t)POOL_BLOCKS * 256 * 2);
    for (size_t i = 0; i < (size_t)POOL_BLOCKS * 256; i++) x[i] = qg_rng_uniform(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < (size_t)POOL_BLOCKS * 256; i++) h[i] = qg_f32_to_f16(x[i]);
    if (qg_kq_quantize_ref(QG_Q4_K, x, POOL_BLOCKS, 256, q4, (size_t)POOL_BLOCKS * 144) != 0 ||
        qg_kq_quantize_ref(QG_Q6_K, x, POOL_BLOCKS, 256, q6, (size_t)POOL_BLOCKS * 210) != 0) {
        fprintf(stderr, "pool quantization failed\n");
        return 1;
    }

    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/qgold-gguf-large-XXXXXX", argv[2]);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/synthetic.gguf", dir);
    FILE *fp = fopen(path, "wb");
    if (fp == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 1;
    }
    const double w0 = now_s();
    put(fp, "GGUF", 4);
    put_u32(fp, 3);
    put_u64(fp, n);
    put_u64(fp, 2);
    put_str(fp, "general.architecture");
    put_u32(fp, 8);
    put_str(fp, "qgold-synthetic");
    put_str(fp, "general.alignment");
    put_u32(fp, 4);
    put_u32(fp, ALIGN);
    for (size_t i = 0; i < n; i++) {
        put_str(fp, t[i].name);
        put_u32(fp, t[i].ne1 > 1 ? 2 : 1);
        put_u64(fp, t[i].ne0);
        if (t[i].ne1 > 1) put_u64(fp, t[i].ne1);
        put_u32(fp, t[i].type);
        put_u64(fp, t[i].offset);
    }
    static uint8_t zeros[ALIGN];
    long pos = ftell(fp);
    put(fp, zeros, (size_t)((ALIGN - pos % ALIGN) % ALIGN));
    const size_t bufsz = (size_t)8 << 20;
    uint8_t *buf = malloc(bufsz);
    uint64_t bad_block = 0, written = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t bb = t[i].type == 12 ? 144 : t[i].type == 14 ? 210 : 0;
        uint64_t left = t[i].nbytes, k = 0, blk = 0;
        while (left > 0) {
            size_t fill = 0;
            if (bb) { /* whole blocks, pool index by a multiplicative hash of the block number */
                while (fill + bb <= bufsz && left - fill >= bb) {
                    const size_t p = (size_t)((blk * 2654435761u) % POOL_BLOCKS);
                    memcpy(buf + fill, (bb == 144 ? q4 : q6) + p * bb, bb);
                    fill += bb, blk++;
                }
                if (i == last_q4 && fill == left) { /* the tensor's last block: d = NaN */
                    buf[fill - 144 + 0] = 0x00, buf[fill - 144 + 1] = 0x7e;
                    bad_block = blk - 1;
                }
            } else { /* F16 embedding and F32 norms: values of the pool */
                while (fill + 2 <= bufsz && left - fill >= 2) {
                    if (t[i].type == 1) {
                        memcpy(buf + fill, &h[k++ % ((size_t)POOL_BLOCKS * 256)], 2);
                        fill += 2;
                    } else {
                        memcpy(buf + fill, &x[k++ % ((size_t)POOL_BLOCKS * 256)], 4);
                        fill += 4;
                    }
                }
            }
            put(fp, buf, fill);
            left -= fill;
            written += fill;
        }
        const uint64_t pad = (ALIGN - t[i].nbytes % ALIGN) % ALIGN;
        if (i + 1 < n) put(fp, zeros, (size_t)pad);
    }
    if (fclose(fp) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 1;
    }
    const double wsec = now_s() - w0;
    long long fsize = 0;
    {
        FILE *f2 = fopen(path, "rb");
        if (f2) fseek(f2, 0, SEEK_END), fsize = ftell(f2), fclose(f2);
    }
    printf("wrote %s: %zu tensors, %lld bytes (%.2f GiB) in %.1f s\n", path, n, fsize, (double)fsize / (double)(1ull << 30), wsec);

    /* the check, as a child: its peak RSS from wait4 */
    char log[1200];
    snprintf(log, sizeof log, "%s/check.log", dir);
    fflush(stdout);
    const double c0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        FILE *o = freopen(log, "w", stdout);
        (void)o;
        execl(argv[1], argv[1], "gguf", "check", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    wait4(pid, &status, 0, &ru);
    const double csec = now_s() - c0;
    const long rss_mib = ru.ru_maxrss / 1024; /* Linux: KiB */
    const double gbps = (double)fsize / csec * 1e-9;
    const double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
                       1e-6 * (double)ru.ru_stime.tv_usec;
    printf("qgold gguf check: %.1f s wall, %.2f GB/s; %.1f s CPU (user + sys, all threads); peak RSS %ld MiB (ceiling %ld MiB); exit %d\n",
           csec, gbps, cpu, rss_mib, k_rss_ceiling_mib, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    char expect[256], line[4096];
    snprintf(expect, sizeof expect, "gguf_block_nonfinite: block %llu ", (unsigned long long)bad_block);
    int named = 0, summary = 0;
    FILE *lf = fopen(log, "r");
    while (lf && fgets(line, sizeof line, lf)) {
        if (strstr(line, t[last_q4].name) && strstr(line, expect) && strncmp(line, "FAIL", 4) == 0) named = 1;
        char want[128];
        snprintf(want, sizeof want, "%zu tensors checked, 1 failed", n);
        if (strstr(line, want)) summary = 1, fputs(line, stdout);
    }
    if (lf) fclose(lf);
    QG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "the check must fail (exit 1) on the one bad block; status %d", status);
    QG_CHECK(named, "the check did not name %s block %llu (log %s)", t[last_q4].name, (unsigned long long)bad_block, log);
    QG_CHECK(summary, "the summary does not say %zu tensors checked, 1 failed (log %s)", n, log);
    QG_CHECK(rss_mib < k_rss_ceiling_mib, "peak RSS %ld MiB for a %lld-byte file", rss_mib, fsize);
    QG_CHECK((uint64_t)fsize >= written && (uint64_t)fsize > target / 2, "file of %lld bytes, wanted about %llu", fsize,
             (unsigned long long)target);
    if (qg_test_failures == 0) {
        unlink(log);
        unlink(path);
        rmdir(dir);
    } else {
        unlink(path); /* keep the log, never the multi-GiB file */
        fprintf(stderr, "kept %s\n", log);
    }
    free(t), free(x), free(q4), free(q6), free(h), free(buf);
    return qg_test_end("large.gguf.stream");
}
