/*
 * debug.h — the block header of debug mode, shared by debug.c (which writes
 * and checks it) and leak.c (which scans the live blocks at exit).
 */
#ifndef EBB_DEBUG_H
#define EBB_DEBUG_H

#include "internal.h"

#define DEBUG_MAGIC_LIVE  0xEBBA110CA7EDB10Cull
#define DEBUG_MAGIC_FREED 0xEBBF4EEDB10CF4EEull
#define DEBUG_MAGIC_BUSY  0xEBBB05BB10CB05BBull /* being freed: fill under way */
#define CANARY_BYTE       0xCB
#define TAIL_MIN          16
#define FILL_FULL_MAX     ((size_t)1 << 20)
#define FILL_EDGE         ((size_t)64 << 10)
#define CANARY_CHECK_MAX  ((size_t)4 << 10)

typedef struct debug_header_s {
    /* DEBUG_MAGIC_LIVE/BUSY/FREED ^ the header's address; stored last
     * (release) once a block's fills and canary are in place, so that
     * ebb_debug_verify, which may run beside other threads, never judges a
     * block half written (debug.c, verify_block). */
    _Atomic(uint64_t) magic;
    uint64_t size;       /* requested */
    uint32_t offset;     /* user pointer - block start */
    uint32_t alloc_trace;
    uint32_t free_trace;
    uint16_t context;
    uint8_t align_log2;  /* requested alignment (0: default) */
    uint8_t flags;       /* DEBUG_FLAG_* */
    struct debug_header_s *qnext; /* in the quarantine */
    uint64_t check;      /* of size, offset, alloc_trace, context, align_log2 */
} debug_header_t;

_Static_assert(sizeof(debug_header_t) == 48, "the header is 48 bytes (a multiple of 16)");

#define DEBUG_FLAG_ZEROED 1 /* calloc: the user bytes were zeroed, not filled */

static inline uint8_t *user_of(debug_header_t *h)
{
    return (uint8_t *)h + h->offset;
}

static inline bool debug_header_live(const debug_header_t *h)
{
    return atomic_load_explicit(&h->magic, memory_order_acquire) == (DEBUG_MAGIC_LIVE ^ (uintptr_t)h);
}

/* A live block whose header no write has changed (its checksum holds, its
 * user bytes lie inside the underlying block). */
bool debug_header_intact(const debug_header_t *h);

/* leak.c */
void leak_report_at_exit(void);

#endif /* EBB_DEBUG_H */
