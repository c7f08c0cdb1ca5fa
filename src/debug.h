/*
 * debug.h — the block header of debug mode, shared by debug.c (which writes
 * and checks it) and leak.c (which scans the live blocks at exit).
 */
#ifndef EBB_DEBUG_H
#define EBB_DEBUG_H

#include "internal.h"

#define DEBUG_MAGIC_LIVE  0xEBBA110CA7EDB10Cull
#define DEBUG_MAGIC_FREED 0xEBBF4EEDB10CF4EEull
#define DEBUG_MAGIC_BUSY  0xEBBB05BB10CB05BBull /* being freed, or leaving the quarantine */
/* Held by ebb_debug_verify while it checks a live or a freed block (debug.c,
 * "Claiming a block"): whoever wants to change the block waits. */
#define DEBUG_MAGIC_CHECKED_LIVE  0xEBBC4EC7A110CA7Eull
#define DEBUG_MAGIC_CHECKED_FREED 0xEBBC4EC7F4EEDB10ull
/* A realloc in place is changing a live block's size and trace (debug.c,
 * realloc_in_place): whoever judges or reads the block waits. */
#define DEBUG_MAGIC_RESIZING      0xEBBE5121A110CA7Eull
/* Out of the quarantine, checked, waiting in the reuse cache (debug.c): its
 * links there are followed only into blocks with this magic. */
#define DEBUG_MAGIC_REUSE         0xEBB4E05EB10C4E05ull
#define CANARY_BYTE       0xCB
#define TAIL_MIN          16
#define FILL_FULL_MAX     ((size_t)1 << 20)
#define FILL_EDGE         ((size_t)64 << 10)
#define CANARY_CHECK_MAX  ((size_t)4 << 10)

typedef struct debug_header_s {
    /* DEBUG_MAGIC_* ^ the header's address; stored last (release) once a
     * block's fills and canary are in place. ebb_debug_verify, which may run
     * beside other threads, checks a block only after claiming it through
     * this word, and the threads that free it or take it out of the
     * quarantine claim it the same way first (debug.c, "Claiming a block"). */
    _Atomic(uint64_t) magic;
    uint64_t size;       /* requested */
    uint32_t shard;      /* a freed block: its quarantine FIFO + 1 (a link from
                            another FIFO's block to it is a changed link);
                            0 while live */
    uint32_t alloc_trace;
    uint32_t free_trace;
    uint16_t context;
    uint8_t align_log2;  /* requested alignment (0: default) */
    uint8_t flags;       /* DEBUG_FLAG_* */
    struct debug_header_s *qnext; /* in the quarantine */
    uint64_t check;      /* of every field but magic and qnext (header_check) */
} debug_header_t;

_Static_assert(sizeof(debug_header_t) == 48, "the header is 48 bytes (a multiple of 16)");

#define DEBUG_FLAG_ZEROED 1 /* calloc: the user bytes were zeroed, not filled */
/* realloc made or resized it: C23's free_sized frees it whatever alignment
 * the block it came from had (review finding: free_sized after a realloc of
 * an aligned_alloc block was reported as a wrong alignment). */
#define DEBUG_FLAG_REALLOCATED 0x80
/* Bits 1-6 of `flags`: how many fork()s deep the process that allocated the
 * block was (debug_fork_depth then; DEBUG_FORK_DEPTH_MAX for any deeper).
 * The leak report of a forked child tells its own blocks from those it
 * inherited (leak.c). */
#define DEBUG_FORK_DEPTH_SHIFT 1
#define DEBUG_FORK_DEPTH_MAX   63

/* This process's fork depth: 0 in the process that was exec'ed, one more in
 * each child of a fork() that ran the fork handlers (_Fork does not).
 * Written only in the child's fork handler, when it is the only thread. */
extern uint8_t debug_fork_depth;

static inline unsigned debug_block_fork_depth(const debug_header_t *h)
{
    return (h->flags >> DEBUG_FORK_DEPTH_SHIFT) & DEBUG_FORK_DEPTH_MAX;
}

/* Bytes from the header to the user pointer: the header rounded up to the
 * requested alignment (align_log2; 0: MIN_ALIGN, the header alone). Derived,
 * not stored: a 32-bit field stopped debug mode at alignments of 2 GiB, which
 * release mode serves up to what the address space holds. */
static inline size_t debug_offset(const debug_header_t *h)
{
    size_t a = (size_t)1 << (h->align_log2 & 63);
    return h->align_log2 == 0 ? sizeof *h : (sizeof *h + a - 1) & ~(a - 1);
}

static inline uint8_t *user_of(debug_header_t *h)
{
    return (uint8_t *)h + debug_offset(h);
}

/* One wait for verify to let go of a block: a pause, then yields, so that a
 * verify thread that was preempted holding it gets the processor. */
void debug_claim_backoff(unsigned spins);

/* The block's magic once ebb_debug_verify (or a reader holding it) has let
 * go of it and no realloc in place is changing it: while verify checks a
 * block (a short read of its header and canary or fill), whoever judges it
 * waits, so that it is never taken for a block in no known state. */
static inline uint64_t debug_magic_settled(const debug_header_t *h)
{
    uint64_t held_live = DEBUG_MAGIC_CHECKED_LIVE ^ (uintptr_t)h;
    uint64_t held_freed = DEBUG_MAGIC_CHECKED_FREED ^ (uintptr_t)h;
    uint64_t resizing = DEBUG_MAGIC_RESIZING ^ (uintptr_t)h;
    for (unsigned spins = 0;; spins++) {
        uint64_t m = atomic_load_explicit(&h->magic, memory_order_acquire);
        if (ebb_likely(m != held_live && m != held_freed && m != resizing))
            return m;
        debug_claim_backoff(spins);
    }
}

static inline bool debug_header_live(const debug_header_t *h)
{
    return debug_magic_settled(h) == (DEBUG_MAGIC_LIVE ^ (uintptr_t)h);
}

/* A live block whose header no write has changed (its checksum holds, its
 * user bytes lie inside the underlying block): *copy is its header, read
 * while holding the block, so that a realloc in place on another thread
 * cannot change it half-read. For the heap walk and the leak report, which
 * read blocks other threads own. */
bool debug_header_intact(debug_header_t *h, debug_header_t *copy);

/* Fault and leak reports: EBB_DEBUG_LOG's file, or stderr (debug.c); opened
 * and written under the report lock. */
void debug_report_lock(void);
void debug_report_unlock(void);
bool debug_report_held_here(void);
int debug_log_open(bool *opened);
void debug_log_close(int fd, bool opened);

/* leak.c */
void leak_report_at_exit(void);
/* The leak report's gate (debug.c, "The leak report's gate"). */
void debug_gate_close(void);
void debug_gate_open(void);

#endif /* EBB_DEBUG_H */
