/*
 * large.c — huge blocks: requests above LARGE_MAX, and alignments a slice run
 * cannot honour. Each is its own mapping, with a segment header (kind
 * SEGMENT_HUGE, thread_id 0) at its start, so free finds it with the same mask
 * as any block and no thread owns it: any thread frees it by unmapping.
 *
 * Layout of a mapping:  [header page(s) | block ...]
 *   - alignment < SEGMENT_SIZE: the mapping starts on a segment boundary and
 *     the block at offset max(page size, alignment);
 *   - alignment >= SEGMENT_SIZE: the block must itself start on a segment
 *     boundary, so the header sits exactly one segment below it (ptr_segment
 *     masks p - 1 for this reason).
 * realloc grows a mapping in place with mremap when the address space after it
 * is free, else moves it with mremap onto a new reservation aligned the same
 * way — the kernel moves page tables, no byte is copied.
 */
#include <string.h>

#include "internal.h"

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) & ~(to - 1);
}

/* Where the block sits in the mapping, and how the mapping is aligned. */
static void huge_layout(size_t alignment, size_t *offset, size_t *map_align, size_t *align_offset)
{
    if (alignment >= SEGMENT_SIZE) {
        *offset = SEGMENT_SIZE;
        *map_align = alignment;
        *align_offset = SEGMENT_SIZE;
    } else {
        *offset = alignment > os_info.page_size ? alignment : os_info.page_size;
        *map_align = SEGMENT_SIZE;
        *align_offset = 0;
    }
}

void *huge_alloc(size_t size, size_t alignment)
{
    size_t offset, map_align, align_offset;
    huge_layout(alignment, &offset, &map_align, &align_offset);
    size_t ps = os_info.page_size;
    if (size > SIZE_MAX - offset - ps)
        return NULL;
    size_t total = offset + round_up(size ? size : 1, ps);
    segment_t *seg = os_map_aligned(total, map_align, align_offset);
    if (seg == NULL && segment_cache_release())
        seg = os_map_aligned(total, map_align, align_offset);
    if (seg == NULL)
        return NULL;
    seg->kind = SEGMENT_HUGE;
    seg->map_size = total;
    seg->block_offset = offset;
    seg->alignment = alignment;
    segment_map_set(seg, true);
    return (uint8_t *)seg + offset;
}

void huge_free(segment_t *seg)
{
    segment_map_set(seg, false);
    os_unmap(seg, seg->map_size);
}

size_t huge_usable_size(segment_t *seg)
{
    return seg->map_size - seg->block_offset;
}

void *huge_realloc(segment_t *seg, void *p, size_t size)
{
    size_t ps = os_info.page_size;
    size_t offset = seg->block_offset;
    if (size > SIZE_MAX - offset - ps)
        return NULL;
    size_t old_total = seg->map_size;
    size_t new_total = offset + round_up(size, ps);
    if (new_total == old_total)
        return p;
    if (new_total < old_total) {
        if (!os_remap_inplace(seg, old_total, new_total))
            return NULL;
        seg->map_size = new_total;
        return p;
    }
    if (os_remap_inplace(seg, old_total, new_total)) {
        seg->map_size = new_total;
        return p;
    }
    size_t off, map_align, align_offset;
    huge_layout(seg->alignment, &off, &map_align, &align_offset);
    void *target = os_reserve_aligned(new_total, map_align, align_offset);
    if (target == NULL)
        return NULL;
    segment_map_set(seg, false);
    if (!os_remap_move(seg, old_total, new_total, target)) {
        segment_map_set(seg, true);
        os_unreserve(target, new_total);
        return NULL;
    }
    seg = target;
    seg->map_size = new_total;
    segment_map_set(seg, true);
    return (uint8_t *)seg + offset;
}
