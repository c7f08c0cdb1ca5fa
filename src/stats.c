/*
 * stats.c — what ebb holds, for glibc's reporting calls (mallinfo, mallinfo2,
 * malloc_stats, malloc_info). The counters come from the OS layer and the
 * huge-block module; live bytes come from a walk of every segment's page
 * descriptors, exact when other threads are quiescent and approximate (never
 * negative) while they run. Nothing here allocates.
 */
#include "internal.h"

void stats_collect(ebb_glibc_stats_t *out)
{
    *out = (ebb_glibc_stats_t){0};
    segment_walk_live(&out->segments, &out->segment_bytes, &out->live_bytes);
    huge_live(&out->huge_count, &out->huge_bytes);
    out->mapped_bytes = os_mapped_bytes();
}
