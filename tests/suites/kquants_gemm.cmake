# K-quant gemm path (batch 1..64): the reference row (label unit) and the tensor-core CUDA kernel
# (label gpu: exit 77 without a device, 1 with QG_REQUIRE_GPU=1). Both: every type, batches 1..64, the
# bound of the row's numerics, batch invariance, determinism, rejected arguments.
qg_test_exe(test_kq_gemm unit/test_kq_gemm.c)
qg_add_test(NAME unit.kq_gemm.ref LABELS unit COMMAND test_kq_gemm ref)
if(QG_HAVE_CUDA)
  qg_add_test(NAME gpu.kq_gemm.cuda LABELS gpu COMMAND test_kq_gemm cuda)
  # QG_CUDA_KQ_MMA_TILES pins the kernel (0: k_kq_gemm at every batch; 1 or 2: the staged kernel with
  # one or two row tiles a warp; the default above mixes 1 and 2 by type, batch and rows, and on a GPU of
  # more than 32 SMs takes 1 on every shape of this test, so tiles2 keeps the two-tile kernel tested): every setting must
  # give the reference's bound and the same bits at every batch, so each runs the whole test. QG_CUDA_KQ_MMA_COLGROUPS=0 takes batch 17..32 through
  # k_kq_gemm instead of the staged kernel's column-group blocks.
  foreach(tiles 0 1 2)
    qg_add_test(NAME gpu.kq_gemm.cuda.tiles${tiles} LABELS gpu COMMAND test_kq_gemm cuda)
    set_property(TEST gpu.kq_gemm.cuda.tiles${tiles} APPEND PROPERTY ENVIRONMENT QG_CUDA_KQ_MMA_TILES=${tiles})
  endforeach()
  qg_add_test(NAME gpu.kq_gemm.cuda.nogroups LABELS gpu COMMAND test_kq_gemm cuda)
  set_property(TEST gpu.kq_gemm.cuda.nogroups APPEND PROPERTY ENVIRONMENT QG_CUDA_KQ_MMA_COLGROUPS=0 QG_CUDA_KQ_WG=0)
  # The warpgroup kernel (sm_90a builds on sm_90: every type at batch 17..64 by default, 9..16 on large
  # shapes; its
  # columns compared bit for bit with the same columns computed alone by the other kernels): wg.off leaves
  # batch 17..64 to the staged kernel's column groups and k_kq_gemm; wg.n64 takes batch 33..64 as one
  # column group of 64 (the default: two of 32). The default at these small shapes runs CTAs of two
  # warpgroups and one phase each (the phase sums joined by a second kernel); wg.ps4 pins CTAs of two
  # warpgroups walking all four phases, wg.rows64 CTAs of one warpgroup walking all four (with one
  # column group of 64), wg.rows64ps1 CTAs of one warpgroup and one phase (Q6_K's CTAs are always one
  # warpgroup); wg.min1 runs it at every batch from 1 (QG_CUDA_KQ_WG_MIN=1; batch 1..16 as one group of
  # 16 columns), wg.min1ps4 with CTAs walking all four phases (the choice on 28672 rows at 9..16). Its rows
  # come by a tensor map where they allow one (as the ring kernel's below); the .cpasync variants
  # (QG_CUDA_KQ_TMA=0) keep its cp.async copies on every shape.
  foreach(v "off;QG_CUDA_KQ_WG=0" "n64;QG_CUDA_KQ_WG_N=64" "ps4;QG_CUDA_KQ_WG_PS=4"
            "rows64;QG_CUDA_KQ_WG_ROWS=64;QG_CUDA_KQ_WG_PS=4;QG_CUDA_KQ_WG_N=64"
            "rows64ps1;QG_CUDA_KQ_WG_ROWS=64;QG_CUDA_KQ_WG_PS=1" "min1;QG_CUDA_KQ_WG_MIN=1"
            "min1ps4;QG_CUDA_KQ_WG_MIN=1;QG_CUDA_KQ_WG_PS=4"
            "min1.cpasync;QG_CUDA_KQ_WG_MIN=1;QG_CUDA_KQ_TMA=0" "min1ps4.cpasync;QG_CUDA_KQ_WG_MIN=1;QG_CUDA_KQ_WG_PS=4;QG_CUDA_KQ_TMA=0")
    list(GET v 0 name)
    list(SUBLIST v 1 -1 envs)
    qg_add_test(NAME gpu.kq_gemm.cuda.wg.${name} LABELS gpu COMMAND test_kq_gemm cuda)
    set_property(TEST gpu.kq_gemm.cuda.wg.${name} APPEND PROPERTY ENVIRONMENT ${envs})
  endforeach()
  # The ring kernel (sm_90: from batch 8 (Q4_K), 4 (Q5_K, Q6_K) or 1 (Q8_K) to 16 by default, where its
  # grid fills the GPU; the test's shapes are small, so the default takes the staged kernel there, but
  # for Q8_K at batch 9..16):
  # ring.ph4 pins its CTAs of all four phases, ring.all runs it (CTAs of 4 phase groups at these sizes)
  # from batch 1 for every type, ring.off leaves batch 1..16 to the staged kernel.
  # ring.lt3 / ring.lt7: CTAs of all four phases with 3 or 7 row tiles pinned (what the host picks for
  # some row counts, ring_tiles) at every batch: Q8_K's 8-warp CTAs computing 3 or 7 of their row tiles,
  # the other warps copying x and keeping the barriers only; Q4_K, Q5_K and Q6_K in 7-warp CTAs (lt7).
  # The ring copies a CTA's rows by a tensor map where the rows allow one (every Q4_K and Q5_K shape here,
  # Q6_K and Q8_K at 16 super-blocks a row, Q8_K also at 4), else by cp.async; the .cpasync variants
  # (QG_CUDA_KQ_TMA=0) keep the cp.async copies on every shape.
  foreach(v "ph4;QG_CUDA_KQ_RING_PH=4" "all;QG_CUDA_KQ_RING_MIN=1" "off;QG_CUDA_KQ_MMA_RING=0"
            "lt3;QG_CUDA_KQ_RING_PH=4;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_RING_LT=3"
            "lt7;QG_CUDA_KQ_RING_PH=4;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_RING_LT=7"
            "all.cpasync;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_TMA=0"
            "ph4.cpasync;QG_CUDA_KQ_RING_PH=4;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_TMA=0"
            "lt3.cpasync;QG_CUDA_KQ_RING_PH=4;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_RING_LT=3;QG_CUDA_KQ_TMA=0"
            "lt7.cpasync;QG_CUDA_KQ_RING_PH=4;QG_CUDA_KQ_RING_MIN=1;QG_CUDA_KQ_RING_LT=7;QG_CUDA_KQ_TMA=0")
    list(GET v 0 name)
    list(SUBLIST v 1 -1 envs)
    qg_add_test(NAME gpu.kq_gemm.cuda.ring.${name} LABELS gpu COMMAND test_kq_gemm cuda)
    set_property(TEST gpu.kq_gemm.cuda.ring.${name} APPEND PROPERTY ENVIRONMENT ${envs})
  endforeach()
endif()
