# The harness's device-output canaries (guard_cuda.c), on a GPU.
if(QG_HAVE_CUDA)
  qg_test_exe(test_guard_cuda unit/test_guard_cuda.c)
  qg_add_test(NAME gpu.harness.canaries LABELS gpu COMMAND test_guard_cuda)
endif()
