/* Output files that are either completely written or not changed at all.
 *
 * Data goes to a temporary file `.NAME.XXXXXX` in the target's directory, which is flushed, fsync'ed and
 * then renamed over the target; on any failure the temporary is unlinked and the previous target (if
 * any) is left as it was. A target that is a symlink is written through (the link stays); a target that
 * exists and is not a regular file (/dev/null, a FIFO) cannot be replaced and is written in place.
 * Functions return 0 or an errno value (for strerror).
 */
#ifndef QGOLD_ATOMIC_WRITE_H
#define QGOLD_ATOMIC_WRITE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *fp;    /* where the content goes (in memory until qg_atomic_commit) */
    char *path;  /* the target, symlinks resolved */
    char *tmp;   /* the temporary file; NULL when writing a non-regular file in place */
    int fd;      /* open on tmp (or on the non-regular target) */
    char *buf;   /* fp's memory */
    size_t len;
} qg_atomic_file;

/* Whole buffer to path. */
int qg_atomic_write(const char *path, const void *buf, size_t n);

/* Streamed content: creates the temporary file now (so an unwritable target fails before any work),
 * f->fp receives the content; then exactly one of commit or abort. */
int qg_atomic_open(qg_atomic_file *f, const char *path);
/* Writes what f->fp received and replaces the target; on failure the target is unchanged. */
int qg_atomic_commit(qg_atomic_file *f);
/* Discards everything; the target is unchanged. */
void qg_atomic_abort(qg_atomic_file *f);

#endif
