/*
 * ebbrun — run any program with ebb preloaded and ebb's options set.
 *
 *   ebbrun [--stats] [--stats-file FILE] [--stats-interval MS] [--purge-delay MS]
 *          [--debug] [--set NAME=VALUE]... -- program [args...]
 *
 * It finds libebb.so next to itself (the build tree: build/ebbrun and
 * build/libebb.so), else in the library directory it was installed with
 * (`make install` builds it for its LIBDIR), else in ../lib; puts it first
 * in LD_PRELOAD (keeping what was there, less any other libebb.so: two
 * copies of ebb in one process would each report); sets the EBB_* variables
 * the flags ask for (every copy of each: the loader and ebb would otherwise
 * read another copy than the one set); and executes the program, which
 * inherits both (so do its children). Every value is checked against ebb's
 * option table (src/option_table.c, the same table the library parses)
 * before the program starts: a bad one is an error here, not a surprise
 * later. A program the loader will not preload ebb into (statically linked,
 * or set-user-ID or set-group-ID for someone else) still runs, with a
 * warning. ebbrun's own failures exit with 125, as env(1)'s do, so that
 * they are not taken for the program's status.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "options.h"

#ifndef EBB_LIBDIR
#define EBB_LIBDIR "/usr/local/lib"
#endif

static const char *prog = "ebbrun";

/* ebbrun's own failure (a bad flag, no library): env(1)'s status, which a
 * program's own exit rarely is (2 was grep's, diff's and make's). */
#define EBBRUN_FAILED 125

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [options] -- program [args...]\n"
            "\n"
            "Runs program with the ebb allocator preloaded (LD_PRELOAD) and ebb's\n"
            "options set in its environment.\n"
            "\n"
            "options:\n"
            "  --stats               print ebb's report when the program exits (EBB_STATS=1)\n"
            "  --stats-file FILE     append the report and samples to FILE (EBB_STATS_FILE;\n"
            "                        implies --stats)\n"
            "  --stats-interval MS   print a one-line sample every MS ms (EBB_STATS_INTERVAL)\n"
            "  --purge-delay MS      ms before free memory goes back to the OS (EBB_PURGE_DELAY)\n"
            "  --debug               debug mode (EBB_DEBUG=1): heap misuse reported with stack traces\n"
            "  --debug-log FILE      append debug mode's reports to FILE (EBB_DEBUG_LOG;\n"
            "                        implies --debug)\n"
            "  --set NAME=VALUE      set any EBB_* variable below\n"
            "  --library PATH        preload this libebb.so instead of the one found\n"
            "  --help, -h            this text\n"
            "\n"
            "ebbrun exits with 125 when it cannot run the program, 126 when the program\n"
            "cannot be executed, 127 when it is not found; else with the program's status.\n"
            "A libebb.so already in LD_PRELOAD is replaced by this one.\n"
            "In a file name, %%p stands for the process id and %%%% for a %%.\n"
            "\n"
            "EBB_* variables (also read from the environment as it is):\n",
            prog);
    for (int i = 0; i < OPT_COUNT; i++) {
        const option_desc_t *d = &option_table[i];
        fprintf(out, "  %-25s %s\n", d->name, d->doc);
        if (d->is_text)
            fprintf(out, "  %-25s   (a file name; unset by default)\n", "");
        else if (d->choices)
            fprintf(out, "  %-25s   (one of the names; default %s)\n", "", d->choices[d->def]);
        else if (d->unit == OPTION_SWITCH)
            fprintf(out, "  %-25s   (0/1, off/on, no/yes or false/true; default %ld)\n", "", d->def);
        else if (d->unit == OPTION_BYTES)
            fprintf(out, "  %-25s   (%ld to %ld bytes%s; default %ld)\n", "", d->min, d->max,
                    option_form_note(d), d->def);
        else
            fprintf(out, "  %-25s   (%ld to %ld; default %ld)\n", "", d->min, d->max, d->def);
    }
    fprintf(out, "\nUnknown or malformed EBB_* variables are reported by ebb itself, once, "
                 "when the program starts.\n");
}

static void die(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(%s --help lists the options)\n", prog);
    exit(EBBRUN_FAILED);
}

static const option_desc_t *option_find(const char *name, size_t len)
{
    for (int i = 0; i < OPT_COUNT; i++) {
        const option_desc_t *d = &option_table[i];
        if (strlen(d->name) == len && strncmp(d->name, name, len) == 0)
            return d;
    }
    return NULL;
}

