/* A double free of a block bigger than the whole quarantine (16 MiB by
 * default; tests/test_debug.sh also runs a 64 KiB one against a 4 KiB
 * quarantine): such a block goes back as it is freed, yet the second free
 * is reported as a double free with its traces, not as a foreign pointer
 * (review finding). */
#include "fault.h"

int main(void)
{
    const char *env = getenv("EBB_DEBUG_QUARANTINE");
    size_t n = env && atol(env) < 65536 ? 65536 : (size_t)20 << 20;
    char *p = allocate_victim(n);
    announce(p);
    free(p);
    free(p);
    return survived();
}
