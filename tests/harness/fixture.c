/* The golden fixture loader: HDF5 in, checked arrays out, a named error for everything else.
 *
 * Only the stable HDF5 1.10 API is used (H5Gget_info / H5Lget_name_by_idx rather than the iterate
 * callbacks whose signatures changed in 1.12), and the library's own error printing is switched off:
 * every failure becomes one qg_err message naming file, object and expectation.
 */
#include "fixture.h"

#include "sha256.h"

#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the manifest hashes little-endian bytes; a big-endian port must swap before hashing"
#endif

/* ---------------------------------------------------------------------------------------------- */
/* dtypes */

static const struct {
    qgh_dtype t;
    const char *name;
    size_t size;
    H5T_class_t cls;
    H5T_sign_t sign;
} k_dtypes[] = {
    {QGH_U8, "uint8", 1, H5T_INTEGER, H5T_SGN_NONE},   {QGH_U16, "uint16", 2, H5T_INTEGER, H5T_SGN_NONE},
    {QGH_U32, "uint32", 4, H5T_INTEGER, H5T_SGN_NONE}, {QGH_U64, "uint64", 8, H5T_INTEGER, H5T_SGN_NONE},
    {QGH_I8, "int8", 1, H5T_INTEGER, H5T_SGN_2},       {QGH_I16, "int16", 2, H5T_INTEGER, H5T_SGN_2},
    {QGH_I32, "int32", 4, H5T_INTEGER, H5T_SGN_2},     {QGH_I64, "int64", 8, H5T_INTEGER, H5T_SGN_2},
    {QGH_F32, "float32", 4, H5T_FLOAT, H5T_SGN_ERROR}, {QGH_F64, "float64", 8, H5T_FLOAT, H5T_SGN_ERROR},
};
enum { K_NDTYPES = sizeof k_dtypes / sizeof k_dtypes[0] };

const char *qgh_dtype_name(qgh_dtype t)
{
    for (int i = 0; i < K_NDTYPES; i++)
        if (k_dtypes[i].t == t) return k_dtypes[i].name;
    return "?";
}

size_t qgh_dtype_size(qgh_dtype t)
{
    for (int i = 0; i < K_NDTYPES; i++)
        if (k_dtypes[i].t == t) return k_dtypes[i].size;
    return 0;
}

static hid_t native_type(qgh_dtype t)
{
    switch (t) {
    case QGH_U8: return H5T_NATIVE_UINT8;
    case QGH_U16: return H5T_NATIVE_UINT16;
    case QGH_U32: return H5T_NATIVE_UINT32;
    case QGH_U64: return H5T_NATIVE_UINT64;
    case QGH_I8: return H5T_NATIVE_INT8;
    case QGH_I16: return H5T_NATIVE_INT16;
    case QGH_I32: return H5T_NATIVE_INT32;
    case QGH_I64: return H5T_NATIVE_INT64;
    case QGH_F32: return H5T_NATIVE_FLOAT;
    case QGH_F64: return H5T_NATIVE_DOUBLE;
    }
    return H5I_INVALID_HID;
}

/* The qgh_dtype of a file type, or 0 for anything outside the schema (strings, compounds, fp16...). */
static qgh_dtype classify(hid_t ftype)
{
    H5T_class_t cls = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    if (cls == H5T_FLOAT) {
        /* Only IEEE binary32/64 layouts: a 16-bit or odd-field float is not in the schema. */
        size_t spos, epos, esize, mpos, msize;
        if (H5Tget_fields(ftype, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
        if (size == 4 && esize == 8 && msize == 23) return QGH_F32;
        if (size == 8 && esize == 11 && msize == 52) return QGH_F64;
        return 0;
    }
    if (cls != H5T_INTEGER) return 0;
    H5T_sign_t sign = H5Tget_sign(ftype);
    for (int i = 0; i < K_NDTYPES; i++)
        if (k_dtypes[i].cls == H5T_INTEGER && k_dtypes[i].size == size && k_dtypes[i].sign == sign) return k_dtypes[i].t;
    return 0;
}

static void describe_type(hid_t ftype, char *buf, size_t len)
{
    qgh_dtype t = classify(ftype);
    if (t != 0) {
        snprintf(buf, len, "%s", qgh_dtype_name(t));
        return;
    }
    const char *cls;
    switch (H5Tget_class(ftype)) {
    case H5T_INTEGER: cls = "integer"; break;
    case H5T_FLOAT: cls = "float"; break;
    case H5T_STRING: cls = "string"; break;
    case H5T_COMPOUND: cls = "compound"; break;
    default: cls = "non-numeric"; break;
    }
    snprintf(buf, len, "%s of %zu bytes", cls, H5Tget_size(ftype));
}

void qgh_array_free(qgh_array *a)
{
    if (a != NULL) {
        free(a->data);
        memset(a, 0, sizeof *a);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* manifest */

typedef struct {
    char *key; /* "<relpath> <object>" */
    char hex[65];
} manifest_entry;

struct qgh_manifest {
    manifest_entry *e;
    size_t n;
};

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const manifest_entry *)a)->key, ((const manifest_entry *)b)->key);
}

