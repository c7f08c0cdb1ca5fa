/*
 * debug.c — debug mode (EBB_DEBUG=1): every block carries a header and a
 * canary, freed blocks wait in a quarantine filled with a pattern, and misuse
 * is reported with stack traces at the first call that can see it.
 *
 * How it is reached without costing release mode anything on malloc: in
 * debug mode a thread never gets a heap in tls.heap, so every malloc misses
 * the fast path (tls.heap stays heap_empty, whose direct slots are empty) and
 * reaches alloc_malloc_slow, which hands over to debug_alloc (the other
 * allocating calls through alloc_generic, which does too). Blocks come from a
 * per-thread debug heap whose segments carry the owner's id with
 * THREAD_ID_DEBUG set, an id no thread has: free's fast path never claims one
 * of them. free itself checks debug_enabled first (one load and a branch, the
 * only cost in release mode) so that even a pointer ebb never returned is
 * reported rather than dereferenced.
 *
 * A block:  [header (48 bytes) | padding to the alignment | user bytes |
 *            canary up to the block's end (at least 16 bytes)]
 * The header sits at the start of the underlying block, so any pointer into
 * the block finds it: the page gives the block, the block its header. Its
 * `magic` says live or freed and is mixed with the header's own address; its
 * `check` covers every other field but the quarantine link (header_check),
 * so a stray write before the user bytes is reported as corruption instead
 * of being trusted.
 *
 * Large blocks: fills and checks cover the whole block up to 1 MiB, and the
 * first and last 64 KiB beyond (a huge block is not made resident by its
 * fill); the canary is checked over its first 4 KiB.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "debug.h"

bool debug_enabled;

static struct {
    bool on_error_continue;
    bool realloc_moves; /* EBB_DEBUG_REALLOC=move */
    const char *log_pattern;  /* EBB_DEBUG_LOG, made absolute at start; NULL: stderr */
    uint8_t fill_alloc, fill_free;
    int depth;
    size_t quarantine_max;
    long quarantine_idle_ms; /* -1: never drained by time */
} cfg;

static void patterns_init(void);
static void reuse_init(void);
static void log_pattern_init(void);

static __thread bool in_debug; /* a trace capture that allocates must not recurse */
/* The canonical frame address of the innermost debug_* function on this
 * thread's stack (0 outside): trace frames at or below it are ebb's. */
static __thread uintptr_t stack_mark;

/* At the top of each public debug_* function: the mark becomes its own
 * canonical frame address (its frame pointer + 16: the return address and
 * the saved frame pointer lie between), and DEBUG_LEAVE puts back the mark
 * it found. The public functions do not call one another, so a call inside
 * another comes from outside ebb's code: a signal handler that interrupted
 * an allocator call, or the C library allocating inside one. It is traced
 * from its own frames. When only the outermost call set the mark, such a
 * call kept it, every frame below it (the handler's) counted as ebb's, and
 * a handler's block got the trace of the call the signal interrupted
 * (tests/debug/alloc_in_signal_handler.c). */
#define DEBUG_ENTER()                                                              \
    const uintptr_t outer_mark_ = stack_mark;                                      \
    stack_mark = (uintptr_t)__builtin_frame_address(0) + 2 * sizeof(void *)
#define DEBUG_LEAVE() (stack_mark = outer_mark_)

/* override.c's entry points, where it is linked (not in the sanitizer builds). */
__attribute__((weak)) void override_register_entry_points(void)
{
}

/* ---------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------- */
void debug_init(void)
{
    if (!option_get(OPT_DEBUG))
        return;
    cfg.on_error_continue = option_get(OPT_DEBUG_ON_ERROR) == 1;
    cfg.realloc_moves = option_get(OPT_DEBUG_REALLOC) == 1;
    cfg.fill_alloc = (uint8_t)option_get(OPT_DEBUG_FILL_ALLOC);
    cfg.fill_free = (uint8_t)option_get(OPT_DEBUG_FILL_FREE);
    cfg.depth = (int)option_get(OPT_DEBUG_TRACE_DEPTH);
    cfg.quarantine_max = (size_t)option_get(OPT_DEBUG_QUARANTINE);
    cfg.quarantine_idle_ms = option_get(OPT_DEBUG_QUARANTINE_IDLE);
    text_stderr_keep(); /* where reports go if the program closes fd 2 */
    log_pattern_init();
    patterns_init();
    reuse_init();
    /* Traces start at the caller of these. */
    const void *entries[] = {
        (const void *)ebb_malloc, (const void *)ebb_free, (const void *)ebb_calloc,
        (const void *)ebb_realloc, (const void *)ebb_reallocarray, (const void *)ebb_posix_memalign,
        (const void *)ebb_aligned_alloc, (const void *)ebb_memalign, (const void *)ebb_valloc,
        (const void *)ebb_pvalloc, (const void *)ebb_free_sized, (const void *)ebb_free_aligned_sized,
        (const void *)ebb_malloc_usable_size,
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        trace_add_entry_point(entries[i]);
    override_register_entry_points();
    trace_cache_init();
    debug_enabled = true;
    atomic_fetch_or_explicit(&alloc_calloc_slow, CALLOC_DEBUG, memory_order_relaxed);
}

/* The checksum of every header field but the magic and the quarantine link
 * (which change while the block waits in the quarantine, and are checked by
 * what they must be: the magic's value, a link to a freed header or, in a live
 * block, NULL). It covered only the fields set at allocation until a review
 * found writes into `flags` (calloc's "zeroed", the fork depth the leak
 * report uses) and `free_trace` (a double free's "freed at") unreported; the
 * free trace is covered since the free recomputes it. */
static uint64_t header_check(const debug_header_t *h)
{
    uint64_t x = h->size * 0x9E3779B97F4A7C15ull;
    x ^= ((uint64_t)h->shard << 32 | h->alloc_trace) * 0xC2B2AE3D27D4EB4Full;
    x ^= ((uint64_t)h->context << 8 | h->align_log2) * 0x165667B19E3779F9ull;
    x ^= ((uint64_t)h->flags << 32 | h->free_trace) * 0x27D4EB2F165667C5ull;
    return x ^ (x >> 29);
}

/* A header no write has changed: its checksum holds, and a live block's
 * quarantine link is NULL (a freed one's is checked where it is followed). */
static bool header_sound(const debug_header_t *h, bool live)
{
    return h->check == header_check(h) && (!live || h->qnext == NULL);
}


/* Allocations the C library makes for ebb itself (the scavenger's thread
 * structures, in purge_start_thread) are not the caller's: they get no trace,
 * instead of the trace of whichever malloc happened to start the thread. */
bool debug_untraced_begin(void)
{
    bool was = in_debug;
    in_debug = true;
    return was;
}

void debug_untraced_end(bool was)
{
    in_debug = was;
}

static uint32_t capture(void)
{
    /* Not from a signal handler that interrupted a section of ebb's holding
     * a lock (lock_any_held), such as fork_prepare, which holds the trace
     * registry's: the capture would wait for its own thread (review finding:
     * a handler's realloc during its thread's fork hung). The block gets no
     * trace instead. */
    if (cfg.depth == 0 || in_debug || lock_any_held())
        return 0;
    in_debug = true;
    uint32_t id = trace_capture_id(cfg.depth, stack_mark);
    in_debug = false;
    return id;
}

/* ---------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------- */
static lock_t report_lock = LOCK_INIT;

/* Every report, the leak report too, is written under it: they share the
 * symbolizer's buffers (trace.c, trace_print) and do not interleave.
 * - Its holder is recorded: a signal handler that interrupts a report and
 *   calls exit (whose leak report needs the lock) or fork (whose handlers
 *   take it) would otherwise wait for itself (review finding): the leak
 *   report is then skipped, and fork leaves the lock as it is.
 * - Cancellation is off while it is held: a report waits for addr2line and
 *   writes, which are cancellation points, and a thread cancelled there left
 *   the lock held for good (the next report, and exit's, hung). */
static _Atomic(uintptr_t) report_owner;
static __thread int report_cancel_state;

void debug_report_lock(void)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    lock_acquire(&report_lock);
    report_cancel_state = old;
    atomic_store_explicit(&report_owner, thread_id_self(), memory_order_relaxed);
}

void debug_report_unlock(void)
{
    int old = report_cancel_state;
    atomic_store_explicit(&report_owner, 0, memory_order_relaxed);
    lock_release(&report_lock);
    pthread_setcancelstate(old, &old);
}

/* Whether this thread is in the middle of a report (a signal handler of its
 * interrupted one). */
bool debug_report_held_here(void)
{
    return atomic_load_explicit(&report_owner, memory_order_relaxed) == thread_id_self();
}

/* A relative EBB_DEBUG_LOG is taken from the directory the process started
 * in (text_absolute_path). */
static void log_pattern_init(void)
{
    static char absolute[4096] ebb_cold_bss;
    cfg.log_pattern = text_absolute_path(option_get_text(OPT_DEBUG_LOG), absolute, sizeof absolute);
}

/* Where a report goes: EBB_DEBUG_LOG's file, opened for this one report, else
 * stderr (text_report_open says why). */
int debug_log_open(bool *opened)
{
    static char path[4096] ebb_cold_bss; /* under the report lock, as every report */
    return text_report_open("EBB_DEBUG_LOG", cfg.log_pattern, path, sizeof path, opened);
}

void debug_log_close(int fd, bool opened)
{
    text_report_close(fd, opened);
}

/* One fault: its name, the pointer, the block (when it has a valid header)
 * with its traces, and this call's trace. `detail` may be NULL. Then abort,
 * unless EBB_DEBUG_ON_ERROR=continue. */
static void report_at(const char *fault, const void *p, const debug_header_t *h, uintptr_t h_at,
                      const char *detail);

static void report(const char *fault, const void *p, const debug_header_t *h, const char *detail)
{
    report_at(fault, p, h, (uintptr_t)h, detail);
}

/* After a report: go on (EBB_DEBUG_ON_ERROR=continue), or abort. */
static void report_end(void)
{
    if (!cfg.on_error_continue) {
        /* A SIGABRT handler may siglongjmp out and let the program carry
         * on: then the debug call this report ends never returns to clear
         * its stack mark. Left set, every later capture on the thread
         * started from this call's dead frame: traces of frames long gone,
         * and a SIGSEGV once a coroutine's stack it lay on was unmapped
         * (review finding, tests/debug/abort_caught_on_a_coroutine_stack.c).
         * Cleared, the handler's own allocations are traced from their own
         * frames too, not from the call the abort interrupted. */
        stack_mark = 0;
        in_debug = false;
        abort();
    }
}

static const char report_continuing[] = "==ebb== continuing (EBB_DEBUG_ON_ERROR=continue)\n";
static const char report_aborting[] =
    "==ebb== aborting (EBB_DEBUG_ON_ERROR=continue logs faults and goes on)\n";

/* A fault found by a signal handler that interrupted this thread's own
 * report: the report lock is this thread's already and the symbolizer's
 * buffers are in use (a report waits for addr2line, whose exit raises
 * SIGCHLD; a handler's double free waited for the lock for good, and not
 * even the first report was written: review finding). A short report
 * instead, without a trace (a capture now could wait
 * for a lock of the trace registry's that the interrupted report holds).
 * The bad call is ignored, as with EBB_DEBUG_ON_ERROR=continue; without it,
 * the interrupted report aborts once it is written. */
/* A fault report's first line: "==ebb== ERROR: <fault> of <pointer> (pid N)". */
static void report_headline(text_t *t, const char *fault, const void *p)
{
    text_add(t, "==ebb== ERROR: ");
    text_add(t, fault);
    text_add(t, " of ");
    text_add_hex(t, (uintptr_t)p);
    text_add(t, " (pid ");
    text_add_u64(t, (uint64_t)os_getpid(), 0);
    text_add(t, ")\n");
}

static bool fault_report_running; /* under the report lock: report_at's, not the leak report */

static void report_nested(const char *fault, const void *p)
{
    /* The interrupted report is the leak report, which ends in no abort:
     * without continue, abort now (review finding: such a fault left the
     * process to exit 0). */
    bool abort_now = !cfg.on_error_continue && !fault_report_running;
    /* To EBB_DEBUG_LOG's file, as every report (it went to stderr before:
     * review finding), through a path buffer of its own: the interrupted
     * report may be filling debug_log_open's. A handler that interrupts
     * this one finds the buffer taken and writes to stderr. */
    static char path[4096] ebb_cold_bss;
    static atomic_bool path_taken;
    bool opened = false;
    int fd = -1;
    if (!atomic_exchange_explicit(&path_taken, true, memory_order_acquire)) {
        fd = text_report_open("EBB_DEBUG_LOG", cfg.log_pattern, path, sizeof path, &opened);
        atomic_store_explicit(&path_taken, false, memory_order_release);
    } else {
        fd = text_stderr();
    }
    text_t t;
    text_init(&t, fd);
    report_headline(&t, fault, p);
    text_add(&t, "  found by a signal handler that interrupted this thread's report of another "
                 "fault: no block details or trace\n");
    text_add(&t, cfg.on_error_continue ? report_continuing
                 : abort_now           ? report_aborting
                                       : "==ebb== the call is ignored; the interrupted report "
                                         "aborts once it is written\n");
    text_flush(&t);
    text_report_close(fd, opened);
    if (abort_now)
        report_end();
}

/* The same, h being a copy of the header that was at h_at (verify_report,
 * report_unheld). */
static void report_at(const char *fault, const void *p, const debug_header_t *h, uintptr_t h_at,
                      const char *detail)
{
    if (ebb_unlikely(debug_report_held_here())) {
        report_nested(fault, p);
        return;
    }
    uint32_t here = capture();
    if (cfg.depth != 0 && !in_debug) /* where a capture may list modules */
        trace_check_unloads();
    debug_report_lock();
    fault_report_running = true;
    bool opened;
    int fd = debug_log_open(&opened);
    if (fd >= 0) {
        uint32_t traces[3] = {here, h ? h->alloc_trace : 0, h ? h->free_trace : 0};
        trace_symbolize(traces, 3);
    }
    text_t t;
    text_init(&t, fd);
    report_headline(&t, fault, p);
    if (detail) {
        text_add(&t, "  ");
        text_add(&t, detail);
        text_add(&t, "\n");
    }
    if (h) {
        text_add(&t, "  block: ");
        text_add_u64(&t, h->size, 0);
        text_add(&t, " bytes requested at ");
        text_add_hex(&t, h_at + debug_offset(h));
        /* How it was asked for, where that is not plain malloc: a reader
         * chasing a stale value wants to know the block started zeroed. */
        if (h->flags & DEBUG_FLAG_ZEROED)
            text_add(&t, ", zeroed (calloc)");
        if (h->align_log2 && h->align_log2 < 64) { /* a corrupted header may hold anything */
            text_add(&t, ", aligned to ");
            text_add_u64(&t, (uint64_t)1 << h->align_log2, 0);
        }
        const char *ctx = debug_context_name(h->context);
        if (ctx) {
            text_add(&t, ", context \"");
            text_add(&t, ctx);
            text_add(&t, "\"");
        }
        text_add(&t, "\n");
    }
    text_add(&t, "  this call:\n");
    trace_print(&t, here, "    ");
    if (h) {
        text_add(&t, "  allocated at:\n");
        trace_print(&t, h->alloc_trace, "    ");
        if (h->free_trace) {
            text_add(&t, "  freed at:\n");
            trace_print(&t, h->free_trace, "    ");
        }
    }
    text_add(&t, cfg.on_error_continue ? report_continuing : report_aborting);
    text_flush(&t);
    debug_log_close(fd, opened);
    fault_report_running = false;
    debug_report_unlock();
    report_end();
}

/* ---------------------------------------------------------------------------
 * Fills and checks
 * ------------------------------------------------------------------------- */
/* Fill [p + from, p + n) with `byte`, all of it for a block of up to
 * FILL_FULL_MAX bytes, else only what lies in its first and last FILL_EDGE
 * bytes (a huge block is not made resident by its fill). `from` > 0: realloc,
 * which copies the old contents there. */
static void fill_past(uint8_t *p, size_t n, size_t from, uint8_t byte)
{
    if (from >= n)
        return;
    if (n <= FILL_FULL_MAX) {
        memset(p + from, byte, n - from);
        return;
    }
    if (from < FILL_EDGE)
        memset(p + from, byte, FILL_EDGE - from);
    size_t tail = n - FILL_EDGE > from ? n - FILL_EDGE : from;
    memset(p + tail, byte, n - tail);
}

