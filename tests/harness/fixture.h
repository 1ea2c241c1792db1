/* The golden fixture loader (spec: reference/spec/fixtures.md).
 *
 * Every failure is a qg_err whose message names the file, the object and what was expected, e.g.
 *   golden/fp16/f32_to_f16.h5: /boundaries/x: element type is float32, expected uint32 (dtype float32 bits)
 * Reads never trust sizes from the file beyond a fixed cap, and the manifest (golden/MANIFEST) is
 * checked for every dataset read when the file was opened with one.
 */
#ifndef QGOLD_FIXTURE_H
#define QGOLD_FIXTURE_H

#include "qg_err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    QGH_U8 = 1, QGH_U16, QGH_U32, QGH_U64, QGH_I8, QGH_I16, QGH_I32, QGH_I64, QGH_F32, QGH_F64
} qgh_dtype;

const char *qgh_dtype_name(qgh_dtype t);
size_t qgh_dtype_size(qgh_dtype t);

enum { QGH_MAX_RANK = 4 };
/* Datasets above this many bytes are refused (QG_ERR_fixture_too_large): a corrupt header must not
 * make the loader allocate gigabytes. */
#define QGH_MAX_DATASET_BYTES ((size_t)256 << 20)

typedef struct {
    void *data;
    qgh_dtype dtype;
    int rank;
    size_t dims[QGH_MAX_RANK];
    size_t count; /* product of dims */
} qgh_array;

void qgh_array_free(qgh_array *a);

typedef struct qgh_manifest qgh_manifest;
/* Loads <golden_dir>/MANIFEST. A fixture directory always carries one: a missing file is the error
 * fixture_manifest_missing ("<dir>/MANIFEST: missing; ..."). Reading without a manifest is the caller's
 * explicit choice (qgh_open with m = NULL). */
int qgh_manifest_load(const char *golden_dir, qgh_manifest **out, qg_err *e);
void qgh_manifest_free(qgh_manifest *m);
size_t qgh_manifest_count(const qgh_manifest *m);

typedef struct qgh_file qgh_file;
/* Opens <golden_dir>/<relpath>; `m` may be NULL (no content check). */
int qgh_open(const char *golden_dir, const char *relpath, const qgh_manifest *m, qgh_file **out, qg_err *e);
/* Opens an in-memory file image (the fuzz target); `name` is used in messages. */
int qgh_open_image(const void *buf, size_t len, const char *name, qgh_file **out, qg_err *e);
void qgh_close(qgh_file *f);
const char *qgh_name(const qgh_file *f);

size_t qgh_case_count(const qgh_file *f);
const char *qgh_case_name(const qgh_file *f, size_t i);

/* Attributes of a case group (`obj` = case name) or of the file (`obj` = "" or "/"). */
int qgh_attr_str(qgh_file *f, const char *obj, const char *attr, char *buf, size_t len, qg_err *e);
int qgh_attr_i64(qgh_file *f, const char *obj, const char *attr, int64_t *v, qg_err *e);
int qgh_attr_u64(qgh_file *f, const char *obj, const char *attr, uint64_t *v, qg_err *e);
int qgh_attr_f64(qgh_file *f, const char *obj, const char *attr, double *v, qg_err *e);
int qgh_has_attr(qgh_file *f, const char *obj, const char *attr);

/* Reads dataset <case>/<name> after checking its element type (`want`), its `dtype` attribute when
 * `want_logical` is not NULL ("float16", "bfloat16", "float32"), its rank, and each dim of `want_dims`
 * that is not 0 (want_dims may be NULL). */
int qgh_read(qgh_file *f, const char *case_name, const char *name, qgh_dtype want, const char *want_logical,
             int want_rank, const size_t *want_dims, qgh_array *out, qg_err *e);

/* The attributes every case carries (fixtures.md). */
typedef struct {
    char name[64];
    char format[32];
    char path[64];
    char case_id[192];
    char description[256];
    char distribution[64];
    char expect[16];
    char error[64]; /* "" for valid cases */
    int64_t format_version;
    uint64_t seed;
} qgh_case_info;

int qgh_read_case_info(qgh_file *f, const char *case_name, qgh_case_info *ci, qg_err *e);

/* Schema check of a whole file: root attributes, every case's attributes, every dataset readable (and
 * matching the manifest when one was given). Used by the audit before it trusts a file, and fuzzed. */
int qgh_lint(qgh_file *f, qg_err *e);

#endif
