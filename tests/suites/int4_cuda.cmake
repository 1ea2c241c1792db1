# INT4 on the GPU: the W4A16 tensor-core GEMM (repack bit-exact against a host repack, the bound, batch
# invariance, the pinned split-K order, errors, identical results across processes) and the tensor-core
# accumulation probe of numerics section 5. Label gpu: exit 77 without a device (1 with QG_REQUIRE_GPU=1).
if(QG_HAVE_CUDA)
  qg_test_exe(test_int4_cuda unit/test_int4_cuda.c)
  # The pinned-order sums on the host are compared bit for bit: no contraction in the test either.
  target_compile_options(test_int4_cuda PRIVATE -ffp-contract=off -fno-fast-math)
  foreach(mode repack gemm splitk errors processes decode packed workspace)
    qg_add_test(NAME gpu.int4_cuda.${mode} LABELS gpu COMMAND test_int4_cuda ${mode})
  endforeach()
  # M <= 8 runs the producer-warp kernel on sm_90; the ring kernel (what sm_80 runs there) is checked
  # at every M too, against the same reference and the same rows inside M = 1024
  qg_add_test(NAME gpu.int4_cuda.gemm.ring LABELS gpu COMMAND test_int4_cuda gemm)
  set_property(TEST gpu.int4_cuda.gemm.ring APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WS=0)
  # CTAs of 7 warps (the default where they balance the SMs, e.g. 28672 rows), forced on every shape: at
  # M <= 8 through the ring kernel too (ring7) and through the producer-warp kernel's 7 consumer warps (ws7)
  foreach(mode gemm splitk workspace)
    qg_add_test(NAME gpu.int4_cuda.${mode}.ring7 LABELS gpu COMMAND test_int4_cuda ${mode})
    set_property(TEST gpu.int4_cuda.${mode}.ring7 APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_RING_W=7 QG_CUDA_INT4_WS=0)
    qg_add_test(NAME gpu.int4_cuda.${mode}.ws7 LABELS gpu COMMAND test_int4_cuda ${mode})
    set_property(TEST gpu.int4_cuda.${mode}.ws7 APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_RING_W=7)
  endforeach()
  # M > 16 runs the wgmma kernel in sm_90a builds on sm_90; the mma.sync kernel (what every other build
  # and device runs there) gets the same checks with it switched off
  # (and its two CTA widths, each forced once: the host picks one from the grid size)
  foreach(mode gemm splitk workspace)
    qg_add_test(NAME gpu.int4_cuda.${mode}.mma LABELS gpu COMMAND test_int4_cuda ${mode})
    set_property(TEST gpu.int4_cuda.${mode}.mma APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WGMMA=0)
    # the wgmma kernel waiting once a chunk (the default waits once a group): same checks
    qg_add_test(NAME gpu.int4_cuda.${mode}.wgsync LABELS gpu COMMAND test_int4_cuda ${mode})
    set_property(TEST gpu.int4_cuda.${mode}.wgsync APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WG_DEFER=0)
    # the activations pre-ordered (16-byte copies, the default) or not (4-byte copies), each forced at every M > 16
    foreach(xq 0 1)
      qg_add_test(NAME gpu.int4_cuda.${mode}.wgxq${xq} LABELS gpu COMMAND test_int4_cuda ${mode})
      set_property(TEST gpu.int4_cuda.${mode}.wgxq${xq} APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WG_XQ=${xq})
    endforeach()
    # CTA tiles of 128 rows (the default at M > 64 on large grids), forced at every M > 32
    qg_add_test(NAME gpu.int4_cuda.${mode}.wgbn128 LABELS gpu COMMAND test_int4_cuda ${mode})
    set_property(TEST gpu.int4_cuda.${mode}.wgbn128 APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WG_BN=128)
    foreach(wn 128 256)
      qg_add_test(NAME gpu.int4_cuda.${mode}.wg${wn} LABELS gpu COMMAND test_int4_cuda ${mode})
      set_property(TEST gpu.int4_cuda.${mode}.wg${wn} APPEND PROPERTY ENVIRONMENT QG_CUDA_INT4_WG_N=${wn})
    endforeach()
  endforeach()
  qg_test_exe(test_tc_probe unit/test_tc_probe.c)
  target_compile_options(test_tc_probe PRIVATE -ffp-contract=off -fno-fast-math)
  qg_add_test(NAME gpu.tc_probe.cuda LABELS gpu COMMAND test_tc_probe)
endif()
