/* qgold verify --plugin: a plugin's kernels judged like qgold's own (tests/harness/verify.h). */
#include "atomic_write.h"
#include "cli.h"
#include "cmds.h"
#include "plugin_load.h"
#include "verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *k_usage_verify =
    "usage: qgold verify --plugin PATH.so [--format F] [--path P] [--backend cpu|cuda] [--full] [--timeout S]\n"
    "                    [--golden DIR] [--no-manifest] [--json FILE] [--junit FILE]\n"
    "\n"
    "Loads a kernel plugin (the ABI of qgold/plugin.h) and judges each of its kernels exactly as qgold audit\n"
    "judges qgold's own: every golden fixture case of the kernel's format and path at the path's tier,\n"
    "poisoned outputs and canaries, determinism (twice in one process and once more in another, compared\n"
    "by hash), batch invariance, the invalid-input corpus (an error status, never a crash), and for the\n"
    "K-quant kinds random bytes as blocks against the reference. Every case runs in its own process with a\n"
    "time limit: a crash or a hang fails that case, names it and the signal, and the next case runs.\n"
    "One table row per kernel and fixture file (or generated check), as in qgold audit.\n"
    "  --plugin PATH   the shared library (a name without '/' is taken from the current directory)\n"
    "  --format F, --path P, --backend cpu|cuda   only the plugin's kernels of that format, path, backend\n"
    "  --full          also large shapes made from the pinned stream, against the reference\n"
    "  --timeout S     seconds per case, 1..3600 (default 30; large shapes get 20 times as long)\n"
    "  --golden DIR, --no-manifest   as for qgold audit\n"
    "  --json FILE     also write the rows as JSON to FILE\n"
    "  --junit FILE    also write a JUnit XML report to FILE (one testcase per row)\n"
    "Exit status: 0 every row passes (skips allowed), 1 a failure, a plugin that cannot be loaded or is\n"
    "refused (its error name is printed), nothing verified; 2 wrong arguments.\n";

typedef struct {
    sink_ctx table;
    FILE *junit;
    const char *plugin;
    const char *last_kernel;
} verify_sink;

static void xml_str(FILE *fp, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') fputs("&lt;", fp);
        else if (c == '>') fputs("&gt;", fp);
        else if (c == '&') fputs("&amp;", fp);
        else if (c == '"') fputs("&quot;", fp);
        else if (c < 0x20 && c != '\n' && c != '\t') fprintf(fp, "&#x%x;", c);
        else fputc(c, fp);
    }
}

static void verify_row(const qg_audit_row *r, void *vctx)
{
    verify_sink *v = vctx;
    if (v->last_kernel == NULL || strcmp(v->last_kernel, r->kernel) != 0) {
        printf("kernel %s (plugin %s):\n", r->kernel, v->plugin);
        v->last_kernel = r->kernel;
    }
    qgc_print_row(r, &v->table);
    if (v->junit != NULL) {
        fprintf(v->junit, "  <testcase classname=\"");
        xml_str(v->junit, v->plugin);
        fputc('.', v->junit);
        xml_str(v->junit, r->kernel);
        fprintf(v->junit, "\" name=\"");
        xml_str(v->junit, r->file);
        fprintf(v->junit, "\">");
        if (r->verdict == QG_AUDIT_FAIL) {
            fprintf(v->junit, "<failure message=\"");
            xml_str(v->junit, r->detail);
            fprintf(v->junit, "\"/>");
        } else if (r->verdict == QG_AUDIT_SKIP) {
            fprintf(v->junit, "<skipped message=\"");
            xml_str(v->junit, r->detail);
            fprintf(v->junit, "\"/>");
        }
        fprintf(v->junit, "</testcase>\n");
    }
}

static int open_out(qg_atomic_file *f, const char *path)
{
    int e = qg_atomic_open(f, path);
    if (e != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), path, strerror(e));
    return e;
}

