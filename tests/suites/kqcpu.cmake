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
endif()
if(QG_AARCH64)
  qg_add_test(NAME simd.kquants.q8k_gemv.neon LABELS simd COMMAND test_kq_q8k neon)
endif()