static void fill(uint8_t *p, size_t n, uint8_t byte)
{
    fill_past(p, n, 0, byte);
}


/* Blocks of the free fill and the canary byte, for memcmp: the C library's
 * is vectorized, and checking fills is the largest part of debug mode's cost
 * for small blocks. */
#define PATTERN_BYTES 1024
static uint8_t free_pattern[PATTERN_BYTES] ebb_cold_bss, canary_pattern[PATTERN_BYTES] ebb_cold_bss;

static void patterns_init(void)
{
    memset(free_pattern, cfg.fill_free, PATTERN_BYTES);
    memset(canary_pattern, CANARY_BYTE, PATTERN_BYTES);
}

/* The first byte of [p, p + n) that is not `byte`: eight bytes at a time. */
static const uint8_t *first_other_slow(const uint8_t *p, size_t n, uint8_t byte)
{
    size_t i = 0;
    for (; i < n && ((uintptr_t)(p + i) & 7) != 0; i++)
        if (p[i] != byte)
            return p + i;
    uint64_t want = 0x0101010101010101ull * byte;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != want)
            break;
    }
    for (; i < n; i++)
        if (p[i] != byte)
            return p + i;
    return NULL;
}

/* The first byte of [p, p + n) that is not `byte`, or NULL: by memcmp against
 * a pattern block where there is one for `byte`. */
static const uint8_t *first_other(const uint8_t *p, size_t n, uint8_t byte)
{
    const uint8_t *pattern = byte == cfg.fill_free ? free_pattern
                             : byte == CANARY_BYTE ? canary_pattern
                                                   : NULL;
    if (pattern == NULL)
        return first_other_slow(p, n, byte);
    for (size_t i = 0; i < n; i += PATTERN_BYTES) {
        size_t k = n - i < PATTERN_BYTES ? n - i : PATTERN_BYTES;
        if (memcmp(p + i, pattern, k) != 0)
            return first_other_slow(p + i, k, byte);
    }
    return NULL;
}

/* Whether the n <= SHORT_CHECK_MAX bytes at p are all `byte`: sixteen at a
 * time from 16 bytes on, the last sixteen overlapping, the differences OR-ed
 * together and tested once; eight at a time below. A canary tail is 16..31
 * bytes for most blocks, and a small block's free fill (checked as it leaves
 * the quarantine) under 128: there memcmp's call and set-up against a
 * pattern block cost more than the compare. Eight bytes a step up to 256
 * did not pay (docs/debug-mode.md, "Cost"); sixteen, two vectors a step, up
 * to 128 did: callgrind, a debug-mode python run 2,594 M -> 2,584 M. GCC's
 * vector types compile to SSE2 on x86-64 (to the target's vectors, or to
 * scalar code, elsewhere). */
#define SHORT_CHECK_MAX 128

typedef uint8_t bytes16_t __attribute__((vector_size(16)));

static inline bool short_all(const uint8_t *p, size_t n, uint8_t byte)
{
    if (n < 16) {
        uint64_t want = 0x0101010101010101ull * byte, w;
        if (n < 8) {
            for (size_t i = 0; i < n; i++)
                if (p[i] != byte)
                    return false;
            return true;
        }
        uint64_t a;
        memcpy(&a, p, 8);
        memcpy(&w, p + n - 8, 8);
        return ((a ^ want) | (w ^ want)) == 0;
    }
    bytes16_t want = (bytes16_t){0} + byte, diff = {0}, v, u;
    size_t i = 0;
    for (; i + 32 < n; i += 32) {
        memcpy(&v, p + i, 16);
        memcpy(&u, p + i + 16, 16);
        diff |= (v ^ want) | (u ^ want);
    }
    if (i + 16 < n) {
        memcpy(&v, p + i, 16);
        diff |= v ^ want;
    }
    memcpy(&v, p + n - 16, 16);
    diff |= v ^ want;
    uint64_t half[2];
    memcpy(half, &diff, 16);
    return (half[0] | half[1]) == 0;
}

/* The first byte of [p, p + n) that is not `byte` (as `fill` wrote it), or NULL. */
static const uint8_t *find_changed(const uint8_t *p, size_t n, uint8_t byte)
{
    if (n <= SHORT_CHECK_MAX)
        return short_all(p, n, byte) ? NULL : first_other_slow(p, n, byte);
    if (n <= FILL_FULL_MAX)
        return first_other(p, n, byte);
    const uint8_t *bad = first_other(p, FILL_EDGE, byte);
    return bad ? bad : first_other(p + n - FILL_EDGE, FILL_EDGE, byte);
}


/* The usable size of the underlying block h starts: alloc_usable_size, with
 * a small page's look-up inlined (three or four of them a malloc/free pair). */
static inline size_t block_bytes(const debug_header_t *h)
{
    segment_t *seg = ptr_segment(h);
    if (ebb_unlikely(seg->kind == SEGMENT_HUGE))
        return huge_usable_size(seg);
    return segment_page_of(seg, h)->block_size;
}

/* The canary: the padding between header and user bytes, and the bytes from
 * the requested end to the block's end (its first CANARY_CHECK_MAX). */
static size_t tail_len(debug_header_t *h, size_t usable)
{
    size_t tail = usable - debug_offset(h) - h->size;
    return tail < CANARY_CHECK_MAX ? tail : CANARY_CHECK_MAX;
}

/* The same, finding the underlying block's usable size (callers that have it
 * pass it to tail_len: the look-up is a good part of a small block's cost). */
static size_t tail_of(debug_header_t *h)
{
    return tail_len(h, block_bytes(h));
}

static void canary_write(debug_header_t *h)
{
    /* fill, not memset: the padding of a block aligned to 2 GiB is 2 GiB
     * (canary_broken checks it as fill writes it, the edges of a long run) */
    fill((uint8_t *)h + sizeof *h, debug_offset(h) - sizeof *h, CANARY_BYTE);
    memset(user_of(h) + h->size, CANARY_BYTE, tail_of(h));
}

/* tail: tail_of(h), which its callers need too. */
static const uint8_t *canary_broken(debug_header_t *h, size_t tail)
{
    if (debug_offset(h) > sizeof *h) {
        const uint8_t *bad =
            find_changed((uint8_t *)h + sizeof *h, debug_offset(h) - sizeof *h, CANARY_BYTE);
        if (bad)
            return bad;
    }
    return find_changed(user_of(h) + h->size, tail, CANARY_BYTE);
}

/* A freed block's fill covers what the canary and the user bytes covered: the
 * alignment padding after the header, the user bytes and the checked part of
 * the tail. The canary was checked at free; after it, any write there is a
 * write after free, so one fill and one check (at quarantine exit) serve
 * both. Each of the three parts follows fill's rule for its own length: as
 * one run, a block's padding or tail could take it past FILL_FULL_MAX, and
 * then only the run's edges were filled and checked, not the user bytes of a
 * block of 1 MiB - 16 bytes nor those of one aligned to 1 MiB (review
 * finding: writes after free there went unreported). */
static void freed_fill(debug_header_t *h, size_t tail)
{
    uint8_t byte = cfg.fill_free;
    size_t pad = debug_offset(h) - sizeof *h;
    if (pad + h->size + tail <= FILL_FULL_MAX) { /* all of it either way: one call */
        memset((uint8_t *)h + sizeof *h, byte, pad + h->size + tail);
        return;
    }
    if (pad > 0)
        fill((uint8_t *)h + sizeof *h, pad, byte);
    fill(user_of(h), h->size, byte);
    memset(user_of(h) + h->size, byte, tail); /* at most CANARY_CHECK_MAX */
}

/* The first byte of a freed block's fill that changed, or NULL. */
static const uint8_t *freed_fill_broken(debug_header_t *h, size_t usable)
{
    uint8_t byte = cfg.fill_free;
    size_t pad = debug_offset(h) - sizeof *h, tail = tail_len(h, usable);
    if (pad + h->size + tail <= FILL_FULL_MAX) /* all of it either way: one call */
        return find_changed((uint8_t *)h + sizeof *h, pad + h->size + tail, byte);
    const uint8_t *bad = pad > 0 ? find_changed((uint8_t *)h + sizeof *h, pad, byte) : NULL;
    if (bad == NULL)
        bad = find_changed(user_of(h), h->size, byte);
    if (bad == NULL)
        bad = find_changed(user_of(h) + h->size, tail, byte);
    return bad;
}

/* The detail of a write-after-free report: where, from the user pointer. */
static void describe_freed_write(text_t *t, debug_header_t *h, const uint8_t *bad, const char *found)
{
    text_add(t, "a write after free: the byte at offset ");
    if (bad < user_of(h)) {
        text_add(t, "-");
        text_add_u64(t, (uint64_t)(user_of(h) - bad), 0);
    } else {
        text_add_u64(t, (uint64_t)(bad - user_of(h)), 0);
    }
    if (bad >= user_of(h) + h->size)
        text_add(t, " (past the requested size)");
    text_add(t, found);
}

/* The text of a broken canary; its fault name. */
static const char *describe_overflow(text_t *t, debug_header_t *h, const uint8_t *bad,
                                     const char *when)
{
    bool before = bad < user_of(h);
    text_add(t, before ? "a write before the block's start (" : "a write past the requested size (");
    text_add(t, when);
    text_add(t, "): the byte at offset ");
    if (before) {
        text_add(t, "-");
        text_add_u64(t, (uint64_t)(user_of(h) - bad), 0);
    } else {
        text_add_u64(t, (uint64_t)(bad - user_of(h)), 0);
    }
    text_add(t, " was changed");
    return before ? "heap-buffer-underflow" : "heap-buffer-overflow";
}

static void report_overflow(debug_header_t *h, const uint8_t *bad, const char *when)
{
    text_t t;
    text_init(&t, -1);
    const char *fault = describe_overflow(&t, h, bad, when);
    report(fault, user_of(h), h, text_cstr(&t));
}

/* ---------------------------------------------------------------------------
 * Claiming a block. ebb_debug_verify may run beside threads that free
 * blocks, take them out of the quarantine and reuse them. It reads a block's
 * header and its canary (live) or its free fill (freed); a free writes the
 * fill over the canary, and a block that left the quarantine goes back to
 * the allocator, which writes its free-list link into the block's first word
 * and hands it out again. The magic word decides who may touch a block:
 *   1. verify claims a live or a freed block by one CAS of its magic, LIVE to
 *      CHECKED_LIVE or FREED to CHECKED_FREED (acquire: it sees everything
 *      written before that magic was stored), checks it, copies what a
 *      report needs, and stores the magic back (release). It reports only
 *      after that, once it holds no lock either (ebb_debug_verify). A CAS
 *      that fails means the block is changing: verify leaves it for its
 *      next call;
 *   2. a free claims a live block, LIVE to BUSY, before it writes anything
 *      into it (its free trace, the fill); a block leaving the quarantine is
 *      claimed, FREED to BUSY, before its fill is checked; a realloc in
 *      place claims it LIVE to RESIZING while it changes the header's size,
 *      trace and checksum (realloc_in_place), and stores LIVE back;
 *   3. a claim that finds CHECKED_* waits for verify to store the magic back
 *      (verify holds a block only while it reads it, and waits for nothing
 *      meanwhile), then tries again. A free whose CAS finds
 *      anything else lost a race with another free of the same block: a
 *      double free, reported as one, not a block pushed twice into the
 *      quarantine;
 *   4. whatever judges a block by its magic (a pointer given to free or
 *      realloc, the heap walk, the leak report) waits the same way
 *      (debug_magic_settled, debug.h), also while it is RESIZING. Since a
 *      realloc in place changes a live header, the heap walk and the leak
 *      report copy it while holding the block as verify does (step 1;
 *      debug_header_intact).
 * So verify reads a block only while nobody else may write it, and what it
 * reports is exact. Before the claims it read blocks as they were being
 * filled (a data race ThreadSanitizer found), and it judged only its own
 * double reading of a block. A free block's first word, which verify loads
 * as the magic, is the allocator's link: a remote free stores it atomically
 * (page.c, page_free_remote). A fork cannot split verify's claims: verify
 * holds the purge exclusion throughout, which a fork takes first; nor a
 * realloc's in place (resize_claim_enter). It can split a free's: the
 * child then keeps that block BUSY, on no list (a leak, not a hang).
 * ------------------------------------------------------------------------- */
void debug_claim_backoff(unsigned spins)
{
    if (spins > 64)
        os_yield();
    else
        cpu_relax();
}

static bool magic_held_by_verify(const debug_header_t *h, uint64_t m)
{
    return m == (DEBUG_MAGIC_CHECKED_LIVE ^ (uintptr_t)h) ||
           m == (DEBUG_MAGIC_CHECKED_FREED ^ (uintptr_t)h);
}

/* Step 1's claim, for verify and for reports about a block the reporting
 * thread does not hold: a live or freed block's magic to CHECKED_*, once,
 * without waiting. *seen: the magic to store back (block_unhold). False if
 * the block is neither live nor freed, or is changing. */
static bool block_hold(debug_header_t *h, uint64_t *seen)
{
    uint64_t m = atomic_load_explicit(&h->magic, memory_order_relaxed), held;
    if (m == (DEBUG_MAGIC_LIVE ^ (uintptr_t)h))
        held = DEBUG_MAGIC_CHECKED_LIVE ^ (uintptr_t)h;
    else if (m == (DEBUG_MAGIC_FREED ^ (uintptr_t)h))
        held = DEBUG_MAGIC_CHECKED_FREED ^ (uintptr_t)h;
    else
        return false;
    *seen = m;
    return atomic_compare_exchange_strong_explicit(&h->magic, &m, held, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void block_unhold(debug_header_t *h, uint64_t seen)
{
    atomic_store_explicit(&h->magic, seen, memory_order_release);
}

bool debug_header_intact(debug_header_t *h, debug_header_t *copy)
{
    for (;;) {
        if (!debug_header_live(h))
            return false;
        uint64_t seen;
        if (block_hold(h, &seen)) {
            /* Everything but the magic, which others may load meanwhile,
             * and qnext: the quarantine links a freed block's successor
             * into it under its shard's lock, without claiming the block
             * (quarantine_push). Nobody reads a copy's link. */
            size_t skip = sizeof h->magic, link = offsetof(debug_header_t, qnext);
            size_t after = link + sizeof h->qnext;
            memcpy((uint8_t *)copy + skip, (const uint8_t *)h + skip, link - skip);
            memcpy((uint8_t *)copy + after, (const uint8_t *)h + after, sizeof *copy - after);
            copy->qnext = NULL;
            atomic_init(&copy->magic, seen);
            block_unhold(h, seen);
            break;
        }
        /* Its magic changed since: look again (a free makes it not live). */
    }
    if (copy->check != header_check(copy))
        return false;
    size_t usable = block_bytes(h);
    return debug_offset(copy) <= usable && copy->size <= usable - debug_offset(copy);
}

/* Steps 2 and 3: magic `from` to `to`, waiting while verify holds the block.
 * False, with nothing changed, if the magic is something else. */
static bool block_claim(debug_header_t *h, uint64_t from, uint64_t to)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t m = from ^ (uintptr_t)h;
        if (atomic_compare_exchange_strong_explicit(&h->magic, &m, to ^ (uintptr_t)h,
                                                    memory_order_acquire, memory_order_relaxed))
            return true;
        if (!magic_held_by_verify(h, m))
            return false;
        debug_claim_backoff(spins);
    }
}

/* ---------------------------------------------------------------------------
 * The debug heap and the underlying blocks
 * ------------------------------------------------------------------------- */
static heap_t *debug_heap(void)
{
    heap_t *h = tls_debug_heap;
    return h ? h : heap_create_debug();
}

/* Give an underlying block back: by the owner's path if it is ours, else as
 * a remote free. */
static void release_block(void *block)
{
    alloc_release(tls_debug_heap, block);
}

