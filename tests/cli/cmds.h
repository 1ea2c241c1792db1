/* The qgold commands: each takes the arguments after its name and returns the exit status. */
#ifndef QGOLD_CLI_CMDS_H
#define QGOLD_CLI_CMDS_H

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary; /* one line for `qgold --help` */
} qgc_command;

/* The table qgold.c dispatches on; each command file adds its entry (cmd_<name>.c defines qgc_cmd_<name>). */
extern const qgc_command qgc_commands[];
extern const unsigned qgc_command_count;

int qgc_cmd_verify(int argc, char **argv); /* cmd_verify.c */

int qgc_cmd_gguf(int argc, char **argv);

int qgc_cmd_int8(int argc, char **argv); /* cmd_int8.c */

int qgc_cmd_int4(int argc, char **argv); /* cmd_int4.c */

#endif
