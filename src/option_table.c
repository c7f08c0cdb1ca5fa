/*
 * option_table.c — every EBB_* variable: name, default, range, one line of
 * documentation. Read by options.c (the parser) and tools/ebbrun.c (--help).
 */
#include <limits.h>
#include <stddef.h>
#include <strings.h>

#include "options.h"

static const char *const purge_method_names[] = {"dontneed", "free", NULL};
static const char *const on_error_names[] = {"abort", "continue", NULL};
static const char *const realloc_names[] = {"fit", "move", NULL};
static const char *const leak_names[] = {"off", "lost", "all", NULL};

const option_desc_t option_table[OPT_COUNT] = {
    [OPT_PURGE_DELAY] = {"EBB_PURGE_DELAY", 50, -1, 3600000, NULL, false,
                         "ms a free page waits before it is returned to the OS "
                         "(0: at once, -1: never)"},
    [OPT_PURGE_METHOD] = {"EBB_PURGE_METHOD", 0, 0, 1, purge_method_names, false,
                          "how pages are returned: dontneed (RSS drops at once) or "
                          "free (MADV_FREE: the kernel takes them under pressure)"},
    [OPT_UNMAP_DELAY] = {"EBB_UNMAP_DELAY", 1000, 0, 3600000, NULL, false,
                         "ms an entirely free segment or huge block stays mapped "
                         "(purged) before it is unmapped"},
    [OPT_BACKGROUND] = {"EBB_BACKGROUND", 1, 0, 1, NULL, false,
                        "1: a background thread purges when the program is idle; "
                        "0: purge only during allocator calls", OPTION_SWITCH},
    [OPT_HUGE_PAGES] = {"EBB_HUGE_PAGES", 0, 0, 1, NULL, false,
                        "1: back huge blocks (above 2 MiB, or aligned beyond what a segment "
                        "gives) with transparent huge pages (fewer page faults; a sparsely "
                        "written block is resident 2 MiB at a time)", OPTION_SWITCH},
    [OPT_STATS] = {"EBB_STATS", 0, 0, 1, NULL, false,
                   "1: print a report of what ebb holds (snapshot and size-class "
                   "table) when the process exits", OPTION_SWITCH},
    [OPT_STATS_FILE] = {"EBB_STATS_FILE", 0, 0, 0, NULL, true,
                        "append the reports and samples to this file instead of "
                        "stderr (%p: the process id)"},
    [OPT_STATS_INTERVAL] = {"EBB_STATS_INTERVAL", 0, 0, 86400000, NULL, false,
                            "ms between one-line samples printed by the background "
                            "thread (0: none; needs EBB_BACKGROUND=1)"},
    [OPT_DEBUG] = {"EBB_DEBUG", 0, 0, 1, NULL, false,
                   "1: debug mode: headers, canaries, fills, a quarantine and stack "
                   "traces catch heap misuse (docs/debug-mode.md)", OPTION_SWITCH},
    [OPT_DEBUG_ON_ERROR] = {"EBB_DEBUG_ON_ERROR", 0, 0, 1, on_error_names, false,
                            "after a fault report: abort, or continue (the bad free is "
                            "ignored)"},
    [OPT_DEBUG_REALLOC] = {"EBB_DEBUG_REALLOC", 0, 0, 1, realloc_names, false,
                           "realloc: fit (a block stays where it is when the new size fits "
                           "it) or move (always moves, so a stale pointer to the old block "
                           "is reported)"},
    [OPT_DEBUG_QUARANTINE] = {"EBB_DEBUG_QUARANTINE", 16 << 20, 0, 1L << 40, NULL, false,
                              "bytes of freed blocks held back (filled, checked when they "
                              "leave) before reuse", OPTION_BYTES},
    [OPT_DEBUG_QUARANTINE_IDLE] = {"EBB_DEBUG_QUARANTINE_IDLE", 1000, -1, 3600000, NULL, false,
                                   "ms a freed block waits in the quarantine at most; then "
                                   "it is checked and released, so its page can go back "
                                   "(-1: no limit)"},
    [OPT_DEBUG_FILL_ALLOC] = {"EBB_DEBUG_FILL_ALLOC", 0xA5, 0, 255, NULL, false,
                              "byte written into new blocks (calloc's stay zero)"},
    [OPT_DEBUG_FILL_FREE] = {"EBB_DEBUG_FILL_FREE", 0xDE, 0, 255, NULL, false,
                             "byte written into freed blocks; a change is a write after free"},
    [OPT_DEBUG_TRACE_DEPTH] = {"EBB_DEBUG_TRACE_DEPTH", 12, 0, 32, NULL, false,
                               "frames kept per stack trace (0: no traces)"},
    [OPT_DEBUG_LEAKS] = {"EBB_DEBUG_LEAKS", 1, 0, 2, leak_names, false,
                         "leak report at exit: off, lost (blocks no longer reachable; a "
                         "forked child counts those it inherited) or all (reachable and "
                         "inherited ones listed too)"},
    [OPT_DEBUG_LEAK_EXITCODE] = {"EBB_DEBUG_LEAK_EXITCODE", 0, 0, 255, NULL, false,
                                 "exit status of a process whose leak report found lost "
                                 "blocks of its own, or could not be made (0: unchanged)"},
    [OPT_DEBUG_LEAK_REGISTERS] = {"EBB_DEBUG_LEAK_REGISTERS", 1, 0, 1, NULL, false,
                                  "1: the leak report reads the registers of threads still "
                                  "running, sending each a real-time signal the program "
                                  "leaves unused (a blocking call may return EINTR); 0: not",
                                  OPTION_SWITCH},
    [OPT_DEBUG_LOG] = {"EBB_DEBUG_LOG", 0, 0, 0, NULL, true,
                       "append fault and leak reports to this file instead of stderr "
                       "(%p: the process id), opened for each report"},
    [OPT_DEBUG_DEMANGLE] = {"EBB_DEBUG_DEMANGLE", 1, 0, 1, NULL, false,
                            "1: C++ names in stack traces are demangled (by binutils' c++filt, "
                            "where it can run); 0: shown as the symbol table has them", OPTION_SWITCH},
};

