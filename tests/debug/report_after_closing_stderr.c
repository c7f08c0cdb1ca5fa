/* A program that closes its stderr, as xz does before it exits, then loses a
 * block and frees another twice (run with EBB_DEBUG_ON_ERROR=continue and
 * EBB_DEBUG_LOG set). Both reports, the double free and the leak report at
 * exit, must reach the log file; written to stderr they were lost. fd 2 is
 * then taken by a file of the program's own, which no report may touch. */
#include <fcntl.h>
#include <unistd.h>

#include "fault.h"

static char *lost;

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    lost = allocate_victim(77);
    char *p = allocate_victim(24);
    announce(p);
    close(2);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644); /* the program's file, as fd 2 */
    if (fd != 2)
        return 3;
    free(p);
    free(p);
    lost = NULL;
    scrub_stack();
    if (write(fd, "program data\n", 13) != 13)
        return 4;
    return survived();
}
