/* A test harness's pattern: a SIGABRT handler that siglongjmps back, so each
 * fault is caught and the program goes on. Three double frees, each caught;
 * then a block is lost and the program returns. Every fault is reported, the
 * program ends normally, and the leak report at exit still comes. */
#include <setjmp.h>
#include <signal.h>

#include "fault.h"

static sigjmp_buf back;
static char *lost;

static void on_abort(int sig)
{
    (void)sig;
    siglongjmp(back, 1);
}

int main(void)
{
    signal(SIGABRT, on_abort);
    volatile int caught = 0;
    for (volatile int i = 0; i < 3; i++) {
        char *p = allocate_victim(24);
        if (sigsetjmp(back, 1) == 0) {
            free(p);
            free(p);
        } else {
            caught++;
        }
    }
    printf("caught=%d\n", (int)caught);
    lost = allocate_victim(77);
    lost = NULL;
    scrub_stack();
    return survived();
}