size_t qgh_manifest_count(const qgh_manifest *m) { return m != NULL ? m->n : 0; }

void qgh_manifest_free(qgh_manifest *m)
{
    if (m == NULL) return;
    for (size_t i = 0; i < m->n; i++) free(m->e[i].key);
    free(m->e);
    free(m);
}

int qgh_manifest_load(const char *golden_dir, qgh_manifest **out, qg_err *e)
{
    char path[1024];
    *out = NULL;
    snprintf(path, sizeof path, "%s/MANIFEST", golden_dir);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return qg_err_set(e, QG_ERR_fixture_manifest_missing,
                          "%s: %s; without it no dataset can be checked against its hash (regenerate with generators/regen.py)", path,
                          errno == ENOENT ? "missing" : strerror(errno));
    qgh_manifest *m = calloc(1, sizeof *m);
    size_t cap = 0;
    char line[2048];
    int lineno = 0, rc = QG_ERR_ok;
    if (m == NULL) {
        fclose(fp);
        return qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", path);
    }
    while (fgets(line, sizeof line, fp) != NULL) {
        lineno++;
        size_t L = strlen(line);
        while (L > 0 && (line[L - 1] == '\n' || line[L - 1] == '\r')) line[--L] = '\0';
        if (L == 0 || line[0] == '#') continue;
        char hex[65], file[1024], obj[1024];
        if (sscanf(line, "%64s %1023s %1023s", hex, file, obj) != 3 || strlen(hex) != 64 ||
            strspn(hex, "0123456789abcdef") != 64) {
            rc = qg_err_set(e, QG_ERR_fixture_attr_invalid,
                            "%s: line %d: expected '<sha256 hex>  <file>  <object>', got '%.200s'", path, lineno, line);
            break;
        }
        if (m->n == cap) {
            cap = cap ? 2 * cap : 256;
            manifest_entry *ne = realloc(m->e, cap * sizeof *ne);
            if (ne == NULL) {
                rc = qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", path);
                break;
            }
            m->e = ne;
        }
        size_t klen = strlen(file) + 1 + strlen(obj) + 1;
        char *key = malloc(klen);
        if (key == NULL) {
            rc = qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", path);
            break;
        }
        snprintf(key, klen, "%s %s", file, obj);
        m->e[m->n].key = key;
        memcpy(m->e[m->n].hex, hex, 65);
        m->n++;
    }
    fclose(fp);
    if (rc != QG_ERR_ok) {
        qgh_manifest_free(m);
        return rc;
    }
    qsort(m->e, m->n, sizeof *m->e, cmp_entry);
    *out = m;
    return QG_ERR_ok;
}

