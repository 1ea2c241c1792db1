# K-quant gemm path (batch 1..64): the reference row (label unit) and the tensor-core CUDA kernel
# (label gpu: exit 77 without a device, 1 with QG_REQUIRE_GPU=1). Both: every type, batches 1..64, the
# bound of the row's numerics, batch invariance, determinism, rejected arguments.
qg_test_exe(test_kq_gemm unit/test_kq_gemm.c)
qg_add_test(NAME unit.kq_gemm.ref LABELS unit COMMAND test_kq_gemm ref)
if(QG_HAVE_CUDA)
  qg_add_test(NAME gpu.kq_gemm.cuda LABELS gpu COMMAND test_kq_gemm cuda)
endif()
