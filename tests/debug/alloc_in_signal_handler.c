/* A signal handler that interrupts an allocator call and allocates: its
 * block is traced from the handler's own frames. Reported at a double free
 * of that block, "allocated at:" starts in allocate_in_handler. Before,
 * the handler's call took the mark of the call it interrupted, and every
 * frame below that mark, the handler's included, counted as ebb's: the
 * trace began in main, at the interrupted free.
 *
 * The signal comes at a known point inside ebb: the program makes one page
 * of a block read-only and frees the block; the free fill's write to that
 * page faults in the middle of ebb's free (the block claimed, no lock
 * held), and the SIGSEGV handler makes the page writable again, allocates,
 * and returns to the write. With VIA_MEMALIGN the fault comes in
 * posix_memalign (below). */
#include <signal.h>
#include <sys/mman.h>

#include "ebb.h"
#include "fault.h"

#define PAGE 4096

static char *page;
static char *volatile from_handler;

__attribute__((noinline)) static char *allocate_in_handler(size_t n)
{
    char *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    char *at = si->si_addr;
    if (from_handler != NULL || at < page || at >= page + PAGE) {
        signal(sig, SIG_DFL); /* not the fault this test makes: crash */
        return;
    }
    mprotect(page, PAGE, PROT_READ | PROT_WRITE);
    from_handler = allocate_in_handler(24);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);

    char *b = malloc(3 * PAGE);
    memset(b, 1, 3 * PAGE);
    /* The block's middle page: inside it however the block is aligned. */
    page = (char *)(((uintptr_t)b + 2 * PAGE - 1) & ~(uintptr_t)(PAGE - 1));
    if (getenv("VIA_MEMALIGN") != NULL) {
        /* The fault comes in posix_memalign instead, in the new-memory fill
         * of the same block handed out again (EBB_DEBUG_QUARANTINE smaller
         * than the block: it skips the quarantine). ebb_posix_memalign, an
         * allocator entry point, keeps its frame on the stack there, between
         * the handler's frames and main: the walk must not start the trace
         * over at it. */
        free(b);
        if (mprotect(page, PAGE, PROT_READ) != 0) {
            perror("mprotect");
            return 1;
        }
        void *q = NULL;
        if (posix_memalign(&q, 64, 3 * PAGE) != 0 || (char *)q > page ||
            (char *)q + 3 * PAGE < page + PAGE) {
            fprintf(stderr, "posix_memalign did not hand the block out again\n");
            return 1;
        }
    } else {
        if (mprotect(page, PAGE, PROT_READ) != 0) {
            perror("mprotect");
            return 1;
        }
        free(b); /* its fill faults on the page: the handler allocates */
    }
    if (from_handler == NULL) {
        fprintf(stderr, "the handler did not allocate: the free wrote nothing to the page\n");
        return 1;
    }
    announce(from_handler);
    free(from_handler);
    free(from_handler);
    return survived();
}
