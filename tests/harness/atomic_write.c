/* Output files replaced atomically (atomic_write.h). */
#include "atomic_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void release(qg_atomic_file *f)
{
    free(f->path);
    free(f->tmp);
    free(f->buf);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Resolves the target and opens what the content goes to: a new temporary file next to the target
 * (mode and owner of the file it replaces, else 0666 less the umask), or a non-regular target itself. */
static int begin(qg_atomic_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) f->path = realpath(path, NULL); /* NULL: dangling */
    if (f->path == NULL && (f->path = strdup(path)) == NULL) return ENOMEM;
    int exists = stat(f->path, &st) == 0;
    if (!exists && errno != ENOENT) {
        int e = errno;
        release(f);
        return e;
    }
    if (exists && S_ISDIR(st.st_mode)) {
        release(f);
        return EISDIR;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        if ((f->fd = open(f->path, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0) {
            int e = errno;
            release(f);
            return e;
        }
        return 0;
    }
    const char *slash = strrchr(f->path, '/');
    const size_t dlen = slash ? (size_t)(slash - f->path) + 1 : 0;
    const char *base = f->path + dlen;
    const size_t blen = strnlen(base, 200); /* the temporary name stays within NAME_MAX */
    if ((f->tmp = malloc(dlen + blen + 9)) == NULL) {
        release(f);
        return ENOMEM;
    }
    memcpy(f->tmp, f->path, dlen);
    f->tmp[dlen] = '.';
    memcpy(f->tmp + dlen + 1, base, blen);
    memcpy(f->tmp + dlen + 1 + blen, ".XXXXXX", 8);
    if ((f->fd = mkstemp(f->tmp)) < 0) {
        int e = errno;
        free(f->tmp); /* not created: nothing to unlink */
        f->tmp = NULL;
        release(f);
        return e;
    }
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
        if (fchown(f->fd, st.st_uid, st.st_gid) != 0) { /* best effort: only the owner or root may */
        }
    } else {
        const mode_t mask = umask(0); /* read back at once: single-threaded at this point */
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(f->fd, mode) != 0) {
        int e = errno;
        qg_atomic_abort(f);
        return e;
    }
    return 0;
}

static int write_fd(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes, syncs and renames; on failure the temporary file is removed. Releases f. */
static int finish(qg_atomic_file *f, const void *buf, size_t n)
{
    int e = write_fd(f->fd, buf, n);
    if (e == 0 && f->tmp != NULL && fsync(f->fd) != 0) e = errno;
    if (close(f->fd) != 0 && e == 0) e = errno;
    f->fd = -1;
    if (f->tmp != NULL) {
        if (e == 0 && rename(f->tmp, f->path) != 0) e = errno;
        if (e != 0) {
            unlink(f->tmp);
        } else { /* make the rename itself durable; a directory that cannot be synced is no error */
            char *slash = strrchr(f->path, '/');
            int dfd;
            if (slash == NULL) {
                dfd = open(".", O_RDONLY | O_CLOEXEC);
            } else {
                *slash = '\0';
                dfd = open(slash == f->path ? "/" : f->path, O_RDONLY | O_CLOEXEC);
                *slash = '/';
            }
            if (dfd >= 0) {
                if (fsync(dfd) != 0) { /* ignored, see above */
                }
                close(dfd);
            }
        }
    }
    release(f);
    return e;
}

int qg_atomic_write(const char *path, const void *buf, size_t n)
{
    qg_atomic_file f;
    int e = begin(&f, path);
    return e != 0 ? e : finish(&f, buf, n);
}

int qg_atomic_open(qg_atomic_file *f, const char *path)
{
    int e = begin(f, path);
    if (e != 0) return e;
    if ((f->fp = open_memstream(&f->buf, &f->len)) == NULL) {
        e = errno;
        qg_atomic_abort(f);
        return e;
    }
    return 0;
}

int qg_atomic_commit(qg_atomic_file *f)
{
    FILE *fp = f->fp;
    f->fp = NULL;
    if (fp != NULL && fclose(fp) != 0) {
        int e = errno != 0 ? errno : EIO;
        qg_atomic_abort(f);
        return e;
    }
    return finish(f, f->buf != NULL ? f->buf : "", f->len);
}

void qg_atomic_abort(qg_atomic_file *f)
{
    if (f->fp != NULL) fclose(f->fp);
    if (f->fd >= 0) close(f->fd);
    if (f->tmp != NULL) unlink(f->tmp);
    release(f);
}
