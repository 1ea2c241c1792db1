/* qgold error codes.
 *
 * Errors are values: every fallible function returns a qg_status, 0 on success. The numbers are stable
 * and are never reused or renumbered, because fixtures store error *names* and users grep logs for the
 * numbers. Ranges:
 *     0..99     general (arguments, memory, backends)
 *   100..199    fixtures and the harness (HDF5 loader, manifest)
 *   200..299    GGUF K-quants
 *   300..399    SpQR
 *   400..499    rANS tiles
 * A new code takes the next free number of its range; a removed code leaves a hole.
 */
#ifndef QGOLD_ERRORS_H
#define QGOLD_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message) */
#define QG_ERROR_LIST(X)                                                                          \
    X(ok, 0, "no error")                                                                          \
    X(generic, 1, "unspecified error")                                                            \
    X(argument_invalid, 2, "an argument is invalid (null pointer or value out of range)")         \
    X(shape_invalid, 3, "a dimension is zero, negative, too large, or not a multiple the format requires") \
    X(size_mismatch, 4, "a buffer size does not match the shape")                                 \
    X(alloc_failed, 5, "memory allocation failed")                                                \
    X(unsupported, 6, "the operation is not supported by this format, path or backend")           \
    X(backend_unavailable, 7, "the backend is not available on this machine")                    \
    X(batch_invalid, 8, "batch size is outside the supported range")                              \
    X(io_failed, 9, "reading or writing a file failed")                                           \
    X(device_failed, 10, "a GPU call failed (the message names the call)")                       \
    X(fixture_open_failed, 100, "the fixture file cannot be opened as HDF5")                     \
    X(fixture_object_missing, 101, "a group, dataset or attribute the schema requires is missing") \
    X(fixture_dtype_mismatch, 102, "a dataset or attribute has the wrong element type")          \
    X(fixture_shape_mismatch, 103, "a dataset has the wrong rank or length")                     \
    X(fixture_read_failed, 104, "HDF5 could not read an object (truncated or corrupt file)")     \
    X(fixture_manifest_mismatch, 105, "a dataset's content hash differs from golden/MANIFEST")   \
    X(fixture_manifest_missing, 106, "golden/MANIFEST has no entry for a dataset")               \
    X(fixture_attr_invalid, 107, "an attribute has a value the schema does not allow")           \
    X(fixture_too_large, 108, "a dataset is larger than the loader accepts")                     \
    X(fixture_corrupt, 109, "the HDF5 library crashed reading the file (isolated in a child process)") \
    X(mismatch, 120, "a kernel result differs from the expected value")                          \
    X(bound_exceeded, 121, "a kernel result is outside its declared error bound")                \
    X(canary_clobbered, 122, "a kernel wrote outside its output buffer")                         \
    X(output_unwritten, 123, "a kernel left part of its output unwritten")                       \
    X(nondeterministic, 124, "two identical calls gave different bits")                          \
    X(kq_type_unknown, 200, "not a K-quant type (q4_k, q5_k, q6_k, q8_k)")                       \
    X(kq_cols_not_multiple, 201, "K-quant row length (cols) is zero or not a multiple of 256; 4544- and 896-wide rows are not K-quant rows") \
    X(kq_size_mismatch, 202, "K-quant buffer length is not rows * cols/256 * block bytes")        \
    X(kq_batch_out_of_range, 203, "K-quant GEMV batch is outside 1..16")

typedef enum {
#define QG_X_ENUM(name, num, msg) QG_ERR_##name = num,
    QG_ERROR_LIST(QG_X_ENUM)
#undef QG_X_ENUM
    QG_ERR_max_code = 999 /* sentinel: never returned */
} qg_status;

/* "fixture_dtype_mismatch" for a code; "unknown_error" for a number not in the list. */
const char *qg_error_name(int code);
/* The one-line message of a code. */
const char *qg_error_message(int code);
/* Code for a name, or -1 when the name is not in the list (fixtures store names). */
int qg_error_from_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
