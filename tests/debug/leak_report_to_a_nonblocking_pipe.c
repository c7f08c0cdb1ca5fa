/* A program that made its stderr non-blocking (O_NONBLOCK on a pipe it
 * shares) and leaks 400 blocks from 400 call sites: a report of about 200
 * KB, more than a pipe holds. Its writes met EAGAIN while the reader lagged,
 * and the report dropped those pieces yet still ended with its closing line.
 * Expected (read slowly): all 400 groups and the closing line. */
#include "fault.h"

#include <fcntl.h>

#define SITES 400

typedef void *(*site_fn)(size_t);

#define SITE(n)                                                               \
    __attribute__((noinline)) static void *site_##n(size_t k)                 \
    {                                                                         \
        void *p = malloc(k + n);                                              \
        __asm__ volatile("" ::: "memory");                                    \
        return p;                                                             \
    }
#define SITE10(n) SITE(n##0) SITE(n##1) SITE(n##2) SITE(n##3) SITE(n##4) \
                  SITE(n##5) SITE(n##6) SITE(n##7) SITE(n##8) SITE(n##9)
#define SITE100(n) SITE10(n##0) SITE10(n##1) SITE10(n##2) SITE10(n##3) SITE10(n##4) \
                   SITE10(n##5) SITE10(n##6) SITE10(n##7) SITE10(n##8) SITE10(n##9)
SITE100(1) SITE100(2) SITE100(3) SITE100(4)

#define REF(n) site_##n,
#define REF10(n) REF(n##0) REF(n##1) REF(n##2) REF(n##3) REF(n##4) \
                 REF(n##5) REF(n##6) REF(n##7) REF(n##8) REF(n##9)
#define REF100(n) REF10(n##0) REF10(n##1) REF10(n##2) REF10(n##3) REF10(n##4) \
                  REF10(n##5) REF10(n##6) REF10(n##7) REF10(n##8) REF10(n##9)
static const site_fn sites[SITES] = {REF100(1) REF100(2) REF100(3) REF100(4)};

int main(void)
{
    int flags = fcntl(2, F_GETFL);
    if (flags < 0 || fcntl(2, F_SETFL, flags | O_NONBLOCK) != 0) {
        printf("no non-blocking stderr\n");
        return 2;
    }
    for (int i = 0; i < SITES; i++) {
        void *volatile p = sites[i](1);
        p = NULL;
        (void)p;
    }
    scrub_stack();
    printf("leaked %d\n", SITES);
    return 0;
}
