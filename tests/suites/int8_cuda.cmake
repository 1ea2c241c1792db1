# INT8 CUDA kernels against the reference: quantize / dequant / W8A8 bit for bit, W8A16 within the
# registry bound, batch invariance, determinism (tests/unit/test_int8_cuda.c). Exit 77 without a GPU.
if(QG_HAVE_CUDA)
  qg_test_exe(test_int8_cuda unit/test_int8_cuda.c)
  # Bitwise comparisons and a float64 exact sum: no contraction in the test either.
  target_compile_options(test_int8_cuda PRIVATE -ffp-contract=off -fno-fast-math)
  qg_add_test(NAME gpu.int8_extra.cuda LABELS gpu COMMAND test_int8_cuda TIMEOUT 900)
  # The same cases with every W8A8 call pinned to one kernel (QG_INT8_CUDA_GEMM, read by the launcher):
  # the dp4a / mma.sync kernels alone, and, in builds with sm_90a device code, each warpgroup-MMA tile
  # width and the TMA warp-specialized kernel (with its whole-tile epilogue, and with the general one on
  # every tile: tma_plain) at every M (partial tiles, M = 1, odd N), so each kernel is compared with the
  # reference by memcmp, not only the one the automatic choice picks for a shape.
  qg_add_test(NAME gpu.int8_extra.cuda.mma LABELS gpu COMMAND test_int8_cuda TIMEOUT 900)
  set_property(TEST gpu.int8_extra.cuda.mma APPEND PROPERTY ENVIRONMENT QG_INT8_CUDA_GEMM=mma)
  if("${CMAKE_CUDA_ARCHITECTURES}" MATCHES "90a")
    foreach(tile wgmma128 wgmma256 tma tma_plain)
      qg_add_test(NAME gpu.int8_extra.cuda.${tile} LABELS gpu COMMAND test_int8_cuda TIMEOUT 900)
      set_property(TEST gpu.int8_extra.cuda.${tile} APPEND PROPERTY ENVIRONMENT QG_INT8_CUDA_GEMM=${tile})
    endforeach()
  endif()
endif()
