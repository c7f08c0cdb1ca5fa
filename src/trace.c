/*
 * trace.c — stack traces for debug mode: capture, a deduplicating registry of
 * compressed traces, and symbolization for reports.
 *
 * Capture. Debian's binaries have no frame pointers, so a frame-pointer walk
 * would stop or wander at the first such frame; traces follow the .eh_frame
 * tables every binary carries instead, with nothing allocated. Three ways, the
 * cheapest that applies: the capture cache (a call chain seen before, checked
 * slot by slot), the fast unwinder (each pc's unwind rule worked out once from
 * its FDE and kept in a table), and libgcc's _Unwind_Backtrace for anything
 * the fast unwinder does not follow (signal frames, unusual CFA rules). Frames
 * inside ebb are dropped: those below the stack mark (the canonical frame
 * address of the innermost debug function: each sets its own), and
 * any frame of an allocator entry point (malloc, free, ebb_malloc, ...),
 * recognised by its function's start address, with everything before it,
 * up to a signal frame: beyond one lies the call a signal handler
 * interrupted (tests/debug/alloc_in_signal_handler.c).
 * libebb.so carries its own copy of libgcc's unwinder (-static-libgcc, in
 * the Makefile), so that a process does not load libgcc_s for it. That copy
 * finds FDEs through dl_iterate_phdr, in every module the loader knows; code
 * registered at run time with __register_frame (some JITs) is known only to
 * the process's libgcc_s, and a trace stops at its first such frame.
 * In a statically linked process ebb's unwinder is the program's own, and two
 * of its users call malloc or free where a capture would deadlock or crash:
 * the C library sets up _dl_find_object (which the unwinder calls) with
 * malloc's help before constructors run, and crtbeginT's destructor frees
 * the unwinder's FDE table while holding the lock every FDE search takes. So
 * such a process records allocations without a trace before ebb's
 * constructor (trace_unwinder_ready) and from ebb's destructor on
 * (trace_process_exiting). A program linked with libebb.a dynamically shares
 * its unwinder too; there only frames registered at run time (JITs) call
 * malloc under that lock, and are not handled.
 *
 * The registry. A trace is stored once: its return addresses as deltas from
 * the previous one (the first from 0), zigzag-encoded and written as
 * variable-length integers (7 bits a byte), so nearby addresses in one module
 * take 2-4 bytes instead of 8. Identical traces get the same 32-bit id (a hash
 * table of 64 Ki buckets chained through the entries). Entries live in 1 MiB
 * chunks mapped on demand and never freed: an id stays valid for the life of
 * the process. Lookups and inserts take one lock.
 *
 * A trace also keeps the loader's unload count it was captured under, so that
 * a report can tell frames that may belong to a library unloaded since
 * (trace_print).
 *
 * Symbolization (reports only): the module of each address from
 * dl_iterate_phdr; the function from the module's ELF symbol table (.symtab,
 * which has the non-exported functions too, else .dynsym), read by mapping the
 * file; file:line from `addr2line` (binutils) run once per module per report,
 * when it is installed and the module has debug info; C++ names demangled by
 * one `c++filt` (binutils) run for all the new ones of a report. Costs:
 * nothing at capture time; a few milliseconds per report.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <unwind.h>

#include "internal.h"

/* ---------------------------------------------------------------------------
 * Capture
 * ------------------------------------------------------------------------- */
/* Registered by debug_init before the first capture, and never after: the
 * fast unwinder's rule table (below) keeps, per pc, whether its function is
 * one of them. */
static const void *entry_points[64] ebb_cold_bss;
static size_t entry_count;

void trace_add_entry_point(const void *fn)
{
    if (entry_count < sizeof entry_points / sizeof entry_points[0])
        entry_points[entry_count++] = fn;
}

static bool is_entry_point(uintptr_t fn_start)
{
    for (size_t i = 0; i < entry_count; i++)
        if ((uintptr_t)entry_points[i] == fn_start)
            return true;
    return false;
}

/* The most frames a capture-cache entry replays: a walk keeps up to
 * TRACE_DEPTH_MAX frames, and its last step may read the 0 that ends the
 * stack (kept as one frame more). */
#define WALK_FRAMES (TRACE_DEPTH_MAX + 1)
_Static_assert(WALK_FRAMES <= 64, "a capture-cache entry marks its rbp steps in 64 bits");

/* How the fast unwinder (below) steps from a frame to its caller. */
enum { RULE_FRAME = 1, RULE_LAST, RULE_UNKNOWN };

typedef struct rule_s {
    int32_t cfa_off;
    int32_t rbp_off; /* the caller's rbp is saved at CFA + rbp_off; 0: kept in rbp */
    uint8_t cfa_rbp; /* CFA = rbp + cfa_off, else rsp + cfa_off */
    uint8_t kind;    /* RULE_LAST: the walk ends after this frame (no FDE, or
                        the return address is undefined, as in _start) */
    uint8_t entry;   /* the function is an allocator entry point
                        (is_entry_point, worked out once with the rule) */
} rule_t;

typedef struct capture_s {
    uintptr_t *pcs;
    int n, max;
    uintptr_t mark;   /* frames whose CFA is below this are ebb's */
    bool restart;     /* the previous frame was an entry point */
    bool cacheable;   /* the fast walk took every step, and no entry point
                         restarted the trace: the walk record replays it */
    int walked;       /* frames walked above the mark, entry points too */
    /* libgcc's walk has crossed a signal frame: the frames beyond it are the
     * code the signal interrupted, whose allocator entry point (an
     * allocation made by a signal handler inside malloc) must not start
     * the trace over. The fast walk never crosses one. */
    bool past_signal;
    /* The walk record (fast walk only): every pc the walk read, in order,
     * ending with the 0 that ended the stack if it read one, and the rule
     * each step took from pc i to pc i + 1. */
    int walk_n;
    uintptr_t walk_top; /* the sp of the last frame recorded: the highest
                           CFA the walk took, whose slot below it read */
    uintptr_t walk_pcs[WALK_FRAMES];
    rule_t walk_rules[WALK_FRAMES];
} capture_t;

/* Allocator entry points lie within the first ENTRY_WINDOW frames above the
 * mark: the public function and the generic paths it takes to debug.c (two or
 * three frames; a few more for an allocation made while ebb itself is inside
 * a C library call, such as pthread_create starting the scavenger). A walk
 * that has its max frames stops once it has also walked this many, since no
 * entry point (which would restart the trace) can come later; it used to walk
 * 8 frames past max every time, 40% of a miss's cost at the default depth. */
#define ENTRY_WINDOW 12

