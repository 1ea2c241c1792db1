# INT8 (reference/spec/intq.md): the reference on hand-checked cases, and every optimized backend against
# the reference on random shapes from the pinned stream.
qg_test_exe(test_int8_ref unit/test_int8_ref.c)
# Bitwise comparisons against double formulations: no contraction in the test either.
target_compile_options(test_int8_ref PRIVATE -ffp-contract=off -fno-fast-math)
qg_add_test(NAME unit.int8.ref LABELS unit COMMAND test_int8_ref)
