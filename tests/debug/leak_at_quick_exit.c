/* quick_exit runs at_quick_exit handlers, and no destructor: the leak report
 * is one of those handlers (registered by ebb's constructor, so it runs after
 * the program's own). The program loses a block, registers a handler that
 * prints, and leaves by quick_exit(0). */
#include "fault.h"

static void program_handler(void)
{
    printf("program handler\n");
    fflush(stdout);
}

int main(void)
{
    char *lost = allocate_victim(77);
    announce(lost);
    lost = NULL;
    scrub_stack();
    at_quick_exit(program_handler);
    quick_exit(0);
}
