# INT4 (reference/spec/intq.md): reference unit tests on hand-checked cases.
qg_test_exe(test_int4_ref unit/test_int4_ref.c)
# Bitwise comparisons against naive float loops: no contraction in the test either.
target_compile_options(test_int4_ref PRIVATE -ffp-contract=off -fno-fast-math)
qg_add_test(NAME unit.int4.ref LABELS unit COMMAND test_int4_ref)

# One backend's decode, GEMV and packed GEMM against the reference (tests/unit/test_int4_kernels.c).
qg_test_exe(test_int4_kernels unit/test_int4_kernels.c)
target_compile_options(test_int4_kernels PRIVATE -ffp-contract=off -fno-fast-math)
# golden.int4.<backend> (the audit over golden/int4), simd.int4.<backend> and full.int4.<backend>.
qg_add_format_tests(GROUP int4 GOLDEN int4 KERNELS test_int4_kernels FULL)

# The CLI: qgold int4 import|dequant|gemv on raw files (tests/cli/test_int4.sh).
qg_add_test(NAME cli.int4 LABELS unit COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_int4.sh $<TARGET_FILE:qgold>
            ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli-int4 ${CMAKE_CROSSCOMPILING_EMULATOR})
