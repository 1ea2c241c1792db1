# Kernel plugins: the loader (tests/harness/plugin.c), `qgold verify --plugin`, the example plugin of the
# README, one build of tests/plugins/modes.c per defect (each test expects the named check), and the
# installed package used by an outside project.
target_link_libraries(qgold_harness PUBLIC ${CMAKE_DL_LIBS})

set(QG_PLUGIN_DIR ${CMAKE_BINARY_DIR}/plugins)
function(qg_plugin name src)
  add_library(${name} MODULE ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/kernels/include)
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${QG_PLUGIN_DIR} C_VISIBILITY_PRESET hidden)
  foreach(d ${ARGN})
    target_compile_definitions(${name} PRIVATE ${d})
  endforeach()
endfunction()

qg_plugin(example_q4k ${CMAKE_CURRENT_SOURCE_DIR}/plugins/example_q4k.c)
qg_plugin(modes_good ${CMAKE_CURRENT_SOURCE_DIR}/plugins/modes.c)

set(qg_verify sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/expect_verify.sh)
set(qg_qgold ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:qgold> verify --golden ${QG_GOLDEN})
# A correct plugin passes: every kernel row PASS, exit 0 (and the output says so).
qg_add_test(NAME plugin.example LABELS "unit;plugin" COMMAND ${qg_verify} 0 "PASS" ${qg_qgold} --plugin ${QG_PLUGIN_DIR}/example_q4k.so)
# The README prints this plugin; the copy there must be the file.
qg_add_test(NAME plugin.readme LABELS "unit;plugin" COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_readme.sh ${CMAKE_SOURCE_DIR}/README.md
            ${CMAKE_CURRENT_SOURCE_DIR}/plugins/example_q4k.c ${CMAKE_CURRENT_BINARY_DIR}/tmp/plugin-readme)
qg_add_test(NAME plugin.good LABELS "unit;plugin" COMMAND ${qg_verify} 0 "0 failed" ${qg_qgold} --plugin ${QG_PLUGIN_DIR}/modes_good.so)

# mode | kernels it concerns (--path) | expected output. The crash patterns name the signal where no
# sanitizer intercepts it (ASan turns SIGSEGV and double frees into its own report and exit status 1).
if(QG_SANITIZE)
  set(qg_segv "plugin_case_crashed")
  set(qg_heap "plugin_case_crashed")
else()
  set(qg_segv "SIGSEGV.*plugin_case_crashed")
  set(qg_heap "SIGABRT.*plugin_case_crashed")
endif()
# qg_plugin_mode(MODE PATH PATTERN [SECONDS]): modes.c built with -DQGP_BREAK_<MODE>; verify over its Q4_K
# kernels (of PATH, "-" for all), with a time limit per case (default 5 s), must exit 1 with output
# matching PATTERN.
function(qg_plugin_mode mode path pattern)
  set(limit 5)
  if(ARGC GREATER 3)
    set(limit ${ARGV3})
  endif()
  string(TOLOWER ${mode} lower)
  qg_plugin(modes_${lower} ${CMAKE_CURRENT_SOURCE_DIR}/plugins/modes.c QGP_BREAK_${mode})
  set(sel --format q4_k)
  if(NOT path STREQUAL "-")
    list(APPEND sel --path ${path})
  endif()
  qg_add_test(NAME plugin.broken.${lower} LABELS "unit;plugin" COMMAND ${qg_verify} 1 "${pattern}" ${qg_qgold} --plugin
              ${QG_PLUGIN_DIR}/modes_${lower}.so ${sel} --timeout ${limit} TIMEOUT 300)
endfunction()
qg_plugin_mode(NIBBLE dequant "q4_k/dequant.h5: case .*element.*expected.*got.*\\[mismatch\\]")
qg_plugin_mode(F16ACC gemv "\\[bound_exceeded\\]")
qg_plugin_mode(NONDET gemv "\\[nondeterministic\\]")
qg_plugin_mode(PROCESS gemv "\\[plugin_nondeterministic_process\\]")
qg_plugin_mode(BATCH gemv "computed alone differs")
qg_plugin_mode(QUANTIZE quantize "q4_k/quantize.h5: case .*block 0 byte 0.*\\[mismatch\\]")
qg_plugin_mode(UNWRITTEN dequant "\\[output_unwritten\\]")
qg_plugin_mode(OVERRUN dequant "\\[canary_clobbered\\]")
qg_plugin_mode(SEGV dequant "${qg_segv}")
qg_plugin_mode(ABORT dequant "SIGABRT.*plugin_case_crashed")
qg_plugin_mode(HEAP dequant "${qg_heap}")
qg_plugin_mode(HANG dequant "\\[plugin_case_timeout\\]" 1)
qg_plugin_mode(ABI - "plugin_abi_newer: .*built against plugin ABI 2")
qg_plugin_mode(NOENTRY - "plugin_entry_missing: ")
qg_plugin_mode(ABIZERO - "plugin_abi_invalid: .*abi_version 0")
qg_plugin_mode(EMPTY - "plugin_entry_failed: .*n_kernels 0")
qg_plugin_mode(ENTRYCRASH - "plugin_entry_failed: .*loading the plugin")
qg_plugin_mode(KIND - "plugin_kernel_invalid: .*unknown kind 99")
qg_plugin_mode(NULLFN - "plugin_kernel_invalid: .*fn2")
qg_plugin_mode(NUMERICS - "plugin_numerics_invalid: .*u_acc 0.5")
qg_plugin_mode(TIER - "plugin_numerics_invalid: .*bit-exact")
# A crash names the case, and the cases after it still run (the row counts them all).
qg_add_test(NAME plugin.isolation.continues LABELS "unit;plugin" COMMAND ${qg_verify} 1 "dequant.h5: case [^ ]*specials.*plugin_case_crashed.*and [0-9]+ more failing cases"
            ${qg_qgold} --plugin ${QG_PLUGIN_DIR}/modes_segv.so --format q4_k --path dequant)