static _Unwind_Reason_Code capture_step(struct _Unwind_Context *ctx, void *arg)
{
    capture_t *c = arg;
    int interrupted = 0; /* 1: this frame was interrupted by a signal */
    uintptr_t ip = (uintptr_t)_Unwind_GetIPInfo(ctx, &interrupted);
    if (ip == 0)
        return _URC_END_OF_STACK;
    /* During _Unwind_Backtrace's callback the context's CFA is still that of
     * the frame below (the callee): the stack pointer of this frame at its
     * call. The frame that called the debug function that set the mark sees
     * exactly the mark; everything deeper sees less. Only until the first
     * frame at or above it: past a signal frame the walk may go on on
     * another stack, lower in memory (a handler on an alternate stack above
     * the interrupted one), whose frames were taken for ebb's and wiped the
     * trace, all of it (review finding;
     * tests/debug/double_free_on_a_higher_alternate_stack.c). */
    if (c->walked == 0 && (uintptr_t)_Unwind_GetCFA(ctx) < c->mark) {
        c->n = 0; /* still inside ebb */
        return _URC_NO_REASON;
    }
    c->walked++;
    if (interrupted)
        c->past_signal = true;
    if (c->restart) { /* everything so far was inside ebb */
        c->n = 0;
        c->restart = false;
        c->cacheable = false;
    }
    if (!c->past_signal && is_entry_point((uintptr_t)_Unwind_GetRegionStart(ctx))) {
        c->restart = true;
        return _URC_NO_REASON;
    }
    if (c->n < c->max)
        c->pcs[c->n++] = ip;
    return c->n >= c->max && c->walked >= ENTRY_WINDOW ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* Writers of the seqlocked tables (the rule table and the capture cache below), under
 * the table's lock: make the entry's count odd before changing it and even
 * again after, so that a reader that raced the change sees an odd or changed
 * count and treats its lookup as a miss. */
static unsigned seq_write_begin(atomic_uint *seq)
{
    unsigned s = atomic_load_explicit(seq, memory_order_relaxed);
    atomic_store_explicit(seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    return s;
}

static void seq_write_end(atomic_uint *seq, unsigned begun)
{
    atomic_store_explicit(seq, begun + 2, memory_order_release);
}

/* In a statically linked process, true only from ebb's constructor (the
 * first of the program's) to ebb's destructor. Relaxed: a capture that sees
 * it late records one trace more or less, and the stores come at points
 * (before main, at exit) where nothing else depends on their order. */
static atomic_bool unwinder_ok = true;

void trace_unwinder_ready(void)
{
    atomic_store_explicit(&unwinder_ok, true, memory_order_relaxed);
}

void trace_process_exiting(void)
{
    if (os_info.static_exe)
        atomic_store_explicit(&unwinder_ok, false, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * The fast unwinder (x86-64). On a cache miss the walk still need not go
 * through libgcc: per frame, libgcc finds the FDE of the pc and runs its CFA
 * program up to the pc, and what comes out on x86-64 is nearly always one of
 * a few rules: CFA = rsp + n or rbp + n, the return address at CFA - 8, the
 * caller's rbp saved at CFA + k or left as it is. This walk works out a pc's
 * rule once, from the FDE that libgcc's _Unwind_Find_FDE finds, and keeps it
 * in a table by pc; a frame then costs a table lookup and two loads. A pc
 * with any other rule (a signal frame; a CFA that is an expression or in
 * another register, as after stack realignment; a register saved in a
 * register) makes the walk give up, and libgcc's unwinder takes the whole
 * trace. The walk visits frames exactly as capture_step does (the same
 * entry-point restarts, the same stop at ENTRY_WINDOW), so both give the
 * same trace (tests/test_unwind.c).
 *
 * The table is written under rules_lock with a sequence count, as the
 * capture cache, and read without it.
 * ------------------------------------------------------------------------- */
struct dwarf_eh_bases {
    void *tbase;
    void *dbase;
    void *func;
};
/* libgcc (unwind-dw2-fde.h): the FDE covering pc, NULL if none. */
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);


#define RULE_ENTRIES 16384

typedef struct rule_entry_s {
    atomic_uint seq;
    uintptr_t pc;
    rule_t rule;
} rule_entry_t;

static rule_entry_t *rules; /* NULL: libgcc walks every time */
static lock_t rules_lock = LOCK_INIT;

#if defined(__x86_64__) /* elsewhere the table stays NULL (trace_cache_init) */
static void rules_init(void)
{
    size_t bytes = (RULE_ENTRIES * sizeof(rule_entry_t) + os_info.page_size - 1) &
                   ~(os_info.page_size - 1);
    rules = os_map_aligned(bytes, os_info.page_size, 0);
}
#endif

/* DWARF register numbers (x86-64) and call frame instructions. */
#define DW_RBP 6
#define DW_RSP 7
#define DW_RA  16

typedef struct cfa_row_s {
    int cfa_reg;
    int64_t cfa_off;
    /* How the caller's rbp and the return address are found: */
    enum { KEPT, AT_OFFSET, UNDEFINED, OTHER } rbp_how, ra_how;
    int64_t rbp_off, ra_off;
} cfa_row_t;

/* An unsigned LEB128 number (the registry's varints are the same); *bits: how
 * many bits its bytes carried. */
static uint64_t read_leb(const uint8_t **p, const uint8_t *end, unsigned *bits)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    *bits = shift;
    return v;
}

static uint64_t read_uleb(const uint8_t **p, const uint8_t *end)
{
    unsigned bits;
    return read_leb(p, end, &bits);
}

/* A signed LEB128 number: the last byte's top bit (0x40) is the sign. */
static int64_t read_sleb(const uint8_t **p, const uint8_t *end)
{
    unsigned bits;
    uint64_t v = read_leb(p, end, &bits);
    if (bits > 0 && bits < 64 && ((v >> (bits - 1)) & 1))
        v |= ~(uint64_t)0 << bits;
    return (int64_t)v;
}

/* Step over a pointer written with DW_EH_PE encoding `enc`. */
static bool skip_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc)
{
    if (enc == 0xff) /* omitted */
        return true;
    switch (enc & 0x0f) {
    case 0x00: *p += 8; break;           /* absptr */
    case 0x01: case 0x09: read_uleb(p, end); break;
    case 0x02: case 0x0a: *p += 2; break;
    case 0x03: case 0x0b: *p += 4; break;
    case 0x04: case 0x0c: *p += 8; break;
    default: return false;
    }
    return (enc & 0x70) != 0x50 && *p <= end; /* no "aligned" pointers */
}

static void row_set(cfa_row_t *row, uint64_t reg, int how, int64_t off)
{
    if (reg == DW_RBP) {
        row->rbp_how = how;
        row->rbp_off = off;
    } else if (reg == DW_RA) {
        row->ra_how = how;
        row->ra_off = off;
    }
}

static void row_restore(cfa_row_t *row, const cfa_row_t *initial, uint64_t reg)
{
    if (reg == DW_RBP) {
        row->rbp_how = initial->rbp_how;
        row->rbp_off = initial->rbp_off;
    } else if (reg == DW_RA) {
        row->ra_how = initial->ra_how;
        row->ra_off = initial->ra_off;
    }
}

/* Run call frame instructions [p, end) from location `loc` while it is
 * below `pc` (the row in force at pc - 1, as libgcc does for a return
 * address). False on an instruction this walk does not follow. */
static bool cfa_run(const uint8_t *p, const uint8_t *end, uint64_t code_align, int64_t data_align,
                    uintptr_t loc, uintptr_t pc, cfa_row_t *row, const cfa_row_t *initial)
{
    cfa_row_t saved[8];
    int depth = 0;
    while (p < end && loc < pc) {
        uint8_t op = *p++;
        uint64_t reg, delta;
        switch (op & 0xc0) {
        case 0x40: /* advance_loc */
            loc += (op & 0x3f) * code_align;
            continue;
        case 0x80: /* offset */
            row_set(row, op & 0x3f, AT_OFFSET, (int64_t)read_uleb(&p, end) * data_align);
            continue;
        case 0xc0: /* restore */
            row_restore(row, initial, op & 0x3f);
            continue;
        }
        switch (op) {
        case 0x00: /* nop */
            break;
        case 0x02: /* advance_loc1 */
            loc += *p++ * code_align;
            break;
        case 0x03: /* advance_loc2 */
            delta = (uint64_t)p[0] | (uint64_t)p[1] << 8;
            p += 2;
            loc += delta * code_align;
            break;
        case 0x04: { /* advance_loc4 */
            uint32_t d32;
            memcpy(&d32, p, 4);
            p += 4;
            loc += d32 * code_align;
            break;
        }
        case 0x05: /* offset_extended */
            reg = read_uleb(&p, end);
            row_set(row, reg, AT_OFFSET, (int64_t)read_uleb(&p, end) * data_align);
            break;
        case 0x06: /* restore_extended */
            row_restore(row, initial, read_uleb(&p, end));
            break;
        case 0x07: /* undefined */
            row_set(row, read_uleb(&p, end), UNDEFINED, 0);
            break;
        case 0x08: /* same_value */
            row_set(row, read_uleb(&p, end), KEPT, 0);
            break;
        case 0x09: /* register: saved in another register, a rule we do not follow */
            reg = read_uleb(&p, end);
            (void)read_uleb(&p, end);
            row_set(row, reg, OTHER, 0);
            break;
        case 0x0a: /* remember_state */
            if (depth == 8)
                return false;
            saved[depth++] = *row;
            break;
        case 0x0b: /* restore_state */
            if (depth == 0)
                return false;
            *row = saved[--depth];
            break;
        case 0x0c: /* def_cfa */
            row->cfa_reg = (int)read_uleb(&p, end);
            row->cfa_off = (int64_t)read_uleb(&p, end);
            break;
        case 0x0d: /* def_cfa_register */
            row->cfa_reg = (int)read_uleb(&p, end);
            break;
        case 0x0e: /* def_cfa_offset */
            row->cfa_off = (int64_t)read_uleb(&p, end);
            break;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = read_uleb(&p, end);
            delta = read_uleb(&p, end);
            p += delta;
            row_set(row, reg, OTHER, 0);
            break;
        case 0x11: /* offset_extended_sf */
            reg = read_uleb(&p, end);
            row_set(row, reg, AT_OFFSET, read_sleb(&p, end) * data_align);
            break;
        case 0x12: /* def_cfa_sf */
            row->cfa_reg = (int)read_uleb(&p, end);
            row->cfa_off = read_sleb(&p, end) * data_align;
            break;
        case 0x13: /* def_cfa_offset_sf */
            row->cfa_off = read_sleb(&p, end) * data_align;
            break;
        case 0x15: /* val_offset_sf */
            reg = read_uleb(&p, end);
            read_sleb(&p, end);
            row_set(row, reg, OTHER, 0);
            break;
        case 0x2e: /* GNU_args_size */
            read_uleb(&p, end);
            break;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = read_uleb(&p, end);
            row_set(row, reg, AT_OFFSET, -(int64_t)read_uleb(&p, end) * data_align);
            break;
        default: /* set_loc, def_cfa_expression, anything else */
            return false;
        }
    }
    return p <= end;
}

/* The rule for the frame whose return address (or pc) is `pc`, from its FDE. */
static rule_t rule_compute(uintptr_t pc, uintptr_t *func)
{
    const rule_t unknown = {.kind = RULE_UNKNOWN}, last = {.kind = RULE_LAST};
    struct dwarf_eh_bases bases;
    const uint8_t *fde = _Unwind_Find_FDE((void *)(pc - 1), &bases);
    *func = 0;
    if (fde == NULL)
        return last;
    *func = (uintptr_t)bases.func;
    uint32_t len, cie_len;
    int32_t cie_ptr;
    memcpy(&len, fde, 4);
    memcpy(&cie_ptr, fde + 4, 4);
    if (len == 0 || len == 0xffffffffu)
        return unknown;
    const uint8_t *fde_end = fde + 4 + len;
    const uint8_t *cie = fde + 4 - cie_ptr;
    memcpy(&cie_len, cie, 4);
    if (cie_len == 0 || cie_len == 0xffffffffu)
        return unknown;
    const uint8_t *cie_end = cie + 4 + cie_len, *p = cie + 8;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    size_t aug_len = strnlen(aug, (size_t)(cie_end - p));
    p += aug_len + 1;
    uint64_t code_align = read_uleb(&p, cie_end);
    int64_t data_align = read_sleb(&p, cie_end);
    uint64_t ra_reg = version == 1 ? *p++ : read_uleb(&p, cie_end);
    uint8_t fde_enc = 0;
    if (ra_reg != DW_RA)
        return unknown;
    if (aug[0] == 'z') {
        uint64_t n = read_uleb(&p, cie_end);
        const uint8_t *aug_end = p + n;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R') {
                fde_enc = *p++;
            } else if (*a == 'L') {
                p++;
            } else if (*a == 'P') {
                uint8_t enc = *p++;
                if (!skip_encoded(&p, aug_end, enc))
                    return unknown;
            } else {
                return unknown; /* 'S' (a signal frame) or unknown */
            }
        }
        p = aug_end;
    } else if (aug[0] != '\0') {
        return unknown;
    }
    cfa_row_t initial = {.cfa_reg = -1, .rbp_how = KEPT, .ra_how = KEPT}, row;
    if (!cfa_run(p, cie_end, code_align, data_align, 0, 1, &initial, &initial))
        return unknown;
    /* CIE instructions have no advance_loc: they all ran, at "location 0". */
    const uint8_t *q = fde + 8;
    if (!skip_encoded(&q, fde_end, fde_enc) || !skip_encoded(&q, fde_end, fde_enc & 0x0f))
        return unknown;
    if (aug[0] == 'z')
        q += read_uleb(&q, fde_end);
    row = initial;
    if (!cfa_run(q, fde_end, code_align, data_align, *func, pc, &row, &initial))
        return unknown;
    if ((row.cfa_reg != DW_RSP && row.cfa_reg != DW_RBP) || row.cfa_off <= 0 ||
        row.cfa_off > INT32_MAX)
        return unknown;
    if (row.ra_how == UNDEFINED)
        return last;
    if (row.ra_how != AT_OFFSET || row.ra_off != -(int64_t)sizeof(uintptr_t))
        return unknown;
    rule_t r = {.cfa_off = (int32_t)row.cfa_off, .cfa_rbp = row.cfa_reg == DW_RBP, .kind = RULE_FRAME};
    if (row.rbp_how == AT_OFFSET && row.rbp_off < 0 && row.rbp_off > INT32_MIN)
        r.rbp_off = (int32_t)row.rbp_off;
    else if (row.rbp_how != KEPT)
        return unknown;
    return r;
}

static size_t rule_index(uintptr_t pc)
{
    return (size_t)((pc * 0x9E3779B97F4A7C15ull) >> 50) % RULE_ENTRIES;
}