/* Validate `value` as the library would; exit with a message if it is bad. */
static void option_check(const option_desc_t *d, const char *value)
{
    if (d->is_text) {
        if (*value == '\0')
            die("%s: expected a file name, got an empty value%s", d->name, "");
        /* The library would refuse it at start (review finding: accepted
         * here, refused later). */
        /* The file name must fit a path once the library expands it (text.c:
         * %p up to 7 digits, %% one '%'). A relative name is made absolute
         * from the starting directory where that fits, and kept as it is
         * where it does not. */
        size_t expanded = option_path_expanded_len(value);
        if (expanded >= PATH_MAX) {
            fprintf(stderr, "%s: %s: up to %zu bytes once expanded, longer than a file name "
                    "may be (%d)\n", prog, d->name, expanded, PATH_MAX - 1);
            exit(EBBRUN_FAILED);
        }
        if (strlen(value) >= OPTION_TEXT_SPACE) {
            fprintf(stderr, "%s: %s: %zu bytes, longer than the %d the library holds for text "
                    "options\n", prog, d->name, strlen(value), OPTION_TEXT_SPACE - 1);
            exit(EBBRUN_FAILED);
        }
        return;
    }
    long v;
    if (d->choices) {
        if (option_parse_choice(d, value, &v))
            return;
        fprintf(stderr, "%s: %s=%s: expected one of", prog, d->name, value);
        for (int i = 0; d->choices[i]; i++)
            fprintf(stderr, " %s", d->choices[i]);
        fprintf(stderr, "\n");
        exit(EBBRUN_FAILED);
    }
    if (!option_parse_value(d, value, &v)) {
        const char *why = option_refusal(d, value);
        if (why) {
            fprintf(stderr, "%s: %s=%s: %s\n", prog, d->name, value, why);
            exit(EBBRUN_FAILED);
        }
        fprintf(stderr, "%s: %s=%s: expected %s", prog, d->name, value, option_form(d));
        if (option_has_range(d))
            fprintf(stderr, " from %ld to %ld%s", d->min, d->max, option_form_note(d));
        fprintf(stderr, "\n");
        exit(EBBRUN_FAILED);
    }
}

/* The text options together, each with its NUL, as the library keeps them:
 * alone each may fit, and together not (review finding: two 5,005-byte
 * paths passed, and the library refused the second at start). The ones set
 * in the environment already count too. */
static void text_options_fit(void)
{
    size_t total = 0;
    for (int i = 0; i < OPT_COUNT; i++) {
        const char *v = option_table[i].is_text ? getenv(option_table[i].name) : NULL;
        if (v != NULL && *v != '\0')
            total += strlen(v) + 1;
    }
    if (total > OPTION_TEXT_SPACE) {
        fprintf(stderr, "%s: the text options (file names) take %zu bytes together, more than the "
                "%d the library holds for them\n", prog, total, OPTION_TEXT_SPACE);
        exit(EBBRUN_FAILED);
    }
}

static void option_set(const char *name, const char *value)
{
    const option_desc_t *d = option_find(name, strlen(name));
    if (d == NULL)
        die("%s: not an ebb option%s", name, "");
    option_check(d, value);
    /* unsetenv takes out every copy; setenv alone replaces the first. */
    unsetenv(name);
    if (setenv(name, value, 1) != 0)
        die("cannot set %s: %s", name, strerror(errno));
}

static void option_set_assignment(const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (eq == NULL || strncmp(assignment, "EBB_", 4) != 0)
        die("--set %s: expected EBB_NAME=VALUE%s", assignment, "");
    char name[64];
    size_t len = (size_t)(eq - assignment);
    if (len >= sizeof name)
        die("--set %s: name too long%s", assignment, "");
    memcpy(name, assignment, len);
    name[len] = '\0';
    option_set(name, eq + 1);
}

static bool file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

/* The library: next to this program (the build tree), where it was
 * installed (EBB_LIBDIR: make install builds ebbrun for its LIBDIR, lib64 or
 * a multiarch directory included), or in ../lib (a tree moved elsewhere). */
