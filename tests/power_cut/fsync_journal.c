/* An LD_PRELOAD library that journals what a process made durable, for simulating a power
 * cut after the fact (tests/power_cut/cut.py): every successful fsync or fdatasync of a
 * regular file appends "F <size> <path>", of a directory "D 0 <path>"; every rename
 * "R 0 <old>\t<new>"; every truncation "T <size> <path>". The journal is the file named by
 * POWER_CUT_JOURNAL, opened O_APPEND and written with one write() per line, so lines from
 * several threads never interleave and a SIGKILL loses at most the line being written.
 *
 * The process under test is unchanged: it calls libc's fsync, which this library forwards
 * to after the real call succeeds. Built by the tests with: cc -shared -fPIC -O2 -ldl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int journal_fd = -2;

static int journal(void) {
    if (journal_fd == -2) {
        const char *path = getenv("POWER_CUT_JOURNAL");
        journal_fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    }
    return journal_fd;
}

static void note(char kind, long long size, const char *path, const char *second) {
    char line[2 * PATH_MAX + 64];
    int length = second
        ? snprintf(line, sizeof line, "%c %lld %s\t%s\n", kind, size, path, second)
        : snprintf(line, sizeof line, "%c %lld %s\n", kind, size, path);
    if (journal() >= 0 && length > 0 && length < (int)sizeof line) {
        ssize_t ignored = write(journal_fd, line, (size_t)length);
        (void)ignored;
    }
}

static void absolute(const char *path, char *out) {
    if (!realpath(path, out)) {
        /* the file may be gone (renamed away): keep the name as given, made absolute */
        if (path[0] == '/' || !getcwd(out, PATH_MAX)) {
            snprintf(out, PATH_MAX, "%s", path);
        } else {
            size_t used = strlen(out);
            snprintf(out + used, PATH_MAX - used, "/%s", path);
        }
    }
}

static void note_fd(int fd) {
    char link[64], path[PATH_MAX];
    struct stat info;
    if (fstat(fd, &info) != 0) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, sizeof path - 1);
    if (length <= 0) return;
    path[length] = '\0';
    if (S_ISDIR(info.st_mode)) note('D', 0, path, NULL);
    else if (S_ISREG(info.st_mode)) note('F', (long long)info.st_size, path, NULL);
}

/* the next definition of ``name`` after this library's: libc's */
#define REAL(name) static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int fsync(int fd) {
    REAL(fsync);
    int result = real_fsync(fd);
    if (result == 0) note_fd(fd);
    return result;
}

int fdatasync(int fd) {
    REAL(fdatasync);
    int result = real_fdatasync(fd);
    if (result == 0) note_fd(fd);
    return result;
}

int rename(const char *old, const char *new) {
    REAL(rename);
    char from[PATH_MAX], to[PATH_MAX];
    absolute(old, from);
    int result = real_rename(old, new);
    if (result == 0) {
        absolute(new, to);
        note('R', 0, from, to);
    }
    return result;
}

int ftruncate(int fd, off_t size) {
    REAL(ftruncate);
    int result = real_ftruncate(fd, size);
    if (result == 0) {
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t length = readlink(link, path, sizeof path - 1);
        if (length > 0) {
            path[length] = '\0';
            note('T', (long long)size, path, NULL);
        }
    }
    return result;
}

int ftruncate64(int fd, off_t size) { return ftruncate(fd, size); }

int truncate(const char *name, off_t size) {
    REAL(truncate);
    int result = real_truncate(name, size);
    if (result == 0) {
        char path[PATH_MAX];
        absolute(name, path);
        note('T', (long long)size, path, NULL);
    }
    return result;
}