/* ASCII, case-insensitive: no locale is consulted while the process starts. */
static bool same_word(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        if (x != *b)
            return false;
    }
    return *a == *b;
}

static const char *const switch_off[] = {"0", "off", "no", "false", NULL};
static const char *const switch_on[] = {"1", "on", "yes", "true", NULL};

static bool in_words(const char *s, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (same_word(s, words[i]))
            return true;
    return false;
}

/* A byte count: an optional '+', digits, then nothing or one of K M G T (any
 * case), which may be followed by "iB" or "B" (any case). The sign is
 * accepted as whole numbers accept it (option_parse_long); a '-' never is,
 * not even "-0": option_refusal says why. */
static bool parse_bytes(const char *s, long *out)
{
    if (*s == '+')
        s++;
    /* Leading zeros are no digits of the count: 25 of them before "16"
     * were refused as too long, with a message giving a range 16 is in. */
    while (s[0] == '0' && s[1] >= '0' && s[1] <= '9')
        s++;
    char digits[24];
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        if (n + 1 >= sizeof digits)
            return false;
        digits[n] = s[n];
        n++;
    }
    digits[n] = '\0';
    long v;
    if (n == 0 || !option_parse_long(digits, &v))
        return false;
    const char *unit = s + n;
    if (*unit == '\0') {
        *out = v;
        return true;
    }
    static const char scales[] = "kmgt";
    int shift = 0;
    for (int i = 0; scales[i]; i++)
        if ((unit[0] | 0x20) == scales[i])
            shift = 10 * (i + 1);
    if (shift == 0 || !(unit[1] == '\0' || same_word(unit + 1, "ib") || same_word(unit + 1, "b")))
        return false;
    if (v > LONG_MAX >> shift)
        return false;
    *out = v << shift;
    return true;
}

bool option_parse_value(const option_desc_t *d, const char *s, long *out)
{
    long v;
    switch (d->unit) {
    case OPTION_SWITCH:
        if (in_words(s, switch_off))
            v = 0;
        else if (in_words(s, switch_on))
            v = 1;
        else
            return false;
        break;
    case OPTION_BYTES:
        if (!parse_bytes(s, &v))
            return false;
        break;
    default:
        if (!option_parse_long(s, &v))
            return false;
        break;
    }
    if (v < d->min || v > d->max)
        return false;
    *out = v;
    return true;
}

const char *option_form(const option_desc_t *d)
{
    switch (d->unit) {
    case OPTION_SWITCH:
        return "0 or 1 (or off/on, no/yes, false/true)";
    case OPTION_BYTES:
        return "a byte count";
    default:
        return "a whole number";
    }
}

bool option_parse_choice(const option_desc_t *d, const char *s, long *out)
{
    for (long i = 0; d->choices[i]; i++) {
        if (strcasecmp(s, d->choices[i]) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

bool option_has_range(const option_desc_t *d)
{
    return d->unit != OPTION_SWITCH;
}

/* The suffixes parse_bytes accepts, said once for the refusal messages and
 * ebbrun --help. */
const char *option_form_note(const option_desc_t *d)
{
    return d->unit == OPTION_BYTES ? ", optionally followed by K, M, G or T (powers of 1024; any "
                                     "case, alone or with B or iB: 64K = 64KB = 64KiB)"
                                   : "";
}

const char *option_refusal(const option_desc_t *d, const char *s)
{
    /* "expected a byte count from 0 to N" read as if -0 were out of range. */
    if (d->unit == OPTION_BYTES && s[0] == '-')
        return "a byte count cannot be negative";
    return NULL;
}

bool option_parse_long(const char *s, long *out)
{
    bool neg = false;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    unsigned base = 10;
    if (s[0] == '0' && (s[1] | 0x20) == 'x') {
        base = 16; /* fill bytes are named in hex: EBB_DEBUG_FILL_FREE=0xDD */
        s += 2;
    }
    if (*s == '\0')
        return false;
    unsigned long v = 0;
    for (; *s; s++) {
        unsigned long digit;
        if (*s >= '0' && *s <= '9')
            digit = (unsigned long)(*s - '0');
        else if (base == 16 && (*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
            digit = (unsigned long)((*s | 0x20) - 'a' + 10);
        else
            return false;
        if (v > ((unsigned long)LONG_MAX - digit) / base)
            return false;
        v = v * base + digit;
    }
    *out = neg ? -(long)v : (long)v;
    return true;
}

size_t option_path_expanded_len(const char *pattern)
{
    size_t len = 0;
    for (const char *c = pattern; *c; c++) {
        if (c[0] == '%' && (c[1] == 'p' || c[1] == '%')) {
            len += c[1] == 'p' ? 7 : 1;
            c++;
        } else {
            len++;
        }
    }
    return len;
}
