/*
 * options.c — the only code that reads the environment.
 *
 * Every EBB_* variable is one row of option_table: its name, default, range
 * and one line of documentation; the parser and the documentation both read the
 * table, so they cannot drift apart. Options are read once, at the first
 * allocator call of the process, from `environ` (or /proc/self/environ when the
 * C library has not set `environ` yet), without allocating. A malformed value
 * or an unknown EBB_* name is reported once on stderr, and the default is kept.
 */
#include <string.h>

#include "internal.h"

extern char **environ;

static const char *const purge_method_names[] = {"dontneed", "free", NULL};

const option_desc_t option_table[OPT_COUNT] = {
    [OPT_PURGE_DELAY] = {"EBB_PURGE_DELAY", 50, -1, 3600000, NULL,
                         "ms a free page waits before it is returned to the OS "
                         "(0: at once, -1: never)"},
    [OPT_PURGE_METHOD] = {"EBB_PURGE_METHOD", 0, 0, 1, purge_method_names,
                          "how pages are returned: dontneed (RSS drops at once) or "
                          "free (MADV_FREE: the kernel takes them under pressure)"},
    [OPT_UNMAP_DELAY] = {"EBB_UNMAP_DELAY", 1000, 0, 3600000, NULL,
                         "ms an entirely free segment or huge block stays mapped "
                         "(purged) before it is unmapped"},
    [OPT_BACKGROUND] = {"EBB_BACKGROUND", 1, 0, 1, NULL,
                        "1: a background thread purges when the program is idle; "
                        "0: purge only during allocator calls"},
};

static long option_values[OPT_COUNT] = {
    [OPT_PURGE_DELAY] = 50,
    [OPT_PURGE_METHOD] = 0,
    [OPT_UNMAP_DELAY] = 1000,
    [OPT_BACKGROUND] = 1,
};

long option_get(option_id_t id)
{
    return option_values[id];
}

/* A small append-only text buffer for messages (no allocation). */
typedef struct text_s {
    char buf[512];
    size_t len;
} text_t;

static void text_add(text_t *t, const char *s)
{
    while (*s && t->len < sizeof t->buf - 1)
        t->buf[t->len++] = *s++;
}

static void text_add_long(text_t *t, long v)
{
    char digits[24];
    size_t n = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        text_add(t, "-");
    while (n)
        t->buf[t->len < sizeof t->buf - 1 ? t->len++ : t->len] = digits[--n];
}

static void text_flush(text_t *t)
{
    t->buf[t->len] = '\0';
    os_write_stderr(t->buf, t->len);
}

/* Parse a decimal integer (optional sign); false if `s` is not one. */
static bool parse_long(const char *s, long *out)
{
    bool neg = false;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    if (*s == '\0')
        return false;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 100000000000ul)
            return false;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    *out = neg ? -(long)v : (long)v;
    return true;
}

static void option_set_from_text(option_id_t id, const char *value)
{
    const option_desc_t *d = &option_table[id];
    long v;
    bool ok = false;
    if (d->choices) {
        for (long i = 0; d->choices[i]; i++) {
            if (strcmp(value, d->choices[i]) == 0) {
                v = i;
                ok = true;
            }
        }
    } else {
        ok = parse_long(value, &v) && v >= d->min && v <= d->max;
    }
    if (ok) {
        option_values[id] = v;
        return;
    }
    text_t t = {.len = 0};
    text_add(&t, "ebb: ");
    text_add(&t, d->name);
    text_add(&t, "=");
    text_add(&t, value);
    if (d->choices) {
        text_add(&t, ": expected one of");
        for (long i = 0; d->choices[i]; i++) {
            text_add(&t, " ");
            text_add(&t, d->choices[i]);
        }
        text_add(&t, "; using ");
        text_add(&t, d->choices[d->def]);
    } else {
        text_add(&t, ": expected a whole number from ");
        text_add_long(&t, d->min);
        text_add(&t, " to ");
        text_add_long(&t, d->max);
        text_add(&t, "; using ");
        text_add_long(&t, d->def);
    }
    text_add(&t, "\n");
    text_flush(&t);
}

/* One "NAME=value" string from the environment. */
static void options_consider(const char *entry)
{
    if (strncmp(entry, "EBB_", 4) != 0)
        return;
    const char *eq = strchr(entry, '=');
    if (eq == NULL)
        return;
    size_t name_len = (size_t)(eq - entry);
    for (int id = 0; id < OPT_COUNT; id++) {
        const char *name = option_table[id].name;
        if (strlen(name) == name_len && strncmp(entry, name, name_len) == 0) {
            option_set_from_text((option_id_t)id, eq + 1);
            return;
        }
    }
    text_t t = {.len = 0};
    text_add(&t, "ebb: unknown option ");
    for (size_t i = 0; i < name_len && i < 64; i++) {
        char c[2] = {entry[i], '\0'};
        text_add(&t, c);
    }
    text_add(&t, " (ignored; README.md lists the options)\n");
    text_flush(&t);
}

void options_init(void)
{
    if (environ) {
        for (char **e = environ; *e; e++)
            options_consider(*e);
        return;
    }
    /* Too early for the C library's environ: read the kernel's copy. */
    static char env_copy[32768];
    size_t n = os_read_file("/proc/self/environ", env_copy, sizeof env_copy - 1);
    env_copy[n] = '\0';
    for (size_t i = 0; i < n;) {
        options_consider(&env_copy[i]);
        i += strlen(&env_copy[i]) + 1;
    }
}