/* The rule for pc, from the table or worked out and stored. */
ebb_racy_reader static rule_t rule_for(uintptr_t pc)
{
    rule_entry_t *e = &rules[rule_index(pc)];
    unsigned seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (!(seq & 1)) {
        const volatile rule_entry_t *v = e;
        uintptr_t at = v->pc;
        rule_t r = {.cfa_off = v->rule.cfa_off, .rbp_off = v->rule.rbp_off,
                    .cfa_rbp = v->rule.cfa_rbp, .kind = v->rule.kind, .entry = v->rule.entry};
        atomic_thread_fence(memory_order_acquire);
        if (at == pc && r.kind != 0 && atomic_load_explicit(&e->seq, memory_order_relaxed) == seq)
            return r;
    }
    uintptr_t func;
    rule_t r = rule_compute(pc, &func);
    r.entry = is_entry_point(func);
    lock_acquire(&rules_lock);
    seq = seq_write_begin(&e->seq);
    e->pc = pc;
    e->rule = r;
    seq_write_end(&e->seq, seq);
    lock_release(&rules_lock);
    return r;
}

/* Frames larger than this end the walk as implausible. */
#define FRAME_MAX ((uintptr_t)64 << 20)
_Static_assert(WALK_FRAMES * FRAME_MAX <= UINT32_MAX,
               "a chain of rsp steps spans at most 32 bits (the capture cache's next_pc_at)");

/* Where a walk is: the frame whose return address (pc) lay just below sp
 * (the CFA of the frame it called), and the rbp that frame left it. */
typedef struct walk_s {
    uintptr_t sp, rbp, pc;
} walk_t;

/* The frame that called the debug function that set the mark, whose CFA is the
 * mark, with the return address below it and the caller's rbp below that
 * (debug.c keeps frame pointers). */
static inline walk_t walk_start(uintptr_t mark)
{
    walk_t w = {.sp = mark,
                .rbp = *(const uintptr_t *)(mark - 2 * sizeof(uintptr_t)),
                .pc = *(const uintptr_t *)(mark - sizeof(uintptr_t))};
    return w;
}

/* Step from w's frame to its caller by the frame's rule: false if the CFA
 * the rule gives is implausible (then nothing is read). */
static inline __attribute__((always_inline)) bool walk_step(walk_t *w, rule_t r)
{
    uintptr_t cfa = (r.cfa_rbp ? w->rbp : w->sp) + (uintptr_t)r.cfa_off;
    if (cfa <= w->sp || cfa - w->sp > FRAME_MAX || (cfa & (sizeof(uintptr_t) - 1)) != 0)
        return false;
    if (r.rbp_off != 0)
        w->rbp = *(const uintptr_t *)(cfa + (intptr_t)r.rbp_off);
    w->pc = *(const uintptr_t *)(cfa - sizeof(uintptr_t));
    w->sp = cfa;
    return true;
}

/* Walk from the mark, filling `c` as capture_step would, and its walk
 * record (for the capture cache) as far as it holds. False if the walk gave
 * up (the caller then asks libgcc). */
static bool fast_walk(capture_t *c)
{
    walk_t w = walk_start(c->mark);
    for (;;) {
        bool recorded = c->walk_n < WALK_FRAMES;
        if (recorded) {
            c->walk_pcs[c->walk_n] = w.pc;
            c->walk_top = w.sp;
        } else
            c->cacheable = false;
        if (w.pc == 0) {
            c->walk_n += recorded;
            return true;
        }
        rule_t r = rule_for(w.pc);
        if (r.kind == RULE_UNKNOWN)
            return false;
        if (recorded)
            c->walk_rules[c->walk_n++] = r;
        c->walked++;
        if (c->restart) {
            c->n = 0;
            c->restart = false;
            c->cacheable = false;
        }
        if (r.entry) {
            c->restart = true;
        } else {
            if (c->n < c->max)
                c->pcs[c->n++] = w.pc;
            if (c->n >= c->max && c->walked >= ENTRY_WINDOW)
                return true;
        }
        if (r.kind == RULE_LAST || !walk_step(&w, r))
            return r.kind == RULE_LAST;
    }
}

/* ---------------------------------------------------------------------------
 * The capture cache. Unwinding costs microseconds; most allocations come from
 * a call site, and a call path, seen before. An entry keeps a fast walk's
 * record (capture_t): every pc it read and the rule each step took. A hit
 * replays that walk on the stack as it is now: from the mark it reads the
 * first pc, and while each pc read equals the recorded one, takes the
 * recorded rule to the caller's frame and reads the next. So a hit reads
 * only slots the fast walk would read (all of them, but for the saved rbp
 * slots a chain of rsp steps has no use for; the rule of a pc is the rule
 * the walk would find for it) and reaches the same pcs, and the same trace,
 * whatever lay on the stack before: an entry filled by a chain whose frames
 * had other sizes (alloca, a VLA, a coroutine stack replaced at the same
 * address) fails at the first frame that differs, never reading a slot of
 * the old chain's layout. The key is the mark and the first pc, and an entry
 * serves only the thread that filled it, which keeps hits to chains this
 * thread has walked.
 *
 * A capture that libgcc's unwinder walked (signal frames, unusual CFA rules,
 * a forked child, see below) has no rules to replay and is not kept.
 *
 * Unloaded code ("Unloaded code" below). A library unloaded and another
 * loaded in its place with a call at the very same return address, reached
 * at the very same stack address, would be replayed by the first library's
 * rules: a wrong trace, or, a wrong rbp rule sending the replay 32 MiB up,
 * a SIGSEGV (issue 4, tests/debug/capture_cache_after_library_swap.c: both,
 * in one process, when every capture between the unload and the allocation
 * hit). A miss checks the loader's unload count (dl_iterate_phdr, too dear
 * for a hit) and empties the cache when it changed; a hit only compares
 * two words, the unload count dlclose's interposer keeps (a dlclose under
 * way, or done since the last check, makes the capture a miss, which
 * checks) and a replay never reads above the highest frame of the walk
 * that filled its entry (top_at), which that walk read on this thread's
 * stack. In a forked child no miss can check (step 4 below), so the cache is
 * dropped there: a review made the two libraries, and a child that swapped
 * them got a wrong trace from the inherited entries, or the SIGSEGV
 * (2026-12-05).
 * x86-64 only (elsewhere the return address is not kept at CFA - 8).
 *
 * Entries are written under cache_lock with a sequence count (odd while
 * written) and read without it: a reader treats a count that changed, or
 * was odd, as a miss, and checks it after reading each step's rule and
 * before the rule computes an address, so that no address comes from a
 * half-written entry.
 * ------------------------------------------------------------------------- */
#define CACHE_ENTRIES 2048

/* A trace of `depth` frames recorded again (a cache hit): count it as
 * trace_intern would. */
static void trace_count(int depth);

typedef struct cache_entry_s {
    atomic_uint seq;
    uint32_t id;
    uintptr_t thread; /* whose stack the walk read (thread_id_self) */
    uintptr_t mark;   /* where the walk started */
    uint8_t depth;    /* frames in the trace (id) */
    uint8_t max;      /* the depth asked for when it was walked */
    uint8_t frames;   /* pcs in the walk record, depth <= frames <= WALK_FRAMES */
    uint32_t top_at;  /* the walk's last frame (its sp), from the mark: no
                         replay step takes a CFA above it (in padding: the
                         entry stays 816 bytes) */
    uintptr_t first_pc; /* the walk record's first pc (at the mark) */
    uint64_t rbp_steps; /* bit i: steps[i]'s CFA is from rbp */
    /* steps[i]: the rule from the record's pc i, and pc i + 1 (one record a
     * step, so that a replay step reads one place). */
    struct cache_step_s {
        uintptr_t next_pc;
        int32_t cfa_off, rbp_off;
        uint32_t next_pc_at; /* rbp_steps == 0: where next_pc lies, from the mark
                                (a step is 24 bytes, an entry 816, the cache 1.6 MiB
                                of address space touched as entries fill) */
    } steps[WALK_FRAMES - 1];
} cache_entry_t;

static cache_entry_t *cache;
static lock_t cache_lock = LOCK_INIT;

static size_t cache_map_bytes(void)
{
    return (CACHE_ENTRIES * sizeof(cache_entry_t) + os_info.page_size - 1) &
           ~(os_info.page_size - 1);
}

void trace_cache_init(void)
{
    if (os_info.static_exe)
        atomic_store_explicit(&unwinder_ok, false, memory_order_relaxed);
#if defined(__x86_64__)
    cache = os_map_aligned(cache_map_bytes(), os_info.page_size, 0); /* NULL: no cache */
    rules_init();
#endif
}

static size_t cache_index(uintptr_t mark, uintptr_t pc)
{
    uint64_t h = (mark ^ (pc * 0x9E3779B97F4A7C15ull)) * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 40) % CACHE_ENTRIES;
}

/* A rule a replay can take without walk_step's checks: a CFA from rsp at a
 * positive offset, a multiple of 8, at most FRAME_MAX. cache_store keeps only
 * entries whose rsp rules all are such (a fast walk took each of them, so
 * they are), and a replay starts at an aligned mark: from an aligned sp such
 * a rule always gives a CFA walk_step would accept. */
static bool rule_replays_unchecked(rule_t r)
{
    return !r.cfa_rbp && r.cfa_off > 0 && (uintptr_t)r.cfa_off <= FRAME_MAX &&
           (r.cfa_off & (int32_t)(sizeof(uintptr_t) - 1)) == 0;
}

/* walk_step for a replay of a chain with rbp steps: a rule from rsp skips
 * walk_step's checks (see rule_replays_unchecked), which took half of a
 * replay's instructions in a debug-mode python run (most of its frames have
 * no frame pointer). A rule from rbp depends on what the stack holds now, and
 * is checked. Either way the CFA stays at or below `top`, the highest frame
 * of the walk that filled the entry, which that walk read on this thread's
 * stack: a wrong rule (the rule of code unloaded since, "Unloaded code"), or
 * an rsp step after a wrong rbp step, is a miss instead of a read past the
 * stack's top. */
static inline __attribute__((always_inline)) bool replay_step(walk_t *w, rule_t r, uintptr_t top)
{
    uintptr_t cfa = (r.cfa_rbp ? w->rbp : w->sp) + (uintptr_t)r.cfa_off;
    if (cfa > top)
        return false;
    if (r.cfa_rbp)
        return walk_step(w, r);
    if (r.rbp_off != 0)
        w->rbp = *(const uintptr_t *)(cfa + (intptr_t)r.rbp_off);
    w->pc = *(const uintptr_t *)(cfa - sizeof(uintptr_t));
    w->sp = cfa;
    return true;
}

/* The end of a replay that reached the entry's last step: its trace id,
 * read before the last check of the entry's count (0 if it changed). */
static inline uint32_t replay_done(const cache_entry_t *e, const volatile cache_entry_t *v,
                                   unsigned seq, int depth, int *out_depth)
{
    uint32_t id = v->id;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
        return 0;
    *out_depth = depth;
    return id;
}

/* The replay of an entry with rbp steps, for cache_lookup, which has checked
 * its key (and returns what this returns): the trace id, or 0 at the first
 * pc that differs. Apart from the chains of rsp steps only, so that their
 * replay, nearly every hit, sets up no frame for this one's registers. */
