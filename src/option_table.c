/*
 * option_table.c — every EBB_* variable: name, default, range, one line of
 * documentation. Read by options.c (the parser) and tools/ebbrun.c (--help).
 */
#include <stddef.h>

#include "options.h"

static const char *const purge_method_names[] = {"dontneed", "free", NULL};

const option_desc_t option_table[OPT_COUNT] = {
    [OPT_PURGE_DELAY] = {"EBB_PURGE_DELAY", 50, -1, 3600000, NULL, false,
                         "ms a free page waits before it is returned to the OS "
                         "(0: at once, -1: never)"},
    [OPT_PURGE_METHOD] = {"EBB_PURGE_METHOD", 0, 0, 1, purge_method_names, false,
                          "how pages are returned: dontneed (RSS drops at once) or "
                          "free (MADV_FREE: the kernel takes them under pressure)"},
    [OPT_UNMAP_DELAY] = {"EBB_UNMAP_DELAY", 1000, 0, 3600000, NULL, false,
                         "ms an entirely free segment or huge block stays mapped "
                         "(purged) before it is unmapped"},
    [OPT_BACKGROUND] = {"EBB_BACKGROUND", 1, 0, 1, NULL, false,
                        "1: a background thread purges when the program is idle; "
                        "0: purge only during allocator calls"},
    [OPT_STATS] = {"EBB_STATS", 0, 0, 1, NULL, false,
                   "1: print a report of what ebb holds (snapshot and size-class "
                   "table) when the process exits"},
    [OPT_STATS_FILE] = {"EBB_STATS_FILE", 0, 0, 0, NULL, true,
                        "append the reports and samples to this file instead of "
                        "stderr"},
    [OPT_STATS_INTERVAL] = {"EBB_STATS_INTERVAL", 0, 0, 86400000, NULL, false,
                            "ms between one-line samples printed by the background "
                            "thread (0: none; needs EBB_BACKGROUND=1)"},
};