static const char *manifest_lookup(const qgh_manifest *m, const char *relpath, const char *obj)
{
    char key[2100];
    snprintf(key, sizeof key, "%s %s", relpath, obj);
    manifest_entry probe = {key, {0}};
    const manifest_entry *hit = bsearch(&probe, m->e, m->n, sizeof *m->e, cmp_entry);
    return hit != NULL ? hit->hex : NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* files */

struct qgh_file {
    hid_t fid;
    char name[1024];    /* for messages: <golden_dir>/<relpath> */
    char relpath[1024]; /* manifest key */
    const qgh_manifest *manifest;
    size_t ncases;
    char **cases;
};

const char *qgh_name(const qgh_file *f) { return f->name; }
size_t qgh_case_count(const qgh_file *f) { return f->ncases; }
const char *qgh_case_name(const qgh_file *f, size_t i) { return i < f->ncases ? f->cases[i] : NULL; }

static void quiet_hdf5(void)
{
    static int done;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

void qgh_close(qgh_file *f)
{
    if (f == NULL) return;
    for (size_t i = 0; i < f->ncases; i++) free(f->cases[i]);
    free(f->cases);
    if (f->fid >= 0) H5Fclose(f->fid);
    free(f);
}

/* Lists the root's links that are groups: the cases, in name order. */
static int list_cases(qgh_file *f, qg_err *e)
{
    H5G_info_t gi;
    if (H5Gget_info(f->fid, &gi) < 0)
        return qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /: cannot read the root group (truncated or corrupt file)", f->name);
    if (gi.nlinks > 100000)
        return qg_err_set(e, QG_ERR_fixture_too_large, "%s: /: %llu cases, expected at most 100000", f->name,
                          (unsigned long long)gi.nlinks);
    f->cases = calloc(gi.nlinks ? gi.nlinks : 1, sizeof *f->cases);
    if (f->cases == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", f->name);
    for (hsize_t i = 0; i < gi.nlinks; i++) {
        char nm[256];
        ssize_t L = H5Lget_name_by_idx(f->fid, ".", H5_INDEX_NAME, H5_ITER_INC, i, nm, sizeof nm, H5P_DEFAULT);
        if (L < 0 || (size_t)L >= sizeof nm)
            return qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /: cannot read the name of link %llu", f->name,
                              (unsigned long long)i);
        hid_t o = H5Oopen(f->fid, nm, H5P_DEFAULT);
        if (o < 0)
            return qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot open the object (truncated or corrupt file)",
                              f->name, nm);
        int is_group = H5Iget_type(o) == H5I_GROUP;
        H5Oclose(o);
        if (!is_group) continue; /* root-level datasets are not cases */
        f->cases[f->ncases] = malloc(strlen(nm) + 1);
        if (f->cases[f->ncases] == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", f->name);
        strcpy(f->cases[f->ncases++], nm);
    }
    return QG_ERR_ok;
}

static int finish_open(qgh_file *f, qgh_file **out, qg_err *e)
{
    int rc = list_cases(f, e);
    if (rc != QG_ERR_ok) {
        qgh_close(f);
        return rc;
    }
    *out = f;
    return QG_ERR_ok;
}

/* ---------------------------------------------------------------------------------------------- */
/* Crash isolation.
 *
 * libhdf5 does not survive every corrupt file: a damaged B-tree or heap can make it free a wild
 * pointer (seen with 1.10 on bit-flipped fixtures). So a file is first opened and linted in a forked
 * child; if the child dies on a signal, the parent reports a named error instead of crashing, and
 * only a file the child survived is parsed in-process. QG_NO_ISOLATION=1 skips the probe (debugging). */

typedef int (*probe_fn)(const void *ctx, qg_err *e);

static int run_isolated(probe_fn fn, const void *ctx, const char *name, qg_err *e)
{
    const char *off = getenv("QG_NO_ISOLATION");
    if (off != NULL && off[0] == '1') return QG_ERR_ok;
    int fds[2];
    if (pipe(fds) != 0) return QG_ERR_ok; /* cannot isolate: fall back to the in-process parse */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return QG_ERR_ok;
    }
    if (pid == 0) {
        close(fds[0]);
        qg_err ce;
        qg_err_clear(&ce);
        int rc = fn(ctx, &ce);
        char buf[sizeof ce.msg + 16];
        int L = snprintf(buf, sizeof buf, "%d\n%s", rc, ce.msg);
        if (L > 0 && write(fds[1], buf, (size_t)L) < 0) _exit(3);
        _exit(0);
    }
    close(fds[1]);
    char buf[sizeof e->msg + 16];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)r;
    buf[got] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    /* The child reports "<code>\n<message>" and exits 0; anything else (a signal, a sanitizer's exit,
     * no report) means reading the file killed it. */
    char *nl = strchr(buf, '\n');
    if (WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || nl == NULL) {
        char how[64];
        if (WIFSIGNALED(status)) snprintf(how, sizeof how, "signal %d", WTERMSIG(status));
        else snprintf(how, sizeof how, "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return qg_err_set(e, QG_ERR_fixture_corrupt,
                          "%s: the HDF5 library crashed (%s) reading this file: it is corrupt; regenerate with "
                          "generators/regen.py",
                          name, how);
    }
    int rc = atoi(buf);
    if (rc != QG_ERR_ok) qg_err_set(e, rc, "%s", nl + 1);
    return rc;
}

