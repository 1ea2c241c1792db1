# CUDA kernel plugins and `qgold bench --plugin`. With CUDA: the example CUDA plugin
# (tests/plugins/example_cuda.cu) must pass verify, and each build of tests/plugins/modes_cuda.cu carries
# one defect that verify must name; label gpu: expect_verify_gpu.sh prints the verify table and exits 77
# when qgold finds no CUDA device (1 with QG_REQUIRE_GPU=1, where qgold reports a FAIL row). Without CUDA:
# a CPU-built plugin with a CUDA descriptor gets a SKIP row that says why. bench --plugin on the CPU
# plugins runs everywhere (--quick: a smoke test of the timing path, not a measurement).
set(qg_pc_dir ${CMAKE_BINARY_DIR}/plugins)
set(qg_pc_qgold ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:qgold>)
set(qg_pc_expect sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/expect_verify.sh)
set(qg_pc_expect_gpu sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/expect_verify_gpu.sh)

# ---- bench --plugin, CPU plugins (tests/plugins/modes.c builds of plugin.cmake) ----
# A verified plugin is timed: qgold's own row and the plugin's row of each timed kernel, exit 0.
qg_add_test(NAME plugin.bench_plugin.cpu LABELS "unit;plugin" COMMAND ${qg_pc_expect} 0
            "q4_k +dot_q8k +plugin .* qg_kq_dot_q8k_" ${qg_pc_qgold} bench --plugin ${qg_pc_dir}/modes_good.so --format q4_k --quick
            TIMEOUT 900)
# A plugin that fails verification is not timed, exit 1 (the failure is in the table above).
qg_add_test(NAME plugin.bench_plugin.refused LABELS "unit;plugin" COMMAND ${qg_pc_expect} 1
            "nothing timed \\(the verification did not pass" ${qg_pc_qgold} bench --plugin ${qg_pc_dir}/modes_nibble.so --format q4_k --quick
            TIMEOUT 900)
qg_add_test(NAME plugin.bench_plugin.usage LABELS "unit;plugin" COMMAND ${qg_pc_expect} 2 "--plugin takes only --format, --reps, --quick and --json"
            ${qg_pc_qgold} bench --plugin ${qg_pc_dir}/modes_good.so --threads 2)

if(NOT QG_HAVE_CUDA)
  # A qgold without CUDA loads and validates a CUDA descriptor and skips it with the reason; the plugin's
  # CPU kernels still run (exit 0).
  qg_plugin(modes_as_cuda ${CMAKE_CURRENT_SOURCE_DIR}/plugins/modes.c QGP_AS_CUDA)
  qg_add_test(NAME plugin.cuda_not_built LABELS "unit;plugin" COMMAND ${qg_pc_expect} 0
              "^ +CUDA plugin kernel not run: this qgold was built without CUDA" ${qg_pc_qgold} verify --golden ${QG_GOLDEN}
              --plugin ${qg_pc_dir}/modes_as_cuda.so --format q4_k)
  return()
endif()

# ---- CUDA plugins, built with nvcc as a user would (a shared library, the static CUDA runtime) ----
function(qg_cuda_plugin name src)
  add_library(${name} MODULE ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/kernels/include)
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${qg_pc_dir} CUDA_VISIBILITY_PRESET hidden
                                           CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  foreach(d ${ARGN})
    target_compile_definitions(${name} PRIVATE ${d})
  endforeach()
endfunction()

qg_cuda_plugin(example_cuda ${CMAKE_CURRENT_SOURCE_DIR}/plugins/example_cuda.cu)
# The correct CUDA plugin passes: both kernels run on the device (no SKIP), every row PASS, exit 0.
qg_add_test(NAME gpu.plugin_cuda.example LABELS "gpu;plugin" COMMAND ${qg_pc_expect_gpu} 0
            "^[1-9][0-9]* passed, 0 failed, 0 skipped" ${qg_pc_qgold} verify --golden ${QG_GOLDEN}
            --plugin ${qg_pc_dir}/example_cuda.so TIMEOUT 1200)

# qg_cuda_plugin_mode(MODE PATH PATTERN): modes_cuda.cu built with -DQGP_CUDA_BREAK_<MODE>; verify over
# its kernels of PATH must exit 1 with output matching PATTERN.
function(qg_cuda_plugin_mode mode path pattern)
  string(TOLOWER ${mode} lower)
  qg_cuda_plugin(modes_cuda_${lower} ${CMAKE_CURRENT_SOURCE_DIR}/plugins/modes_cuda.cu QGP_CUDA_BREAK_${mode})
  qg_add_test(NAME gpu.plugin_cuda.broken.${lower} LABELS "gpu;plugin" COMMAND ${qg_pc_expect_gpu} 1 "${pattern}" ${qg_pc_qgold} verify
              --golden ${QG_GOLDEN} --plugin ${qg_pc_dir}/modes_cuda_${lower}.so --path ${path} --timeout 30 TIMEOUT 1200)
endfunction()
qg_cuda_plugin_mode(OVERRUN dequant "\\[canary_clobbered\\]")
qg_cuda_plugin_mode(UNWRITTEN dequant "\\[output_unwritten\\]")
qg_cuda_plugin_mode(FAULT dequant "illegal memory access.*\\[device_failed\\]")
qg_cuda_plugin_mode(NONDET gemv "\\[nondeterministic\\]")
# Built without a defect, modes_cuda.cu is correct in four kinds (dequant, GEMV, dot, fp32 -> fp16), so
# every CUDA trampoline runs on the device: every row PASS, nothing skipped.
qg_cuda_plugin(modes_cuda_good ${CMAKE_CURRENT_SOURCE_DIR}/plugins/modes_cuda.cu)
qg_add_test(NAME gpu.plugin_cuda.good LABELS "gpu;plugin" COMMAND ${qg_pc_expect_gpu} 0 "^[1-9][0-9]* passed, 0 failed, 0 skipped"
            ${qg_pc_qgold} verify --golden ${QG_GOLDEN} --plugin ${qg_pc_dir}/modes_cuda_good.so TIMEOUT 1200)

# bench --plugin with the CUDA example: qgold's own CUDA GEMV row (vs cuBLAS fp16) and the plugin's (vs
# qgold's), and the plugin's dequant against BW_copy; exit 0.
qg_add_test(NAME gpu.plugin_cuda.bench LABELS "gpu;plugin;bench" COMMAND ${qg_pc_expect_gpu} 0
            "q4_k +gemv +plugin .*qg_kq_gemv_cuda"
            ${qg_pc_qgold} bench --plugin ${qg_pc_dir}/example_cuda.so --quick TIMEOUT 1200)
