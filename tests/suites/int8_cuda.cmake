# INT8 CUDA kernels against the reference: quantize / dequant / W8A8 bit for bit, W8A16 within the
# registry bound, batch invariance, determinism (tests/unit/test_int8_cuda.c). Exit 77 without a GPU.
if(QG_HAVE_CUDA)
  qg_test_exe(test_int8_cuda unit/test_int8_cuda.c)
  # Bitwise comparisons and a float64 exact sum: no contraction in the test either.
  target_compile_options(test_int8_cuda PRIVATE -ffp-contract=off -fno-fast-math)
  qg_add_test(NAME gpu.int8_extra.cuda LABELS gpu COMMAND test_int8_cuda TIMEOUT 900)
endif()
