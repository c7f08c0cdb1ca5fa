/* free of a pointer one header size (48 bytes) into a block whose first bytes
 * hold a copy of another live block's header: free looks for a header just
 * below the pointer first, and a copied header must not pass for one (its
 * magic is tied to its own address). */
#include "fault.h"

int main(void)
{
    char *other = malloc(100);
    char *p = allocate_victim(200);
    const volatile char *header = other - 48; /* ebb's header of `other` */
    for (int i = 0; i < 48; i++)
        p[i] = header[i];
    announce(p + 48);
    free(p + 48);
    free(p); /* the block itself is still sound */
    free(other);
    return survived();
}