typedef struct {
    const char *dir, *rel;
    const qgh_manifest *m;
    const void *buf;
    size_t len;
} probe_args;

static int open_file_unchecked(const char *golden_dir, const char *relpath, const qgh_manifest *m, qgh_file **out, qg_err *e);
static int open_image_unchecked(const void *buf, size_t len, const char *name, qgh_file **out, qg_err *e);

static int probe_file(const void *vctx, qg_err *e)
{
    const probe_args *a = vctx;
    qgh_file *f = NULL;
    int rc = a->buf != NULL ? open_image_unchecked(a->buf, a->len, a->rel, &f, e) : open_file_unchecked(a->dir, a->rel, a->m, &f, e);
    if (rc == QG_ERR_ok) rc = qgh_lint(f, e);
    qgh_close(f);
    return rc;
}

int qgh_open(const char *golden_dir, const char *relpath, const qgh_manifest *m, qgh_file **out, qg_err *e)
{
    char name[2100];
    probe_args a = {golden_dir, relpath, m, NULL, 0};
    snprintf(name, sizeof name, "%s/%s", golden_dir, relpath);
    *out = NULL;
    int rc = run_isolated(probe_file, &a, name, e);
    /* A crash is final; an ordinary error is reproduced in-process below, where the caller meets it. */
    if (rc == QG_ERR_fixture_corrupt) return rc;
    return open_file_unchecked(golden_dir, relpath, m, out, e);
}

int qgh_open_image(const void *buf, size_t len, const char *name, qgh_file **out, qg_err *e)
{
    probe_args a = {NULL, name, NULL, buf, len};
    *out = NULL;
    int rc = run_isolated(probe_file, &a, name, e);
    if (rc == QG_ERR_fixture_corrupt) return rc;
    return open_image_unchecked(buf, len, name, out, e);
}

static int open_file_unchecked(const char *golden_dir, const char *relpath, const qgh_manifest *m, qgh_file **out, qg_err *e)
{
    quiet_hdf5();
    *out = NULL;
    qgh_file *f = calloc(1, sizeof *f);
    if (f == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    f->fid = -1;
    snprintf(f->name, sizeof f->name, "%s/%s", golden_dir, relpath);
    snprintf(f->relpath, sizeof f->relpath, "%s", relpath);
    f->manifest = m;
    FILE *probe = fopen(f->name, "rb");
    if (probe == NULL) {
        int rc = qg_err_set(e, QG_ERR_fixture_open_failed, "%s: file not found or not readable; regenerate with generators/regen.py", f->name);
        qgh_close(f);
        return rc;
    }
    fclose(probe);
    f->fid = H5Fopen(f->name, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f->fid < 0) {
        int rc = qg_err_set(e, QG_ERR_fixture_open_failed,
                            "%s: not a readable HDF5 file (truncated or corrupt); regenerate with generators/regen.py", f->name);
        qgh_close(f);
        return rc;
    }
    return finish_open(f, out, e);
}

static int open_image_unchecked(const void *buf, size_t len, const char *name, qgh_file **out, qg_err *e)
{
    quiet_hdf5();
    *out = NULL;
    qgh_file *f = calloc(1, sizeof *f);
    if (f == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    f->fid = -1;
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->relpath, sizeof f->relpath, "%s", name);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 65536, 0) >= 0 && len > 0 && H5Pset_file_image(fapl, (void *)buf, len) >= 0)
        f->fid = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f->fid < 0) {
        int rc = qg_err_set(e, QG_ERR_fixture_open_failed, "%s: not a readable HDF5 image", name);
        qgh_close(f);
        return rc;
    }
    return finish_open(f, out, e);
}

