/*
 * options.c — the only code that reads the environment.
 *
 * Every EBB_* variable is one row of option_table (option_table.c): its name,
 * default, range and one line of documentation; this parser and ebbrun --help
 * both read the table, so they cannot drift apart. Options are read once, at the first
 * allocator call of the process, from `environ` (or /proc/self/environ when the
 * C library has not set `environ` yet), without allocating. A malformed value
 * or an unknown EBB_* name is reported once on stderr, and the default is kept.
 * A program started with raised privileges ignores them all
 * (options_report_ignored says why).
 */
#include <string.h>
#include <strings.h>

#include "internal.h"

extern char **environ;

static ebb_small_global long option_values[OPT_COUNT];
/* Read only when a report or the stats file is opened: kept out of the one
 * page of small globals (tests/test_exports.sh, cold_arrays_take_no_file_space). */
static const char *option_texts[OPT_COUNT] ebb_cold_bss;
/* The text values themselves, copied: a program may rewrite its environment
 * strings in place (setproctitle in nginx and PostgreSQL clears them to hold
 * the process title), and EBB_DEBUG_LOG is read at every report (a review
 * found the log path emptied that way). */
static char option_text_space[OPTION_TEXT_SPACE] ebb_cold_bss;
static size_t option_text_used;
static bool options_loaded;
/* Set by options_init for a program started with raised privileges: every
 * EBB_* variable is then ignored (options_init says why). */
static bool options_from_untrusted_environment;
static bool options_ignored_some;

/* Before options_init (the first allocator call) the defaults apply. */
long option_get(option_id_t id)
{
    return ebb_likely(options_loaded) ? option_values[id] : option_table[id].def;
}

const char *option_get_text(option_id_t id)
{
    return option_texts[id];
}

static void option_set_from_text(option_id_t id, const char *value)
{
    const option_desc_t *d = &option_table[id];
    long v;
    bool ok = false;
    if (d->is_text) {
        size_t len = strlen(value);
        if (len > 0 && len < OPTION_TEXT_SPACE - option_text_used) {
            char *copy = option_text_space + option_text_used;
            memcpy(copy, value, len + 1);
            option_text_used += len + 1;
            option_texts[id] = copy;
            return;
        }
    } else if (d->choices) {
        ok = option_parse_choice(d, value, &v);
    } else {
        ok = option_parse_value(d, value, &v);
    }
    if (ok) {
        option_values[id] = v;
        return;
    }
    text_t t;
    text_init(&t, 2);
    text_add(&t, "ebb: ");
    text_add(&t, d->name);
    text_add(&t, "=");
    text_add(&t, value);
    if (d->is_text) {
        text_add(&t, ": expected a file name (shorter than 8 KiB in all); ignored");
    } else if (d->choices) {
        text_add(&t, ": expected one of");
        for (long i = 0; d->choices[i]; i++) {
            text_add(&t, " ");
            text_add(&t, d->choices[i]);
        }
        text_add(&t, "; using ");
        text_add(&t, d->choices[d->def]);
    } else if (option_refusal(d, value)) {
        text_add(&t, ": ");
        text_add(&t, option_refusal(d, value));
        text_add(&t, "; using ");
        text_add_long(&t, d->def);
    } else {
        text_add(&t, ": expected ");
        text_add(&t, option_form(d));
        if (option_has_range(d)) {
            text_add(&t, " from ");
            text_add_long(&t, d->min);
            text_add(&t, " to ");
            text_add_long(&t, d->max);
            text_add(&t, option_form_note(d));
        }
        text_add(&t, "; using ");
        text_add_long(&t, d->def);
    }
    text_add(&t, "\n");
    text_flush(&t);
}

/* An option's name in another case ("ebb_debug=1"): a mistake to point
 * out, where another program's own lower-case variable is left alone. */
static void options_consider_other_case(const char *entry, size_t name_len)
{
    for (int id = 0; id < OPT_COUNT; id++) {
        const char *name = option_table[id].name;
        if (strlen(name) == name_len && strncasecmp(entry, name, name_len) == 0) {
            text_t t;
            text_init(&t, 2);
            text_add(&t, "ebb: ");
            text_add_n(&t, entry, name_len);
            text_add(&t, " is not read: option names are upper case (");
            text_add(&t, name);
            text_add(&t, ")\n");
            text_flush(&t);
            return;
        }
    }
}

/* One "NAME=value" string from the environment. A name given twice (a
 * hand-built environment may hold both) takes its first value, as getenv
 * and ebbrun do, and the second is reported. */