static ebb_noinline uint32_t replay_rbp_steps(const volatile cache_entry_t *v, unsigned seq,
                                               uintptr_t mark, int frames, int depth,
                                               int *out_depth)
{
    const cache_entry_t *e = (const cache_entry_t *)v;
    walk_t w = walk_start(mark);
    uint64_t rbp_steps = v->rbp_steps;
    uintptr_t top = mark + v->top_at;
    for (int i = 0; i + 1 < frames; i++) {
        rule_t r = {.cfa_off = v->steps[i].cfa_off, .rbp_off = v->steps[i].rbp_off,
                    .cfa_rbp = (uint8_t)(rbp_steps >> i & 1)};
        uintptr_t want = v->steps[i].next_pc;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
            return 0;
        if (!replay_step(&w, r, top) || w.pc != want)
            return 0;
    }
    return replay_done(e, v, seq, depth, out_depth);
}

/* A hit's trace id (*depth: its frames), or 0. */
ebb_racy_reader static uint32_t cache_lookup(uintptr_t mark, int max, int *out_depth)
{
    uintptr_t first_pc = *(const uintptr_t *)(mark - sizeof(uintptr_t)); /* walk_start's pc */
    cache_entry_t *e = &cache[cache_index(mark, first_pc)];
    unsigned seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (seq & 1)
        return 0;
    const volatile cache_entry_t *v = e;
    int frames = v->frames, depth = v->depth;
    if (v->max != max || depth == 0 || depth > frames || frames > WALK_FRAMES ||
        v->mark != mark || v->first_pc != first_pc || v->thread != thread_id_self())
        return 0;
    /* The replay. Each step's rule and pc are read from the entry, then the
     * count is checked, before the rule computes an address. A chain whose
     * steps all go by rsp has each return address at a fixed distance from
     * the mark (the sum of the CFA offsets below it, worked out by
     * cache_store): its replay reads those slots and no other (rbp, which
     * no step of it uses, is not followed). In a debug-mode python run all
     * but a few hundred of 18.8 M replay steps were such, so this loop is
     * kept to a few instructions a step: a pointer to the step, the slot
     * addressed from the mark (9 instructions a step against 13 when it
     * indexed steps[i]; callgrind, 2026-12-06). */
    if (ebb_unlikely(v->rbp_steps != 0))
        return replay_rbp_steps(v, seq, mark, frames, depth, out_depth);
    const volatile struct cache_step_s *s = v->steps, *end = v->steps + (frames - 1);
    for (; s < end; s++) {
        uint32_t at = s->next_pc_at;
        uintptr_t want = s->next_pc;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
            return 0;
        if (*(const uintptr_t *)(mark + at) != want)
            return 0;
    }
    return replay_done(e, v, seq, depth, out_depth);
}

/* Keep the walk record of `c`, whose trace is `id` (its first n frames). */
static void cache_store(const capture_t *c, int n, uint32_t id)
{
    if ((c->mark & (sizeof(uintptr_t) - 1)) != 0)
        return;
    for (int i = 0; i + 1 < c->walk_n; i++)
        if ((!c->walk_rules[i].cfa_rbp && !rule_replays_unchecked(c->walk_rules[i])) ||
            c->walk_rules[i].rbp_off > 0) /* reads above its CFA: past top_at */
            return;
    cache_entry_t *e = &cache[cache_index(c->mark, c->walk_pcs[0])];
    lock_acquire(&cache_lock);
    unsigned seq = seq_write_begin(&e->seq);
    e->depth = (uint8_t)n;
    e->max = (uint8_t)c->max;
    e->frames = (uint8_t)c->walk_n;
    e->id = id;
    e->thread = thread_id_self();
    e->mark = c->mark;
    e->first_pc = c->walk_pcs[0];
    e->top_at = (uint32_t)(c->walk_top - c->mark); /* below WALK_FRAMES x FRAME_MAX */
    e->rbp_steps = 0;
    uintptr_t cfa_sum = 0; /* at most WALK_FRAMES x FRAME_MAX: fits 32 bits */
    for (int i = 0; i + 1 < c->walk_n; i++) {
        e->rbp_steps |= (uint64_t)(c->walk_rules[i].cfa_rbp != 0) << i;
        e->steps[i].next_pc = c->walk_pcs[i + 1];
        e->steps[i].cfa_off = c->walk_rules[i].cfa_off;
        e->steps[i].rbp_off = c->walk_rules[i].rbp_off;
        cfa_sum += (uintptr_t)c->walk_rules[i].cfa_off;
        e->steps[i].next_pc_at = (uint32_t)(cfa_sum - sizeof(uintptr_t));
    }
    seq_write_end(&e->seq, seq);
    lock_release(&cache_lock);
}
/* ---------------------------------------------------------------------------
 * Unloaded code. The rule table is keyed by pc and the capture cache by
 * return addresses. When a library is unloaded, another can be loaded at its
 * addresses with other code, and a rule kept from the first sends the walk to
 * the wrong stack slots — past the end of the stack, in tests/test_unwind.c.
 * dl_iterate_phdr counts the unloads so far (dlpi_subs). Before it walks, a
 * capture compares that count with the one the tables were filled under, and
 * when it changed empties both. A check costs a dl_iterate_phdr call that
 * stops at the first module, next to the microseconds of a walk; a
 * capture-cache hit, cheaper than that call alone, compares two words
 * instead (below, "Unloads a hit sees"). A check skipped for a fork (step 3)
 * validates nothing.
 *
 * dl_iterate_phdr takes the loader's list lock, which dlclose holds while it
 * frees (and so captures), and glibc does not reset it in a forked child.
 * So, the protocol:
 *   1. No ebb lock is held across the call (dlclose's frees would wait for
 *      it while the check waits for dlclose: a deadlock).
 *   2. A check announces itself in unload_checks, then reads fork_waiting
 *      (both sequentially consistent); trace_fork_prepare sets fork_waiting,
 *      then waits for unload_checks to drain, before fork_prepare takes any
 *      allocator lock. Either the check sees the fork and skips the call, or
 *      the fork sees the check and waits for it: no fork happens while this
 *      thread is inside dl_iterate_phdr.
 *   3. A capture that skipped the check does not use the rule table (it may
 *      be stale): libgcc's unwinder walks, which finds FDEs without a lock
 *      (_dl_find_object).
 *   4. In a forked child every check is skipped, for good, and the capture
 *      cache dropped, unless the parent had no thread but the forking one
 *      and ebb's scavenger (which never enters the loader but through step
 *      2) when trace_fork_prepare counted them: another thread of the parent
 *      may have held the loader's lock at the fork (inside dl_iterate_phdr,
 *      dlopen or dlclose), and the child inherits it held by no one. Such a
 *      child's captures are libgcc's walks from then on (slower, never
 *      stuck: a python run in debug mode took 14x its parent's time); its
 *      fault reports find modules with _dl_find_object (trace_print). The
 *      count cannot be overtaken: with no other program thread, no thread
 *      can be started between the count and the fork. (A fork from inside a
 *      dl_iterate_phdr callback would still leave the lock held: not
 *      covered.)
 * ------------------------------------------------------------------------- */
/* Unloads a hit sees. dlclose's interposer (override_dlopen.c) counts in
 * `dlcloses`: the calls under way in the low 32 bits, the calls done above
 * them; dlopen's counts as one done (below). `dlcloses_checked` is a value of
 * `dlcloses` with none under way, read by a check (forget_unloaded_code)
 * before its dl_iterate_phdr. A capture uses the cache only while the two
 * are equal, else it misses, and the miss checks. The steps:
 *   1. dlclose: add 1 (one under way), call the next dlclose (which unloads
 *      and adds to dlpi_subs), then add 2^32 - 1 (one done, none more under
 *      way). A value with none under way never comes back: a hit that
 *      compares equal saw no dlclose begin since the check.
 *   2. A check reads `dlcloses` (acquire: the dlpi_subs additions of the
 *      calls it counts as done are seen), then dlpi_subs, empties the
 *      tables if that changed, and only then stores what it read in
 *      `dlcloses_checked` (release, after the tables_forget it or an earlier
 *      check did: unloads_seen is stored after the forget, with release,
 *      and read here with acquire), unless a call was under way. A check
 *      that stores an older value than another (two checks racing) costs a
 *      miss, nothing more.
 *   3. A hit loads `dlcloses_checked` with acquire (what the check emptied
 *      is seen emptied) and `dlcloses` relaxed: code of a library loaded
 *      where an unloaded one was can be on this thread's stack only after
 *      that load took the loader's lock the unload held, so after step 1's
 *      first addition, which the load then sees (coherence).
 * What the count does not see, and the replay's bound (top_at, "The capture
 * cache") keeps from a SIGSEGV (a wrong trace remains possible until the next
 * miss): a library linked with libebb.a, libebb-prefixed.so or a libebb.so
 * loaded by dlopen has no interposer in the process's path; and the C
 * library's own unloads (gconv modules after iconv_close, NSS modules at
 * exit: __libc_dlclose, which no interposer sees), unless a dlopen follows
 * the unload (then dlopen's count makes the next capture check), a load by
 * the C library itself (__libc_dlopen) or a dlopen racing the unload on
 * another thread. */
#define DLCLOSE_ONE_UNDER_WAY 1ull                  /* the low 32 bits count them */
#define DLCLOSE_ONE_DONE      (1ull << 32)          /* the bits above count these */
#define DLCLOSE_UNDER_WAY     (DLCLOSE_ONE_DONE - 1) /* mask of the calls under way */
static atomic_ullong dlcloses;         /* steps 1, 3: written only by dlopen and dlclose */
static atomic_ullong dlcloses_checked; /* steps 2, 3 */

void trace_dlclose_begin(void)
{
    atomic_fetch_add_explicit(&dlcloses, DLCLOSE_ONE_UNDER_WAY, memory_order_relaxed);
}

/* Release: the unload (its dlpi_subs addition) comes before the count a
 * check reads with acquire. */
void trace_dlclose_end(void)
{
    atomic_fetch_add_explicit(&dlcloses, DLCLOSE_ONE_DONE - DLCLOSE_ONE_UNDER_WAY,
                              memory_order_release);
}

/* A dlopen, before the next dlopen runs: the C library may have unloaded a
 * module unseen (above), and what dlopen loads may land in its place. One
 * done, as step 1 counts a dlclose; relaxed: it orders nothing the caller's
 * later use of the library does not. */
void trace_dlopen_begin(void)
{
    atomic_fetch_add_explicit(&dlcloses, DLCLOSE_ONE_DONE, memory_order_relaxed);
}

/* Step 3: no dlclose under way or done, nor dlopen, since the last check. */
static inline bool cache_unloads_checked(void)
{
    return atomic_load_explicit(&dlcloses_checked, memory_order_acquire) ==
           atomic_load_explicit(&dlcloses, memory_order_relaxed);
}

