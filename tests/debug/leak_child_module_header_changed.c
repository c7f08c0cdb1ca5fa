/* A forked child's leak report walks the loader's list of modules itself and
 * reads each one's ELF header for its RELRO region (src/leak.c,
 * scan_relro_in_child). Here the child overwrites the ELF magic of the C
 * library's header in its own memory (as a module half-unloaded under the
 * walk would read), loses a block of 30 bytes from lose_in_child, and exits:
 * its report cannot list that module's RELRO region, and must say it is
 * incomplete. The parent exits with the child's status. */
#include "fault.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>

__attribute__((noinline)) static void lose_in_child(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(30) ^ 0x5555555555555555ull;
    (void)hidden;
}

int main(void)
{
    Dl_info info;
    if (dladdr((void *)printf, &info) == 0 || info.dli_fbase == NULL) {
        printf("no module header found\n");
        return 2;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        printf("no fork\n");
        return 2;
    }
    if (child == 0) {
        unsigned char *header = info.dli_fbase;
        if (mprotect(header, 4096, PROT_READ | PROT_WRITE) != 0 || memcmp(header, "\177ELF", 4) != 0) {
            printf("the header cannot be changed here\n");
            _exit(2);
        }
        header[1] = 'X';
        lose_in_child();
        scrub_stack();
        exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
        printf("the child did not exit\n");
        return 2;
    }
    printf("child status=%d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