static bool library_find(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = NULL;
    if (n > 0) {
        self[n] = '\0';
        slash = strrchr(self, '/');
    }
    if (slash) {
        *slash = '\0';
        snprintf(out, cap, "%s/libebb.so", self);
        if (file_exists(out))
            return true;
    }
    snprintf(out, cap, "%s/libebb.so.0", EBB_LIBDIR);
    if (file_exists(out))
        return true;
    if (slash) {
        snprintf(out, cap, "%s/../lib/libebb.so.0", self);
        if (file_exists(out))
            return true;
    }
    return false;
}

/* This build's ELF machine: a library for another one is skipped by the
 * loader. */
#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#else
#define OWN_MACHINE EM_NONE /* not checked */
#endif

/* Whether the file at `path` is an ELF shared object this machine's loader
 * can preload: 64-bit, of this machine, ET_DYN and not a position-
 * independent executable (DF_1_PIE: "cannot dynamically load"). The loader
 * skips anything else with a message and runs the program without it
 * (review findings: --library /usr/bin/true, an aarch64 library). */
static bool elf_shared_object(const char *path)
{
    Elf64_Ehdr eh;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh &&
              memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
              eh.e_type == ET_DYN && (OWN_MACHINE == EM_NONE || eh.e_machine == OWN_MACHINE);
    for (int i = 0; ok && i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) !=
            (ssize_t)sizeof ph)
            break;
        if (ph.p_type != PT_DYNAMIC)
            continue;
        for (Elf64_Off at = 0; at + sizeof(Elf64_Dyn) <= ph.p_filesz; at += sizeof(Elf64_Dyn)) {
            Elf64_Dyn d;
            if (pread(fd, &d, sizeof d, (off_t)(ph.p_offset + at)) != (ssize_t)sizeof d ||
                d.d_tag == DT_NULL)
                break;
            if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_PIE))
                ok = false;
        }
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

/* The file execvp would run for `name`: itself if it has a slash, else the
 * first executable one in PATH. Empty if none. */
static void program_find(const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc's execvp's */
    for (;;) { /* an empty entry, first, last or between two ':', is "." */
        size_t len = strcspn(path, ":");
        snprintf(out, cap, "%.*s%s%s", (int)len, path, len ? "/" : "", name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return;
        if (path[len] == '\0')
            break;
        path += len + 1;
    }
    out[0] = '\0';
}

/* Why the loader will not preload ebb into the program at `path`, or NULL
 * (it will, or the file is not ELF: a script's interpreter is judged when
 * it runs). */
static const char *preload_refusal(const char *path)
{
    struct stat st;
    if (path[0] == '\0' || stat(path, &st) != 0)
        return NULL;
    if ((st.st_mode & S_ISUID && st.st_uid != geteuid()) ||
        (st.st_mode & S_ISGID && st.st_gid != getegid()) ||
        (geteuid() != 0 && getxattr(path, "security.capability", NULL, 0) > 0))
        return "runs with raised privileges (set-user-ID, set-group-ID or file capabilities), "
               "and the loader then preloads no library given by path";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    Elf64_Ehdr eh;
    bool elf64 = read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh &&
                 memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64;
    bool interp = false;
    for (int i = 0; elf64 && i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) !=
            (ssize_t)sizeof ph)
            break;
        interp |= ph.p_type == PT_INTERP;
    }
    close(fd);
    if (elf64 && !interp)
        return "is statically linked, and no library can be preloaded into it (link it with "
               "libebb.a instead)";
    return NULL;
}

/* LD_PRELOAD's entries less any libebb.so (not libebb-prefixed.so), which
 * would be a second copy of ebb in the process. */
static void preload_without_ebb(const char *old, char *out, size_t cap)
{
    out[0] = '\0';
    size_t used = 0;
    while (old && *old) {
        size_t sep = strspn(old, " :");
        old += sep;
        size_t len = strcspn(old, " :");
        if (len == 0)
            break;
        const char *base = old;
        for (size_t k = 0; k < len; k++)
            if (old[k] == '/')
                base = old + k + 1;
        /* libebb.so, or libebb.so.<version> */
        size_t blen = (size_t)(old + len - base);
        bool ebb = blen >= 9 && strncmp(base, "libebb.so", 9) == 0 &&
                   (blen == 9 || (base[9] == '.' && strspn(base + 10, "0123456789.") == blen - 10));
        if (!ebb && used + len + 2 < cap) {
            if (used)
                out[used++] = ':';
            memcpy(out + used, old, len);
            used += len;
            out[used] = '\0';
        }
        old += len;
    }
}

