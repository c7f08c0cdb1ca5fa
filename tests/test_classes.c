/*
 * test_classes.c — the size-class tables (src/alloc.c) and the test on them
 * that every free-list reader relies on (src/internal.h): every request maps
 * to the smallest class that holds it, and page_is_carved_block accepts the
 * start of each carved block of a page and nothing else.
 *
 * Linked with build/obj/libebb-internal.a (the tables and helpers are internal).
 */
#include "check.h"

#include <stdint.h>

#include "../src/internal.h"

static void every_request_maps_to_the_smallest_class_that_holds_it(void)
{
    for (size_t size = 1; size <= SMALL_MAX; size++) {
        unsigned cls = size_class(size);
        REQUIRE(cls < CLASS_COUNT, "size_class(%zu) = %u, expected < %d", size, cls, CLASS_COUNT);
        CHECK(class_block_size[cls] >= size, "size %zu: class %u holds only %u bytes", size, cls,
              class_block_size[cls]);
        CHECK(cls == 0 || class_block_size[cls - 1] < size,
              "size %zu: class %u (%u bytes), but class %u (%u bytes) holds it too", size, cls,
              class_block_size[cls], cls - 1, class_block_size[cls - 1]);
    }
    CHECK(class_block_size[CLASS_COUNT - 1] == SMALL_MAX, "the last class is %u bytes, expected %zu",
          class_block_size[CLASS_COUNT - 1], SMALL_MAX);
}

/* The largest small page, every class: each block start is carved, every
 * other offset not, nor anything past the carved blocks or before the page. */
static void carved_blocks_are_recognised_and_nothing_else(void)
{
    const size_t span = PAGE_MAX_SLICES * SLICE_SIZE;
    const uintptr_t start = (uintptr_t)1 << 40; /* any address: only compared */
    for (unsigned cls = 0; cls < CLASS_COUNT; cls++) {
        size_t bs = class_block_size[cls], capacity = span / bs, wrong = 0, first_wrong = 0;
        for (size_t off = 0; off < span + bs; off += 8) {
            bool want = off % bs == 0 && off / bs < capacity;
            if (page_is_carved_block(start + off, start, bs, capacity) != want && wrong++ == 0)
                first_wrong = off;
        }
        CHECK(wrong == 0, "class %u (%zu bytes): %zu offsets judged wrongly, the first %zu", cls, bs,
              wrong, first_wrong);
        CHECK(!page_is_carved_block(start - bs, start, bs, capacity),
              "class %u: a block before the page counted as carved", cls);
    }
}

int main(void)
{
    RUN_CASE(every_request_maps_to_the_smallest_class_that_holds_it);
    RUN_CASE(carved_blocks_are_recognised_and_nothing_else);
    return check_finish();
}