/* ---------------------------------------------------------------------------------------------- */
/* attributes */

static const char *objname(const char *obj) { return (obj == NULL || obj[0] == '\0') ? "/" : obj; }

/* Opens attribute `attr` of `obj`, requiring a scalar or one-element dataspace. */
static hid_t open_attr(qgh_file *f, const char *obj, const char *attr, qg_err *e)
{
    const char *o = objname(obj);
    if (H5Aexists_by_name(f->fid, o, attr, H5P_DEFAULT) <= 0) {
        qg_err_set(e, QG_ERR_fixture_object_missing, "%s: %s%s@%s: attribute missing", f->name, o[0] == '/' ? "" : "/", o, attr);
        return H5I_INVALID_HID;
    }
    hid_t a = H5Aopen_by_name(f->fid, o, attr, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        qg_err_set(e, QG_ERR_fixture_read_failed, "%s: %s%s@%s: cannot open the attribute", f->name, o[0] == '/' ? "" : "/", o, attr);
        return H5I_INVALID_HID;
    }
    hid_t sp = H5Aget_space(a);
    hssize_t npts = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (npts != 1) {
        H5Aclose(a);
        qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: %s%s@%s: attribute has %lld values, expected a scalar", f->name,
                   o[0] == '/' ? "" : "/", o, attr, (long long)npts);
        return H5I_INVALID_HID;
    }
    return a;
}

int qgh_has_attr(qgh_file *f, const char *obj, const char *attr)
{
    return H5Aexists_by_name(f->fid, objname(obj), attr, H5P_DEFAULT) > 0;
}

int qgh_attr_str(qgh_file *f, const char *obj, const char *attr, char *buf, size_t len, qg_err *e)
{
    const char *o = objname(obj), *sl = o[0] == '/' ? "" : "/";
    hid_t a = open_attr(f, obj, attr, e);
    if (a < 0) return e ? e->code : QG_ERR_fixture_object_missing;
    int rc = QG_ERR_ok;
    hid_t ft = H5Aget_type(a), mt = H5I_INVALID_HID;
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING) {
        rc = qg_err_set(e, QG_ERR_fixture_dtype_mismatch, "%s: %s%s@%s: attribute is not a string", f->name, sl, o, attr);
    } else if (H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft));
        if (H5Aread(a, mt, &s) < 0 || s == NULL) {
            rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: %s%s@%s: cannot read the string", f->name, sl, o, attr);
        } else {
            if (strlen(s) >= len)
                rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: %s%s@%s: string of %zu bytes, expected fewer than %zu",
                                f->name, sl, o, attr, strlen(s), len);
            else
                strcpy(buf, s);
            H5free_memory(s);
        }
    } else {
        size_t sz = H5Tget_size(ft);
        if (sz == 0 || sz >= len) {
            rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: %s%s@%s: fixed string of %zu bytes, expected fewer than %zu",
                            f->name, sl, o, attr, sz, len);
        } else {
            mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, sz + 1);
            H5Tset_strpad(mt, H5T_STR_NULLTERM);
            memset(buf, 0, len);
            if (H5Aread(a, mt, buf) < 0)
                rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: %s%s@%s: cannot read the string", f->name, sl, o, attr);
        }
    }
    if (mt >= 0) H5Tclose(mt);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* Reads a numeric scalar attribute of the given class into `out` with native type `mt`. */
