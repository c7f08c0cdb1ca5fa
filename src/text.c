/*
 * text.c — formatting without stdio, for every message and report ebb writes
 * (option errors, malloc_stats, the EBB_STATS report). stdio may allocate, and
 * these run inside the allocator or at exit; so text is built in a fixed buffer
 * that is written to a file descriptor whenever it fills and at text_flush.
 */
#include <string.h>

#include "internal.h"

void text_init(text_t *t, int fd)
{
    t->len = 0;
    t->fd = fd;
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
    if (t->len > 0)
        os_write_fd(t->fd, t->buf, t->len);
    t->len = 0;
}

void text_add(text_t *t, const char *s)
{
    for (; *s; s++) {
        if (t->len == sizeof t->buf)
            text_flush(t);
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