/* ---------------------------------------------------------------------------
 * The quarantine: freed blocks wait in FIFO order, bounded in bytes (of their
 * underlying blocks) in total. A block leaving it is checked (its free fill,
 * which covers the canary's bytes too, intact), then kept in the reuse cache
 * (below) or released.
 *
 * It is split in QUARANTINE_SHARDS FIFOs, one per thread (threads beyond the
 * count share): a thread frees into its own FIFO and, while the total is over
 * the bound, evicts its own oldest blocks, so a block usually leaves the
 * quarantine in the thread that freed it, most often the one that allocated
 * it: its release is a local free, reused at once, not a cross-thread free
 * waiting for its owner (with one shared FIFO, a thread evicting another's
 * blocks kept twice the quarantine pending in the FastMM scenario), and
 * threads do not queue on one lock. A thread whose own FIFO is empty evicts
 * from the others' (a free-only thread, a FIFO left by a thread that exited).
 * The shards are static: they outlive threads and a fork needs no repair.
 *
 * A block also leaves once it has waited EBB_DEBUG_QUARANTINE_IDLE ms, in a
 * purge pass. Without this, a program that freed many small blocks in random
 * order and then went idle, or went on freeing only now and then, kept
 * nearly all of their pages resident for good: the 16 MiB of blocks last
 * freed lie on almost every page, and a page with a block still held is
 * never freed (2,000,000 x 64 bytes: 266 MB resident after the frees,
 * against 16 MB in release mode). A free pays no clock read for this: a
 * shard counts the blocks pushed and popped, so the block at its front is
 * the popped-th ever pushed, and each pass samples every shard's push count
 * with the time (shard_age_t); the blocks pushed before a sample at least
 * the wait old go.
 * ------------------------------------------------------------------------- */
#define QUARANTINE_SHARDS 64
#define PREFETCH_BYTES 1024

typedef struct quarantine_shard_s {
    _Alignas(64) lock_t lock; /* the FIFO and its counts; one cache line each */
    debug_header_t *first, *last;
    uint64_t pushed, popped; /* blocks ever pushed, ever taken from the front */
    size_t bytes;            /* of the blocks in it (block_bytes) */
} quarantine_shard_t;

/* The purge passes' samples of one shard (under pass_lock): its push count
 * at a time, a new one once the newest is a quarter of the wait old, so the
 * SHARD_SAMPLES span at least twice the wait. */
#define SHARD_SAMPLES 8
typedef struct shard_age_s {
    uint64_t pushed[SHARD_SAMPLES], ms[SHARD_SAMPLES];
    unsigned newest, count;
} shard_age_t;
static shard_age_t shard_age[QUARANTINE_SHARDS] ebb_cold_bss;

static quarantine_shard_t shards[QUARANTINE_SHARDS] ebb_cold_bss;

static unsigned shard_index(const quarantine_shard_t *q)
{
    return (unsigned)(q - shards);
}
static atomic_size_t q_bytes;      /* in all shards */

/* Tests (test_purge_hooks): pause the next realloc in place while it holds
 * its claim, or the next eviction from the quarantine while its blocks are
 * on no list; the flag is 1 meanwhile. One shot each. */
static atomic_long resize_pause_ms, evict_pause_ms;
static atomic_int resize_pausing, evict_pausing;

void debug_inject_resize_pause(long ms)
{
    atomic_store(&resize_pause_ms, ms);
}

void debug_inject_evict_pause(long ms)
{
    atomic_store(&evict_pause_ms, ms);
}

bool debug_resize_pausing(void)
{
    return atomic_load(&resize_pausing) != 0;
}

bool debug_evict_pausing(void)
{
    return atomic_load(&evict_pausing) != 0;
}

static ebb_noinline void injected_pause(atomic_long *ms, atomic_int *flag)
{
    long n = atomic_exchange(ms, 0);
    if (n <= 0)
        return;
    atomic_store(flag, 1);
    os_sleep_ms(n);
    atomic_store(flag, 0);
}
static atomic_uint q_next_shard;   /* round-robin assignment */
static __thread unsigned tls_shard; /* this thread's shard + 1; 0: none yet */

/* This thread's shard (of the quarantine and of the reuse cache). */
static unsigned own_shard(void)
{
    if (tls_shard == 0)
        tls_shard = atomic_fetch_add_explicit(&q_next_shard, 1, memory_order_relaxed) %
                        QUARANTINE_SHARDS + 1;
    return tls_shard - 1;
}

/* ---------------------------------------------------------------------------
 * The reuse cache. A block of at least four OS pages in a small page (16 KiB
 * to SMALL_MAX) that leaves the quarantine is not released at once: it waits
 * here, still resident, in the shard of the thread that took it out, and that
 * thread's next malloc of its size class takes it back, newest first. A block
 * that waited EBB_PURGE_DELAY, or that the byte bound pushes out (oldest
 * first), has its inner OS pages purged and is released.
 *
 * Why: a released block lies free inside a page that its neighbours (live or
 * quarantined) keep in use, where no purge pass reaches it. So blocks used to
 * be purged as they left the quarantine, and the next malloc of their size
 * faulted the pages in again: 7.6 page faults per malloc/free pair of random
 * 1..64 KiB sizes, 34 us a pair. Releasing them unpurged instead left up to
 * twice the quarantine resident in the FastMM scenario (8 threads x
 * malloc(1..70,000)): free blocks spread over every thread's pages of every
 * size class.
 *
 * Bound: reuse_max bytes (a quarter of the quarantine bound) in all shards
 * together. Whatever thread put them there, and whether or not it runs again,
 * the purge pass purges and releases them between one and two purge delays
 * after they came (debug_reuse_decay, one more source of the pass's work:
 * purge.c's wake-up protocol covers it, the bytes being recorded before
 * purge_wake). malloc_trim and ebb_collect(true) flush them all. With
 * EBB_PURGE_DELAY=0 nothing is cached: blocks are purged and released at
 * once; with -1, the bound alone pushes them out.
 *
 * Large and huge blocks are released as they are: their slices or mapping
 * follow the usual delayed purge.
 * ------------------------------------------------------------------------- */
typedef struct reuse_link_s { /* in a cached block, just after its header */
    debug_header_t *newer, *older;
    uint64_t since_ms;
} reuse_link_t;

typedef struct reuse_shard_s {
    lock_t lock; /* everything below */
    size_t bytes;
    debug_header_t *newest[CLASS_COUNT], *oldest[CLASS_COUNT];
    uint32_t count[CLASS_COUNT]; /* blocks in each list: what a cut drops */
} reuse_shard_t;

/* Blocks of at least this many OS pages are cached (smaller ones have no inner
 * page worth purging: they are released as they are). */
#define REUSE_MIN_PAGES 4

static reuse_shard_t reuse_shards[QUARANTINE_SHARDS] ebb_cold_bss;
static atomic_size_t reuse_bytes;          /* in all shards */
static unsigned reuse_class_min = CLASS_COUNT; /* the first class cached; set by reuse_init */
static size_t reuse_max;
static uint64_t reuse_delay_ms;           /* UINT64_MAX: no purge delay (EBB_PURGE_DELAY=-1) */

static void reuse_init(void)
{
    long delay = option_get(OPT_PURGE_DELAY);
    if (delay == 0)
        return; /* purge at once: nothing is kept */
    reuse_delay_ms = delay < 0 ? UINT64_MAX : (uint64_t)delay;
    reuse_max = cfg.quarantine_max / 4;
    size_t min_bytes = REUSE_MIN_PAGES * os_info.page_size;
    reuse_class_min = min_bytes <= SMALL_MAX ? size_class(min_bytes) : CLASS_COUNT;
}

static reuse_link_t *reuse_link(debug_header_t *h)
{
    return (reuse_link_t *)(h + 1);
}

/* A block's inner OS pages, [*from, *to) (empty if to <= from): its first
 * word stays, it becomes the free list link once the block is released. */
static void inner_pages(debug_header_t *h, uintptr_t *from, uintptr_t *to)
{
    size_t ps = os_info.page_size;
    *from = ((uintptr_t)h + sizeof(uintptr_t) + ps - 1) & ~(uintptr_t)(ps - 1);
    *to = ((uintptr_t)h + block_bytes(h)) & ~(uintptr_t)(ps - 1);
}

/* Add a block's inner OS pages to `batch`; the block is released after the
 * batch is flushed. */
static void purge_add_inner(os_purge_batch_t *batch, debug_header_t *h)
{
    uintptr_t from, to;
    inner_pages(h, &from, &to);
    if (to > from)
        os_purge_add(batch, (void *)from, to - from);
}

/* Purge a block's inner OS pages and release it. */
static void purge_and_release(debug_header_t *h)
{
    uintptr_t from, to;
    inner_pages(h, &from, &to);
    if (to > from)
        os_purge((void *)from, to - from);
    release_block(h);
}

/* The links lie in the cached block's first user bytes, where a write after
 * free lands once the quarantine has let the block go, and its header below
 * them, where a write past the end of the block below lands. So a cached
 * block's magic says so (DEBUG_MAGIC_REUSE), and a link is followed only to
 * the start of a block of class cls that has that magic; a block's own links
 * are read only if its header is intact. Anything else cuts the list: its
 * blocks are dropped (never reused, no longer counted) and the cut is
 * reported by the next debug-mode call (note_cut: the lock is held here, or
 * a purge pass is running). Review finding: such a write crashed the next
 * malloc of the size or the next purge pass. */
static uint8_t *block_containing(const void *p);

static bool reuse_cached(const debug_header_t *h, unsigned cls)
{
    if (((uintptr_t)h & (MIN_ALIGN - 1)) != 0 || !segment_map_contains(h))
        return false;
    segment_t *seg = ptr_segment(h);
    if (seg->kind != SEGMENT_NORMAL)
        return false;
    page_t *page = segment_page_of(seg, h);
    return page->kind == PAGE_SMALL && page->class_idx == cls &&
           block_containing(h) == (const uint8_t *)h &&
           atomic_load_explicit(&h->magic, memory_order_relaxed) ==
               (DEBUG_MAGIC_REUSE ^ (uintptr_t)h);
}

typedef enum { CUT_REMOTE_LIST, CUT_REUSE_LINK, CUT_REUSE_HEADER } cut_kind_t;
static void note_cut(cut_kind_t kind, void *block, uintptr_t link, size_t dropped_bytes);

/* Under the shard's lock: h, the block of class list cls being taken out,
 * is itself sound (its header intact) and its links lead to cached blocks,
 * or else the list is cut. False if it was. */
static bool reuse_links_sound(reuse_shard_t *r, debug_header_t *h, unsigned cls, uint64_t now_ms)
{
    cut_kind_t kind;
    uintptr_t bad = 0;
    reuse_link_t *l = reuse_link(h);
    if (!reuse_cached(h, cls) || h->check != header_check(h)) {
        kind = CUT_REUSE_HEADER;
    } else if (l->newer != NULL && !reuse_cached(l->newer, cls)) {
        kind = CUT_REUSE_LINK;
        bad = (uintptr_t)l->newer;
    } else if (l->older != NULL && !reuse_cached(l->older, cls)) {
        kind = CUT_REUSE_LINK;
        bad = (uintptr_t)l->older;
    } else if (l->since_ms > now_ms) {
        kind = CUT_REUSE_LINK; /* a stamp from the future: never purged */
        bad = (uintptr_t)l->since_ms;
    } else {
        return true;
    }
    size_t dropped = (size_t)r->count[cls] * class_block_size[cls];
    note_cut(kind, h, bad, dropped);
    r->newest[cls] = r->oldest[cls] = NULL;
    r->count[cls] = 0;
    r->bytes -= dropped;
    atomic_fetch_sub_explicit(&reuse_bytes, dropped, memory_order_relaxed);
    return false;
}

/* Under the shard's lock: take h out of its class list, or cut the list at
 * a broken link (then false). */
static bool reuse_unlink(reuse_shard_t *r, debug_header_t *h, unsigned cls, uint64_t now_ms)
{
    if (!reuse_links_sound(r, h, cls, now_ms))
        return false;
    reuse_link_t *l = reuse_link(h);
    if (l->newer)
        reuse_link(l->newer)->older = l->older;
    else
        r->newest[cls] = l->older;
    if (l->older)
        reuse_link(l->older)->newer = l->newer;
    else
        r->oldest[cls] = l->newer;
    r->count[cls]--;
    r->bytes -= class_block_size[cls];
    atomic_fetch_sub_explicit(&reuse_bytes, class_block_size[cls], memory_order_relaxed);
    atomic_store_explicit(&h->magic, 0, memory_order_relaxed);
    return true;
}

/* Under the shard's lock: unlink and return its oldest block if it was cached
 * at or before `cutoff_ms`, else NULL. Only the block taken has its links
 * checked (reuse_unlink), and a list whose oldest block has a stamp from the
 * future, which would never be the oldest, is cut: the search goes on. */
static debug_header_t *reuse_take_oldest(reuse_shard_t *r, uint64_t cutoff_ms)
{
    /* Read under the lock: every stamp in the shard was taken before it. */
    uint64_t now = os_now_ms();
    for (;;) {
        debug_header_t *best = NULL;
        unsigned best_cls = 0;
        for (unsigned cls = reuse_class_min; cls < CLASS_COUNT; cls++) {
            debug_header_t *h = r->oldest[cls];
            if (h == NULL)
                continue;
            if (reuse_link(h)->since_ms > now) { /* never the oldest: cut it now */
                reuse_links_sound(r, h, cls, now);
                continue;
            }
            if (reuse_link(h)->since_ms <= cutoff_ms &&
                (best == NULL || reuse_link(h)->since_ms < reuse_link(best)->since_ms)) {
                best = h;
                best_cls = cls;
            }
        }
        if (best == NULL || reuse_unlink(r, best, best_cls, now))
            return best;
    }
}

/* Purge and release the blocks of shard r cached at or before `cutoff_ms`,
 * oldest first, until `need` bytes are out (SIZE_MAX: all of them). They
 * are taken OS_PURGE_BATCH at a time, purged with one call where the kernel
 * allows (os.c, "Batched purges"), then released: taken, no other thread
 * reaches them until then. One madvise a block made the FastMM scenario in
 * debug mode spend half its time in the kernel (44,500 calls, 6.5 s of 13.4 s
 * of CPU; bench_seeds fastmm). */
static void reuse_evict(reuse_shard_t *r, uint64_t cutoff_ms, size_t need)
{
    size_t got = 0;
    bool more = true;
    while (more && got < need) {
        debug_header_t *taken[OS_PURGE_BATCH];
        size_t n = 0;
        os_purge_batch_t batch;
        os_purge_batch_init(&batch);
        lock_acquire(&r->lock);
        while (n < OS_PURGE_BATCH && got < need) {
            debug_header_t *h = r->bytes ? reuse_take_oldest(r, cutoff_ms) : NULL;
            if (h == NULL) {
                more = false;
                break;
            }
            got += block_bytes(h);
            taken[n++] = h;
        }
        lock_release(&r->lock);
        for (size_t i = 0; i < n; i++)
            purge_add_inner(&batch, taken[i]);
        os_purge_flush(&batch);
        for (size_t i = 0; i < n; i++)
            release_block(taken[i]);
    }
}

/* A block leaving the quarantine: into the reuse cache if it is of a cached
 * class, else released (purged first if it has inner pages: EBB_PURGE_DELAY=0). */
static void reuse_or_release(debug_header_t *h, size_t bytes)
{
    segment_t *seg = ptr_segment(h);
    page_t *page = seg->kind == SEGMENT_NORMAL ? segment_page_of(seg, h) : NULL;
    if (page == NULL || page->kind != PAGE_SMALL || bytes < REUSE_MIN_PAGES * os_info.page_size) {
        release_block(h);
        return;
    }
    unsigned cls = page->class_idx;
    if (cls < reuse_class_min) {
        purge_and_release(h);
        return;
    }
    unsigned own = own_shard();
    reuse_shard_t *r = &reuse_shards[own];
    uint64_t now = os_now_ms();
    reuse_link_t *l = reuse_link(h);
    l->since_ms = now;
    l->newer = NULL;
    atomic_store_explicit(&h->magic, DEBUG_MAGIC_REUSE ^ (uintptr_t)h, memory_order_relaxed);
    lock_acquire(&r->lock);
    l->older = r->newest[cls];
    if (l->older)
        reuse_link(l->older)->newer = h;
    else
        r->oldest[cls] = h;
    r->newest[cls] = h;
    r->count[cls]++;
    r->bytes += class_block_size[cls];
    /* Counted under the lock, so that no eviction of h can subtract its bytes
     * first; recorded (seq_cst) before the scavenger is woken: its protocol
     * (purge.c). */
    size_t total = atomic_fetch_add(&reuse_bytes, class_block_size[cls]) + class_block_size[cls];
    lock_release(&r->lock);
    purge_wake();
    if (total <= reuse_max)
        return;
    /* Over the bound: the oldest go, this thread's first, down to 7/8 of
     * it, so that they go many to a purge call (reuse_evict) rather than
     * one block for each block that comes in. Measured against going down
     * to the bound itself (5 paired runs each, debug mode): bench_seeds
     * fastmm 0.57x the time at 7/8, 0.66x at 15/16, about 0.5x at 3/4;
     * bench_core rand 1024 65536, one thread, which reuses more of what the
     * cache holds: 1.01x, 0.97x and 1.10x. */
    size_t target = reuse_max - reuse_max / 8;
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++) {
        size_t held = atomic_load_explicit(&reuse_bytes, memory_order_relaxed);
        if (held <= target)
            break;
        reuse_evict(&reuse_shards[(own + k) % QUARANTINE_SHARDS], UINT64_MAX, held - target);
    }
}