# --full: the large shapes of every K-quant kind against the reference (label full: minutes).
qg_add_test(NAME plugin.full LABELS "full;plugin" COMMAND ${qg_verify} 0 "full 14336x4096 b4 .*PASS" ${qg_qgold} --plugin
            ${QG_PLUGIN_DIR}/modes_good.so --format q4_k --full TIMEOUT 1800)
# --bench: the plugin's rows beside qgold's own, same run (a smoke test of the timing path, no figures;
# label full: minutes under qemu, and the x86-64 run already covers the timing path).
qg_add_test(NAME plugin.bench LABELS "bench;plugin;full" COMMAND ${qg_verify} 0 "q4_k +dot_q8k +plugin .* qg_kq_dot_q8k_"
            ${qg_qgold} --plugin ${QG_PLUGIN_DIR}/modes_good.so --format q4_k --path dot_q8k --bench TIMEOUT 900)
qg_add_test(NAME plugin.open_failed LABELS "unit;plugin" COMMAND ${qg_verify} 1 "plugin_open_failed: .*no_such_plugin.so"
            ${qg_qgold} --plugin ${CMAKE_CURRENT_BINARY_DIR}/no_such_plugin.so)
# --json and --junit are written (atomically) and agree with the table.
qg_add_test(NAME plugin.reports LABELS "unit;plugin" COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_reports.sh
            ${CMAKE_CURRENT_BINARY_DIR}/tmp/plugin-reports ${qg_qgold} --plugin ${QG_PLUGIN_DIR}/modes_nibble.so --format q4_k)

# ---- installed package: cmake --install into a temporary prefix, then an outside project builds the
# README's example plugin against it with find_package(qgold) and runs qgold_add_plugin_test ----
include(GNUInstallDirs)
set(QG_PKG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/qgold)
file(RELATIVE_PATH QG_PKG_TO_PREFIX /p/${QG_PKG_DIR} /p)
set(QG_PKG_BINDIR ${CMAKE_INSTALL_BINDIR})
set(QG_PKG_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
set(QG_PKG_GOLDEN ${CMAKE_INSTALL_DATADIR}/qgold/golden)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/plugins/cmake/qgoldConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/qgoldConfig.cmake @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/qgoldConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/qgoldConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/qgoldConfigVersion.cmake
        DESTINATION ${QG_PKG_DIR})
install(FILES ${CMAKE_SOURCE_DIR}/kernels/include/qgold/plugin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qgold)
if(NOT CMAKE_CROSSCOMPILING)
  qg_add_test(NAME plugin.install LABELS "plugin" COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_install.sh ${CMAKE_BINARY_DIR}
              ${CMAKE_CURRENT_BINARY_DIR}/tmp/plugin-install ${CMAKE_CURRENT_SOURCE_DIR}/plugins/outside ${CMAKE_COMMAND} TIMEOUT 900)
endif()

# ---- ggml (llama.cpp) as a plugin: its libggml and public headers from the llama-cpp-python package,
# installed by ci/setup.sh --ggml into QG_GGML_PREFIX; without them the test skips and says why ----
set(QG_GGML_PREFIX ${CMAKE_SOURCE_DIR}/.venv/ggml CACHE PATH "ggml installed by ci/setup.sh --ggml (include/ggml.h, lib/libggml-cpu.so)")
if(EXISTS ${QG_GGML_PREFIX}/include/ggml.h AND EXISTS ${QG_GGML_PREFIX}/include/ggml-cpu.h AND NOT CMAKE_CROSSCOMPILING)
  qg_plugin(ggml_plugin ${CMAKE_CURRENT_SOURCE_DIR}/plugins/ggml_plugin.c QGP_GGML_LIB_DIR="${QG_GGML_PREFIX}/lib")
  target_include_directories(ggml_plugin SYSTEM PRIVATE ${QG_GGML_PREFIX}/include)
  qg_add_test(NAME plugin.ggml LABELS "plugin" COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_ggml.sh ${QG_PLUGIN_DIR}/ggml_plugin.so
              ${QG_GGML_PREFIX}/lib ${CMAKE_CURRENT_BINARY_DIR}/tmp/ggml ${qg_qgold} TIMEOUT 1200)
  # kqdot_vs_ggml: qgold's AVX2 dot and ggml's vec_dot timed side by side (a tool, not a test)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    add_executable(kqdot_vs_ggml ${CMAKE_CURRENT_SOURCE_DIR}/plugins/kqdot_vs_ggml.c)
    target_include_directories(kqdot_vs_ggml SYSTEM PRIVATE ${QG_GGML_PREFIX}/include)
    target_compile_definitions(kqdot_vs_ggml PRIVATE QGP_GGML_LIB_DIR="${QG_GGML_PREFIX}/lib")
    target_link_libraries(kqdot_vs_ggml PRIVATE qgold_harness m)
  endif()
else()
  qg_add_test(NAME plugin.ggml LABELS "plugin" COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugins/test_ggml.sh - ${QG_GGML_PREFIX}
              ${CMAKE_CURRENT_BINARY_DIR}/tmp/ggml)
endif()
