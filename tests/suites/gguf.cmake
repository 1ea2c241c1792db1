# GGUF model files (../shared/specs/gguf.md): the reader over every golden/gguf file, the CLI, the fuzz
# corpus replay, and (opt-in, label `large`) the streaming check of a synthetic 8 GiB file.
qg_test_exe(test_gguf_golden golden/test_gguf_golden.c)
qg_add_test(NAME golden.gguf.ref LABELS golden COMMAND test_gguf_golden ${QG_GOLDEN})
qg_add_test(NAME cli.gguf LABELS unit COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_gguf.sh $<TARGET_FILE:qgold>
            ${QG_GOLDEN} ${CMAKE_CURRENT_BINARY_DIR}/tmp/gguf ${CMAKE_CROSSCOMPILING_EMULATOR})
