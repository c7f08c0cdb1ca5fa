/* quarantine_link_write.c, but the program then sleeps: the background
 * thread's pass drains the quarantine once its blocks waited
 * EBB_DEBUG_QUARANTINE_IDLE (1 s), and finds the changed header there. */
#include <unistd.h>

#include "fault.h"

int main(void)
{
    enum { N = 64 };
    char *b[N], *w = NULL, *x = NULL;
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(100);
    if (!find_neighbours(b, N, 192, &w, &x))
        return 1;
    announce(x);
    free(x);
    free(malloc(200));
    memset(w, 'A', 100 + 84);
    sleep(3);
    return survived();
}
