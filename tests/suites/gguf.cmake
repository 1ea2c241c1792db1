# GGUF model files (../shared/specs/gguf.md): the reader over every golden/gguf file, the CLI, the fuzz
# corpus replay, and (opt-in, label `large`) the streaming check of a synthetic 8 GiB file.
qg_test_exe(test_gguf_golden golden/test_gguf_golden.c)
qg_add_test(NAME golden.gguf.ref LABELS golden COMMAND test_gguf_golden ${QG_GOLDEN})
qg_add_test(NAME cli.gguf LABELS unit COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_gguf.sh $<TARGET_FILE:qgold>
            ${QG_GOLDEN} ${CMAKE_CURRENT_BINARY_DIR}/tmp/gguf ${CMAKE_CROSSCOMPILING_EMULATOR})

# Fuzzing: the reader on arbitrary bytes (tests/fuzz/fuzz_gguf.c); its corpus (seeds copied from
# golden/gguf) replayed as an ordinary test, and the libFuzzer binary with QG_FUZZ=ON.
add_executable(replay_gguf fuzz/fuzz_gguf.c fuzz/replay_main.c)
target_link_libraries(replay_gguf PRIVATE qgold_ref)
qg_add_test(NAME fuzz.gguf.replay LABELS fuzz COMMAND replay_gguf ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/gguf)
if(QG_FUZZ)
  add_executable(fuzz_gguf fuzz/fuzz_gguf.c)
  target_link_libraries(fuzz_gguf PRIVATE qgold_ref)
  target_compile_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
endif()

# Streaming and scale (opt-in: label `large`, and QG_LARGE=1, else skipped): a synthetic 8 GiB GGUF in
# the build tree's tmp/, checked by the CLI as a child process whose peak RSS and rate are printed.
qg_test_exe(test_gguf_large unit/test_gguf_large.c)
qg_add_test(NAME large.gguf.stream LABELS large COMMAND test_gguf_large $<TARGET_FILE:qgold> ${CMAKE_CURRENT_BINARY_DIR}/tmp 8 TIMEOUT 3600)

# A file made entirely by third parties: ggml's quantizer (libggml-base from ci/setup.sh --ggml, or the
# ggml-python package) and gguf-py's writer; qgold's check passes and its dequantization equals gguf-py's.
# Skipped (77), saying why, where neither quantizer is installed.
set(QG_GGML_PYTHON "" CACHE FILEPATH "Python with ggml-python and gguf for cli.gguf.ggml (default: QG_PYTHON)")
if(NOT CMAKE_CROSSCOMPILING AND (QG_GGML_PYTHON OR QG_PYTHON_OK))
  if(QG_GGML_PYTHON)
    set(qg_ggml_py ${QG_GGML_PYTHON})
  else()
    set(qg_ggml_py ${QG_PYTHON})
  endif()
  qg_add_test(NAME cli.gguf.ggml LABELS unit COMMAND ${qg_ggml_py} ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_ggml_crosscheck.py
              $<TARGET_FILE:qgold> ${CMAKE_CURRENT_BINARY_DIR}/tmp/gguf-ggml)
endif()
