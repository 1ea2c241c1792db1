# INT8 (reference/spec/intq.md): the reference on hand-checked cases, and every optimized backend against
# the reference on random shapes from the pinned stream.
qg_test_exe(test_int8_ref unit/test_int8_ref.c)
# Bitwise comparisons against double formulations: no contraction in the test either.
target_compile_options(test_int8_ref PRIVATE -ffp-contract=off -fno-fast-math)
qg_add_test(NAME unit.int8.ref LABELS unit COMMAND test_int8_ref)
# Every optimized backend against the reference (simd.int8.<be>, full.int8.<be> with "full", gpu.int8.cuda).
qg_test_exe(test_int8_kernels unit/test_int8_kernels.c)
# golden.int8.<be>: the audit of golden/int8 on every backend built (qgold audit --format int8).
qg_add_format_tests(GROUP int8 GOLDEN int8 KERNELS test_int8_kernels FULL)
# The integer dot products without the optional instruction (vpdpbusd / sdot) where the CPU has it.
if(QG_X86_64)
  qg_add_test(NAME simd.int8.avx2.novnni LABELS simd COMMAND test_int8_kernels avx2)
  set_property(TEST simd.int8.avx2.novnni APPEND PROPERTY ENVIRONMENT QG_INT8_VNNI=0)
endif()
if(QG_AARCH64)
  qg_add_test(NAME simd.int8.neon.nosdot LABELS simd COMMAND test_int8_kernels neon)
  set_property(TEST simd.int8.neon.nosdot APPEND PROPERTY ENVIRONMENT QG_INT8_SDOT=0)
endif()
# qgold int8 quantize|dequantize|gemm: hand-checked bytes, every backend built, named errors, atomic outputs.
qg_add_test(NAME cli.int8 LABELS unit COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_int8.sh $<TARGET_FILE:qgold>
            ${CMAKE_CURRENT_BINARY_DIR}/tmp/cli_int8 ${CMAKE_CROSSCOMPILING_EMULATOR})
