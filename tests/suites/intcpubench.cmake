# qgold bench on the CPU halves of int8 and int4 (--quick: a smoke test of the timing path, no figures):
# exit 0 and a row of every path each CPU backend built here must time; a --backend with no kernel of the
# format is a usage error; a W4A16 shape whose K is not a multiple of the group 128 fails with its reason.
set(qg_icb_qgold ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:qgold>)
set(qg_icb_expect sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/expect_verify.sh)
set(qg_icb_be ref)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  list(APPEND qg_icb_be avx2)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  list(APPEND qg_icb_be neon)
endif()
# Rows per format: "PATH BATCH" (shape 256x4096, the --quick default).
set(qg_icb_int8 "quantize_row 1" "w8a8 1" "w8a8 16" "w8a16 1" "w8a16 16")
set(qg_icb_int4 "w4a16_decode 1" "w4a16_g128 1" "w4a16_g128 16" "gemm_packed 1" "gemm_packed 16")
foreach(be ${qg_icb_be})
  foreach(fmt int8 int4)
    foreach(pb ${qg_icb_${fmt}})
      separate_arguments(pb)
      list(GET pb 0 path)
      list(GET pb 1 b)
      qg_add_test(NAME bench.${fmt}_cpu.${be}.${path}.b${b} LABELS bench COMMAND ${qg_icb_expect} 0
                  "^${fmt} +${path} +${be} +256x4096 +${b} " ${qg_icb_qgold} bench --format ${fmt} --backend ${be} --quick)
    endforeach()
  endforeach()
endforeach()
# --shapes / --batches reach the CPU halves: the row of the requested shape and batch appears.
qg_add_test(NAME bench.int8_cpu.shapes LABELS bench COMMAND ${qg_icb_expect} 0 "^int8 +w8a16 +ref +64x512 +3 "
            ${qg_icb_qgold} bench --format int8 --backend ref --quick --shapes 64x512 --batches 3)
qg_add_test(NAME bench.int4_cpu.shapes LABELS bench COMMAND ${qg_icb_expect} 0 "^int4 +w4a16_g128 +ref +64x512 +3 "
            ${qg_icb_qgold} bench --format int4 --backend ref --quick --shapes 64x512 --batches 3)
qg_add_test(NAME bench.int4_cpu.bad_k LABELS bench COMMAND ${qg_icb_expect} 1 "K \\(columns\\) must be a multiple of 128"
            ${qg_icb_qgold} bench --format int4 --backend ref --quick --shapes 64x200)
# The JSON document of a CPU run is written (through a temporary file and rename).
qg_add_test(NAME bench.int8_cpu.json LABELS bench COMMAND qgold bench --format int8 --quick --json
            ${CMAKE_CURRENT_BINARY_DIR}/bench-int8-cpu-smoke.json)
qg_add_test(NAME bench.int4_cpu.json LABELS bench COMMAND qgold bench --format int4 --quick --json
            ${CMAKE_CURRENT_BINARY_DIR}/bench-int4-cpu-smoke.json)
