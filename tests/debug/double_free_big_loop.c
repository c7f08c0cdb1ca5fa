/* A loop of big blocks (ALIGN: posix_memalign's alignment, 0 for malloc;
 * SIZE bytes), each freed before the next is allocated, the last 16 freed
 * pointers kept. Mappings this big are unmapped at their free, and two
 * blocks took turns at two addresses: a new block landed on a freed
 * pointer, the move meant to keep it apart landed on the other one, and
 * the second free of the old pointer freed the live block unreported
 * (review finding: by the third iteration). If a new block lands on a
 * freed pointer, that pointer is freed again at once; else, after 40
 * blocks, the last one freed is: a double free either way, which must be
 * reported with its traces. */
#include "fault.h"

int main(void)
{
    const char *a = getenv("ALIGN"), *n_text = getenv("SIZE");
    size_t align = a ? strtoull(a, NULL, 0) : 0;
    size_t n = n_text ? strtoull(n_text, NULL, 0) : (size_t)100 << 20;
    char *freed[16];
    int count = 0;
    for (int i = 0; i < 40; i++) {
        char *p = align ? allocate_victim_aligned(align, n) : allocate_victim(n);
        if (p == NULL)
            return 4;
        memset(p, 'q', 4096);
        for (int k = 0; k < count && k < 16; k++) {
            if (freed[k] == p) {
                announce(p);
                free(p); /* the old pointer's second free; p is live again */
                return survived();
            }
        }
        free(p);
        freed[count++ % 16] = p;
    }
    char *last = freed[(count - 1) % 16];
    announce(last);
    free(last);
    return survived();
}