/* Whether LD_PRELOAD can name this path: the loader splits its value at
 * spaces and colons (and takes no escapes). */
static bool preload_can_carry(const char *path)
{
    return strpbrk(path, " :\t\n") == NULL;
}

int main(int argc, char **argv)
{
    const char *library = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        /* "--" ends the options: it is never an option's value
         * (`--stats-file -- prog` sent the report to a file named "--"). */
        bool has_value = i + 1 < argc && strcmp(argv[i + 1], "--") != 0;
        if (strcmp(a, "--stats") == 0) {
            option_set("EBB_STATS", "1");
        } else if (strcmp(a, "--debug") == 0) {
            option_set("EBB_DEBUG", "1");
        } else if (strcmp(a, "--debug-log") == 0 && has_value) {
            option_set("EBB_DEBUG_LOG", argv[++i]);
            option_set("EBB_DEBUG", "1"); /* a log of nothing was no use */
        } else if (strcmp(a, "--stats-file") == 0 && has_value) {
            option_set("EBB_STATS_FILE", argv[++i]);
            option_set("EBB_STATS", "1");
        } else if (strcmp(a, "--stats-interval") == 0 && has_value) {
            option_set("EBB_STATS_INTERVAL", argv[++i]);
        } else if (strcmp(a, "--purge-delay") == 0 && has_value) {
            option_set("EBB_PURGE_DELAY", argv[++i]);
        } else if (strcmp(a, "--set") == 0 && has_value) {
            option_set_assignment(argv[++i]);
        } else if (strcmp(a, "--library") == 0 && has_value) {
            library = argv[++i];
        } else if (a[0] == '-') {
            die("%s: unknown option, or its value is missing%s", a, "");
        } else {
            break; /* the program, without "--" */
        }
    }
    if (i >= argc) {
        fprintf(stderr, "%s: no program to run\n", prog);
        usage(stderr);
        return EBBRUN_FAILED;
    }
    char found[PATH_MAX + 32];
    if (library == NULL) {
        if (!library_find(found, sizeof found)) {
            fprintf(stderr, "%s: cannot find libebb.so (looked next to %s, in ../lib, and in %s); "
                            "use --library PATH\n", prog, argv[0], EBB_LIBDIR);
            return EBBRUN_FAILED;
        }
        library = found;
    } else if (!file_exists(library)) {
        die("--library %s: %s", library, strerror(errno));
    }
    if (!elf_shared_object(library))
        die("%s: not a shared library (LD_PRELOAD would skip it and run the program without "
            "ebb)%s", library, "");
    /* An absolute path (the program may change directory), and one that
     * LD_PRELOAD can carry: the loader splits it at spaces and colons, and a
     * library path with either in it was silently not loaded (the program
     * then ran without ebb). The given path is kept where resolving it would
     * bring one in, so that a symbolic link without them works. */
    char resolved[PATH_MAX], absolute[PATH_MAX];
    if (realpath(library, resolved) != NULL && preload_can_carry(resolved)) {
        library = resolved;
    } else if (library[0] != '/' && getcwd(absolute, sizeof absolute) != NULL &&
               strlen(absolute) + 1 + strlen(library) < sizeof absolute) {
        strcat(absolute, "/");
        strcat(absolute, library);
        library = absolute;
    }
    if (!preload_can_carry(library))
        die("%s: LD_PRELOAD cannot carry a path with a space or a colon; give --library a path "
            "without them (a symbolic link to the library will do)%s", library, "");
    text_options_fit();
    const char *old = getenv("LD_PRELOAD");
    size_t need = strlen(library) + (old ? strlen(old) + 1 : 0) + 2;
    char *kept = malloc(need), *preload = malloc(need);
    if (kept == NULL || preload == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EBBRUN_FAILED;
    }
    preload_without_ebb(old, kept, need);
    snprintf(preload, need, "%s%s%s", library, *kept ? ":" : "", kept);
    unsetenv("LD_PRELOAD"); /* every copy: the loader reads the last one */
    setenv("LD_PRELOAD", preload, 1);
    char target[PATH_MAX];
    program_find(argv[i], target, sizeof target);
    const char *refusal = preload_refusal(target);
    if (refusal)
        fprintf(stderr, "%s: warning: %s %s: it runs without ebb\n", prog, argv[i], refusal);
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