/* malloc: a cached block of class cls from this thread's shard, or NULL. */
static debug_header_t *reuse_pop(unsigned cls)
{
    unsigned own = own_shard();
    reuse_shard_t *r = &reuse_shards[own];
    lock_acquire(&r->lock);
    debug_header_t *h = r->newest[cls];
    if (h && !reuse_unlink(r, h, cls, os_now_ms()))
        h = NULL;
    lock_release(&r->lock);
    return h;
}

static void reuse_flush(void)
{
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++)
        reuse_evict(&reuse_shards[k], UINT64_MAX, SIZE_MAX);
}

/* A purge pass (purge.c): the blocks that waited a purge delay go (with
 * `force`, all of them). True while some remain for a later pass. */
bool debug_reuse_decay(uint64_t now_ms, bool force)
{
    if (atomic_load(&reuse_bytes) == 0)
        return false;
    uint64_t cutoff = force ? UINT64_MAX
                      : reuse_delay_ms == UINT64_MAX || now_ms < reuse_delay_ms ? 0
                                                                                : now_ms - reuse_delay_ms;
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++)
        reuse_evict(&reuse_shards[k], cutoff, SIZE_MAX);
    return atomic_load(&reuse_bytes) != 0;
}

/* The purge pass's re-check (purge.c, the wake-up protocol): seq_cst, as
 * the count's increments. */
bool debug_reuse_pending(void)
{
    return atomic_load(&reuse_bytes) != 0;
}

size_t debug_reuse_bytes(void)
{
    return atomic_load_explicit(&reuse_bytes, memory_order_relaxed);
}

/* A freed block's user pointer in the default layout: for reports about a
 * block whose header (and so its offset) cannot be trusted. */
static void *default_user_of(debug_header_t *h)
{
    return (uint8_t *)h + sizeof *h;
}

/* What a changed header found in the quarantine means. */
static const char header_changed_in_quarantine[] =
    "a write before the block's start changed ebb's header while the block waited in the "
    "quarantine (a write past the end of the block below it?)";

/* A block out of the quarantine: `claimed` if its magic went from freed to
 * busy (shard_take_locked claims each block it takes). */
static void leave_quarantine_claimed(debug_header_t *h, bool claimed)
{
    size_t bytes = block_bytes(h);
    if (!claimed || h->check != header_check(h) || debug_offset(h) > bytes ||
        h->size > bytes - debug_offset(h)) {
        report("corrupted block header", default_user_of(h), NULL, header_changed_in_quarantine);
        atomic_store_explicit(&h->magic, 0, memory_order_release);
        release_block(h);
        return;
    }
    const uint8_t *bad = freed_fill_broken(h, bytes);
    if (bad) {
        text_t t;
        text_init(&t, -1);
        describe_freed_write(&t, h, bad, " changed while the block was in quarantine");
        report("heap-use-after-free", user_of(h), h, text_cstr(&t));
    }
    atomic_store_explicit(&h->magic, 0, memory_order_release);
    reuse_or_release(h, bytes);
}

/* A freed block that never entered the quarantine (too big for it). Step 2:
 * a magic a write changed is no claim to wait for: the block leaves all the
 * same, but its header is not trusted (its size and offset lead the fill
 * check) and the block is released unchecked. */
static void leave_quarantine(debug_header_t *h)
{
    leave_quarantine_claimed(h, block_claim(h, DEBUG_MAGIC_FREED, DEBUG_MAGIC_BUSY));
}

/* The blocks shard_take_locked took (and claimed), in order. */
static void leave_quarantine_all(debug_header_t *list)
{
    while (list) {
        debug_header_t *next = list->qnext;
        leave_quarantine_claimed(list, true);
        list = next;
    }
}

/* Whether `m`, the first word of the block at `at`, is the magic of a debug
 * block (in use, in the quarantine or the reuse cache, or changing): a free
 * block of the underlying page holds its free-list link there instead, a
 * pointer into the page or 0, never one of these. */
static bool magic_of_a_debug_block(uintptr_t at, uint64_t m)
{
    static const uint64_t magics[] = {DEBUG_MAGIC_LIVE,         DEBUG_MAGIC_FREED,
                                      DEBUG_MAGIC_BUSY,         DEBUG_MAGIC_CHECKED_LIVE,
                                      DEBUG_MAGIC_CHECKED_FREED, DEBUG_MAGIC_RESIZING,
                                      DEBUG_MAGIC_REUSE};
    for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++)
        if (m == (magics[i] ^ at))
            return true;
    return false;
}

/* The quarantine's links live in the freed blocks' headers (qnext), where a
 * write past the end of the block below one can reach them, magic first (the
 * header's first word). So a link is followed only out of a header whose
 * magic still says "freed" (or "held by verify"), and only to one whose
 * magic says so too. A broken link cuts the shard's FIFO there: the blocks
 * from it on are dropped (never reused, no longer counted), and the cut is
 * reported once the shard's lock is dropped (quarantine_report_cut: a report
 * may abort). Review finding: an overflow 84 bytes past a block into its
 * quarantined neighbour's header crashed the next drain. */
static bool quarantined_magic(const debug_header_t *h)
{
    uint64_t m = atomic_load_explicit(&h->magic, memory_order_relaxed);
    return m == (DEBUG_MAGIC_FREED ^ (uintptr_t)h) || m == (DEBUG_MAGIC_CHECKED_FREED ^ (uintptr_t)h);
}

/* A link read from a header: to a header of ours whose magic says freed. */
static bool quarantined_sound(const debug_header_t *h)
{
    if (((uintptr_t)h & (MIN_ALIGN - 1)) != 0 || !segment_map_contains(h))
        return false;
    return quarantined_magic(h);
}

/* A link of shard k's chain to a freed block of the same FIFO. */
static bool quarantine_link_in_shard(const debug_header_t *to, unsigned k)
{
    return to != NULL && quarantined_sound(to) && to->shard == k + 1;
}

/* What a link to `to`, which quarantined_sound refused or which lies in
 * shard `k`'s chain, says about the block that holds the link: false if the
 * link is plausible and `to`'s own header was changed (its magic no debug
 * block's, or 0), true if the link itself is wrong: it leads to a block that
 * is not a freed one of this FIFO (one already taken, one out of the
 * quarantine and in use again, or another FIFO's block: a drain that followed
 * such a link took another thread's blocks, and verify wrote into another
 * FIFO; review findings). */
static bool quarantine_link_wrong(const debug_header_t *to, unsigned k)
{
    if (((uintptr_t)to & (MIN_ALIGN - 1)) != 0 || !segment_map_contains(to) ||
        block_containing(to) != (const uint8_t *)to)
        return true; /* not a block's start */
    uint64_t m = atomic_load_explicit(&to->magic, memory_order_relaxed);
    if (quarantined_magic(to))
        return to->shard != k + 1;
    return m != 0 && magic_of_a_debug_block((uintptr_t)to, m);
}

/* The first cut this thread made and has not reported yet: the block whose
 * header was found changed (`at`, when the link to it was plausible), or the
 * block whose link was (`from`, with the link's value). */
static __thread struct {
    debug_header_t *at, *from;
    uintptr_t link;
    size_t dropped_bytes;
} quarantine_cut;

/* Under q's lock: drop `bad` (the front of q, or old's successor) and the
 * rest of q; the bytes dropped. `link_bad`: old's link is wrong whatever it
 * points to (to a block already taken, or not where the shard's count says
 * the FIFO ends). */
static size_t shard_cut_locked(quarantine_shard_t *q, debug_header_t *old, debug_header_t *bad,
                               bool link_bad)
{
    if (quarantine_cut.at == NULL && quarantine_cut.from == NULL) {
        /* A link to the start of a block of ours is taken as intact: then
         * it is that block's header that was changed. */
        bool plausible = !link_bad && ((uintptr_t)bad & (MIN_ALIGN - 1)) == 0 &&
                         segment_map_contains(bad) && block_containing(bad) == (uint8_t *)bad;
        if (plausible || old == NULL) {
            quarantine_cut.at = bad;
        } else {
            quarantine_cut.from = old;
            quarantine_cut.link = (uintptr_t)bad;
        }
        quarantine_cut.dropped_bytes = q->bytes;
    }
    size_t dropped = q->bytes;
    q->bytes = 0;
    q->first = q->last = NULL;
    q->popped = q->pushed;
    return dropped;
}

static void quarantine_report_cut(void)
{
    if (ebb_likely(quarantine_cut.at == NULL && quarantine_cut.from == NULL))
        return;
    text_t t;
    text_init(&t, -1);
    debug_header_t *h;
    if (quarantine_cut.at) {
        h = quarantine_cut.at;
        text_add(&t, header_changed_in_quarantine);
    } else {
        h = quarantine_cut.from;
        text_add(&t, "the block's quarantine link was changed to ");
        text_add_hex(&t, quarantine_cut.link);
        text_add(&t, ", not the next freed block in line: a write into its header");
    }
    text_add(&t, "; the blocks freed after it in this quarantine (");
    text_add_long(&t, (long)quarantine_cut.dropped_bytes);
    text_add(&t, " bytes) are dropped, never reused");
    quarantine_cut.at = quarantine_cut.from = NULL;
    report("corrupted block header", default_user_of(h), NULL, text_cstr(&t));
}

/* Under q's lock: take blocks from the front of `q` onto *out_tail until
 * `need` bytes are taken, it is empty, or `keep` is next (NULL: none kept);
 * the bytes taken (and dropped, at a broken link).
 * Each block taken is claimed (freed -> busy) here, under the lock, not when
 * it leaves: a link a write turned back to a block already taken (this
 * drain's, or another thread's still leaving) or to itself then fails
 * quarantined_sound like any other broken link. Claimed only as it left, such
 * a block was taken again and again: a drain of all of it (malloc_trim) spun
 * for good under the lock, or reported the same block millions of times,
 * releasing it each time (review finding). A chain that ends before the
 * shard's count of blocks does (a link written to 0, or forward past some)
 * is cut there too. */
static size_t shard_take_locked(quarantine_shard_t *q, size_t need, debug_header_t ***out_tail,
                                const debug_header_t *keep)
{
    size_t got = 0;
    while (got < need && q->first && q->first != keep) {
        /* q->first is a block free pushed or a link quarantined_sound
         * passed (below), whose block has stayed allocated since: only its
         * magic, which a write may have changed meanwhile, is checked again,
         * not where it points (a segment map look-up an eviction). The
         * claim waits while verify holds the block, which takes no shard
         * lock meanwhile. */
        debug_header_t *old = q->first;
        if (q->popped == q->pushed || !quarantined_magic(old) ||
            !block_claim(old, DEBUG_MAGIC_FREED, DEBUG_MAGIC_BUSY)) {
            got += shard_cut_locked(q, NULL, old, false);
            break;
        }
        debug_header_t *next = old->qnext;
        bool last = q->popped + 1 == q->pushed;
        bool sound = next == NULL || quarantine_link_in_shard(next, shard_index(q));
        bool link_bad = (next == NULL) != last || (!sound && quarantine_link_wrong(next, shard_index(q)));
        if (link_bad || !sound) {
            /* old is sound: it is taken; the FIFO is cut after it (which
             * counts old as popped too). */
            size_t bytes = block_bytes(old);
            q->bytes -= bytes;
            got += bytes + shard_cut_locked(q, old, next, link_bad);
            old->qnext = NULL;
            **out_tail = old;
            *out_tail = &old->qnext;
            break;
        }
        q->first = next;
        if (q->first == NULL)
            q->last = NULL;
        q->popped++;
        size_t bytes = block_bytes(old);
        q->bytes -= bytes;
        got += bytes;
        old->qnext = NULL;
        **out_tail = old;
        *out_tail = &old->qnext;
    }
    /* Under the shard's lock, as the push's addition: with every shard
     * locked (debug_fork_lock) the count is what the shards hold. Taken off
     * after the unlock, a fork in between left the child counting blocks it
     * has on no list, the quarantine never empty and the scavenger passing
     * 20 times a second for good (review finding). */
    if (got)
        atomic_fetch_sub_explicit(&q_bytes, got, memory_order_relaxed);
    return got;
}

static size_t shard_evict(quarantine_shard_t *q, size_t need, debug_header_t ***out_tail)
{
    lock_acquire(&q->lock);
    size_t got = shard_take_locked(q, need, out_tail, NULL);
    lock_release(&q->lock);
    return got;
}

/* The block the next eviction of this shard will check, while the caller
 * returns to its program: it waited a whole quarantine and is cold. `h` may
 * be gone by now (another thread evicted it); a prefetch never faults. */
static void prefetch_block(const debug_header_t *h)
{
    if (h == NULL)
        return;
    const char *p = (const char *)h;
    /* Unrolled: the loop's own counting took three instructions a line. */
#pragma GCC unroll 16
    for (size_t off = 0; off < PREFETCH_BYTES; off += 64)
        __builtin_prefetch(p + off);
}

/* Blocks bigger than the whole quarantine leave it as they enter, so their
 * header is gone by a second free, which then read as a free of a pointer
 * ebb never returned, without the block's traces (review finding: a double
 * free of 17 MiB was reported as "foreign"). The last BIG_FREED_MAX of them
 * are remembered here, header and all: a pointer no live block has is
 * looked up here before it is called foreign. A record is only read for
 * such a pointer: if its address serves a new block, that block answers.
 * The pointer is kept inverted: ebb's data is a root of the leak report, and
 * a plain copy made a lost block at that address reachable (review finding).
 *
 * A new block at a remembered pointer would answer for it, and the second
 * free of the old pointer would free the new block unreported: the huge
 * cache hands a freed mapping to the next request of its size at once. So a
 * new huge block whose pointer is remembered is moved, pages and all, to an
 * address of its own (big_freed_keep_apart, huge_relocate: one mremap, no
 * byte copied, no range held back); the old range is left unmapped, and a
 * free of the old pointer is then reported with the old block's traces (a
 * new mapping that covers it makes it an interior pointer: reported the
 * same way). Where it cannot move it stays, as before: a large block of a
 * segment (a quarantine smaller than the default), a huge block whose header
 * lies apart from it (aligned to 2 MiB or more with EBB_HUGE_PAGES=1 or THP
 * "always": two kernel mappings, which one mremap cannot move), the OS
 * refusing. Under an address-space limit (RLIMIT_AS) the ranges a move
 * leaves are not held (os_hold), and a run of moves may end on a remembered
 * pointer again: its double free then goes unreported.
 */
#define BIG_FREED_MAX 16
static struct {
    lock_t lock;
    unsigned next;
    struct {
        uintptr_t user_inverted; /* ~user pointer */
        debug_header_t header;
    } at[BIG_FREED_MAX];
} big_freed ebb_cold_bss;
/* Whether a record was ever made: a relaxed hint, read without the lock by
 * every allocation that could collide with one. */
static atomic_bool big_freed_any;

static void big_freed_note(debug_header_t *h)
{
    uintptr_t inverted = ~(uintptr_t)user_of(h);
    lock_acquire(&big_freed.lock);
    /* One record a pointer, the newest: a block freed, its address taken
     * again and freed again left two, and a double free was shown with the
     * older block's traces. */
    unsigned i = big_freed.next % BIG_FREED_MAX;
    bool known = false;
    for (unsigned k = 0; k < BIG_FREED_MAX && !known; k++) {
        if (big_freed.at[k].user_inverted == inverted) {
            i = k;
            known = true;
        }
    }
    if (!known)
        big_freed.next++;
    big_freed.at[i].user_inverted = inverted;
    memcpy(&big_freed.at[i].header, h, sizeof *h);
    lock_release(&big_freed.lock);
    atomic_store_explicit(&big_freed_any, true, memory_order_relaxed);
}

