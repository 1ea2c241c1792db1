/* unit.loader: the fixture loader on the shipped files, then on copies broken in each way
 * fixtures.md names (wrong dtype, missing dataset, missing attribute, truncated file, changed value):
 * each must give its named error with a message naming the file and the object, and the audit over
 * such a copy must fail. */
#include "audit.h"
#include "fixture.h"
#include "qg_test.h"

#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>

static const char *k_file = "fp16/f16_to_f32.h5";

static int copy_file(const char *from, const char *to, long limit)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    long done = 0;
    if (!a || !b) {
        if (a) fclose(a);
        if (b) fclose(b);
        return -1;
    }
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) {
        if (limit >= 0 && done + (long)n > limit) n = (size_t)(limit - done);
        fwrite(buf, 1, n, b);
        done += (long)n;
        if (limit >= 0 && done >= limit) break;
    }
    fclose(a);
    fclose(b);
    return 0;
}

static void mkdir_p(const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0777);
            *s = '/';
        }
    mkdir(p, 0777);
}

/* A copy of MANIFEST and golden/fp16 under tmp/name; `truncate` halves the target file. */
static void make_copy(const char *golden, const char *tmp, const char *name, int truncate, char *out, size_t len)
{
    char src[1024], dst[1024], files[32][256];
    snprintf(out, len, "%s/%s", tmp, name);
    mkdir_p(tmp);
    mkdir(out, 0777);
    snprintf(dst, sizeof dst, "%s/fp16", out);
    mkdir(dst, 0777);
    snprintf(src, sizeof src, "%s/MANIFEST", golden);
    snprintf(dst, sizeof dst, "%s/MANIFEST", out);
    copy_file(src, dst, -1);
    size_t n = qg_list_fixture_files(golden, "fp16", files, 32);
    for (size_t i = 0; i < n; i++) {
        snprintf(src, sizeof src, "%s/%s", golden, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", out, files[i]);
        long limit = -1;
        if (truncate && strcmp(files[i], k_file) == 0) {
            struct stat st;
            stat(src, &st);
            limit = (long)st.st_size / 2;
        }
        copy_file(src, dst, limit);
    }
}

/* Applies an HDF5 edit to <dir>/<k_file>. */
static hid_t open_rw(const char *dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, k_file);
    return H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
}

/* The audit over the broken copy must report a failure. */
static int audit_fails(const char *dir)
{
    qg_audit_opts o = {dir, "fp16", QG_BACKEND_REF, 0};
    qg_audit_summary s;
    int rc = qg_audit(&o, NULL, NULL, &s);
    return rc != 0 && s.fail > 0;
}

/* Reads the case with the types the fp16 runner expects, then lints the whole file; returns the error. */
static int read_case(const char *dir, qg_err *e)
{
    qgh_manifest *m = NULL;
    qgh_file *f = NULL;
    qgh_array x, y;
    qg_err_clear(e);
    int rc = qgh_manifest_load(dir, &m, e);
    if (!rc) rc = qgh_open(dir, k_file, m, &f, e);
    if (!rc) {
        rc = qgh_read(f, "all_f16", "x", QGH_U16, "float16", 1, NULL, &x, e);
        if (!rc) qgh_array_free(&x);
    }
    if (!rc) {
        rc = qgh_read(f, "all_f16", "expected", QGH_U32, "float32", 1, NULL, &y, e);
        if (!rc) qgh_array_free(&y);
    }
    if (!rc) rc = qgh_lint(f, e);
    qgh_close(f);
    qgh_manifest_free(m);
    return rc;
}

