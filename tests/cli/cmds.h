/* The qgold commands: each takes the arguments after its name and returns the exit status. */
#ifndef QGOLD_CLI_CMDS_H
#define QGOLD_CLI_CMDS_H

#include "bench.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary; /* one line for `qgold --help` */
} qgc_command;

/* The table qgold.c dispatches on; each command file adds its entry (cmd_<name>.c defines qgc_cmd_<name>). */
extern const qgc_command qgc_commands[];
extern const unsigned qgc_command_count;

int qgc_cmd_verify(int argc, char **argv); /* cmd_verify.c */
/* qgold bench --plugin PATH.so (cmd_verify.c): verify the plugin, then time its verified kernels with the
 * options of bo (format: a filter, or NULL for every kernel; reps, quick, json). Returns the exit status. */
int qgc_bench_plugin(const char *plugin, const qg_bench_opts *bo);

int qgc_cmd_gguf(int argc, char **argv);

int qgc_cmd_int8(int argc, char **argv); /* cmd_int8.c */

int qgc_cmd_int4(int argc, char **argv); /* cmd_int4.c */

#endif
