/*
 * text.c — formatting without stdio, for every message and report ebb writes
 * (option errors, malloc_stats, the EBB_STATS report). stdio may allocate, and
 * these run inside the allocator or at exit; so text is built in a fixed buffer
 * that is written to a file descriptor whenever it fills and at text_flush.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

void text_init(text_t *t, int fd)
{
    t->len = 0;
    t->fd = fd;
    t->cut = false;
    t->spool = NULL;
    t->spool_len = t->spool_cap = 0;
}

void text_init_spool(text_t *t, int fd, char *spool, size_t cap)
{
    text_init(t, fd);
    t->spool = spool;
    t->spool_cap = cap;
}

/* The buffer is full (or the text ends): into the spool, writing the spool
 * out first where it has no room. */
static void text_spool_buffer(text_t *t)
{
    if (t->spool_len + t->len > t->spool_cap) {
        if (!t->cut)
            t->cut = !os_write_fd(t->fd, t->spool, t->spool_len);
        t->spool_len = 0;
    }
    memcpy(t->spool + t->spool_len, t->buf, t->len);
    t->spool_len += t->len;
    t->len = 0;
}

/* A file name pattern (EBB_STATS_FILE, EBB_DEBUG_LOG) with "%p" replaced by
 * the process id ("%%" by "%"), so the processes of one command (gcc's
 * driver, cc1, as) can write a file each. False if the result does not fit. */
bool text_expand_path(const char *pattern, char *out, size_t cap)
{
    text_t pid;
    text_init(&pid, -1);
    text_add_u64(&pid, (uint64_t)os_getpid(), 0);
    const char *pid_text = text_cstr(&pid);
    size_t n = 0;
    for (const char *c = pattern; *c; c++) {
        const char *piece = c;
        size_t len = 1;
        if (c[0] == '%' && c[1] == 'p') {
            piece = pid_text;
            len = strlen(pid_text);
            c++;
        } else if (c[0] == '%' && c[1] == '%') {
            c++;
        }
        if (n + len >= cap)
            return false;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return true;
}

void text_flush(text_t *t)
{
    /* Once a piece is lost, the rest is not written: a report cut short
     * must not end with its closing line as if it were whole. */
    if (t->spool != NULL) {
        text_spool_buffer(t);
        if (t->spool_len > 0 && !t->cut)
            t->cut = !os_write_fd(t->fd, t->spool, t->spool_len);
        t->spool_len = 0;
        return;
    }
    if (t->len > 0 && !t->cut)
        t->cut = !os_write_fd(t->fd, t->buf, t->len);
    t->len = 0;
}

void text_add(text_t *t, const char *s)
{
    for (; *s; s++) {
        if (t->len == sizeof t->buf) {
            if (t->spool != NULL)
                text_spool_buffer(t);
            else
                text_flush(t);
        }
        t->buf[t->len++] = *s;
    }
}

void text_add_n(text_t *t, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        char c[2] = {s[i], '\0'};
        text_add(t, c);
    }
}

/* Right-aligned in `width` columns (0: as long as needed). */
void text_add_u64(text_t *t, uint64_t v, unsigned width)
{
    char digits[24];
    unsigned n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (unsigned i = n; i < width; i++)
        text_add(t, " ");
    char s[24];
    for (unsigned i = 0; i < n; i++)
        s[i] = digits[n - 1 - i];
    s[n] = '\0';
    text_add(t, s);
}

void text_add_long(text_t *t, long v)
{
    if (v < 0) {
        text_add(t, "-");
        text_add_u64(t, 0ul - (unsigned long)v, 0);
    } else {
        text_add_u64(t, (uint64_t)v, 0);
    }
}