int qgc_cmd_verify(int argc, char **argv)
{
    qgv_opts o = {NULL, NULL, NULL, 0, 0, 0, 30.0};
    const char *plugin = NULL, *json_path = NULL, *junit_path = NULL;
    static const char *const with_value[] = {"--plugin", "--format", "--path", "--backend", "--timeout", "--golden", "--json", "--junit", NULL};
    char golden[4096];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", k_usage_verify);
            return 0;
        }
        if (qgc_takes_value(a, with_value) && i + 1 >= argc) return qgc_usage_error(k_usage_verify, "option %s needs a value", a);
        if (strcmp(a, "--plugin") == 0) {
            plugin = argv[++i];
        } else if (strcmp(a, "--format") == 0) {
            o.format = argv[++i];
            if (!qgc_format_known(o.format)) return qgc_usage_error(k_usage_verify, "unknown format '%s' (see qgold list)", o.format);
        } else if (strcmp(a, "--path") == 0) {
            o.path = argv[++i];
        } else if (strcmp(a, "--backend") == 0) {
            const char *b = argv[++i];
            if (strcmp(b, "cpu") == 0) o.backend = QGOLD_PLUGIN_CPU;
            else if (strcmp(b, "cuda") == 0) o.backend = QGOLD_PLUGIN_CUDA;
            else return qgc_usage_error(k_usage_verify, "unknown plugin backend '%s' (cpu, cuda)", b);
        } else if (strcmp(a, "--timeout") == 0) {
            uint64_t t;
            if (qgc_parse_uint(argv[++i], 1, 3600, &t) != 0) return qgc_bad_number(k_usage_verify, a, argv[i], 1, 3600);
            o.timeout_s = (double)t;
        } else if (strcmp(a, "--golden") == 0) {
            o.golden_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json_path = argv[++i];
        } else if (strcmp(a, "--junit") == 0) {
            junit_path = argv[++i];
        } else if (strcmp(a, "--full") == 0) {
            o.full = 1;
        } else if (strcmp(a, "--no-manifest") == 0) {
            o.no_manifest = 1;
        } else {
            return qgc_usage_error(k_usage_verify, "unexpected argument '%s'", a);
        }
    }
    if (plugin == NULL) return qgc_usage_error(k_usage_verify, "--plugin PATH.so is required");
    if (o.golden_dir == NULL) {
        if (qgc_find_golden(golden, sizeof golden) != 0) return 1;
        o.golden_dir = golden;
    }
    qg_err e;
    qg_err_clear(&e);
    qgp_plugin *p = NULL;
    int rc = qgv_load_isolated(plugin, o.timeout_s, &p, &e);
    if (rc != QG_ERR_ok) {
        fprintf(stderr, "qgold: %s: %s\n", qg_error_name(rc), e.msg);
        return 1;
    }
    verify_sink v = {{NULL, 1}, NULL, p->name, NULL};
    qg_atomic_file jf, xf;
    if (json_path != NULL) {
        if (open_out(&jf, json_path) != 0) {
            qgp_unload(p);
            return 1;
        }
        v.table.json = jf.fp;
    }
    if (junit_path != NULL) {
        if (open_out(&xf, junit_path) != 0) {
            if (json_path) qg_atomic_abort(&jf);
            qgp_unload(p);
            return 1;
        }
        v.junit = xf.fp;
    }
    printf("qgold verify: plugin %s%s%s (%s, ABI %u), %zu kernel%s; golden %s; manifest: %s\n", p->name, p->version[0] ? " " : "", p->version,
           plugin, p->abi, p->n, p->n == 1 ? "" : "s", o.golden_dir, o.no_manifest ? "not checked (--no-manifest)" : "checked");
    qgc_table_header();
    if (v.table.json != NULL) {
        fprintf(v.table.json, "{\n  \"plugin\": ");
        qgc_json_str(v.table.json, p->name);
        fprintf(v.table.json, ",\n  \"plugin_version\": ");
        qgc_json_str(v.table.json, p->version);
        fprintf(v.table.json, ",\n  \"plugin_file\": ");
        qgc_json_str(v.table.json, plugin);
        fprintf(v.table.json, ",\n  \"abi\": %u,\n  \"golden\": ", p->abi);
        qgc_json_str(v.table.json, o.golden_dir);
        fprintf(v.table.json, ",\n  \"manifest\": \"%s\",\n  \"full\": %s,\n  \"rows\": [", o.no_manifest ? "not checked" : "checked",
                o.full ? "true" : "false");
    }
    /* The JUnit header needs the counts: the cases go to a buffer first. */
    char *cases = NULL;
    size_t cases_len = 0;
    FILE *junit_file = v.junit;
    if (junit_file != NULL) v.junit = open_memstream(&cases, &cases_len);
    qg_audit_summary s;
    rc = qgv_verify(&o, p, verify_row, &v, &s);
    printf("\n%zu passed, %zu failed, %zu skipped\n", s.pass, s.fail, s.skip);
    int out_rc = 0;
    if (v.table.json != NULL) {
        fprintf(v.table.json, "\n  ],\n  \"passed\": %zu, \"failed\": %zu, \"skipped\": %zu\n}\n", s.pass, s.fail, s.skip);
        int werr = qg_atomic_commit(&jf);
        if (werr != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), json_path, strerror(werr)), out_rc = 1;
    }
    if (junit_file != NULL) {
        if (v.junit != NULL) fclose(v.junit);
        fprintf(junit_file, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"qgold verify ");
        xml_str(junit_file, p->name);
        fprintf(junit_file, "\" tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\">\n", s.pass + s.fail + s.skip, s.fail, s.skip);
        if (cases != NULL) fwrite(cases, 1, cases_len, junit_file);
        fprintf(junit_file, "</testsuite>\n");
        free(cases);
        int werr = qg_atomic_commit(&xf);
        if (werr != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), junit_path, strerror(werr)), out_rc = 1;
    }
    qgp_unload(p);
    if (s.pass == 0 && s.fail == 0) {
        fprintf(stderr, "qgold: nothing was verified (no kernel of the plugin matches the selection, or all were skipped)\n");
        return 1;
    }
    return rc || out_rc ? 1 : 0;
}
