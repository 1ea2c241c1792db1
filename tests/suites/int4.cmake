# INT4 (reference/spec/intq.md): reference unit tests on hand-checked cases.
qg_test_exe(test_int4_ref unit/test_int4_ref.c)
# Bitwise comparisons against naive float loops: no contraction in the test either.
target_compile_options(test_int4_ref PRIVATE -ffp-contract=off -fno-fast-math)
qg_add_test(NAME unit.int4.ref LABELS unit COMMAND test_int4_ref)