static void options_consider(const char *entry, bool seen[OPT_COUNT])
{
    const char *eq = strchr(entry, '=');
    if (eq == NULL)
        return;
    size_t name_len = (size_t)(eq - entry);
    if (strncmp(entry, "EBB_", 4) != 0) {
        if (strncasecmp(entry, "EBB_", 4) == 0 && !options_from_untrusted_environment)
            options_consider_other_case(entry, name_len);
        return;
    }
    if (options_from_untrusted_environment) {
        options_ignored_some = true;
        return;
    }
    for (int id = 0; id < OPT_COUNT; id++) {
        const char *name = option_table[id].name;
        if (strlen(name) == name_len && strncmp(entry, name, name_len) == 0) {
            if (!seen[id]) {
                seen[id] = true;
                option_set_from_text((option_id_t)id, eq + 1);
                return;
            }
            text_t t;
            text_init(&t, 2);
            text_add(&t, "ebb: ");
            text_add(&t, name);
            text_add(&t, " is set twice in the environment; only the first is read, ");
            text_add_n(&t, entry, name_len < 64 ? name_len : 64);
            text_add(&t, "=");
            text_add_n(&t, eq + 1, strnlen(eq + 1, 64));
            text_add(&t, " ignored\n");
            text_flush(&t);
            return;
        }
    }
    text_t t;
    text_init(&t, 2);
    text_add(&t, "ebb: unknown option ");
    text_add_n(&t, entry, name_len < 64 ? name_len : 64);
    text_add(&t, " (ignored; README.md lists the options)\n");
    text_flush(&t);
}

/* The kernel's copy of the environment is read this much at a time; an
 * entry longer than that is cut (option texts hold 8 KiB in all anyway). */
#define ENV_PIECE 8192

/* One entry of /proc/self/environ, len bytes: an EBB_ one is copied and
 * NUL-terminated for the parser. */
static void options_consider_record(const char *rec, size_t len, void *arg)
{
    (void)arg;
    static char entry[ENV_PIECE + 1] ebb_cold_bss; /* one caller, before any thread */
    if (len < 4 || strncasecmp(rec, "EBB_", 4) != 0) /* ebb_debug too: options_consider */
        return;
    if (len >= sizeof entry)
        len = sizeof entry - 1;
    memcpy(entry, rec, len);
    entry[len] = '\0';
    options_consider(entry, arg);
}

/* A program started with raised privileges (a set-user-ID or set-group-ID
 * file, or file capabilities) was given its environment by a less privileged
 * user. Honoured there, EBB_STATS_FILE and EBB_DEBUG_LOG would let that user
 * create or append to any file the program may write, debug mode's reports
 * would show them heap addresses and what the stack traces read, and
 * EBB_DEBUG_LEAK_EXITCODE would change the program's exit status. So there
 * every EBB_* variable is ignored, the way glibc ignores its own malloc
 * settings in such a program, and one line on stderr says so. */
static void options_report_ignored(void)
{
    text_t t;
    text_init(&t, 2);
    text_add(&t, "ebb: this program runs with raised privileges (set-user-ID, set-group-ID "
                 "or file capabilities): its EBB_* variables are ignored\n");
    text_flush(&t);
}

void options_init(void)
{
    /* Which names were read already: on the stack, as a static array it made
     * a page of cold bss resident in every process with an EBB_* variable
     * (tests/test_purge.c, a_fresh_process_writes_few_of_ebbs_static_pages). */
    bool seen[OPT_COUNT] = {false};
    option_text_used = 0;
    options_from_untrusted_environment = os_raised_privileges();
    /* option_texts is all NULL already (this runs once, before any option
     * is set): writing it would make its page of cold bss resident in every
     * process, 4 KiB for nothing (docs/memory-return.md, "The floor"). */
    for (int id = 0; id < OPT_COUNT; id++)
        option_values[id] = option_table[id].def;
    options_loaded = true;
    if (environ) {
        for (char **e = environ; *e; e++)
            options_consider(*e, seen);
    } else {
        /* Too early for the C library's environ: read the kernel's copy, an
         * entry at a time, however long the environment. */
        static char env_piece[ENV_PIECE] ebb_cold_bss;
        os_for_each_record("/proc/self/environ", '\0', env_piece, sizeof env_piece,
                           options_consider_record, seen);
    }
    if (options_ignored_some)
        options_report_ignored();
}

/* The variables are taken out of the environment too, as glibc takes out
 * LD_PRELOAD and MALLOC_TRACE there: a set-user-ID program that calls
 * setuid(0) and runs a helper linked with ebb passed them on, and the
 * helper, no longer started with raised privileges, wrote its report into
 * a root-only file (review finding). In place, without allocating, from
 * ebb's constructor only: never inside an allocator call, which may be
 * setenv's own realloc of environ (a first version did it at the first
 * call, and a variable a constructor set before ebb's landed past the end
 * of environ: review finding). */
void options_forget_untrusted(void)
{
    if (!options_from_untrusted_environment || environ == NULL)
        return;
    char **to = environ;
    for (char **e = environ; *e; e++)
        if (strncasecmp(*e, "EBB_", 4) != 0)
            *to++ = *e;
    *to = NULL;
}