static void expect_error(const char *what, const char *dir, int want, const char *object)
{
    qg_err e;
    int rc = read_case(dir, &e);
    QG_CHECK(rc == want, "%s: got %s, expected %s (%s)", what, qg_error_name(rc), qg_error_name(want), e.msg);
    QG_CHECK(strstr(e.msg, "f16_to_f32.h5") != NULL, "%s: message does not name the file: %s", what, e.msg);
    if (object) QG_CHECK(strstr(e.msg, object) != NULL, "%s: message does not name %s: %s", what, object, e.msg);
    QG_CHECK(audit_fails(dir), "%s: the audit over the broken copy passed", what);
    printf("%s -> %s: %s\n", what, qg_error_name(rc), e.msg);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_loader GOLDEN_DIR TMP_DIR\n");
        return 2;
    }
    const char *golden = argv[1], *tmp = argv[2];
    qg_err e;
    char dir[1024];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    /* The shipped fixtures load and lint. */
    QG_CHECK(read_case(golden, &e) == QG_ERR_ok, "shipped fixture: %s", e.msg);
    qgh_manifest *m = NULL;
    QG_CHECK(qgh_manifest_load(golden, &m, &e) == QG_ERR_ok && qgh_manifest_count(m) > 0, "MANIFEST loads with entries");
    qgh_manifest_free(m);

    /* A missing file. */
    qgh_file *f = NULL;
    QG_CHECK(qgh_open(golden, "fp16/no_such_file.h5", NULL, &f, &e) == QG_ERR_fixture_open_failed && strstr(e.msg, "no_such_file.h5"),
             "missing file: %s", e.msg);

    /* Wrong dtype: x rewritten as float32 values. */
    make_copy(golden, tmp, "wrong_dtype", 0, dir, sizeof dir);
    hid_t fid = open_rw(dir);
    QG_CHECK(fid >= 0, "open copy for writing");
    H5Ldelete(fid, "all_f16/x", H5P_DEFAULT);
    hsize_t dims[1] = {65536};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(fid, "all_f16/x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    static float zeros[65536];
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros);
    hid_t as = H5Screate(H5S_SCALAR), st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    const char *dt = "float16";
    hid_t at = H5Acreate2(d, "dtype", st, as, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(at, st, &dt);
    H5Aclose(at);
    H5Tclose(st);
    H5Sclose(as);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(fid);
    expect_error("wrong dtype", dir, QG_ERR_fixture_dtype_mismatch, "/all_f16/x");

    /* Missing dataset. */
    make_copy(golden, tmp, "missing_dataset", 0, dir, sizeof dir);
    fid = open_rw(dir);
    H5Ldelete(fid, "all_f16/expected", H5P_DEFAULT);
    H5Fclose(fid);
    expect_error("missing dataset", dir, QG_ERR_fixture_object_missing, "/all_f16/expected");

    /* Missing attribute. */
    make_copy(golden, tmp, "missing_attribute", 0, dir, sizeof dir);
    fid = open_rw(dir);
    H5Adelete_by_name(fid, "all_f16", "expect", H5P_DEFAULT);
    H5Fclose(fid);
    expect_error("missing attribute", dir, QG_ERR_fixture_object_missing, "/all_f16@expect");

    /* Changed value: one element of expected, caught by the manifest. */
    make_copy(golden, tmp, "changed_value", 0, dir, sizeof dir);
    fid = open_rw(dir);
    d = H5Dopen2(fid, "all_f16/expected", H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t start[1] = {15360}, count[1] = {1}; /* the element for fp16 1.0 */
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(1, count, NULL);
    uint32_t v = 0x3F800001u;
    H5Dwrite(d, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, &v);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(fid);
    expect_error("changed value", dir, QG_ERR_fixture_manifest_mismatch, "/all_f16/expected");

    /* Truncated file. */
    make_copy(golden, tmp, "truncated", 1, dir, sizeof dir);
    {
        int rc = read_case(dir, &e);
        QG_CHECK(rc == QG_ERR_fixture_open_failed || rc == QG_ERR_fixture_read_failed, "truncated: got %s (%s)", qg_error_name(rc), e.msg);
        QG_CHECK(strstr(e.msg, "f16_to_f32.h5") != NULL, "truncated: message names the file: %s", e.msg);
        QG_CHECK(audit_fails(dir), "truncated: the audit passed");
        printf("truncated -> %s: %s\n", qg_error_name(rc), e.msg);
    }

    /* No MANIFEST: the loader and the audit fail naming it, unless the audit is told not to check. */
    make_copy(golden, tmp, "no_manifest", 0, dir, sizeof dir);
    {
        char p[1100];
        snprintf(p, sizeof p, "%s/MANIFEST", dir);
        remove(p);
        int rc = read_case(dir, &e);
        QG_CHECK(rc == QG_ERR_fixture_manifest_missing && strstr(e.msg, "MANIFEST: missing") != NULL, "no manifest: got %s (%s)",
                 qg_error_name(rc), e.msg);
        QG_CHECK(audit_fails(dir), "no manifest: the audit passed");
        qg_audit_opts o = {dir, "fp16", QG_BACKEND_REF, 1};
        qg_audit_summary s;
        QG_CHECK(qg_audit_check_golden(&o, &e) == QG_ERR_ok && qg_audit(&o, NULL, NULL, &s) == 0 && s.pass > 0 && s.fail == 0,
                 "no manifest, no_manifest set: the audit did not pass");
        printf("no manifest -> %s: %s\n", qg_error_name(rc), e.msg);
    }
    /* No directory at all. */
    {
        snprintf(dir, sizeof dir, "%s/no_such_dir", tmp);
        qg_audit_opts o = {dir, "fp16", QG_BACKEND_REF, 0};
        qg_audit_summary s;
        int rc = qg_audit_check_golden(&o, &e);
        QG_CHECK(rc == QG_ERR_io_failed && strstr(e.msg, "cannot open golden directory") && strstr(e.msg, "No such file or directory"),
                 "missing dir: got %s (%s)", qg_error_name(rc), e.msg);
        QG_CHECK(qg_audit(&o, NULL, NULL, &s) != 0 && s.fail == 1 && s.pass == 0, "missing dir: the audit did not fail once");
    }
    return qg_test_end("unit.loader");
}