static atomic_ullong unloads_seen ebb_cold_bss; /* dlpi_subs when the tables were last emptied */
static atomic_int unload_checks ebb_cold_bss;   /* threads inside the check's dl_iterate_phdr */
static atomic_bool fork_waiting ebb_cold_bss;   /* trace_fork_prepare .. trace_fork_done */
static atomic_bool forked_child ebb_cold_bss;   /* this process is a fork's child (step 4) */
static bool fork_alone ebb_cold_bss; /* trace_fork_prepare .. child: no other program thread */

static int unloads_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)arg = info->dlpi_subs;
    return 1; /* the count is the same in every module's info */
}

/* Empty the seqlocked tables entry by entry, under their locks (one at a
 * time). Entries never written are skipped, so that their pages stay
 * untouched. */
static void tables_forget(void)
{
    if (rules) {
        lock_acquire(&rules_lock);
        for (size_t i = 0; i < RULE_ENTRIES; i++) {
            rule_entry_t *e = &rules[i];
            if (e->pc == 0)
                continue;
            unsigned seq = seq_write_begin(&e->seq);
            e->pc = 0;
            e->rule.kind = 0;
            seq_write_end(&e->seq, seq);
        }
        lock_release(&rules_lock);
    }
    if (cache) {
        lock_acquire(&cache_lock);
        for (size_t i = 0; i < CACHE_ENTRIES; i++) {
            cache_entry_t *e = &cache[i];
            if (e->depth == 0)
                continue;
            unsigned seq = seq_write_begin(&e->seq);
            e->depth = 0;
            seq_write_end(&e->seq, seq);
        }
        lock_release(&cache_lock);
    }
}

/* The protocol's steps 1-2. False: the check was skipped for a fork, and the
 * rule table must not be used (step 3). */
static bool forget_unloaded_code(void)
{
    if (atomic_load_explicit(&forked_child, memory_order_relaxed))
        return false;
    atomic_fetch_add(&unload_checks, 1);
    if (atomic_load(&fork_waiting)) {
        atomic_fetch_sub(&unload_checks, 1);
        return false;
    }
    unsigned long long closes = atomic_load_explicit(&dlcloses, memory_order_acquire);
    unsigned long long subs = 0;
    dl_iterate_phdr(unloads_cb, &subs);
    atomic_fetch_sub(&unload_checks, 1);
    if (subs != atomic_load_explicit(&unloads_seen, memory_order_acquire)) {
        tables_forget();
        atomic_store_explicit(&unloads_seen, subs, memory_order_release);
    }
    if ((closes & DLCLOSE_UNDER_WAY) == 0) /* "Unloads a hit sees", step 2 */
        atomic_store_explicit(&dlcloses_checked, closes, memory_order_release);
    return true;
}

void trace_check_unloads(void)
{
    (void)forget_unloaded_code();
}

/* The modules loaded at startup, by load bias: glibc unloads only what
 * dlopen loaded, so a frame in one of them names its code whatever was
 * unloaded since (trace_print). Noted from ebb's constructor, when every
 * startup module is loaded, and only if nothing was loaded since
 * (dlpi_adds counts every load, startup's too): a module that another
 * constructor dlopen'ed must not pass for one. */
#define STARTUP_MODULES_MAX 256 /* beyond: none counts as a startup module */
static uintptr_t startup_bias[STARTUP_MODULES_MAX] ebb_cold_bss;
static int startup_count ebb_cold_bss;

typedef struct startup_list_s {
    int n;
    bool over;
    unsigned long long adds, subs;
} startup_list_t;

static int startup_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    startup_list_t *l = arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ||
        l->n == STARTUP_MODULES_MAX) {
        l->over = true;
        return 1;
    }
    l->adds = info->dlpi_adds;
    l->subs = info->dlpi_subs;
    startup_bias[l->n++] = info->dlpi_addr;
    return 0;
}

void trace_note_startup_modules(void)
{
    startup_list_t l = {0};
    dl_iterate_phdr(startup_cb, &l);
    startup_count = !l.over && l.subs == 0 && l.adds == (unsigned long long)l.n ? l.n : 0;
}

static bool startup_module(uintptr_t bias)
{
    for (int i = 0; i < startup_count; i++)
        if (startup_bias[i] == bias)
            return true;
    return false;
}

void trace_fork_prepare(void)
{
    atomic_store(&fork_waiting, true);
    while (atomic_load(&unload_checks) != 0)
        os_yield();
    /* Step 4: only debug mode keeps anything by address, and only it pays
     * for reading the count (a file read a fork). */
    fork_alone = false;
    if (rules != NULL || cache != NULL) {
        int threads = os_thread_count();
        fork_alone = threads > 0 && threads - 1 - (purge_thread_running() ? 1 : 0) == 0;
    }
}

void trace_fork_done(void)
{
    atomic_store(&fork_waiting, false);
}

void trace_fork_child(void)
{
    if (fork_alone) { /* step 4: the loader's lock was free at the fork */
        trace_fork_done();
        return;
    }
    atomic_store_explicit(&forked_child, true, memory_order_relaxed);
    /* No unload can be seen from here on (step 4), so no cache entry can be
     * trusted ("The capture cache"): the child's captures are libgcc's
     * walks. This thread is the child's only one, between captures. */
    if (cache != NULL) {
        os_unmap(cache, cache_map_bytes());
        cache = NULL;
    }
    trace_fork_done();
}

/* The trace from the mark: the fast walk, else libgcc's unwinder. */
static void capture_walk(capture_t *c, bool allow_fast)
{
    if (!forget_unloaded_code())
        allow_fast = false;
    if (allow_fast && rules != NULL && c->mark != 0) {
        capture_t start = *c;
        if (fast_walk(c))
            return;
        *c = start;
    }
    c->cacheable = false; /* no walk record to replay */
    _Unwind_Backtrace(capture_step, c);
}

/* A capture the cache did not serve: walk, intern, and remember it. Apart
 * from trace_capture_id, so that a hit does not set up this frame. */
static ebb_noinline uint32_t capture_miss(int max, uintptr_t mark)
{
    if (!atomic_load_explicit(&unwinder_ok, memory_order_relaxed))
        return 0;
    uintptr_t pcs[TRACE_DEPTH_MAX];
    capture_t c = {.pcs = pcs, .n = 0, .mark = mark, .cacheable = true, .max = max};
    capture_walk(&c, true);
    if (c.restart)
        c.n = 0;
    uint32_t id = trace_intern(pcs, c.n);
    if (id && cache && mark != 0 && c.cacheable && c.n > 0)
        cache_store(&c, c.n, id);
    return id;
}

uint32_t trace_capture_id(int max, uintptr_t mark)
{
    if (max <= 0)
        return 0;
    if (max > TRACE_DEPTH_MAX)
        max = TRACE_DEPTH_MAX;
    if (cache && mark != 0 && cache_unloads_checked()) {
        int depth;
        uint32_t id = cache_lookup(mark, max, &depth);
        if (id) {
            trace_count(depth);
            return id;
        }
    }
    return capture_miss(max, mark);
}

int trace_crosscheck(uintptr_t mark, int max, uintptr_t *fast, uintptr_t *slow, int *n_slow)
{
    *n_slow = 0;
    if (mark == 0)
        return -1;
    if (max > TRACE_DEPTH_MAX)
        max = TRACE_DEPTH_MAX;
    capture_t s = {.pcs = slow, .mark = mark, .max = max};
    _Unwind_Backtrace(capture_step, &s);
    *n_slow = s.restart ? 0 : s.n;
    if (rules == NULL) /* no fast unwinder here (x86-64 only): libgcc's trace alone */
        return -1;
    capture_t f = {.pcs = fast, .mark = mark, .max = max};
    if (!forget_unloaded_code() || !fast_walk(&f))
        return -1;
    return f.restart ? 0 : f.n;
}

/* ---------------------------------------------------------------------------
 * The registry
 * ------------------------------------------------------------------------- */
#define TRACE_BUCKETS   65536
#define TRACE_CHUNK     ((size_t)1 << 20)
#define TRACE_CHUNKS    1024 /* ids: chunk index << 20 | offset, so 1 GiB at most */

typedef struct trace_entry_s {
    uint32_t next; /* the next id in this bucket, 0 at the end */
    uint32_t hash;    /* of code[] */
    uint32_t unloads; /* the unload count it was first captured under
                         ("Unloaded code"), so that trace_print knows whether
                         a library was unloaded since; not part of the key */
    uint16_t len;  /* bytes of code below */
    uint8_t depth;
    uint8_t code[];
} trace_entry_t;

static lock_t registry_lock = LOCK_INIT;
static uint32_t buckets[TRACE_BUCKETS] ebb_cold_bss;
static uint8_t *chunks[TRACE_CHUNKS] ebb_cold_bss;
static size_t chunk_count ebb_cold_bss, chunk_used ebb_cold_bss;
static atomic_size_t registry_bytes ebb_cold_bss; /* entries stored (their chunks' used part) */
static atomic_size_t raw_bytes ebb_cold_bss;      /* 8 bytes per frame of every trace interned */
static atomic_size_t traces_interned ebb_cold_bss;

static size_t encode(const uintptr_t *pcs, int n, uint8_t *out)
{
    size_t len = 0;
    uintptr_t prev = 0;
    for (int i = 0; i < n; i++) {
        int64_t delta = (int64_t)(pcs[i] - prev);
        uint64_t z = ((uint64_t)delta << 1) ^ (uint64_t)(delta >> 63); /* zigzag */
        prev = pcs[i];
        do {
            uint8_t byte = z & 0x7f;
            z >>= 7;
            out[len++] = (uint8_t)(byte | (z ? 0x80 : 0));
        } while (z);
    }
    return len;
}

static int decode(const uint8_t *code, size_t len, int depth, uintptr_t *pcs, int max)
{
    const uint8_t *at = code, *end = code + len;
    uintptr_t prev = 0;
    int n = 0;
    while (n < depth && n < max && at < end) {
        uint64_t z = read_uleb(&at, end);
        int64_t delta = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        prev += (uintptr_t)delta;
        pcs[n++] = prev;
    }
    return n;
}

static trace_entry_t *entry_of(uint32_t id)
{
    size_t chunk = id >> 20, off = id & (TRACE_CHUNK - 1);
    if (id == 0 || chunk >= chunk_count)
        return NULL;
    return (trace_entry_t *)(chunks[chunk] + off);
}

static uint32_t code_hash(const uint8_t *code, size_t len)
{
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ code[i]) * 16777619u;
    return hash;
}

/* Lock held. The entry of an id read from a block header, which a write into
 * the heap may have changed: NULL unless it is the start of an entry within
 * the registry (its code in bounds, its hash matching it), so that a report
 * never reads outside the registry nor prints frames that were never a trace
 * (review finding: a changed trace id was decoded from wherever it pointed). */
