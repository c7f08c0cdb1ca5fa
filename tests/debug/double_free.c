/* Double free: reported at the second free, with both traces. */
#include "ebb.h"
#include "fault.h"

int main(void)
{
    ebb_debug_set_context("phase-two");
    char *p = allocate_victim(24);
    announce(p);
    free(p);
    free(p);
    return survived();
}