static int attr_num(qgh_file *f, const char *obj, const char *attr, H5T_class_t want, hid_t mt, void *out,
                    const char *expect, qg_err *e)
{
    const char *o = objname(obj), *sl = o[0] == '/' ? "" : "/";
    hid_t a = open_attr(f, obj, attr, e);
    if (a < 0) return e ? e->code : QG_ERR_fixture_object_missing;
    int rc = QG_ERR_ok;
    hid_t ft = H5Aget_type(a);
    if (ft < 0 || H5Tget_class(ft) != want) {
        char got[64] = "unknown";
        if (ft >= 0) describe_type(ft, got, sizeof got);
        rc = qg_err_set(e, QG_ERR_fixture_dtype_mismatch, "%s: %s%s@%s: attribute is %s, expected %s", f->name, sl, o, attr, got, expect);
    } else if (H5Aread(a, mt, out) < 0) {
        rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: %s%s@%s: value does not fit %s", f->name, sl, o, attr, expect);
    }
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int qgh_attr_i64(qgh_file *f, const char *obj, const char *attr, int64_t *v, qg_err *e)
{
    return attr_num(f, obj, attr, H5T_INTEGER, H5T_NATIVE_INT64, v, "an integer", e);
}

int qgh_attr_u64(qgh_file *f, const char *obj, const char *attr, uint64_t *v, qg_err *e)
{
    return attr_num(f, obj, attr, H5T_INTEGER, H5T_NATIVE_UINT64, v, "an unsigned integer", e);
}

int qgh_attr_f64(qgh_file *f, const char *obj, const char *attr, double *v, qg_err *e)
{
    return attr_num(f, obj, attr, H5T_FLOAT, H5T_NATIVE_DOUBLE, v, "a float", e);
}

/* ---------------------------------------------------------------------------------------------- */
/* datasets */

/* Canonical content hash (fixtures.md): "<dtype>:<d0,d1,...>\n" then the little-endian bytes. */
static void content_hash(const qgh_array *a, char hex[65])
{
    char hdr[128];
    int L = snprintf(hdr, sizeof hdr, "%s:", qgh_dtype_name(a->dtype));
    for (int i = 0; i < a->rank; i++) L += snprintf(hdr + L, sizeof hdr - (size_t)L, i ? ",%zu" : "%zu", a->dims[i]);
    L += snprintf(hdr + L, sizeof hdr - (size_t)L, "\n");
    qg_sha256 s;
    unsigned char d[32];
    qg_sha256_init(&s);
    qg_sha256_update(&s, hdr, (size_t)L);
    qg_sha256_update(&s, a->data, a->count * qgh_dtype_size(a->dtype));
    qg_sha256_final(&s, d);
    qg_sha256_hex(d, hex);
}

/* Reads dataset `path` (e.g. "boundaries/x") whatever its numeric type; checks size cap and manifest. */
static int read_any(qgh_file *f, const char *path, qgh_dtype want, qgh_array *out, qg_err *e)
{
    int rc = QG_ERR_ok;
    memset(out, 0, sizeof *out);
    hid_t d = H5I_INVALID_HID, ft = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    if (H5Lexists(f->fid, path, H5P_DEFAULT) <= 0) {
        /* H5Lexists needs the parent group to exist; a missing case is reported by the caller. */
        return qg_err_set(e, QG_ERR_fixture_object_missing, "%s: /%s: dataset missing", f->name, path);
    }
    d = H5Dopen2(f->fid, path, H5P_DEFAULT);
    if (d < 0) return qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot open as a dataset", f->name, path);
    ft = H5Dget_type(d);
    sp = H5Dget_space(d);
    if (ft < 0 || sp < 0) {
        rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot read type or shape (corrupt file)", f->name, path);
        goto done;
    }
    qgh_dtype t = classify(ft);
    if (t == 0 || (want != 0 && t != want)) {
        char got[64];
        describe_type(ft, got, sizeof got);
        rc = qg_err_set(e, QG_ERR_fixture_dtype_mismatch, "%s: /%s: element type is %s, expected %s", f->name, path, got,
                        want != 0 ? qgh_dtype_name(want) : "a numeric type of the schema");
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank < 0 || rank > QGH_MAX_RANK) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: rank %d, expected at most %d", f->name, path, rank, QGH_MAX_RANK);
        goto done;
    }
    hsize_t dims[QGH_MAX_RANK] = {0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t count = 1, esize = qgh_dtype_size(t);
    for (int i = 0; i < rank; i++) {
        if (dims[i] != 0 && count > QGH_MAX_DATASET_BYTES / dims[i]) count = QGH_MAX_DATASET_BYTES + 1;
        else count *= (size_t)dims[i];
        out->dims[i] = (size_t)dims[i];
    }
    if (count > QGH_MAX_DATASET_BYTES / esize) {
        rc = qg_err_set(e, QG_ERR_fixture_too_large, "%s: /%s: larger than the loader's cap of %zu bytes", f->name, path,
                        QGH_MAX_DATASET_BYTES);
        goto done;
    }
    out->rank = rank;
    out->count = count;
    out->dtype = t;
    out->data = malloc(count > 0 ? count * esize : 1);
    if (out->data == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "%s: /%s: out of memory", f->name, path);
        goto done;
    }
    if (count > 0 && H5Dread(d, native_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data) < 0) {
        rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot read the data (truncated or corrupt file)", f->name, path);
        goto done;
    }
    if (f->manifest != NULL) {
        char obj[600], hex[65];
        snprintf(obj, sizeof obj, "/%s", path);
        const char *want_hex = manifest_lookup(f->manifest, f->relpath, obj);
        if (want_hex == NULL) {
            rc = qg_err_set(e, QG_ERR_fixture_manifest_missing,
                            "%s: %s: no entry in MANIFEST; regenerate with generators/regen.py", f->name, obj);
            goto done;
        }
        content_hash(out, hex);
        if (strcmp(hex, want_hex) != 0) {
            rc = qg_err_set(e, QG_ERR_fixture_manifest_mismatch,
                            "%s: %s: content (%s, %zu elements) hash %.12s... differs from MANIFEST %.12s...: the data "
                            "or its type changed since generation; run generators/regen.py --check to see what differs",
                            f->name, obj, qgh_dtype_name(out->dtype), out->count, hex, want_hex);
            goto done;
        }
    }
done:
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    if (d >= 0) H5Dclose(d);
    if (rc != QG_ERR_ok) qgh_array_free(out);
    return rc;
}