/* "0x" and lowercase hex digits into out (at least 19 bytes); the length. */
size_t text_format_hex(char *out, uintptr_t v)
{
    char digits[16];
    size_t n = 0, len = 0;
    do {
        digits[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    out[len++] = '0';
    out[len++] = 'x';
    while (n)
        out[len++] = digits[--n];
    out[len] = '\0';
    return len;
}

void text_add_hex(text_t *t, uintptr_t v)
{
    char s[20];
    text_format_hex(s, v);
    text_add(t, s);
}

/* The text so far as a C string (a text built with fd -1 as a message). */
const char *text_cstr(text_t *t)
{
    if (t->len == sizeof t->buf)
        t->len--;
    t->buf[t->len] = '\0';
    return t->buf;
}

/* Bytes as MiB with one decimal ("12.3 MiB"). */
void text_add_mib(text_t *t, uint64_t bytes)
{
    uint64_t tenths = (bytes * 10 + (1u << 19)) >> 20;
    text_add_u64(t, tenths / 10, 0);
    text_add(t, ".");
    text_add_u64(t, tenths % 10, 0);
    text_add(t, " MiB");
}

/* A ratio with two decimals. */
void text_add_ratio(text_t *t, double r)
{
    if (!(r >= 0) || r > 1e12)
        r = 0;
    uint64_t hundredths = (uint64_t)(r * 100 + 0.5);
    text_add_u64(t, hundredths / 100, 0);
    text_add(t, ".");
    text_add_u64(t, (hundredths / 10) % 10, 0);
    text_add_u64(t, hundredths % 10, 0);
}

/* ---------------------------------------------------------------------------
 * Where reports to stderr go (debug mode's reports, the EBB_STATS report)
 * ------------------------------------------------------------------------- */
/* Set once, in process initialization (single-threaded), by the modules that
 * will report: fd 2 as it was at start, and a copy of it. */
static struct {
    bool kept;
    uint64_t identity; /* os_fd_identity(2) at start; 0: fd 2 was closed */
    int copy;          /* a copy of that fd 2, or -1 */
} start_stderr ebb_cold_bss;

void text_stderr_keep(void)
{
    if (start_stderr.kept)
        return;
    start_stderr.kept = true;
    start_stderr.identity = os_fd_identity(2);
    /* Above the descriptors programs number themselves (bash takes 255 and
     * down; a clash is caught by the identity check in text_stderr). */
    start_stderr.copy = start_stderr.identity ? os_fd_copy_high(2, 300) : -1;
}

/* fd 2 while it is the file it was at start or a pipe, terminal or device,
 * else the copy of the first stderr while that copy is still that file, else
 * -1 (nowhere). A program may close its fd 2 and open one of its own files
 * there (a daemon may close every descriptor), and a report written into that
 * file would corrupt it (review finding: a leak report was appended to a
 * program's data file); a program may also just close it before it exits
 * (gnulib's close_stdout does, in ls, sleep and the rest of coreutils: their
 * EBB_STATS report was lost, review finding). So when fd 2 is closed or has
 * become another regular file, reports go to the stderr the process started
 * with (also for a program that sent its stderr to a log file with freopen:
 * EBB_DEBUG_LOG and EBB_STATS_FILE are for that). */
int text_stderr(void)
{
    uint64_t now = os_fd_identity(2);
    /* fd 2 as it was, or pointed by the program at a pipe, a terminal or a
     * device (a test capturing its child's reports with dup2): only a
     * regular file that took fd 2's place may be the program's data. */
    if (now != 0 && (now == start_stderr.identity || !os_fd_is_regular_file(2)))
        return 2;
    if (start_stderr.kept && start_stderr.copy >= 0 &&
        os_fd_identity(start_stderr.copy) == start_stderr.identity)
        return start_stderr.copy;
    return -1;
}

/* Why a report's file could not be opened, in words: strerror may allocate
 * (its messages are translated), and this runs inside the allocator. */
static const char *text_errno_reason(int error)
{
    switch (error) {
    case ENOENT: return "no such directory";
    case ENOTDIR: return "a part of the path is not a directory";
    case EISDIR: return "it is a directory";
    case EACCES: return "permission denied";
    case EPERM: return "operation not permitted";
    case EROFS: return "read-only file system";
    case ENAMETOOLONG: return "the name is too long";
    case ENOSPC: return "no space left";
    case EMFILE: case ENFILE: return "too many open files";
    case ELOOP: return "too many symbolic links";
    case ETXTBSY: return "a running program's file";
    default: return "the system refused it";
    }
}

/* Where one report goes: the file of `pattern` (EBB_DEBUG_LOG's or
 * EBB_STATS_FILE's, "%p" expanded into `path`, the caller's buffer of `cap`
 * bytes), opened for this one report and closed after it (text_report_close),
 * else stderr as text_stderr finds it. A program may close its stderr (xz
 * does, before it exits), and a daemon may close every descriptor and open
 * others in their place: a descriptor kept open between reports could by
 * then be one of the program's files. Opening costs a few system calls per
 * report. When the file cannot be opened, that stderr says so, naming
 * `option`, and gets the report. -1: nowhere. NULL pattern: stderr. */
int text_report_open(const char *option, const char *pattern, char *path, size_t cap, bool *opened)
{
    *opened = false;
    if (pattern == NULL)
        return text_stderr();
    int error = ENAMETOOLONG; /* what a pattern too long to expand gets */
    int fd = text_expand_path(pattern, path, cap) ? os_open_append(path, &error) : -1;
    if (fd >= 0) {
        *opened = true; /* any number, even 2 if the program closed its stderr */
        return fd;
    }
    int err = text_stderr();
    if (err < 0)
        return -1;
    /* Said once for each option: EBB_STATS_INTERVAL's samples said it again
     * with every sample (review finding). Racing callers may both say it. */
    static const char *warned[4] ebb_cold_bss;
    for (size_t i = 0; i < sizeof warned / sizeof warned[0]; i++) {
        if (warned[i] == option)
            return err;
        if (warned[i] == NULL) {
            warned[i] = option;
            break;
        }
    }
    text_t t;
    text_init(&t, err);
    text_add(&t, "ebb: ");
    text_add(&t, option);
    text_add(&t, "=");
    text_add(&t, pattern);
    text_add(&t, ": cannot open for appending (");
    text_add(&t, text_errno_reason(error));
    text_add(&t, "); writing to stderr\n");
    text_flush(&t);
    return err;
}

void text_report_close(int fd, bool opened)
{
    if (opened)
        os_close(fd);
}

/* A relative path pattern (EBB_DEBUG_LOG, EBB_STATS_FILE) taken from the
 * directory the process started in, copied into `buf`: a daemon that changes
 * directory (to /, typically) still writes where it was asked to. The pattern
 * itself if it is absolute, NULL, or does not fit. */
const char *text_absolute_path(const char *pattern, char *buf, size_t cap)
{
    if (pattern == NULL || pattern[0] == '/' || !os_getcwd(buf, cap))
        return pattern;
    /* Measured as text_expand_path will make it: %p up to 7 digits, %% one
     * byte. An absolute name that would not fit once expanded stays
     * relative (review finding: it fitted unexpanded, and every report went
     * to stderr as "the name is too long"). */
    size_t dir = strlen(buf);
    if (dir + 1 + option_path_expanded_len(pattern) + 1 > cap)
        return pattern;
    size_t len = strlen(pattern);
    buf[dir] = '/';
    memcpy(buf + dir + 1, pattern, len + 1);
    return buf;
}