/* Whether p is the pointer of a remembered block. */
static bool big_freed_holds(const void *p)
{
    bool found = false;
    lock_acquire(&big_freed.lock);
    for (unsigned k = 0; k < BIG_FREED_MAX && !found; k++)
        found = big_freed.at[k].user_inverted == ~(uintptr_t)p;
    lock_release(&big_freed.lock);
    return found;
}

/* h: a block just allocated, not yet headed, whose user bytes will start at
 * h + offset. A new address for it if that pointer is a remembered big
 * free's (above), else h. */
static debug_header_t *big_freed_keep_apart(debug_header_t *h, size_t offset)
{
    if (ebb_likely(!atomic_load_explicit(&big_freed_any, memory_order_relaxed)) ||
        !big_freed_holds((uint8_t *)h + offset))
        return h;
    /* The place a move finds may be another remembered pointer's: a
     * mapping too big for the huge cache is unmapped at its free, and two
     * blocks then took turns at two addresses (review finding). So each
     * range a move leaves is held (os_hold: no page, nothing committed)
     * until a move lands on no remembered pointer, then let go: at most one
     * move a remembered pointer, and one more. */
    struct {
        void *at;
        size_t len;
    } held[BIG_FREED_MAX + 1];
    unsigned n = 0;
    for (unsigned tries = 0; tries <= BIG_FREED_MAX; tries++) {
        segment_t *seg = ptr_segment(h);
        if (seg->kind != SEGMENT_HUGE || (uint8_t *)seg + seg->block_offset != (uint8_t *)h)
            break;
        size_t len = seg->map_size;
        debug_header_t *moved = huge_relocate(seg, h);
        if (moved == NULL)
            break;
        if (os_hold(seg, len)) {
            held[n].at = seg;
            held[n].len = len;
            n++;
        }
        h = moved;
        if (!big_freed_holds((uint8_t *)h + offset))
            break;
    }
    while (n > 0) {
        n--;
        os_unhold(held[n].at, held[n].len);
    }
    return h;
}

/* The header of the remembered block whose user pointer p was; false if none. */
static bool big_freed_find(const void *p, debug_header_t *copy, uintptr_t *h_at)
{
    bool found = false;
    if (p == NULL)
        return false;
    lock_acquire(&big_freed.lock);
    for (unsigned k = 0; k < BIG_FREED_MAX && !found; k++) {
        if (big_freed.at[k].user_inverted == ~(uintptr_t)p) {
            memcpy(copy, &big_freed.at[k].header, sizeof *copy);
            *h_at = (uintptr_t)p - debug_offset(copy);
            found = true;
        }
    }
    lock_release(&big_freed.lock);
    return found;
}

/* While the leak report runs (debug_quarantine_hold), the quarantine keeps
 * every block it gets, over its bound too: a block freed meanwhile then keeps
 * its address, and the report can tell it from a new block at that address
 * (leak.c, span_still_listed). The report takes milliseconds, a few seconds
 * with many threads running beside it. */
static atomic_bool quarantine_held;

void debug_quarantine_hold(bool hold)
{
    atomic_store(&quarantine_held, hold);
}

/* bytes: block_bytes(h). */
static void quarantine_push(debug_header_t *h, size_t bytes)
{
    if (bytes > cfg.quarantine_max) {
        big_freed_note(h);
        leave_quarantine(h);
        return;
    }
    unsigned own = own_shard();
    quarantine_shard_t *q = &shards[own];
    lock_acquire(&q->lock);
    h->qnext = NULL;
    if (q->last)
        q->last->qnext = h;
    else
        q->first = h;
    q->last = h;
    q->pushed++;
    q->bytes += bytes;
    /* seq_cst, then the wake: the scavenger's protocol (purge.c), so that a
     * quarantine that was empty is drained once its threads stop freeing. */
    size_t total = atomic_fetch_add(&q_bytes, bytes) + bytes;
    if (total <= cfg.quarantine_max || atomic_load_explicit(&quarantine_held, memory_order_relaxed)) {
        lock_release(&q->lock);
        if (total == bytes && cfg.quarantine_idle_ms >= 0)
            purge_wake();
        return;
    }
    /* Over the bound: evict the excess, own blocks first (under the lock
     * already held: in a steady state this is all of it), but never the
     * block just freed, so that a second free of it is always reported as
     * a double free. (When the total was over the bound by more than the
     * rest of this shard, as after concurrent pushes that each found the
     * others' blocks taken, the block just freed was evicted at once, and
     * its double free read as a foreign pointer: test_static's debug case
     * failed 1 run in 20 to 60, and 0 in 150 with this.) */
    debug_header_t *out = NULL, **out_tail = &out;
    size_t need = total - cfg.quarantine_max;
    size_t got = shard_take_locked(q, need, &out_tail, h);
    debug_header_t *next = q->first;
    lock_release(&q->lock);
    for (unsigned k = 1; k < QUARANTINE_SHARDS && got < need; k++)
        got += shard_evict(&shards[(own + k) % QUARANTINE_SHARDS], need - got, &out_tail);
    if (ebb_unlikely(atomic_load_explicit(&evict_pause_ms, memory_order_relaxed) > 0) && out)
        injected_pause(&evict_pause_ms, &evict_pausing);
    leave_quarantine_all(out);
    quarantine_report_cut();
    prefetch_block(next);
}

/* malloc_trim / ebb_collect(true): every block leaves the quarantine now
 * (checked as usual), so that what it held can go back to the OS. */
void debug_quarantine_flush(void)
{
    if (atomic_load(&quarantine_held))
        return; /* a leak report is running: see quarantine_held */
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++) {
        debug_header_t *out = NULL, **out_tail = &out;
        (void)shard_evict(&shards[k], SIZE_MAX, &out_tail);
        leave_quarantine_all(out);
        quarantine_report_cut();
    }
    reuse_flush();
}

/* Under pass_lock: record shard k's push count now (a sample at most every
 * quarter of the wait), and return the count of the newest sample at least
 * the wait old: every block pushed before it has waited that long. */
static uint64_t shard_pushed_before(unsigned k, uint64_t pushed, uint64_t now_ms, uint64_t wait_ms)
{
    shard_age_t *a = &shard_age[k];
    if (a->count == 0 || now_ms - a->ms[a->newest] >= wait_ms / 4) {
        a->newest = (a->newest + 1) % SHARD_SAMPLES;
        a->pushed[a->newest] = pushed;
        a->ms[a->newest] = now_ms;
        if (a->count < SHARD_SAMPLES)
            a->count++;
    }
    for (unsigned n = 0; n < a->count; n++) {
        unsigned i = (a->newest + SHARD_SAMPLES - n) % SHARD_SAMPLES;
        if (now_ms - a->ms[i] >= wait_ms)
            return a->pushed[i];
    }
    return 0;
}

/* Blocks a purge pass took out of the quarantine: they leave (checked, and
 * reported if a write after free changed them) once the pass is over, by
 * debug_quarantine_after_pass. A report aborts, and one made inside the pass
 * aborted holding the pass lock: a SIGABRT handler that forked, or that
 * siglongjmp'ed on, or another thread's exit then waited for it for good
 * (review finding). Per thread: the thread that ran the pass takes them. */
static __thread debug_header_t *decay_out;

void debug_quarantine_after_pass(void)
{
    debug_header_t *list = decay_out;
    decay_out = NULL;
    leave_quarantine_all(list);
    quarantine_report_cut(); /* a cut the pass made */
}

/* A purge pass (purge.c): the blocks that waited EBB_DEBUG_QUARANTINE_IDLE ms
 * are taken out (with `force`, all of them), to leave after the pass. True
 * while blocks remain for a later pass. */
bool debug_quarantine_decay(uint64_t now_ms, bool force)
{
    static uint64_t last_ms; /* under pass_lock */
    if (cfg.quarantine_idle_ms < 0 && !force)
        return false;
    /* Samples come a quarter of the wait apart: a pass in between (one
     * purge delay after the last) has nothing to take or record. */
    if (!force && last_ms != 0 && now_ms - last_ms < (uint64_t)cfg.quarantine_idle_ms / 4)
        return debug_quarantine_pending();
    last_ms = now_ms;
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++) {
        quarantine_shard_t *q = &shards[k];
        debug_header_t *out = NULL, **out_tail = &out;
        lock_acquire(&q->lock);
        uint64_t before = shard_pushed_before(k, q->pushed, now_ms, (uint64_t)cfg.quarantine_idle_ms);
        size_t got = 0;
        if (force)
            got = shard_take_locked(q, SIZE_MAX, &out_tail, NULL);
        while (q->first && q->popped < before)
            got += shard_take_locked(q, 1, &out_tail, NULL);
        lock_release(&q->lock);
        if (got) {
            *out_tail = decay_out;
            decay_out = out;
        }
    }
    return debug_quarantine_pending() || decay_out != NULL;
}

/* The purge pass's re-check: seq_cst, as the count's increments. */
bool debug_quarantine_pending(void)
{
    return cfg.quarantine_idle_ms >= 0 && atomic_load(&q_bytes) != 0;
}

