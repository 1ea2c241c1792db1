# Test-only format tq8: the audit of its fixtures on every backend built.
qg_add_format_tests(GROUP tq8 GOLDEN tq8)