static int require_case(qgh_file *f, const char *case_name, qg_err *e)
{
    for (size_t i = 0; i < f->ncases; i++)
        if (strcmp(f->cases[i], case_name) == 0) return QG_ERR_ok;
    return qg_err_set(e, QG_ERR_fixture_object_missing, "%s: /%s: case group missing", f->name, case_name);
}

int qgh_read(qgh_file *f, const char *case_name, const char *name, qgh_dtype want, const char *want_logical,
             int want_rank, const size_t *want_dims, qgh_array *out, qg_err *e)
{
    char path[512];
    int rc = require_case(f, case_name, e);
    if (rc != QG_ERR_ok) return rc;
    snprintf(path, sizeof path, "%s/%s", case_name, name);
    if (H5Lexists(f->fid, path, H5P_DEFAULT) <= 0)
        return qg_err_set(e, QG_ERR_fixture_object_missing, "%s: /%s: dataset missing", f->name, path);
    if (want_logical != NULL) {
        char logical[32];
        rc = qgh_attr_str(f, path, "dtype", logical, sizeof logical, e);
        if (rc != QG_ERR_ok) return rc;
        if (strcmp(logical, want_logical) != 0)
            return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@dtype: is \"%s\", expected \"%s\"", f->name, path,
                              logical, want_logical);
    }
    rc = read_any(f, path, want, out, e);
    if (rc != QG_ERR_ok) return rc;
    if (out->rank != want_rank) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: rank %d, expected %d", f->name, path, out->rank, want_rank);
    } else if (want_dims != NULL) {
        for (int i = 0; i < want_rank; i++)
            if (want_dims[i] != 0 && out->dims[i] != want_dims[i]) {
                rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: dimension %d is %zu, expected %zu", f->name, path, i,
                                out->dims[i], want_dims[i]);
                break;
            }
    }
    if (rc != QG_ERR_ok) qgh_array_free(out);
    return rc;
}

