/*
 * options.h — the table of EBB_* variables, shared by the library (options.c
 * parses the environment with it) and by tools/ebbrun.c (whose --help prints
 * it), so that the documentation cannot drift from the parser. Standalone: it
 * needs nothing else of ebb's internals.
 */
#ifndef EBB_OPTIONS_H
#define EBB_OPTIONS_H

#include <stdbool.h>

typedef enum {
    OPT_PURGE_DELAY,    /* ms; 0 = at once, -1 = never */
    OPT_PURGE_METHOD,   /* 0 = MADV_DONTNEED, 1 = MADV_FREE */
    OPT_UNMAP_DELAY,    /* ms */
    OPT_BACKGROUND,     /* 0/1 */
    OPT_HUGE_PAGES,     /* 0/1: huge blocks asked to be backed by transparent huge pages */
    OPT_STATS,          /* 0/1: the report at exit */
    OPT_STATS_FILE,     /* text: where reports and samples go (stderr if unset) */
    OPT_STATS_INTERVAL, /* ms; 0 = no periodic samples */
    OPT_DEBUG,             /* 0/1: debug mode */
    OPT_DEBUG_ON_ERROR,    /* 0 = abort, 1 = continue */
    OPT_DEBUG_REALLOC,     /* 0 = fit (in place when it fits), 1 = move */
    OPT_DEBUG_QUARANTINE,  /* bytes of freed blocks held back */
    OPT_DEBUG_QUARANTINE_IDLE, /* ms without a free after which a thread's quarantine drains */
    OPT_DEBUG_FILL_ALLOC,  /* byte written into new blocks */
    OPT_DEBUG_FILL_FREE,   /* byte written into freed blocks */
    OPT_DEBUG_TRACE_DEPTH, /* frames per stack trace */
    OPT_DEBUG_LEAKS,       /* 0 = off, 1 = lost, 2 = all */
    OPT_DEBUG_LEAK_EXITCODE, /* exit status of a leaking process (0: unchanged) */
    OPT_DEBUG_LEAK_REGISTERS, /* 1: the leak report asks other threads for their registers */
    OPT_DEBUG_LOG,         /* text: where fault and leak reports go (stderr if unset) */
    OPT_DEBUG_DEMANGLE,    /* 1: C++ names in traces demangled (by c++filt) */
    OPT_COUNT
} option_id_t;

/* How a numeric option's value is written. */
typedef enum {
    OPTION_NUMBER, /* an integer, decimal or hex after 0x, with an optional
                      sign (+ or -) */
    OPTION_SWITCH, /* 0 or 1; also off/on, no/yes, false/true (any case) */
    OPTION_BYTES,  /* decimal digits with an optional '+' (never a '-', not
                      even -0), optionally followed by K, M, G or T (powers
                      of 1024, any case; "KiB" and "KB" mean the same) */
} option_unit_t;

/* Bytes the library keeps for the values of its text options, all of them
 * together, each with its terminating NUL (options.c); ebbrun refuses a
 * value that cannot fit. */
#define OPTION_TEXT_SPACE 8192

typedef struct option_desc_s {
    const char *name;
    long def, min, max;         /* numeric options */
    const char *const *choices; /* NULL-terminated names of 0, 1, ...; or NULL */
    bool is_text;               /* the value is text (a path), not a number */
    const char *doc;            /* one line for README.md and ebbrun --help */
    option_unit_t unit;         /* numeric options: how the value is written */
} option_desc_t;

extern const option_desc_t option_table[OPT_COUNT];

/* An integer with an optional sign and nothing else (no spaces): decimal
 * digits, or hex digits after "0x" (any case); false if `s` is not one or is
 * beyond a long. */
bool option_parse_long(const char *s, long *out);

/* The value of numeric option `d` written as `s` (its unit's forms, above),
 * within d's range; false if it is not one. The library and ebbrun both use
 * it, so ebbrun accepts exactly what the library will. */
bool option_parse_value(const option_desc_t *d, const char *s, long *out);

/* The index of the name `s` among a named option's choices (d->choices),
 * matched in any case, as switches' words are; false if it is none of them.
 * The library and ebbrun both use it. */
bool option_parse_choice(const option_desc_t *d, const char *s, long *out);

/* What option_parse_value accepts for `d`, for "expected <form> from <min>
 * to <max><note>" (option_has_range) or "expected <form>" (a switch); the
 * note (a byte count's suffixes) is in ebbrun --help too. */
const char *option_form(const option_desc_t *d);
bool option_has_range(const option_desc_t *d);
const char *option_form_note(const option_desc_t *d);

/* Why `s` is refused for numeric option `d`, where that says more than the
 * form and range do (a '-' before a byte count: "a byte count cannot be
 * negative"); NULL otherwise. The library and ebbrun both use it. */
const char *option_refusal(const option_desc_t *d, const char *s);

/* The length of a file-name option's value once the library expands it (text.c,
 * text_expand_path): each %p up to 7 digits (the largest pid), each %% one
 * '%'. The library and ebbrun both use it. */
size_t option_path_expanded_len(const char *pattern);

#endif /* EBB_OPTIONS_H */
