# The K-quant GEMV with Q8_K activations (qgold/kquants_q8k_gemv.h): every built row against the
# reference dot / the pinned dot order bitwise, thread-count and batch invariance, named errors and the
# kind's on-the-fly audit checks; one test per backend. The golden GEMV fixtures run through
# golden.kquants.* (qgold audit), whose kind table shares them with this path.
qg_test_exe(test_kq_q8k unit/test_kq_q8k.c)
# The expected bits are formed with fmaf and separate products: no contraction in the test either.
target_compile_options(test_kq_q8k PRIVATE -ffp-contract=off -fno-fast-math)
qg_add_test(NAME unit.kquants.q8k_gemv.ref LABELS unit COMMAND test_kq_q8k ref)
if(QG_X86_64)
  qg_add_test(NAME simd.kquants.q8k_gemv.avx2 LABELS simd COMMAND test_kq_q8k avx2)
  # QG_KQ_EVEX=0: the row dots' plain AVX2 build where the CPU would take the AVX-512VL/BW one (the
  # default tests above and simd.kquants.avx2 run that one on such CPUs); both must give the same bits.
  qg_add_test(NAME simd.kquants.q8k_gemv.avx2.noevex LABELS simd COMMAND test_kq_q8k avx2)
  set_property(TEST simd.kquants.q8k_gemv.avx2.noevex APPEND PROPERTY ENVIRONMENT QG_KQ_EVEX=0)
  qg_add_test(NAME simd.kquants.avx2.noevex LABELS simd COMMAND test_kq_kernels avx2)
  set_property(TEST simd.kquants.avx2.noevex APPEND PROPERTY ENVIRONMENT QG_KQ_EVEX=0)
endif()
if(QG_AARCH64)
  qg_add_test(NAME simd.kquants.q8k_gemv.neon LABELS simd COMMAND test_kq_q8k neon)
endif()
