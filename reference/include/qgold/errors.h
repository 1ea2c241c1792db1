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
 *   500..599    GGUF model files (container and tensors)
 *   600..699    integer formats (INT8, INT4; intq spec)
 *   700..799    plugins (loading, ABI, isolation)
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
    X(kq_batch_out_of_range, 203, "K-quant GEMV batch is outside 1..16") \
    X(kq_input_out_of_domain, 204, "K-quant quantizer input outside its valid domain (non-finite, or a magnitude or spread the float32 fit cannot represent): ggml's bytes, but meaningless") \
    X(spqr_rows_not_multiple, 300, "SpQR row count m is zero or not a multiple of 16 (a partial tile row cannot carry its second-order word)") \
    X(spqr_cols_out_of_range, 301, "SpQR column count n is 0 or larger than 65536") \
    X(spqr_size_mismatch, 302, "an SpQR buffer length (dense words, row_offsets, perm) does not match m and n") \
    X(spqr_reserved_bits, 303, "an SpQR dense word has bits 62-63 set") \
    X(spqr_fragment_mismatch, 304, "the two copies of a second-order byte (tile rows 2b and 2b+1) differ") \
    X(spqr_offsets_not_zero, 305, "SpQR row_offsets[0] is not 0") \
    X(spqr_offsets_decreasing, 306, "SpQR row_offsets decrease") \
    X(spqr_offsets_not_nnz, 307, "the last SpQR row offset is not the number of outlier words") \
    X(spqr_outlier_col_out_of_range, 308, "an SpQR outlier column is >= n") \
    X(spqr_ptcsr_segment_not_multiple, 309, "a PTCSR tile-row segment length is not a multiple of 16") \
    X(spqr_ptcsr_segment_mismatch, 310, "a PTCSR segment is not 16 x its longest row (an all-padding last level, or an outlier after a padding slot)") \
    X(spqr_perm_invalid, 311, "the SpQR column permutation is not a permutation of 0..n-1") \
    X(spqr_padding_codes_nonzero, 312, "a padded column of the last SpQR column tile has a nonzero weight code") \
    X(spqr_batch_out_of_range, 313, "SpQR GEMV batch is outside 1..16") \
    X(rans_bad_magic, 400, "not an rANS container: the first bytes are not RANS (SNAR means a byte-swapped writer)") \
    X(rans_bad_header, 401, "an rANS header field has a value container version 2 does not allow (an older version, nonzero reserved bytes, file_size not the length)") \
    X(rans_bad_table, 402, "the rANS frequency table does not sum to 4096, is all zero, or has an entry above 4096") \
    X(rans_bad_tile_meta, 403, "rANS tile metadata is inconsistent: offset or size outside the file, overlap, misalignment, unknown predictor, nonzero reserved bytes or bad warp_end") \
    X(rans_bad_state, 404, "an rANS initial lane state is outside [2^15, 2^31)") \
    X(rans_truncated, 405, "an rANS lane needed a word past the end of its warp stream") \
    X(rans_trailing_data, 406, "an rANS warp stream has words left after its tile was decoded") \
    X(rans_corrupt, 407, "an rANS tile decoded to a final state other than 2^15, or to nonzero bytes outside the matrix") \
    X(rans_checksum, 408, "an rANS tile checksum (Adler-32) does not match its decoded bytes") \
    X(rans_symbol_not_in_table, 409, "the rANS encoder met a symbol whose frequency is 0") \
    X(rans_batch_out_of_range, 410, "rANS GEMV batch is outside 1..16") \
    X(rans_size_mismatch, 411, "an rANS caller buffer (weights, scales, output) does not match the container or M x K") \
    X(rans_predictor_invalid, 412, "an rANS predictor mode is not 0..3 or auto") \
    X(rans_container_checksum, 413, "the rANS container checksum (CRC-32 of the whole file, header bytes 56-63) does not match: the file is damaged") \
    X(rans_container_truncated, 414, "the rANS file is truncated: it is shorter than its header's file_size, than the 64-byte header or than 576 bytes") \
    X(int_nonfinite_input, 600, "a value to quantize (or a scale) is NaN or infinite") \
    X(int_k_too_large, 601, "the reduction length K exceeds what an exact int32 accumulation allows (131071 for int8 x int8)") \
    X(int_scale_invalid, 602, "a quantization scale is negative, NaN, infinite, or missing (NULL) where the layout needs one") \
    X(int_group_invalid, 603, "the group size is not allowed for the layout or does not divide the row length") \
    X(int4_bad_padding, 610, "an odd-K packed int4 row has a nonzero padding nibble") \
    X(int4_g_idx_invalid, 611, "g_idx holds a group index out of range, or not a valid group assignment") \
    X(int4_zero_out_of_range, 612, "an int4 zero point is outside 0..15") \
    X(gguf_bad_magic, 500, "not a GGUF file: the first 4 bytes are not GGUF") \
    X(gguf_bad_version, 501, "unsupported GGUF version (qgold reads versions 2 and 3, little-endian)") \
    X(gguf_truncated, 502, "a GGUF header field, string or array runs past the end of the file") \
    X(gguf_string_too_long, 503, "a GGUF string is longer than 1 MiB") \
    X(gguf_array_too_long, 504, "a GGUF array has more than 2^32 elements") \
    X(gguf_count_too_large, 505, "the GGUF tensor or key-value count exceeds 2^20") \
    X(gguf_value_type_unknown, 506, "a GGUF key-value or array element type is not 0..12") \
    X(gguf_nesting_too_deep, 507, "GGUF arrays nest deeper than 8 levels") \
    X(gguf_duplicate_tensor, 508, "two GGUF tensors have the same name") \
    X(gguf_n_dims_invalid, 509, "a GGUF tensor has n_dims outside 1..4") \
    X(gguf_dim_zero, 510, "a GGUF tensor dimension is 0 (a tensor needs at least one row of one element)") \
    X(gguf_shape_overflow, 511, "a GGUF tensor element count or byte size overflows 64 bits") \
    X(gguf_ne0_not_multiple, 512, "a GGUF tensor row length (ne0) is not a multiple of its type block size") \
    X(gguf_offset_misaligned, 513, "a GGUF tensor offset is not a multiple of the alignment") \
    X(gguf_tensor_out_of_bounds, 514, "a GGUF tensor data range runs past the end of the file") \
    X(gguf_tensor_overlap, 515, "two GGUF tensor data ranges overlap") \
    X(gguf_alignment_invalid, 516, "general.alignment is not a u32 positive multiple of 8") \
    X(gguf_block_nonfinite, 517, "a K-quant block of a GGUF tensor has a non-finite d or dmin") \
    X(gguf_tensor_name_too_long, 518, "a GGUF tensor name is longer than 64 bytes") \
    X(gguf_type_unknown, 519, "a GGUF tensor type id is not a ggml type qgold knows (its size cannot be computed)") \
    X(plugin_open_failed, 700, "the plugin library cannot be loaded (dlopen failed; the message has the loader's reason)") \
    X(plugin_entry_missing, 701, "the plugin library does not export qgold_plugin_entry") \
    X(plugin_abi_newer, 702, "the plugin was built against a newer plugin ABI than this qgold supports") \
    X(plugin_entry_failed, 703, "qgold_plugin_entry refused the load or returned a malformed plugin description") \
    X(plugin_kernel_invalid, 704, "a plugin kernel descriptor is invalid (unknown kind, backend, format or path, or no function)") \
    X(plugin_numerics_invalid, 705, "a plugin kernel's numerics declaration is out of range or contradicts its path's tier") \
    X(plugin_case_crashed, 706, "a plugin kernel crashed on a case (killed by a signal, or exited without a report)") \
    X(plugin_case_timeout, 707, "a plugin kernel did not finish a case within the time limit") \
    X(plugin_nondeterministic_process, 708, "a plugin kernel gave different output bits in two separate processes") \
    X(plugin_abi_invalid, 709, "the plugin states ABI version 0 or a struct size smaller than version 1's")

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