static trace_entry_t *entry_checked(uint32_t id)
{
    size_t chunk = id >> 20, off = id & (TRACE_CHUNK - 1);
    if (id == 0 || chunk >= chunk_count || off < 8 || off % 8 != 0)
        return NULL;
    size_t used = chunk + 1 == chunk_count ? chunk_used : TRACE_CHUNK;
    if (off + sizeof(trace_entry_t) > used)
        return NULL;
    trace_entry_t *e = (trace_entry_t *)(chunks[chunk] + off);
    if (e->len > used - off - sizeof *e || e->depth == 0 || e->depth > TRACE_DEPTH_MAX ||
        code_hash(e->code, e->len) != e->hash)
        return NULL;
    return e;
}

/* Room for `size` bytes (8-aligned); 0 when out of memory. Lock held. */
static uint32_t registry_reserve(size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if (chunk_count == 0 || chunk_used + size > TRACE_CHUNK) {
        if (chunk_count == TRACE_CHUNKS)
            return 0;
        uint8_t *c = os_map_aligned(TRACE_CHUNK, os_info.page_size, 0);
        if (c == NULL)
            return 0;
        chunks[chunk_count++] = c;
        chunk_used = 8; /* id 0 means "no trace" */
    }
    uint32_t id = (uint32_t)((chunk_count - 1) << 20 | chunk_used);
    chunk_used += size;
    atomic_fetch_add_explicit(&registry_bytes, size, memory_order_relaxed);
    return id;
}

uint32_t trace_intern(const uintptr_t *pcs, int n)
{
    if (n <= 0)
        return 0;
    uint8_t code[TRACE_DEPTH_MAX * 10];
    size_t len = encode(pcs, n, code);
    uint32_t hash = code_hash(code, len);
    /* As the capture that walked these frames last saw it (capture_walk).
     * Kept by a new entry only: with the count in the key, a program that
     * loads and unloads a plugin in a loop would store every trace again
     * after each unload, and the registry is never freed. A trace seen
     * again after an unload keeps its older count, so its frames outside
     * the startup modules say "a library was unloaded since" (true of its
     * first capture), with what is there now. */
    uint32_t unloads = (uint32_t)atomic_load_explicit(&unloads_seen, memory_order_acquire);
    trace_count(n);
    lock_acquire(&registry_lock);
    uint32_t *head = &buckets[hash % TRACE_BUCKETS];
    for (uint32_t id = *head; id;) {
        trace_entry_t *e = entry_of(id);
        if (e->hash == hash && e->len == len && e->depth == n && memcmp(e->code, code, len) == 0) {
            lock_release(&registry_lock);
            return id;
        }
        id = e->next;
    }
    uint32_t id = registry_reserve(sizeof(trace_entry_t) + len);
    if (id) {
        trace_entry_t *e = entry_of(id);
        e->hash = hash;
        e->unloads = unloads;
        e->len = (uint16_t)len;
        e->depth = (uint8_t)n;
        memcpy(e->code, code, len);
        e->next = *head;
        *head = id;
    }
    lock_release(&registry_lock);
    return id;
}

/* The counts of traces recorded (for ebb_stats_get) are kept per thread and
 * added to the shared ones every COUNT_BATCH traces, when the thread exits,
 * and when it reads them: two atomic adds to shared lines per capture, two
 * per malloc/free pair, took 10-20% of a small-block pair's time in debug
 * mode, and more with threads contending for the lines. So a thread still
 * running holds back at most COUNT_BATCH - 1 of its traces from what other
 * threads read. Only a thread with a debug heap batches: its exit (heap.c,
 * heap_thread_done) flushes. A thread that only frees has none, nor does one
 * past that point of its exit (in a later key destructor): those add each
 * trace at once (a review found a free-only thread's counts lost). */
#define COUNT_BATCH 256

static __thread struct {
    size_t raw_bytes, traces;
} tls_counts;

void trace_counts_flush(void)
{
    if (tls_counts.traces == 0)
        return;
    atomic_fetch_add_explicit(&raw_bytes, tls_counts.raw_bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&traces_interned, tls_counts.traces, memory_order_relaxed);
    tls_counts.raw_bytes = 0;
    tls_counts.traces = 0;
}

static void trace_count(int depth)
{
    tls_counts.raw_bytes += (size_t)depth * 8;
    if (ebb_unlikely(++tls_counts.traces >= COUNT_BATCH || tls_debug_heap == NULL))
        trace_counts_flush();
}

/* trace_get, and the unload count the trace was captured under. */
static int trace_get_unloads(uint32_t id, uintptr_t *pcs, int max, uint32_t *unloads)
{
    lock_acquire(&registry_lock);
    trace_entry_t *e = entry_checked(id);
    int n = e ? decode(e->code, e->len, e->depth, pcs, max) : 0;
    *unloads = e ? e->unloads : 0;
    lock_release(&registry_lock);
    return n;
}

int trace_get(uint32_t id, uintptr_t *pcs, int max)
{
    uint32_t unloads;
    return trace_get_unloads(id, pcs, max, &unloads);
}

/* Every lock of this file (a capture takes them one at a time, never two;
 * trace_fork_prepare has already waited out the unload checks). */
void trace_fork_lock(void)
{
    lock_acquire(&rules_lock);
    lock_acquire(&registry_lock);
    lock_acquire(&cache_lock);
}

void trace_fork_unlock(void)
{
    lock_release(&cache_lock);
    lock_release(&registry_lock);
    lock_release(&rules_lock);
}

void trace_registry_counts(size_t *stored, size_t *raw, size_t *traces)
{
    trace_counts_flush();
    *stored = atomic_load_explicit(&registry_bytes, memory_order_relaxed);
    *raw = atomic_load_explicit(&raw_bytes, memory_order_relaxed);
    *traces = atomic_load_explicit(&traces_interned, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Symbolization
 * ------------------------------------------------------------------------- */
/* The longest function name kept whole, with its NUL. C++ names are long:
 * JDK 17's libjvm has mangled names of up to 350 bytes (2% above 127, the
 * limit here until 2026-12-06) and demangled ones of up to 857; node's
 * demangled names are longer than 1,023 bytes in 0.5% of its symbols. A
 * longer one is cut short, and printed with "..." after it. */
#define SYM_NAME_MAX 1024

typedef struct module_s {
    uintptr_t pc;
    uintptr_t bias;
    char path[1024]; /* a longer one is cut, and its file then not read */
    bool found;
} module_t;

/* The file mapped at m->pc, from /proc/self/maps: for a module the loader
 * knows by a relative path (dlopen("./x.so")), which no longer names it
 * once the program changed directory. False if no mapping has a path. */
typedef struct maps_find_s {
    module_t *m;
    bool found;
} maps_find_t;

static void maps_find_line(const char *line, size_t len, void *arg)
{
    maps_find_t *f = arg;
    os_maps_line_t ml;
    if (f->found || !os_maps_line_parse(line, len, &ml) || f->m->pc < ml.start ||
        f->m->pc >= ml.end || ml.path == NULL || ml.path[0] != '/')
        return;
    size_t n = ml.path_len < sizeof f->m->path - 1 ? ml.path_len : sizeof f->m->path - 1;
    memcpy(f->m->path, ml.path, n);
    f->m->path[n] = '\0';
    f->found = true;
}

/* The last module found this way, by the loader's name for it (the same
 * string while it stays loaded) and its bias: the frames of a report come
 * from few modules, and each lookup reads /proc/self/maps. Forgotten with
 * module_memo at each report call (a library unloaded between reports may
 * leave its name's address and its bias to another). Under the report
 * lock, as all of the symbolizer. */
static struct {
    const char *name;
    uintptr_t bias;
    char path[sizeof ((module_t *)0)->path];
} relative_memo ebb_cold_bss;

static bool module_path_from_maps(module_t *m, const char *name)
{
    if (relative_memo.name == name && relative_memo.bias == m->bias && relative_memo.path[0]) {
        memcpy(m->path, relative_memo.path, sizeof m->path);
        return true;
    }
    static char buf[8192] ebb_cold_bss;
    maps_find_t f = {m, false};
    os_for_each_line("/proc/self/maps", buf, sizeof buf, maps_find_line, &f);
    if (f.found) {
        relative_memo.name = name;
        relative_memo.bias = m->bias;
        memcpy(relative_memo.path, m->path, sizeof m->path);
    }
    return f.found;
}

/* Record the module found for m->pc: its load bias and file. */
static void module_set(module_t *m, uintptr_t bias, const char *name)
{
    m->bias = bias;
    if (name && name[0] && name[0] != '/' && strchr(name, '/') && module_path_from_maps(m, name)) {
        /* a relative path ("./x.so"; a name with no '/' at all is the
         * vdso's, or was found on the search path and stored whole): the
         * mapped file's absolute path, found above */
    } else if (name && name[0]) {
        size_t len = strlen(name);
        if (len >= sizeof m->path)
            len = sizeof m->path - 1;
        memcpy(m->path, name, len);
        m->path[len] = '\0';
    } else if (os_info.via_loader) {
        /* Started as `ld.so ./prog`: /proc/self/exe is the loader, and
         * the program is its argv[0], relative to the start's cwd. */
        size_t len = strlen(program_invocation_name);
        if (len >= sizeof m->path)
            len = sizeof m->path - 1;
        memcpy(m->path, program_invocation_name, len);
        m->path[len] = '\0';
    } else { /* the main program: its real path (addr2line runs elsewhere),
              * read once (callers hold the report lock; a process keeps its
              * executable until exec) */
        static char exe[sizeof m->path] ebb_cold_bss;
        if (exe[0] == '\0')
            os_exe_path(exe, sizeof exe);
        memcpy(m->path, exe, sizeof exe);
    }
    m->found = true;
}

#if !defined(DLFO_STRUCT_HAS_EH_DBASE)
static int module_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    module_t *m = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (m->pc >= start && m->pc < start + ph->p_memsz) {
            module_set(m, info->dlpi_addr, info->dlpi_name);
            return 1;
        }
    }
    return 0;
}
#endif

/* The module holding m->pc. With glibc 2.35 or later, _dl_find_object: it
 * takes no lock, so a report in a forked child cannot wait for the
 * loader's lock that another thread of the parent held at the fork
 * ("Unloaded code", step 4). */
static void module_find(module_t *m)
{
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
    struct dl_find_object dlfo;
    if (_dl_find_object((void *)m->pc, &dlfo) == 0 && dlfo.dlfo_link_map != NULL)
        module_set(m, dlfo.dlfo_link_map->l_addr, dlfo.dlfo_link_map->l_name);
#else
    dl_iterate_phdr(module_find_cb, m);
#endif
}

/* The function containing file address `vaddr` in the ELF file `path`: its
 * name in name (cap bytes; *cut when it did not fit and was cut short), the
 * address's offset into it in *offset. */