int qgh_read_case_info(qgh_file *f, const char *case_name, qgh_case_info *ci, qg_err *e)
{
    memset(ci, 0, sizeof *ci);
    int rc = require_case(f, case_name, e);
    if (rc != QG_ERR_ok) return rc;
    snprintf(ci->name, sizeof ci->name, "%s", case_name);
    if ((rc = qgh_attr_str(f, case_name, "format", ci->format, sizeof ci->format, e)) ||
        (rc = qgh_attr_str(f, case_name, "path", ci->path, sizeof ci->path, e)) ||
        (rc = qgh_attr_str(f, case_name, "case_id", ci->case_id, sizeof ci->case_id, e)) ||
        (rc = qgh_attr_str(f, case_name, "description", ci->description, sizeof ci->description, e)) ||
        (rc = qgh_attr_str(f, case_name, "distribution", ci->distribution, sizeof ci->distribution, e)) ||
        (rc = qgh_attr_str(f, case_name, "expect", ci->expect, sizeof ci->expect, e)) ||
        (rc = qgh_attr_i64(f, case_name, "format_version", &ci->format_version, e)) ||
        (rc = qgh_attr_u64(f, case_name, "seed", &ci->seed, e)))
        return rc;
    if (strcmp(ci->expect, "invalid") == 0) {
        if ((rc = qgh_attr_str(f, case_name, "error", ci->error, sizeof ci->error, e))) return rc;
        if (qg_error_from_name(ci->error) < 0)
            return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@error: \"%s\" is not an error name of errors.h", f->name,
                              case_name, ci->error);
    } else if (strcmp(ci->expect, "valid") != 0) {
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@expect: is \"%s\", expected \"valid\" or \"invalid\"", f->name,
                          case_name, ci->expect);
    }
    return QG_ERR_ok;
}

int qgh_lint(qgh_file *f, qg_err *e)
{
    char buf[256];
    int64_t schema;
    int rc;
    if ((rc = qgh_attr_str(f, "", "generator", buf, sizeof buf, e)) || (rc = qgh_attr_str(f, "", "format", buf, sizeof buf, e)) ||
        (rc = qgh_attr_i64(f, "", "schema_version", &schema, e)))
        return rc;
    if (schema != 1)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /@schema_version: is %lld, this loader reads version 1", f->name,
                          (long long)schema);
    if (f->ncases == 0) return qg_err_set(e, QG_ERR_fixture_object_missing, "%s: /: the file holds no case groups", f->name);
    char(*ids)[sizeof(((qgh_case_info *)0)->case_id)] = calloc(f->ncases, sizeof *ids);
    if (ids == NULL) return qg_err_set(e, QG_ERR_alloc_failed, "%s: out of memory", f->name);
    for (size_t i = 0; i < f->ncases; i++) {
        qgh_case_info ci;
        if ((rc = qgh_read_case_info(f, f->cases[i], &ci, e))) break;
        memcpy(ids[i], ci.case_id, sizeof ids[i]);
        for (size_t j = 0; j < i && rc == QG_ERR_ok; j++)
            if (strcmp(ids[i], ids[j]) == 0)
                rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@case_id: \"%s\" repeats the case_id of /%s", f->name,
                                f->cases[i], ci.case_id, f->cases[j]);
        if (rc) break;
        /* Every dataset of the case must be readable and match the manifest. */
        hid_t g = H5Gopen2(f->fid, f->cases[i], H5P_DEFAULT);
        H5G_info_t gi;
        if (g < 0 || H5Gget_info(g, &gi) < 0) {
            rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot read the case group", f->name, f->cases[i]);
            gi.nlinks = 0;
        }
        for (hsize_t k = 0; k < gi.nlinks && k < 1000 && rc == QG_ERR_ok; k++) {
            char nm[256], path[600];
            ssize_t L = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, k, nm, sizeof nm, H5P_DEFAULT);
            if (L < 0 || (size_t)L >= sizeof nm) {
                rc = qg_err_set(e, QG_ERR_fixture_read_failed, "%s: /%s: cannot read a link name", f->name, f->cases[i]);
                break;
            }
            snprintf(path, sizeof path, "%s/%s", f->cases[i], nm);
            qgh_array a;
            rc = read_any(f, path, 0, &a, e);
            qgh_array_free(&a);
        }
        if (g >= 0) H5Gclose(g);
        if (rc) break;
    }
    free(ids);
    return rc;
}