size_t debug_quarantine_bytes(void)
{
    return atomic_load_explicit(&q_bytes, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Allocation
 * ------------------------------------------------------------------------- */

/* A freed block's free-list link (its first word) found changed to `link`:
 * the report's detail goes to t; `what` says why the link is wrong (", not a
 * block of its page") and `where` how it was found ("" or a parenthesis).
 * The block's header, from its last life, lies under the link: the link
 * overwrote only its magic, which header_check leaves out, so a header
 * whose checksum still holds names the block's requested size and its
 * allocation and free; it is returned (NULL for one that does not hold, or
 * with `header_readable` false: the block may have been reused since). A
 * header of all zeros passes the checksum, so it is not taken: the block's
 * inner pages were purged when it left the quarantine (purge_and_release),
 * or it was never handed out; nor one that does not fit the block (left by
 * a block of another size class, before its page was reused). *user: the
 * block's user pointer, as the header says, or in the default layout. */
static debug_header_t *describe_changed_link(text_t *t, void *block, uintptr_t link,
                                             const char *what, const char *where,
                                             bool header_readable, void **user)
{
    debug_header_t *h = block;
    size_t bytes = block_bytes(h);
    bool sound = header_readable && h->check != 0 && h->check == header_check(h) &&
                 debug_offset(h) <= bytes && h->size <= bytes - debug_offset(h);
    text_add(t, "this freed block's free-list link was changed to ");
    text_add_hex(t, link);
    text_add(t, what);
    text_add(t, ": a write into freed memory");
    text_add(t, where);
    *user = sound ? user_of(h) : default_user_of(h);
    return sound ? h : NULL;
}

static void report_changed_link(void *block, uintptr_t link, const char *what, const char *where,
                                bool header_readable)
{
    text_t t;
    text_init(&t, -1);
    void *user;
    debug_header_t *h = describe_changed_link(&t, block, link, what, where, header_readable, &user);
    report("corrupted free list", user, h, text_cstr(&t));
}

/* The block just taken from a page's free list was linked to the next free
 * block by its first word, which a write before a freed block's start (or
 * after it left the quarantine) may have changed. Check the link now, before
 * the next malloc follows it: a bad one is reported, and the page's free list
 * is cut there (its remaining free blocks are lost, nothing else).
 * The page's free list is the owner's, so it is read (and cut) inside a busy
 * window and only while this thread still owns the segment: the scavenger
 * may quiesce an idle-looking heap and collect its pages (heap.c, steps 2-4),
 * and then the check is skipped. */
static void free_list_check(void *block)
{
    segment_t *seg = ptr_segment(block);
    if (seg->kind != SEGMENT_NORMAL)
        return;
    page_t *page = segment_page_of(seg, block);
    uintptr_t next = 0, owner = tls_debug_heap ? tls_debug_heap->thread_id : 0;
    const char *what = ", not a block of its page";
    busy_enter();
    if (owner != 0 && atomic_load_explicit(&seg->thread_id, memory_order_acquire) == owner &&
        page->kind == PAGE_SMALL && page->free != NULL) {
        uintptr_t link = (uintptr_t)page->free, start = (uintptr_t)page_start(page);
        size_t bs = page->block_size;
        bool carved = page_is_carved_block(link, start, bs, page->capacity);
        /* A link to a block of the page that is not free (review finding: a
         * link written to point at a live neighbour handed that block out
         * a second time, and the report then named the neighbour). */
        if (carved && magic_of_a_debug_block(link, *(const uint64_t *)link)) {
            carved = false;
            what = ", a block of its page that is not free";
        }
        if (!carved) {
            next = link;
            page->free = NULL;
        }
    }
    busy_leave();
    if (next != 0)
        report_changed_link(block, next, what, "", true); /* ours: no one reuses it meanwhile */
}

/* A new block of `size` user bytes, zeroed or filled with the new-memory
 * fill; the first `copied` bytes are left as they are instead, for realloc,
 * which copies the old contents over them at once. */
/* `room`: bytes the underlying block gets beyond what the request needs
 * (realloc's headroom, below); they lie past the canary, untouched.
 * `reallocated`: realloc's block (DEBUG_FLAG_REALLOCATED). */
static void *alloc_impl_copy(size_t size, size_t alignment, bool zero, size_t copied, size_t room,
                             bool reallocated)
{
    if (alignment < MIN_ALIGN)
        alignment = MIN_ALIGN;
    size_t offset = sizeof(debug_header_t);
    if (alignment > MIN_ALIGN)
        offset = (offset + alignment - 1) & ~(alignment - 1);
    size_t total;
    if (__builtin_add_overflow(size, offset + TAIL_MIN + room, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    heap_t *heap = debug_heap();
    if (heap == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    debug_header_t *h = NULL;
    if (alignment == MIN_ALIGN && total <= SMALL_MAX) {
        unsigned cls = size_class(total);
        if (cls >= reuse_class_min)
            h = reuse_pop(cls);
    }
    /* calloc: the user bytes are cleared unless the underlying block is
     * known to read as zero (pages the OS just mapped or purged), so that a
     * big, sparsely used calloc stays as little resident as in release mode
     * (review finding: a calloc of 256 MiB was made resident by a memset).
     * The underlying allocation clears nothing itself: its memset would
     * write the header's first word, which verify loads as the magic
     * beside it (only atomic stores may write it: "Claiming a block"). */
    bool zeroed = false;
    if (h == NULL) {
        int saved_errno = errno;
        h = alloc_generic_in_fresh(heap, total, alignment, &zeroed);
        if (h == NULL && room == 0 && debug_quarantine_bytes() + debug_reuse_bytes() > 0 &&
            os_size_mappable(total)) {
            /* The OS refused (SPEC, failure contract: caches and standby
             * memory go back before a request fails). The freed blocks
             * waiting in the quarantine and the reuse cache are such
             * memory: they leave now, checked as usual, and the request
             * tries again on what they free. Not for a request no mapping
             * could serve: the quarantine would lose its blocks for
             * nothing; nor for realloc's try with headroom, which tries
             * again without it first. */
            debug_quarantine_flush();
            h = alloc_generic_in_fresh(heap, total, alignment, &zeroed);
        }
        if (h == NULL)
            return NULL; /* errno set */
        errno = saved_errno;
        free_list_check(h);
        h = big_freed_keep_apart(h, offset);
    }
    h->size = size;
    h->shard = 0;
    h->alloc_trace = capture();
    h->free_trace = 0;
    h->context = debug_context_current();
    h->align_log2 = alignment > MIN_ALIGN ? (uint8_t)__builtin_ctzl(alignment) : 0;
    h->flags = (uint8_t)((zero ? DEBUG_FLAG_ZEROED : 0) | (reallocated ? DEBUG_FLAG_REALLOCATED : 0) |
                         (unsigned)debug_fork_depth << DEBUG_FORK_DEPTH_SHIFT);
    h->qnext = NULL;
    h->check = header_check(h);
    uint8_t *user = user_of(h);
    if (zero && !zeroed)
        memset(user, 0, size);
    else if (!zero)
        fill_past(user, size, copied, cfg.fill_alloc);
    canary_write(h);
    atomic_store_explicit(&h->magic, DEBUG_MAGIC_LIVE ^ (uintptr_t)h, memory_order_release);
    return user;
}

static void *alloc_impl(size_t size, size_t alignment, bool zero)
{
    return alloc_impl_copy(size, alignment, zero, 0, 0, false);
}

/* ---------------------------------------------------------------------------
 * Finding a block's header from a pointer, and judging the pointer
 * ------------------------------------------------------------------------- */
typedef enum { PTR_OK, PTR_FOREIGN, PTR_INTERIOR, PTR_FREED, PTR_DAMAGED, PTR_NOT_LIVE } ptr_kind_t;

/* What p is, given the underlying block h it lies in (p >= h); h. */
static debug_header_t *header_judge(const void *p, debug_header_t *h, ptr_kind_t *kind)
{
    uint64_t magic = debug_magic_settled(h);
    /* BUSY: another thread is freeing it, or taking it out of the quarantine. */
    if (magic == (DEBUG_MAGIC_FREED ^ (uintptr_t)h) || magic == (DEBUG_MAGIC_BUSY ^ (uintptr_t)h)) {
        *kind = (uint8_t *)p == user_of(h) ? PTR_FREED : PTR_INTERIOR;
        return h;
    }
    if (magic != (DEBUG_MAGIC_LIVE ^ (uintptr_t)h)) {
        /* A free block of the underlying allocator (p was never returned, or
         * was freed long ago), or a header overwritten from its first word. */
        *kind = PTR_NOT_LIVE;
        return h;
    }
    if (!header_sound(h, true) || debug_offset(h) > block_bytes(h)) {
        *kind = PTR_DAMAGED; /* live, but a write changed its header */
        return h;
    }
    *kind = (uint8_t *)p == user_of(h) ? PTR_OK : PTR_INTERIOR;
    return h;
}

/* A block aligned to SEGMENT_SIZE or more is a huge mapping whose header
 * lies one segment below the block (large.c), and its user pointer is
 * `alignment` bytes into it (the header rounded up), in a unit the segment
 * map does not mark. The block p is the user pointer of, if any: tried for
 * each power-of-two alignment from SEGMENT_SIZE that p has. */
static uint8_t *huge_aligned_block_of(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    for (size_t a = SEGMENT_SIZE; a != 0 && a < u && (u & (a - 1)) == 0; a <<= 1) {
        uint8_t *block = (uint8_t *)(u - a);
        if (!segment_map_contains(block))
            continue;
        segment_t *seg = ptr_segment(block);
        if (seg->kind == SEGMENT_HUGE && seg->alignment == a &&
            (uint8_t *)seg + seg->block_offset == block)
            return block;
    }
    return NULL;
}

/* The underlying block whose span p lies in (p in a segment of the segment
 * map), or NULL where no block is (a free page, a small page's tail). */
static uint8_t *block_containing(const void *p)
{
    segment_t *seg = ptr_segment(p);
    if (seg->kind == SEGMENT_HUGE)
        return (uint8_t *)seg + seg->block_offset;
    page_t *page = segment_page_of(seg, p);
    if (page->kind == PAGE_LARGE)
        return page_start(page);
    if (page->kind != PAGE_SMALL)
        return NULL;
    uint8_t *start = page_start(page);
    size_t idx = ((uintptr_t)p - (uintptr_t)start) / page->block_size;
    /* reserved, not capacity: the owner grows capacity as it carves,
     * unsynchronised with this (maybe another) thread. A pointer into the
     * part not carved yet finds no live header. */
    if (idx >= page->reserved)
        return NULL;
    return start + idx * page->block_size;
}

/* The header of the underlying block containing p (NULL if p is in no live
 * block of ours), and what p is. */
static debug_header_t *header_for(const void *p, ptr_kind_t *kind)
{
    *kind = PTR_FOREIGN;
    if (!segment_map_contains(p)) {
        uint8_t *huge = huge_aligned_block_of(p);
        if (huge == NULL) { /* beyond a huge mapping's first unit? */
            segment_t *seg = huge_live_containing(p);
            if (seg == NULL || (uint8_t *)p < (uint8_t *)seg + seg->block_offset)
                return NULL;
            huge = (uint8_t *)seg + seg->block_offset;
        }
        return header_judge(p, (debug_header_t *)huge, kind);
    }
    segment_t *seg = ptr_segment(p);
    /* The common case first: p is the user pointer of a live block with the
     * default layout, its header just below it. A live magic is xor-ed with
     * its own address, so it is found only where a header was written, at a
     * block's start: no division to find the block. The whole of a normal
     * segment is mapped, so the header's place can be read whatever p is;
     * a user pointer of this layout is MIN_ALIGN-aligned, so the header is
     * read aligned. */
    if (((uintptr_t)p & (MIN_ALIGN - 1)) == 0 &&
        ((uintptr_t)p & SEGMENT_MASK) >= sizeof(debug_header_t) && seg->kind == SEGMENT_NORMAL) {
        debug_header_t *h = (debug_header_t *)((uint8_t *)p - sizeof *h);
        if (h->magic == (DEBUG_MAGIC_LIVE ^ (uintptr_t)h) && h->align_log2 == 0 &&
            header_sound(h, true)) {
            *kind = PTR_OK;
            return h;
        }
    }
    uint8_t *block = block_containing(p);
    if (block == NULL || (uint8_t *)p < block)
        return NULL;
    return header_judge(p, (debug_header_t *)block, kind);
}

/* The call a pointer was given to, which names the fault. */
typedef enum { CALL_FREE, CALL_REALLOC, CALL_USABLE_SIZE } call_t;

/* Fault names by call: free, realloc, malloc_usable_size. */
static const char *const fault_foreign[] = {
    "free of a pointer ebb never returned (foreign)",
    "realloc of a pointer ebb never returned (foreign)",
    "malloc_usable_size of a pointer ebb never returned (foreign)"};
static const char *const fault_interior[] = {"free of an interior pointer",
                                             "realloc of an interior pointer",
                                             "malloc_usable_size of an interior pointer"};
static const char *const fault_freed[] = {"double free", "realloc of a freed block",
                                          "malloc_usable_size of a freed block"};
static const char *const fault_not_live[] = {
    "free of a pointer that is not a live block",
    "realloc of a pointer that is not a live block",
    "malloc_usable_size of a pointer that is not a live block"};

/* A report about a block this thread does not hold (a double free, an
 * interior pointer): the header is copied while it is claimed as verify
 * claims it (step 1), and the report is made from the copy. Read in place,
 * the header could go while the report waited for the report lock and
 * symbolized: the block leaving the quarantine, reused or its segment
 * unmapped (a review's four threads each freeing blocks twice, with
 * EBB_DEBUG_ON_ERROR=continue, crashed 5 runs of 5). A block that is
 * changing at that moment is reported without its header. */
static void report_unheld(const char *fault, const void *p, debug_header_t *h, const char *detail)
{
    uint64_t seen;
    debug_header_t copy;
    if (block_hold(h, &seen)) {
        memcpy(&copy, h, sizeof copy);
        block_unhold(h, seen);
        report_at(fault, p, &copy, (uintptr_t)h, detail);
    } else {
        report(fault, p, NULL, detail);
    }
}

/* p was the user pointer of a block too big for the quarantine, freed
 * before: reported as a call on a freed block, with its traces; true if so. */
static bool report_big_freed(const void *p, call_t call)
{
    debug_header_t copy;
    uintptr_t h_at;
    if (!big_freed_find(p, &copy, &h_at))
        return false;
    report_at(fault_freed[call], p, &copy, h_at,
              "the block was bigger than the whole quarantine (EBB_DEBUG_QUARANTINE): it never "
              "waited there");
    return true;
}

/* Report p if it is not a live block's user pointer; true if it is. */
static bool pointer_sound(const void *p, call_t call, debug_header_t **out)
{
    ptr_kind_t kind;
    debug_header_t *h = header_for(p, &kind);
    *out = h;
    switch (kind) {
    case PTR_OK:
        return true;
    case PTR_FOREIGN:
        if (!report_big_freed(p, call))
            report(fault_foreign[call], p, NULL, NULL);
        return false;
    case PTR_INTERIOR:
        /* Inside a new block that was mapped over a big block freed
         * before: that block's pointer, freed again. */
        if (report_big_freed(p, call))
            return false;
        report_unheld(fault_interior[call], p, h,
                      "the pointer lies inside a block but is not its start");
        return false;
    case PTR_FREED:
        report_unheld(fault_freed[call], p, h, NULL);
        return false;
    case PTR_DAMAGED:
        /* The size and traces come from the damaged header: shown, flagged. */
        report_unheld("corrupted block header", p, h,
                      "a write before the block's start changed ebb's header (the size and "
                      "traces below are read from it and may be wrong too)");
        return false;
    case PTR_NOT_LIVE:
        if (!report_big_freed(p, call))
            report(fault_not_live[call], p, NULL,
                   "freed long ago (it left the quarantine), never returned by malloc, or its "
                   "block's header was overwritten from its first word");
        return false;
    }
    return false;
}

/* ---------------------------------------------------------------------------
 * Free, realloc, usable size
 * ------------------------------------------------------------------------- */
/* A block whose pointer (and size, alignment) were found right goes to the
 * quarantine: claimed (step 2), its canary checked (unless realloc just did,
 * and reported), its free traced and filled. */
static void free_block(debug_header_t *h, bool canary_checked, call_t call)
{
    if (!block_claim(h, DEBUG_MAGIC_LIVE, DEBUG_MAGIC_BUSY)) {
        report_unheld(fault_freed[call], user_of(h), h,
                      "another thread freed the block at the same moment");
        return;
    }
    size_t usable = block_bytes(h), tail = tail_len(h, usable);
    if (!canary_checked) {
        const uint8_t *bad = canary_broken(h, tail);
        if (bad)
            report_overflow(h, bad, "found at free");
    }
    h->free_trace = capture();
    h->shard = own_shard() + 1; /* the FIFO quarantine_push puts it on */
    h->check = header_check(h); /* which covers the free trace and the shard */
    freed_fill(h, tail);
    atomic_store_explicit(&h->magic, DEBUG_MAGIC_FREED ^ (uintptr_t)h, memory_order_release);
    quarantine_push(h, usable);
}

static void free_impl(void *p, size_t size, size_t alignment, debug_free_kind_t how)
{
    if (p == NULL)
        return;
    debug_header_t *h;
    if (!pointer_sound(p, CALL_FREE, &h))
        return; /* reported; with continue, the bad free is ignored */
    if (how != DEBUG_FREE_PLAIN && size != h->size) {
        text_t t;
        text_init(&t, -1);
        text_add(&t, how == DEBUG_FREE_ALIGNED_SIZED ? "free_aligned_sized was given "
                                                     : "free_sized was given ");
        text_add_u64(&t, size, 0);
        text_add(&t, " bytes; the block was allocated with ");
        text_add_u64(&t, h->size, 0);
        report("free with the wrong size", p, h, text_cstr(&t));
        /* With continue, a bad free is ignored like every other: the
         * program's idea of the block is wrong, so the block stays its own
         * (review finding: it was freed, and handed out again). */
        return;
    }
    if (how == DEBUG_FREE_SIZED && h->align_log2 != 0 && !(h->flags & DEBUG_FLAG_REALLOCATED)) {
        /* C23 pairs free_sized with malloc, calloc and realloc, and a block
         * aligned beyond what they give with free_aligned_sized. */
        text_t t;
        text_init(&t, -1);
        text_add(&t, "free_sized was given a block allocated with alignment ");
        text_add_u64(&t, (uint64_t)1 << h->align_log2, 0);
        text_add(&t, "; free_aligned_sized frees such a block");
        report("free with the wrong alignment", p, h, text_cstr(&t));
        return; /* ignored with continue, as above */
    }
    if (how == DEBUG_FREE_ALIGNED_SIZED) {
        size_t had = h->align_log2 ? (size_t)1 << h->align_log2 : MIN_ALIGN;
        if (alignment != had && !(h->align_log2 == 0 && alignment <= MIN_ALIGN)) {
            text_t t;
            text_init(&t, -1);
            text_add(&t, "free_aligned_sized was given alignment ");
            text_add_u64(&t, alignment, 0);
            text_add(&t, "; the block was allocated with alignment ");
            text_add_u64(&t, had, 0);
            report("free with the wrong alignment", p, h, text_cstr(&t));
            return; /* ignored with continue, as above */
        }
    }
    free_block(h, false, CALL_FREE);
}

/* realloc in debug mode (EBB_DEBUG_REALLOC). By default a block stays where
 * it is when the new size fits the underlying block, less the header, the
 * alignment padding and TAIL_MIN bytes of canary, as release mode's realloc
 * keeps a block within its size class: a string grown a few bytes at a time
 * then moves once per size class, instead of being copied at every call,
 * which made such a loop quadratic (gawk appending to a string 100,000
 * times: 2.8 s against 0.05 s in release mode). With "move" every realloc
 * moves, as AddressSanitizer's does, so that a stale pointer to the old
 * block lands in the quarantine and its use is reported. */
static bool realloc_fits(debug_header_t *h, size_t size, size_t usable)
{
    size_t need = size + debug_offset(h) + TAIL_MIN;
    /* Shrinking below half the block moves it, as release mode does: a huge
     * buffer cut down to a few bytes must not keep its pages. */
    return size <= usable - debug_offset(h) - TAIL_MIN && need >= usable / 2;
}

/* Claims a fork must not split: a realloc in place holds its block RESIZING
 * while it changes, and a child forked meanwhile has no thread to end the
 * claim: its free of the block, its heap walk and its leak report waited
 * for it for ever (review finding: free() and exit() hung in such a
 * child). The steps:
 *   1. a realloc in place marks its thread busy (resize_busy_here, before
 *      anything else), adds 1 to resize_claims, then reads
 *      resize_forks_waiting; if a fork waits, it takes its 1 back, waits for
 *      the fork to end and starts again; it takes 1 off once the block is
 *      LIVE again, and then its mark;
 *   2. debug_fork_prepare_first, before the fork takes any lock of ebb's
 *      (a resize may take heap and huge locks to give memory back), adds 1
 *      to resize_forks_waiting and waits for resize_claims to drain;
 *   3. debug_fork_done takes it back, in the parent; the child starts with
 *      no fork waiting and no claim.
 * seq_cst on both sides of 1 and 2. A signal handler may allocate, and fork
 * (review of the first version, which hung in all three cases):
 *   - a realloc in place does not wait in step 1 in its own thread's fork
 *     (resize_forking_here: a handler inside fork_prepare), nor while its
 *     thread holds a lock of ebb's (a handler inside a slow path): neither
 *     fork can go on before that claim ends;
 *   - a fork from a handler that interrupted its own thread's realloc in
 *     place (resize_busy_here) does not wait in step 2, which would wait for
 *     itself; another thread's claim may then be split (the case before
 *     these steps existed), and the child's count may go below 0 when the
 *     interrupted claim ends, which only lets a later fork there wait less. */
static atomic_int resize_claims, resize_forks_waiting;
static __thread int resize_busy_here, resize_forking_here;

static void resize_claim_enter(void)
{
    resize_busy_here++;
    atomic_signal_fence(memory_order_seq_cst);
    for (;;) {
        atomic_fetch_add(&resize_claims, 1);
        if (atomic_load(&resize_forks_waiting) == 0 || resize_forking_here != 0 || lock_any_held())
            break;
        atomic_fetch_sub(&resize_claims, 1);
        while (atomic_load(&resize_forks_waiting) != 0)
            os_yield();
    }
}

static void resize_claim_leave(void)
{
    atomic_fetch_sub(&resize_claims, 1);
    atomic_signal_fence(memory_order_seq_cst);
    resize_busy_here--;
}

void debug_fork_prepare_first(void)
{
    if (!debug_enabled)
        return;
    resize_forking_here++;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_fetch_add(&resize_forks_waiting, 1);
    while (resize_busy_here == 0 && atomic_load(&resize_claims) > 0)
        os_yield();
}

void debug_fork_done(bool child)
{
    if (!debug_enabled)
        return;
    if (child) {
        atomic_store(&resize_forks_waiting, 0);
        atomic_store(&resize_claims, 0);
    } else {
        atomic_fetch_sub(&resize_forks_waiting, 1);
    }
    atomic_signal_fence(memory_order_seq_cst);
    resize_forking_here--;
}

/* The block is live and its canary checked. Claimed while it changes, as
 * a free claims it (a racing free or verify waits or reports). give_back:
 * there was no memory to move it to (realloc_impl), so the underlying block
 * gives back what lies past the new size and its canary, while claimed:
 * verify reads the tail it unmaps only while holding the block.
 * canary_intact: the caller's check found every byte of the canary as
 * written. */
static void *realloc_in_place(debug_header_t *h, size_t size, size_t usable, bool give_back,
                              bool canary_intact)
{
    uint8_t *p = user_of(h);
    uint32_t trace = capture(); /* before the claim: readers wait while it is held */
    /* Readers wait out the claim as they would a lock: a handler that
     * interrupts it must not walk the heap or report leaks at exit, which
     * would wait for this block for ever (purge_exclusive_begin refuses). */
    resize_claim_enter();
    lock_count_up();
    if (!block_claim(h, DEBUG_MAGIC_LIVE, DEBUG_MAGIC_RESIZING)) {
        lock_count_down();
        resize_claim_leave();
        report_unheld(fault_freed[CALL_REALLOC], p, h,
                      "another thread freed the block at the same moment");
        errno = EINVAL;
        return NULL;
    }
    size_t old = h->size;
    size_t old_tail_end = old + tail_len(h, usable); /* the canary checked before the call */
    /* Growing: the bytes past the old size were canary (or never checked);
     * they are new memory now. Shrinking: the canary moves down. */
    fill_past(p, size, old, cfg.fill_alloc);
    h->size = size;
    h->alloc_trace = trace; /* where its present size was asked for, as a move records */
    h->context = debug_context_current();
    /* Not zeroed any more, and allocated by this process now (a forked
     * child's leak report counts it as its own, as it would a moved block). */
    h->flags = (uint8_t)((unsigned)debug_fork_depth << DEBUG_FORK_DEPTH_SHIFT |
                         DEBUG_FLAG_REALLOCATED);
    h->check = header_check(h);
    if (ebb_unlikely(atomic_load_explicit(&resize_pause_ms, memory_order_relaxed) > 0))
        injected_pause(&resize_pause_ms, &resize_pausing);
    if (give_back) {
        alloc_shrink_in_place(tls_debug_heap, h, debug_offset(h) + size + TAIL_MIN);
        usable = block_bytes(h);
    }
    /* The new tail's canary, [size, tail_end): only what is not canary
     * already. With the old canary intact (checked by the caller), that is
     * the new tail less [old, old_tail_end): growing, the new tail's end
     * beyond the old tail's; shrinking, the bytes from the new size to the
     * old. Rewriting the whole tail, up to CANARY_CHECK_MAX bytes a call,
     * was most of the memory a string grown in place touched. A block that
     * gave memory back, or whose canary was found broken (written again,
     * so that the overflow is reported once), gets the whole tail. The
     * padding's canary is as it was. */
    size_t tail_end = size + tail_len(h, usable);
    if (give_back || !canary_intact) {
        memset(p + size, CANARY_BYTE, tail_end - size);
    } else {
        if (size < old)
            memset(p + size, CANARY_BYTE, (old < tail_end ? old : tail_end) - size);
        size_t from = old_tail_end > size ? old_tail_end : size;
        if (tail_end > from)
            memset(p + from, CANARY_BYTE, tail_end - from);
    }
    atomic_store_explicit(&h->magic, DEBUG_MAGIC_LIVE ^ (uintptr_t)h, memory_order_release);
    lock_count_down();
    resize_claim_leave();
    return p;
}

static void *realloc_impl(void *p, size_t size)
{
    if (p == NULL)
        return alloc_impl(size, 0, false);
    debug_header_t *h;
    if (!pointer_sound(p, CALL_REALLOC, &h)) {
        errno = EINVAL;
        return NULL;
    }
    if (size == 0) {
        free_impl(p, 0, 0, DEBUG_FREE_PLAIN);
        return NULL;
    }
    size_t usable = block_bytes(h);
    const uint8_t *bad = canary_broken(h, tail_len(h, usable));
    if (bad)
        report_overflow(h, bad, "found at realloc");
    if (!cfg.realloc_moves && realloc_fits(h, size, usable))
        return realloc_in_place(h, size, usable, false, bad == NULL);
    size_t alignment = h->align_log2 ? (size_t)1 << h->align_log2 : 0;
    /* The new block is filled only past what is copied into it. One that
     * grows beyond SMALL_MAX gets an eighth more room underneath, so that a
     * block grown a few bytes at a time moves once per eighth of its size
     * (the size classes give small blocks as much), not once per page. */
    size_t copied = h->size < size ? h->size : size;
    size_t room = !cfg.realloc_moves && size > h->size && size > SMALL_MAX ? size / 8 : 0;
    int saved_errno = errno;
    void *q = alloc_impl_copy(size, alignment, false, copied, room, true);
    if (q == NULL && room) {
        q = alloc_impl_copy(size, alignment, false, copied, 0, true);
        if (q)
            errno = saved_errno; /* the room's failure is not the caller's */
    }
    if (q == NULL) {
        if (size > h->size)
            return NULL; /* p is untouched */
        /* Shrinking does not fail for want of memory (review finding B2),
         * in either realloc mode: the block stays, its size and canary
         * move down, as a realloc that fits does. */
        errno = saved_errno;
        return realloc_in_place(h, size, usable, true, bad == NULL);
    }
    memcpy(q, p, copied);
    free_block(h, true, CALL_REALLOC); /* its canary was checked above (a fault is reported once) */
    return q;
}

static size_t usable_size_impl(const void *p)
{
    if (p == NULL)
        return 0;
    debug_header_t *h;
    if (!pointer_sound(p, CALL_USABLE_SIZE, &h))
        return 0;
    return h->size;
}

/* ---------------------------------------------------------------------------
 * Contexts: ebb_debug_set_context names a phase; later allocations of the
 * calling thread carry its number (16 bits in the header).
 * ------------------------------------------------------------------------- */
#define CONTEXT_MAX 1024
#define CONTEXT_NAME_MAX 48
static lock_t context_lock = LOCK_INIT;
static char context_names[CONTEXT_MAX][CONTEXT_NAME_MAX] ebb_cold_bss;
static size_t context_count = 1; /* 0: no context */
static __thread uint16_t context_current;

uint16_t debug_context_current(void)
{
    return context_current;
}

const char *debug_context_name(uint16_t id)
{
    return id && id < CONTEXT_MAX && context_names[id][0] ? context_names[id] : NULL;
}

EBB_API void ebb_debug_set_context(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        context_current = 0;
        return;
    }
    lock_acquire(&context_lock);
    size_t id = 0;
    for (size_t i = 1; i < context_count; i++) {
        if (strncmp(context_names[i], name, CONTEXT_NAME_MAX - 1) == 0) {
            id = i;
            break;
        }
    }
    if (id == 0 && context_count < CONTEXT_MAX) {
        id = context_count++;
        strncpy(context_names[id], name, CONTEXT_NAME_MAX - 1);
    }
    lock_release(&context_lock);
    context_current = (uint16_t)id;
}


/* A list the allocator cut where no report can be written (page.c's
 * page_link_sound, under the allocator's locks; the reuse cache, under its
 * shard's lock or inside a purge pass) is reported by the next debug-mode
 * call of any thread: a report may abort. The first cut waits here:
 * cut_state 0 (none), 1 (being written), 2 (ready). */
static atomic_int cut_state;
static cut_kind_t cut_kind;
static void *cut_block;
static uintptr_t cut_link;
static size_t cut_dropped_bytes;

static void note_cut(cut_kind_t kind, void *block, uintptr_t link, size_t dropped_bytes)
{
    int none = 0;
    if (!atomic_compare_exchange_strong_explicit(&cut_state, &none, 1, memory_order_relaxed,
                                                 memory_order_relaxed))
        return; /* one report is enough: the program is corrupting its heap */
    cut_kind = kind;
    cut_block = block;
    cut_link = link;
    cut_dropped_bytes = dropped_bytes;
    atomic_store_explicit(&cut_state, 2, memory_order_release);
}

void debug_note_cut_list(void *block, uintptr_t link)
{
    note_cut(CUT_REMOTE_LIST, block, link, 0);
}

static void report_cut_list_slow(void)
{
    int ready = 2;
    if (!atomic_compare_exchange_strong_explicit(&cut_state, &ready, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return;
    cut_kind_t kind = cut_kind;
    debug_header_t *h = cut_block;
    uintptr_t link = cut_link;
    size_t dropped = cut_dropped_bytes;
    atomic_store_explicit(&cut_state, 0, memory_order_release);
    if (kind == CUT_REMOTE_LIST) {
        /* The block stayed on its page's free list: it may be in use again. */
        report_changed_link(h, link, ", not a block of its page", " (found when the blocks other threads released into its "
                                     "page were collected)", false);
        return;
    }
    /* A dropped block is never reused: its header (intact for a changed
     * link) still names its allocation and its free. */
    text_t t;
    text_init(&t, -1);
    if (kind == CUT_REUSE_HEADER) {
        text_add(&t, "a write before the block's start changed ebb's header while the block "
                     "waited in the reuse cache (a write past the end of the block below it?)");
    } else {
        text_add(&t, "a link ebb keeps in this freed block's first 24 bytes, while it waits to be "
                     "reused after the quarantine, was changed to ");
        text_add_hex(&t, link);
        text_add(&t, ": a write into freed memory after it left the quarantine");
    }
    text_add(&t, "; the blocks of its size waiting with it (");
    text_add_long(&t, (long)dropped);
    text_add(&t, " bytes) are dropped, never reused");
    if (kind == CUT_REUSE_HEADER)
        report("corrupted block header", default_user_of(h), NULL, text_cstr(&t));
    else
        report("corrupted free list", user_of(h), h, text_cstr(&t));
}

static inline void report_cut_list(void)
{
    if (ebb_unlikely(atomic_load_explicit(&cut_state, memory_order_relaxed) == 2))
        report_cut_list_slow();
}

/* ---------------------------------------------------------------------------
 * The leak report's gate. The report runs at exit while other threads may
 * still run, and it lists the live blocks, then marks from the roots. A
 * pointer a thread moved meanwhile into a block allocated after the listing
 * (a vector grown, a table copied and the old one freed, a node pushed on a
 * list) hid every block behind it: counted lost (review finding: a table of
 * 1,000 reachable blocks a worker kept copying, and 55,000-78,000 nodes of a
 * list another thread pushed onto, reported lost). While the report lists
 * and judges the blocks, the gate is closed: another thread's malloc,
 * realloc or free waits at its entry, before it takes any lock, until the
 * report has judged every block (what the program does without the
 * allocator goes on; the report says what it cannot see). A call already
 * past the gate finishes (leak.c scans the blocks it allocates as roots).
 * The report takes no lock that such a waiter may hold outside ebb (it
 * lists the RELRO regions, under the loader's lock, before it closes the
 * gate: leak.c, relro_list), and a wait ends after GATE_WAIT_MAX_MS
 * whatever happens.
 * No wait in the reporting thread, nor where a lock of ebb's is held (a
 * signal handler that interrupted an allocator call, whose lock the
 * report may need).
 * ------------------------------------------------------------------------- */
static atomic_int report_gate; /* 1: closed */
static __thread bool gate_closed_here;

void debug_gate_close(void)
{
    gate_closed_here = true;
    atomic_store(&report_gate, 1);
}

void debug_gate_open(void)
{
    atomic_store(&report_gate, 0);
    os_futex_wake_all(&report_gate);
    gate_closed_here = false;
}

/* At most this long: a thread the report itself waits for through a lock
 * that is none of ebb's (the loader's was one, review finding) must not
 * hang the exit. Past it the call goes on, as before the gate. */
#define GATE_WAIT_MAX_MS 2000

static ebb_noinline void gate_wait(void)
{
    if (gate_closed_here || lock_any_held())
        return;
    uint64_t until = os_now_ms() + GATE_WAIT_MAX_MS;
    for (uint64_t now = os_now_ms(); atomic_load(&report_gate) != 0 && now < until; now = os_now_ms())
        os_futex_wait_ms(&report_gate, 1, (long)(until - now));
}

static inline void gate_pass(void)
{
    if (ebb_unlikely(atomic_load_explicit(&report_gate, memory_order_relaxed) != 0))
        gate_wait();
}

/* The allocation entry points may start the scavenger (purge_poll), as
 * release mode's slow paths do: a debug-mode program that allocated nothing
 * below 128 KiB never started it, and its quarantine's time bound, reuse
 * cache and delayed purges waited for a pass that never came (review
 * finding: 64 freed blocks of 256 KiB held 15 MiB for good). */
void *debug_alloc(size_t size, size_t alignment, bool zero)
{
    gate_pass();
    DEBUG_ENTER();
    purge_poll(true); /* before the allocation, as alloc_generic does; inside
                         the mark, so a fault an inline pass reports is traced
                         from the caller */
    void *r = alloc_impl(size, alignment, zero);
    report_cut_list();
    DEBUG_LEAVE();
    return r;
}

void *debug_realloc(void *p, size_t size)
{
    gate_pass();
    DEBUG_ENTER();
    purge_poll(true);
    void *r = realloc_impl(p, size);
    report_cut_list();
    DEBUG_LEAVE();
    return r;
}

size_t debug_usable_size(const void *p)
{
    DEBUG_ENTER();
    size_t r = usable_size_impl(p);
    DEBUG_LEAVE();
    return r;
}

void debug_free(void *p, size_t size, size_t alignment, debug_free_kind_t how)
{
    gate_pass();
    DEBUG_ENTER();
    free_impl(p, size, alignment, how);
    report_cut_list();
    DEBUG_LEAVE();
}

/* ---------------------------------------------------------------------------
 * ebb_debug_verify: every block and free list checked now. Each heap is
 * paused while it is checked (the heap walk's protocol, heap.c), so the
 * result is exact for it; abandoned segments are checked under their list's
 * lock, huge blocks under the huge lock.
 * ------------------------------------------------------------------------- */
/* A fault verify found. It is reported only once verify holds nothing: no
 * claim, no heap's lock, not the purge exclusion. A report captures this
 * call's trace and symbolizes, which takes the dynamic loader's lock, and a
 * thread inside a dl_iterate_phdr callback that freed the claimed block
 * waited for verify as verify waited for it (review finding); a SIGABRT
 * handler that went on after the abort needed the locks too. */
#define VERIFY_REPORTS_MAX 16

typedef struct verify_finding_s {
    const char *fault;
    uintptr_t p;             /* the pointer the report names */
    uintptr_t at;            /* the block's header, or 0 when it cannot be trusted */
    debug_header_t header;   /* a copy, taken while the block was held */
    char detail[256];
} verify_finding_t;

typedef struct verify_s {
    size_t problems;
    /* Whether no thread can be part way through allocating a block in the
     * pages being walked (verify_big_block): they are the caller's own heap's
     * (unless the call comes from a signal handler that interrupted one of
     * its thread's allocator calls: in_a_call), an exited thread's or an
     * abandoned segment's (not in a forked child). */
    bool no_allocation_under_way;
    bool in_a_call;
    verify_finding_t found[VERIFY_REPORTS_MAX];
} verify_t;

/* Keep a finding for verify_report (beyond VERIFY_REPORTS_MAX, only counted). */
static void verify_keep(verify_t *v, const char *fault, const void *p, debug_header_t *h,
                        const char *detail)
{
    size_t i = v->problems++;
    if (i >= VERIFY_REPORTS_MAX)
        return;
    verify_finding_t *f = &v->found[i];
    f->fault = fault;
    f->p = (uintptr_t)p;
    f->at = (uintptr_t)h;
    if (h)
        memcpy(&f->header, h, sizeof f->header);
    size_t n = strlen(detail);
    if (n >= sizeof f->detail)
        n = sizeof f->detail - 1;
    memcpy(f->detail, detail, n);
    f->detail[n] = '\0';
}

static void verify_report(const verify_t *v)
{
    size_t n = v->problems < VERIFY_REPORTS_MAX ? v->problems : VERIFY_REPORTS_MAX;
    for (size_t i = 0; i < n; i++) {
        const verify_finding_t *f = &v->found[i];
        report_at(f->fault, (const void *)f->p, f->at ? &f->header : NULL, f->at, f->detail);
    }
    if (n < v->problems) { /* EBB_DEBUG_ON_ERROR=continue: the first report did not abort */
        debug_report_lock();
        bool opened;
        int fd = debug_log_open(&opened);
        text_t t;
        text_init(&t, fd);
        text_add(&t, "==ebb== ebb_debug_verify found ");
        text_add_u64(&t, v->problems, 0);
        text_add(&t, " problems; the first ");
        text_add_u64(&t, VERIFY_REPORTS_MAX, 0);
        text_add(&t, " are reported above\n");
        text_flush(&t);
        debug_log_close(fd, opened);
        debug_report_unlock();
    }
}

/* What is wrong with a block that read as live or freed: 0 nothing, else
 * the kind of fault, with *bad the first changed byte. */
enum { VERIFY_SOUND, VERIFY_HEADER, VERIFY_FREED_WRITE, VERIFY_OVERFLOW };

static int verify_problem(debug_header_t *h, bool freed, const uint8_t **bad)
{
    *bad = NULL;
    if (!header_sound(h, !freed) || debug_offset(h) > alloc_usable_size(h))
        return VERIFY_HEADER;
    if (freed) {
        *bad = freed_fill_broken(h, alloc_usable_size(h));
        return *bad ? VERIFY_FREED_WRITE : VERIFY_SOUND;
    }
    *bad = canary_broken(h, tail_of(h));
    return *bad ? VERIFY_OVERFLOW : VERIFY_SOUND;
}

/* Step 1 of "Claiming a block": a live or freed block is checked while
 * verify holds it, so nobody frees, fills or reuses it meanwhile and what is
 * found is there. A block that is changing (its claim fails) is left for the
 * next call. */
static void verify_block(verify_t *v, debug_header_t *h)
{
    uint64_t seen;
    if (!block_hold(h, &seen))
        return; /* a free block of the underlying allocator, or one changing */
    bool freed = seen == (DEBUG_MAGIC_FREED ^ (uintptr_t)h);
    const uint8_t *bad;
    int kind = verify_problem(h, freed, &bad);
    if (kind == VERIFY_HEADER) {
        verify_keep(v, "corrupted block header", (uint8_t *)h + sizeof *h, NULL,
                    "found by ebb_debug_verify: a write before the block's start changed ebb's "
                    "header");
    } else if (kind == VERIFY_FREED_WRITE) {
        text_t t;
        text_init(&t, -1);
        describe_freed_write(&t, h, bad,
                             " changed while the block was in quarantine (found by "
                             "ebb_debug_verify)");
        verify_keep(v, "heap-use-after-free", user_of(h), h, text_cstr(&t));
    } else if (kind == VERIFY_OVERFLOW) {
        text_t t;
        text_init(&t, -1);
        const char *fault = describe_overflow(&t, h, bad, "found by ebb_debug_verify");
        verify_keep(v, fault, user_of(h), h, text_cstr(&t));
    }
    block_unhold(h, seen);
}

/* A small page's free list, as verify walks it: the page's carved blocks. */
typedef struct free_list_bounds_s {
    uintptr_t start;
    size_t block_size, capacity;
} free_list_bounds_t;

/* b's successor, or NULL where the link is not a block of the page. */
static const block_t *free_list_next(const free_list_bounds_t *fl, const block_t *b)
{
    uintptr_t x = (uintptr_t)b->next;
    return page_is_carved_block(x, fl->start, fl->block_size, fl->capacity) ? b->next : NULL;
}

/* The block whose link closes the cycle of a list known to have one (`on`
 * lies on it): the last block before the walk meets a block a second time.
 * With no memory beyond a few pointers: the cycle's length from `on`, then
 * two walks from the head that far apart, which meet at the cycle's first
 * block. NULL if the list changed meanwhile (a write racing verify): every
 * walk is bounded and follows only links to blocks of the page. */
static const block_t *free_list_cycle_closer(const free_list_bounds_t *fl, const block_t *head,
                                             const block_t *on)
{
    size_t length = 1;
    for (const block_t *x = free_list_next(fl, on); x != on; x = free_list_next(fl, x), length++)
        if (x == NULL || length > fl->capacity)
            return NULL;
    const block_t *lead = head, *closer = NULL;
    for (size_t i = 0; i < length && lead != NULL; i++) {
        closer = lead;
        lead = free_list_next(fl, lead);
    }
    const block_t *trail = head;
    for (size_t i = 0; trail != lead; i++) {
        if (lead == NULL || trail == NULL || i > fl->capacity)
            return NULL;
        closer = lead;
        lead = free_list_next(fl, lead);
        trail = free_list_next(fl, trail);
    }
    return closer;
}

/* A small page's free lists: every link a block of the page, no cycle
 * longer than the page. A bad link is reported as the block holding it, as
 * the allocation path reports it (report_changed_link): a write into that
 * freed block changed it. Only a list whose first block is no block of the
 * page names the page: ebb's record of the page was changed. The blocks are
 * the page's free ones: its owner is paused and nobody else takes from its
 * lists, so their headers can be read. */
static void verify_free_list(verify_t *v, page_t *page, const block_t *head, bool remote)
{
    free_list_bounds_t fl = {(uintptr_t)page_start(page), page->block_size, page->capacity};
    if (head != NULL && !page_is_carved_block((uintptr_t)head, fl.start, fl.block_size, fl.capacity)) {
        text_t t;
        text_init(&t, -1);
        text_add(&t, remote ? "found by ebb_debug_verify: the page's remote-free list starts at "
                            : "found by ebb_debug_verify: the page's free list starts at ");
        text_add_hex(&t, (uintptr_t)head);
        text_add(&t, ", not a block of the page: ebb's record of the page was changed");
        verify_keep(v, "corrupted free list", (void *)fl.start, NULL, text_cstr(&t));
        return;
    }
    const block_t *b = head, *holder = NULL;
    const char *what = ", not a block of its page";
    for (size_t n = 1; b != NULL && holder == NULL; n++) {
        if (n > fl.capacity) { /* more blocks than the page has: b is on a cycle */
            holder = free_list_cycle_closer(&fl, head, b);
            what = ", a block the list already passed (a cycle)";
            if (holder == NULL)
                return; /* the list changed under the walk: the next call sees it */
        } else if (b->next != NULL && free_list_next(&fl, b) == NULL) {
            holder = b;
        } else {
            b = b->next;
        }
    }
    if (holder == NULL)
        return;
    text_t t;
    text_init(&t, -1);
    void *user;
    debug_header_t *h = describe_changed_link(
        &t, (void *)holder, (uintptr_t)holder->next, what,
        remote ? " (found by ebb_debug_verify in its page's remote-free list)"
               : " (found by ebb_debug_verify in its page's free list)",
        true, &user);
    verify_keep(v, "corrupted free list", user, h, text_cstr(&t));
}

/* A large block is always a debug block, so a first word that is none of a
 * debug block's magics (nor 0, which a block gets as it goes back to the
 * underlying allocator) was changed by a write, typically an overflow of the
 * block below: verify_block skipped such a block, and only its next free or
 * realloc found it (review finding). Judged only where no allocation can be
 * under way (v->no_allocation_under_way): a thread allocating a block writes
 * its header after the underlying allocator returns it, the magic last, and
 * until then the first word is whatever was there before. A large block of
 * another running thread's heap, and a huge block, are still left to their
 * next free or realloc. */
static void verify_big_block(verify_t *v, debug_header_t *h)
{
    uint64_t m = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (v->no_allocation_under_way && m != 0 && !magic_of_a_debug_block((uintptr_t)h, m)) {
        verify_keep(v, "corrupted block header", (uint8_t *)h + sizeof *h, NULL,
                    "found by ebb_debug_verify: a write changed the magic word of a large "
                    "block's header");
        return;
    }
    verify_block(v, h);
}

static void verify_page(page_t *page, void *arg)
{
    verify_t *v = arg;
    if (page->kind == PAGE_LARGE) {
        verify_big_block(v, (debug_header_t *)page_start(page));
    } else if (page->kind == PAGE_SMALL && page->block_size >= sizeof(debug_header_t)) {
        verify_free_list(v, page, page->free, false);
        uintptr_t x = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
        verify_free_list(v, page, (const block_t *)(x & ~XTHREAD_FLAGS), true);
        uint8_t *start = page_start(page);
        for (size_t k = 0; k < page->capacity; k++)
            verify_block(v, (debug_header_t *)(start + k * page->block_size));
    }
}

static void verify_segment(verify_t *v, segment_t *seg)
{
    segment_for_each_page(seg, verify_page, v);
}

static void verify_heap(heap_t *h, bool paused, void *arg)
{
    if (!paused)
        return; /* its owner is inside an allocator call: checked next time */
    verify_t *v = arg;
    v->no_allocation_under_way = (h == tls_debug_heap && !v->in_a_call) || h->busy == NULL;
    for (segment_t *seg = h->segments; seg; seg = seg->next)
        verify_segment(v, seg);
    v->no_allocation_under_way = false;
}

static void verify_abandoned(segment_t *seg, void *arg)
{
    verify_t *v = arg;
    /* Not in a forked child: the parent's other threads' segments are
     * abandoned there, with whatever block one of them was heading at the
     * fork (review finding: 20 children of 300 reported one). */
    v->no_allocation_under_way = debug_fork_depth == 0;
    verify_segment(v, seg);
    v->no_allocation_under_way = false;
}

static void verify_huge(segment_t *seg, void *arg)
{
    verify_block(arg, (debug_header_t *)((uint8_t *)seg + seg->block_offset));
}

/* A chain of sound links (to freed blocks of FIFO k) longer than its count
 * of `n` blocks from `first`:
 * where it loops back, the block whose link closes the loop (the one a write
 * changed), found with two walkers at one and two steps (Floyd's); `seen` if
 * it does not loop within 2n steps (its end lies in another chain). */
static debug_header_t *quarantine_loop_closer(debug_header_t *first, uint64_t n, debug_header_t *seen,
                                              unsigned k)
{
    debug_header_t *slow = first, *fast = first;
    for (uint64_t i = 0; i <= 2 * n; i++) {
        if (fast == NULL || !quarantine_link_in_shard(fast->qnext, k) ||
            !quarantine_link_in_shard(fast->qnext->qnext, k))
            return seen;
        slow = slow->qnext;
        fast = fast->qnext->qnext;
        if (slow == fast) {
            debug_header_t *start = first; /* where the loop starts */
            while (start != slow) {
                start = start->qnext;
                slow = slow->qnext;
            }
            debug_header_t *closer = start;
            while (closer->qnext != start)
                closer = closer->qnext;
            return closer;
        }
    }
    return seen;
}

/* Under q's lock: end q's FIFO at `end`, a block on its chain (reached
 * through links to this FIFO's blocks only, so it is this FIFO's) whose link
 * is wrong or leads to a changed header, as a drain that reached it would
 * (shard_cut_locked), so that the drain finds a sound FIFO and does not
 * report it a second time; NULL: its first block's header was changed, and
 * all of it goes. The bytes of the blocks dropped, counted out of the
 * quarantine. */
static size_t shard_end_at_locked(quarantine_shard_t *q, debug_header_t *end)
{
    uint64_t kept = 0;
    size_t kept_bytes = 0;
    if (end != NULL) {
        kept = 1;
        kept_bytes = block_bytes(end);
        for (debug_header_t *h = q->first; h != end; h = h->qnext) {
            kept++;
            kept_bytes += block_bytes(h);
        }
        end->qnext = NULL;
    } else {
        q->first = NULL; /* its first block's header was changed: all of it */
    }
    q->last = end;
    q->popped = q->pushed - kept;
    size_t dropped = q->bytes > kept_bytes ? q->bytes - kept_bytes : 0;
    q->bytes -= dropped;
    if (dropped)
        atomic_fetch_sub_explicit(&q_bytes, dropped, memory_order_relaxed);
    return dropped;
}

/* Each quarantine FIFO, under its lock: as many blocks on its chain as its
 * count says, each linked to a freed block of ours, the last to none. A link a
 * write changed was found only when a drain reached it (review finding:
 * verify returned 0 right after a link was turned back on its own block).
 * A wrong link found ends the FIFO there (shard_end_at_locked). */
static void verify_quarantine(verify_t *v)
{
    for (unsigned k = 0; k < QUARANTINE_SHARDS; k++) {
        quarantine_shard_t *q = &shards[k];
        lock_acquire(&q->lock);
        uint64_t count = q->pushed - q->popped;
        /* blamed: the block whose link is wrong (link_wrong) or whose header
         * was changed; end: where the FIFO now ends (NULL: nothing kept). */
        debug_header_t *h = q->first, *blamed = NULL, *end = NULL;
        bool link_wrong = false;
        if (h != NULL && !quarantined_magic(h))
            blamed = h; /* the front block's own header */
        for (uint64_t left = count; h != NULL && blamed == NULL && left > 0; left--) {
            debug_header_t *next = h->qnext;
            if (next == NULL ? left != 1 : left == 1) {
                blamed = end = h; /* the chain ends before its count, or goes on past it */
                link_wrong = true;
                if (next != NULL && quarantine_link_in_shard(next, k))
                    blamed = end = quarantine_loop_closer(q->first, count, h, k);
            } else if (next != NULL && !quarantine_link_in_shard(next, k)) {
                link_wrong = quarantine_link_wrong(next, k);
                blamed = link_wrong ? h : next;
                end = h;
            }
            h = next;
        }
        uintptr_t link = 0;
        size_t dropped = 0;
        if (blamed) {
            link = (uintptr_t)blamed->qnext;
            dropped = shard_end_at_locked(q, end);
        }
        lock_release(&q->lock);
        if (blamed) {
            text_t t;
            text_init(&t, -1);
            if (link_wrong) {
                text_add(&t, "found by ebb_debug_verify: the block's quarantine link was changed "
                             "to ");
                text_add_hex(&t, link);
                text_add(&t, ", not the next freed block in line (a write into its header)");
            } else {
                text_add(&t, "found by ebb_debug_verify: ");
                text_add(&t, header_changed_in_quarantine);
            }
            text_add(&t, "; the blocks freed after it in this quarantine (");
            text_add_long(&t, (long)dropped);
            text_add(&t, " bytes) are dropped, never reused");
            verify_keep(v, "corrupted block header", default_user_of(blamed), NULL, text_cstr(&t));
        }
    }
}

EBB_API size_t ebb_debug_verify(void)
{
    if (!debug_enabled)
        return 0;
    DEBUG_ENTER();
    verify_t v = {0};
    v.in_a_call = outer_mark_ != 0;
    if (!purge_exclusive_begin()) { /* called from a handler inside ebb's pass */
        DEBUG_LEAVE();
        return 0;
    }
    heap_for_each(verify_heap, &v, true);
    segment_for_each_abandoned(verify_abandoned, &v);
    huge_for_each_live(verify_huge, &v);
    verify_quarantine(&v);
    purge_exclusive_end();
    verify_report(&v); /* holding nothing now */
    DEBUG_LEAVE();
    return v.problems;
}

/* fork (heap.c): debug mode's locks are leaves (nothing else is taken while
 * one is held), taken last and released first. The quarantine's and the reuse
 * cache's only in debug mode: nothing else takes them, and their 64 shards
 * lie on 15 pages, each written by the unlock in both processes after the
 * fork (a copy-on-write fault each, 14 in each process: about 0.5 ms of a
 * release-mode fork on this machine, and 60 KiB made resident by the
 * first). */
static bool report_fork_skip; /* between debug_fork_lock and debug_fork_unlock */
void debug_fork_lock(void)
{
    if (debug_enabled) { /* set before the fork handlers exist, never changed */
        for (unsigned k = 0; k < QUARANTINE_SHARDS; k++)
            lock_acquire(&shards[k].lock);
        for (unsigned k = 0; k < QUARANTINE_SHARDS; k++)
            lock_acquire(&reuse_shards[k].lock);
        /* Review finding: missing here, a child forked while another
         * thread noted a big free hung at its first such free. */
        lock_acquire(&big_freed.lock);
    }
    lock_acquire(&context_lock);
    /* A handler that forks in the middle of its thread's report: the lock
     * is ours already, and stays so in both processes. */
    report_fork_skip = debug_report_held_here();
    if (!report_fork_skip)
        lock_acquire(&report_lock);
    trace_fork_lock();
}

uint8_t debug_fork_depth;

void debug_fork_child(void)
{
    if (debug_fork_depth < DEBUG_FORK_DEPTH_MAX)
        debug_fork_depth++;
}

void debug_fork_unlock(void)
{
    trace_fork_unlock();
    if (!report_fork_skip)
        lock_release(&report_lock);
    lock_release(&context_lock);
    if (debug_enabled) {
        lock_release(&big_freed.lock);
        for (unsigned k = QUARANTINE_SHARDS; k-- > 0;)
            lock_release(&reuse_shards[k].lock);
        for (unsigned k = QUARANTINE_SHARDS; k-- > 0;)
            lock_release(&shards[k].lock);
    }
}
