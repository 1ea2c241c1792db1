# SpQR CUDA GEMV: long outlier rows (summed by the whole block in a fixed order) within the registry
# bound, batch-invariant, PTCSR equal to CSR (tests/unit/test_spqr_cuda_long.c). Exit 77 without a GPU.
if(QG_HAVE_CUDA)
  qg_test_exe(test_spqr_cuda_long unit/test_spqr_cuda_long.c)
  qg_add_test(NAME gpu.spqr_long.cuda LABELS gpu COMMAND test_spqr_cuda_long TIMEOUT 900)
endif()