static bool elf_function(const char *path, uintptr_t vaddr, char *name, size_t cap, uintptr_t *offset,
                         bool *cut)
{
    size_t size;
    const uint8_t *f = os_map_file(path, &size);
    if (f == NULL)
        return false;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)f;
    bool ok = size >= sizeof(ElfW(Ehdr)) && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
              eh->e_shoff != 0 && eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= size;
    const ElfW(Shdr) *sh = ok ? (const ElfW(Shdr) *)(f + eh->e_shoff) : NULL;
    bool found = false;
    /* .symtab first (static functions too), then .dynsym. */
    for (int pass = 0; ok && pass < 2 && !found; pass++) {
        uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
        for (int i = 0; i < eh->e_shnum && !found; i++) {
            if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
                continue;
            const ElfW(Shdr) *strs = &sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size)
                continue;
            const ElfW(Sym) *syms = (const ElfW(Sym) *)(f + sh[i].sh_offset);
            size_t count = sh[i].sh_size / sizeof(ElfW(Sym));
            for (size_t k = 0; k < count; k++) {
                const ElfW(Sym) *s = &syms[k];
                if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 ||
                    vaddr < s->st_value || vaddr >= s->st_value + (s->st_size ? s->st_size : 1) ||
                    s->st_name >= strs->sh_size)
                    continue;
                const char *n = (const char *)(f + strs->sh_offset + s->st_name);
                size_t len = strnlen(n, strs->sh_size - s->st_name);
                *cut = len >= cap;
                if (len >= cap)
                    len = cap - 1;
                memcpy(name, n, len);
                name[len] = '\0';
                *offset = vaddr - s->st_value;
                found = true;
                break;
            }
        }
    }
    os_unmap_file(f, size);
    return found;
}

/* addr2line -f for up to 64 addresses of one module: "file:line" per
 * address into lines[i], and the function's name from the debug info into
 * funcs[i] (which names what no symbol table does: a library's internal
 * functions, whose names only its separate debug info keeps); each empty when
 * unknown. No allocation (os_run_output: vfork + execve and a pipe); nothing
 * at all if /usr/bin/addr2line is missing. */
#define ADDR2LINE "/usr/bin/addr2line"

/* Copy addr2line's answer s into out (cap bytes), or leave out empty when
 * the answer is "unknown": "??", "??:0", "??:?", or a location with no file
 * name (":?"). True if it did not fit and was cut short. */
static bool answer_copy(char *out, size_t cap, const char *s)
{
    out[0] = '\0';
    if (s[0] == '\0' || s[0] == ':' || strncmp(s, "??", 2) == 0)
        return false;
    size_t len = strlen(s);
    bool cut = len >= cap;
    if (cut)
        len = cap - 1;
    memcpy(out, s, len);
    out[len] = '\0';
    return cut;
}

static void file_lines(const char *path, const uintptr_t *vaddrs, int n, char lines[][160],
                       char funcs[][SYM_NAME_MAX], bool funcs_cut[])
{
    for (int i = 0; i < n; i++) {
        lines[i][0] = funcs[i][0] = '\0';
        funcs_cut[i] = false;
    }
    if (n == 0)
        return;
    char args[64][24];
    char *argv[64 + 6];
    int a = 0;
    argv[a++] = (char *)ADDR2LINE;
    argv[a++] = (char *)"-f";
    argv[a++] = (char *)"-e";
    argv[a++] = (char *)path;
    for (int i = 0; i < n && i < 64; i++) {
        text_format_hex(args[i], vaddrs[i]);
        argv[a++] = args[i];
    }
    argv[a] = NULL;
    /* Reports are serialized (trace_print). Room for a long C++ name an
     * address; one cut short by the buffer's end is taken as unknown. */
    static char buf[64 * (SYM_NAME_MAX + 256)] ebb_cold_bss;
    os_run_output(ADDR2LINE, argv, buf, sizeof buf);
    /* Two lines an address: the function, then "file:line". */
    int line = 0;
    char *s = buf;
    while (line < 2 * n && *s) {
        char *end = strchr(s, '\n');
        if (!end)
            break; /* cut short by the buffer */
        *end = '\0';
        if (line % 2 == 0)
            funcs_cut[line / 2] = answer_copy(funcs[line / 2], sizeof funcs[0], s);
        else
            answer_copy(lines[line / 2], sizeof lines[0], s);
        line++;
        s = end + 1;
    }
}

/* Symbolized frames, kept for the reports that follow: one addr2line run on
 * the C library's separate debug info takes about 110 ms, and the same frames
 * come back in every report of a program that goes on after its faults
 * (EBB_DEBUG_ON_ERROR=continue: 20 reports of one double free took 5.7 s),
 * in the three traces of one report (this call, allocated, freed), and in
 * the groups of a leak report. A frame is found again by its address, its
 * module's load bias and a hash of the module's path and file identity
 * (device, inode, modification time): a library unloaded and another loaded
 * at the same place has the same bias, but another file (the loader's unload
 * count, which the tables above use, cannot be read here: a forked child
 * must not take the loader's lock, step 4). Under the report lock, as all of
 * the symbolizer (trace_print's callers hold it).
 *
 * The oldest entry goes first, except one that the current sym_resolve call
 * has found or filled (its stamp): those are about to be printed. */
#define SYM_SLOTS 512
typedef struct sym_s {
    uintptr_t pc; /* 0: empty */
    uintptr_t bias;
    uint64_t module_hash; /* module_hash(): the module's path and file */
    uint32_t stamp;       /* the sym_resolve call that last found or filled it */
    uintptr_t offset;     /* into the function */
    bool named;           /* name is valid */
    bool offset_known;    /* offset is valid (the name came from a symbol table) */
    bool cut;             /* name is the start of a longer one */
    char name[SYM_NAME_MAX]; /* the function (demangled, names_demangle) */
    char line[160];       /* "file:line", or empty */
} sym_t;
static sym_t sym_cache[SYM_SLOTS] ebb_cold_bss;
static unsigned sym_next; /* the slot to fill next: the oldest goes first */
static uint32_t sym_stamp;

/* The module's path, and its file's identity: a library rebuilt and loaded
 * again from the same path is another module. */
static uint64_t module_hash(const module_t *m)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = m->found ? m->path : ""; *c; c++)
        h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    uint64_t id[4]; /* device, inode, modification time */
    if (m->found && os_file_version(m->path, id)) {
        for (int i = 0; i < 4; i++)
            h = (h ^ id[i]) * 0x100000001b3ull;
    }
    return h;
}

/* module_hash, remembered for the last module asked about: the frames of a
 * trace lie mostly in one or two modules, and the hash costs a stat. The
 * memo lives for one report call (module_memo_forget at its start: a
 * library can be replaced at its address between reports), under the report
 * lock every caller holds. */
static struct {
    bool valid;
    module_t mod;
    uint64_t hash;
} module_memo ebb_cold_bss;

/* Whether the file a module was loaded from is still at its path. A
 * library upgraded or rebuilt while the program runs (a new file renamed
 * over the old one) leaves the old one mapped, "(deleted)" in
 * /proc/self/maps, and the path names another file: its symbols and lines
 * named the old code's addresses after the new code's functions (review
 * finding: a block allocated in alloc_in_lib was reported as allocated in
 * unrelated_padding_function, at the new source's line). Such a module is
 * not read: its frames show addresses only, and say why. Remembered by
 * bias and by module_hash (the path and the identity of the file there now):
 * a report prints many traces over a few modules, and each look reads all of
 * /proc/self/maps (one a trace made a leak report of 2,000 groups 5 times
 * slower; review finding); a file replaced since, or another module loaded
 * there, is another key (a memo kept for a second, by path alone, answered
 * wrong within it both ways: review finding); and it is emptied once a
 * module was unloaded (unloads_seen moved: the new file, renamed in before
 * the first report, may since be loaded where the old one was). */
#define REPLACED_MEMO 64
static struct {
    size_t count;
    unsigned long long unloads; /* unloads_seen when the entries were made */
    uintptr_t bias[REPLACED_MEMO];
    uint64_t file_hash[REPLACED_MEMO];
    bool replaced[REPLACED_MEMO];
} replaced_memo ebb_cold_bss;

typedef struct replaced_find_s {
    uintptr_t pc;
    bool found, deleted;
} replaced_find_t;

static void replaced_find_line(const char *line, size_t len, void *arg)
{
    replaced_find_t *f = arg;
    os_maps_line_t ml;
    static const char suffix[] = " (deleted)";
    size_t n = sizeof suffix - 1;
    if (f->found || !os_maps_line_parse(line, len, &ml) || f->pc < ml.start || f->pc >= ml.end ||
        ml.path == NULL)
        return;
    f->found = true;
    f->deleted = ml.path_len > n && memcmp(ml.path + ml.path_len - n, suffix, n) == 0;
}

/* file_hash: module_hash(m). Under the report lock, as all of this. */
static bool module_replaced(const module_t *m, uint64_t file_hash)
{
    if (!m->found)
        return false;
    unsigned long long unloads = atomic_load_explicit(&unloads_seen, memory_order_acquire);
    if (replaced_memo.unloads != unloads) {
        replaced_memo.count = 0;
        replaced_memo.unloads = unloads;
    }
    for (size_t i = 0; i < replaced_memo.count; i++)
        if (replaced_memo.bias[i] == m->bias && replaced_memo.file_hash[i] == file_hash)
            return replaced_memo.replaced[i];
    static char buf[8192] ebb_cold_bss;
    replaced_find_t f = {.pc = m->pc};
    os_for_each_line("/proc/self/maps", buf, sizeof buf, replaced_find_line, &f);
    if (replaced_memo.count == REPLACED_MEMO)
        replaced_memo.count = 0; /* full: start over */
    replaced_memo.bias[replaced_memo.count] = m->bias;
    replaced_memo.file_hash[replaced_memo.count] = file_hash;
    replaced_memo.replaced[replaced_memo.count++] = f.deleted;
    return f.deleted;
}

static void module_memo_forget(void)
{
    module_memo.valid = false;
    relative_memo.name = NULL;
}

static uint64_t module_hash_memo(const module_t *m)
{
    if (!module_memo.valid || module_memo.mod.found != m->found || module_memo.mod.bias != m->bias ||
        strcmp(module_memo.mod.path, m->path) != 0) {
        module_memo.mod = *m;
        module_memo.hash = module_hash(m);
        module_memo.valid = true;
    }
    return module_memo.hash;
}

/* The symbol cache's key for a module: module_hash, told apart when the
 * module's file was replaced, so that names left out then are looked up
 * again once the module at that address and path is a sound one (review
 * finding: the new build loaded after the old one's dlclose printed no
 * names). */
static uint64_t sym_module_key(const module_t *m, bool *replaced)
{
    uint64_t h = module_hash_memo(m);
    *replaced = module_replaced(m, h);
    return *replaced ? h ^ 0x9E3779B97F4A7C15ull : h;
}

static sym_t *sym_find(const module_t *m, uint64_t hash)
{
    for (unsigned i = 0; i < SYM_SLOTS; i++)
        if (sym_cache[i].pc == m->pc && sym_cache[i].bias == m->bias &&
            sym_cache[i].module_hash == hash)
            return &sym_cache[i];
    return NULL;
}

/* A slot to fill in the current call: the oldest not stamped by it (a call
 * stamps at most 4 * TRACE_DEPTH_MAX entries, far fewer than SYM_SLOTS). */
static sym_t *sym_take_slot(void)
{
    for (unsigned k = 0; k < SYM_SLOTS && sym_cache[sym_next].stamp == sym_stamp; k++)
        sym_next = (sym_next + 1) % SYM_SLOTS;
    sym_t *e = &sym_cache[sym_next];
    sym_next = (sym_next + 1) % SYM_SLOTS;
    return e;
}

/* C++ names as the program's authors write them: `os::malloc(unsigned long,
 * MEMFLAGS, NativeCallStack const&)`, not the symbol table's
 * `_ZN2os6mallocEm8MEMFLAGSRK15NativeCallStack`. The Itanium ABI's
 * demangling (substitutions, templates, abbreviations) is binutils' own, in
 * `c++filt`: one run for the mangled names of the `count` entries just
 * filled (fresh), all given as arguments (no allocation: os_run_output),
 * instead of a demangler inside the allocator that could print a wrong name.
 * c++filt prints one line an argument, the name itself when it cannot
 * demangle it. So that lines and names cannot fall out of step, only names
 * of the characters mangled names use are given (a symbol name may hold any
 * byte but NUL, a newline too), and a last line cut short by the buffer is
 * not used. Where c++filt is missing or cannot be started (a sandbox refuses
 * vfork or execve) the names stay as they are: mangled, never wrong. Off
 * with EBB_DEBUG_DEMANGLE=0. */
#define CXXFILT "/usr/bin/c++filt"
#define SYM_FRESH_MAX (4 * TRACE_DEPTH_MAX) /* frames a sym_resolve call is given, at most */

static bool mangled_name(const char *s)
{
    if (s[0] != '_' || s[1] != 'Z')
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '$'))
            return false;
    }
    return true;
}

static void names_demangle(sym_t *const *fresh, int count)
{
    if (option_get(OPT_DEBUG_DEMANGLE) == 0)
        return;
    /* Static: under the report lock, and a report may run on a small stack. */
    static char *argv[SYM_FRESH_MAX + 3] ebb_cold_bss;
    static sym_t *asked[SYM_FRESH_MAX] ebb_cold_bss;
    /* 1 KiB a name: a demangled name is about twice its mangled one, which
     * is rarely over 200 bytes; lines past its end keep their names mangled. */
    static char buf[SYM_FRESH_MAX * 1024] ebb_cold_bss;
    int a = 0, k = 0;
    argv[a++] = (char *)CXXFILT;
    argv[a++] = (char *)"--";
    for (int i = 0; i < count && k < SYM_FRESH_MAX; i++) {
        if (fresh[i]->named && !fresh[i]->cut && mangled_name(fresh[i]->name)) {
            asked[k++] = fresh[i];
            argv[a++] = fresh[i]->name;
        }
    }
    if (k == 0)
        return; /* with no name to demangle, c++filt would read stdin */
    argv[a] = NULL;
    os_run_output(CXXFILT, argv, buf, sizeof buf);
    char *s = buf;
    for (int i = 0; i < k; i++) {
        char *end = strchr(s, '\n');
        if (end == NULL)
            break; /* cut short by the buffer, or c++filt ended early */
        *end = '\0';
        size_t len = (size_t)(end - s);
        sym_t *e = asked[i];
        if (len > 0 && strcmp(s, e->name) != 0) {
            e->cut = len >= sizeof e->name;
            if (e->cut)
                len = sizeof e->name - 1;
            memcpy(e->name, s, len);
            e->name[len] = '\0';
        }
        s = end + 1;
    }
}

/* Symbolize the frames of `pcs` (return addresses, at most SYM_FRESH_MAX)
 * not in the cache yet, one addr2line run per module for each 64 of them,
 * and one c++filt run for all. */
#define SYM_BATCH 64
static void sym_resolve(const uintptr_t *pcs, int n)
{
    static module_t mods[SYM_BATCH] ebb_cold_bss;
    static uint64_t hashes[SYM_BATCH] ebb_cold_bss;
    static bool replaced[SYM_BATCH] ebb_cold_bss; /* sym_module_key's, with hashes */
    static char got[SYM_BATCH][160] ebb_cold_bss;
    static char got_fn[SYM_BATCH][SYM_NAME_MAX] ebb_cold_bss;
    static bool got_fn_cut[SYM_BATCH] ebb_cold_bss;
    static sym_t *fresh[SYM_FRESH_MAX] ebb_cold_bss; /* the entries this call fills */
    int fresh_count = 0;
    module_memo_forget();
    if (++sym_stamp == 0)
        sym_stamp = 1; /* 0 is a slot never stamped */
    int i = 0;
    while (i < n) {
        int m = 0; /* gather up to SYM_BATCH new frames */
        for (; i < n && m < SYM_BATCH; i++) {
            memset(&mods[m], 0, sizeof mods[m]);
            mods[m].pc = pcs[i] - 1; /* a return address: the call is just before */
            module_find(&mods[m]);
            hashes[m] = sym_module_key(&mods[m], &replaced[m]);
            sym_t *cached = sym_find(&mods[m], hashes[m]);
            bool seen = cached != NULL;
            if (cached)
                cached->stamp = sym_stamp;
            for (int k = 0; k < m && !seen; k++)
                seen = mods[k].pc == mods[m].pc && mods[k].bias == mods[m].bias &&
                       hashes[k] == hashes[m];
            if (!seen)
                m++;
        }
        bool done[SYM_BATCH] = {false};
        for (int a = 0; a < m; a++) {
            if (done[a])
                continue;
            uintptr_t batch[SYM_BATCH];
            int which[SYM_BATCH], k = 0;
            for (int b = a; b < m; b++) {
                if (!done[b] && hashes[b] == hashes[a] && mods[b].found == mods[a].found) {
                    batch[k] = mods[b].pc - mods[b].bias;
                    which[k++] = b;
                    done[b] = true;
                }
            }
            bool readable = mods[a].found && !replaced[a];
            if (readable)
                file_lines(mods[a].path, batch, k, got, got_fn, got_fn_cut);
            for (int j = 0; j < k; j++) {
                const module_t *mod = &mods[which[j]];
                sym_t *e = sym_take_slot();
                e->pc = mod->pc;
                e->bias = mod->bias;
                e->module_hash = hashes[which[j]];
                e->stamp = sym_stamp;
                e->cut = false;
                e->named = readable && elf_function(mod->path, batch[j], e->name, sizeof e->name,
                                                    &e->offset, &e->cut);
                e->offset_known = e->named;
                /* A name from the debug info, where there is some: without it
                 * (no location either) addr2line names the nearest symbol
                 * before the address, wherever that function ends. */
                if (!e->named && readable && got_fn[j][0] && got[j][0]) {
                    memcpy(e->name, got_fn[j], sizeof e->name);
                    e->cut = got_fn_cut[j];
                    e->named = true;
                }
                if (readable)
                    memcpy(e->line, got[j], sizeof e->line);
                else
                    e->line[0] = '\0';
                if (fresh_count < SYM_FRESH_MAX)
                    fresh[fresh_count++] = e;
            }
        }
    }
    names_demangle(fresh, fresh_count);
}

void trace_symbolize(const uint32_t *ids, int count)
{
    static uintptr_t pcs[4 * TRACE_DEPTH_MAX] ebb_cold_bss;
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (n + TRACE_DEPTH_MAX > (int)(sizeof pcs / sizeof pcs[0])) {
            sym_resolve(pcs, n);
            n = 0;
        }
        n += trace_get(ids[i], pcs + n, TRACE_DEPTH_MAX);
    }
    sym_resolve(pcs, n);
}

/* A frame of a trace captured before a library was unloaded, in a module
 * that could have been loaded since (one not loaded at startup), may have
 * run code that is gone: another library loaded at its address has its own
 * names there. Such a frame says so, and what is there now (review: a block
 * a closed plugin allocated was reported as allocated by the plugin loaded
 * after it, under that one's function and line). The current count is the
 * one the report's trace_check_unloads read (a forked child's is its
 * parent's: step 4). */
void trace_print(text_t *t, uint32_t id, const char *indent)
{
    uintptr_t pcs[TRACE_DEPTH_MAX];
    uint32_t unloads;
    int n = trace_get_unloads(id, pcs, TRACE_DEPTH_MAX, &unloads);
    bool unloaded_since =
        unloads != (uint32_t)atomic_load_explicit(&unloads_seen, memory_order_acquire);
    if (n == 0) {
        text_add(t, indent);
        text_add(t, "(no stack trace)\n");
        return;
    }
    if (t->fd >= 0)
        sym_resolve(pcs, n); /* after trace_symbolize: only a stamp for each frame */
    module_memo_forget();
    /* Static: every caller holds debug.c's report lock, and a report must
     * fit on a thread's small stack (a thread of 32 KiB crashed reporting a
     * double free when 24 KiB of buffers were on it). */
    static module_t mod ebb_cold_bss;
    for (int i = 0; i < n; i++) {
        memset(&mod, 0, sizeof mod);
        mod.pc = pcs[i] - 1;
        module_find(&mod);
        bool replaced = false;
        uint64_t key = sym_module_key(&mod, &replaced);
        const sym_t *e = sym_find(&mod, key);
        bool maybe = unloaded_since && mod.found && !startup_module(mod.bias);
        text_add(t, indent);
        text_add(t, "#");
        text_add_u64(t, (uint64_t)i, 0);
        text_add(t, " ");
        text_add_hex(t, pcs[i]);
        if (maybe)
            text_add(t, " (a library was unloaded since; now there:");
        if (e && e->named) {
            text_add(t, maybe ? " " : " in ");
            text_add(t, e->name);
            if (e->cut)
                text_add(t, "...");
            if (e->offset_known) {
                text_add(t, "+");
                text_add_u64(t, e->offset + 1, 0);
            }
        }
        if (e && e->line[0]) {
            text_add(t, " at ");
            text_add(t, e->line);
        }
        if (mod.found) {
            text_add(t, " (");
            text_add(t, mod.path);
            if (replaced)
                text_add(t, ", replaced on disk since it was loaded: not read");
            text_add(t, ")");
        }
        if (maybe)
            text_add(t, ")");
        text_add(t, "\n");
    }
}

/* ---------------------------------------------------------------------------
 * What the tables beside the registry take
 * ------------------------------------------------------------------------- */
static size_t page_round(size_t bytes)
{
    return (bytes + os_info.page_size - 1) & ~(os_info.page_size - 1);
}

size_t trace_table_bytes(void)
{
    size_t bytes = sizeof buckets + sizeof chunks + sizeof sym_cache;
    if (cache)
        bytes += page_round(CACHE_ENTRIES * sizeof(cache_entry_t));
    if (rules)
        bytes += page_round(RULE_ENTRIES * sizeof(rule_entry_t));
    return bytes;
}
