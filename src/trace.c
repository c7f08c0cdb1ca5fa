/*
 * trace.c — stack traces for debug mode: capture, a deduplicating registry of
 * compressed traces, and symbolization for reports.
 *
 * Capture. Debian's binaries have no frame pointers, so a frame-pointer walk
 * would stop or wander at the first such frame; the unwinder of libgcc
 * (_Unwind_Backtrace) reads the .eh_frame tables every binary carries and
 * does not allocate (it finds a module's tables with dl_iterate_phdr). Frames
 * inside ebb are dropped: those below the stack mark the outermost debug
 * function set (its canonical frame address), and
 * any frame of an allocator entry point (malloc, free, ebb_malloc, ...),
 * recognised by its function's start address, with everything before it.
 *
 * The registry. A trace is stored once: its return addresses as deltas from
 * the previous one (the first from 0), zigzag-encoded and written as
 * variable-length integers (7 bits a byte), so nearby addresses in one module
 * take 2-4 bytes instead of 8. Identical traces get the same 32-bit id (a hash
 * table of 64 Ki buckets chained through the entries). Entries live in 1 MiB
 * chunks mapped on demand and never freed: an id stays valid for the life of
 * the process. Lookups and inserts take one lock.
 *
 * Symbolization (reports only): the module of each address from
 * dl_iterate_phdr; the function from the module's ELF symbol table (.symtab,
 * which has the non-exported functions too, else .dynsym), read by mapping the
 * file; file:line from `addr2line` (binutils) run once per module per report,
 * when it is installed and the module has debug info. Costs: nothing at
 * capture time; a few milliseconds per report.
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unwind.h>

#include "internal.h"

/* ---------------------------------------------------------------------------
 * Capture
 * ------------------------------------------------------------------------- */
static const void *entry_points[64];
static size_t entry_count;

void trace_add_entry_point(const void *fn)
{
    if (entry_count < sizeof entry_points / sizeof entry_points[0])
        entry_points[entry_count++] = fn;
}

static bool is_entry_point(uintptr_t fn_start)
{
    for (size_t i = 0; i < entry_count; i++)
        if ((uintptr_t)entry_points[i] == fn_start)
            return true;
    return false;
}

typedef struct capture_s {
    uintptr_t *pcs;
    uintptr_t *slots; /* where each return address was found on the stack */
    int n, max;
    uintptr_t mark;   /* frames whose CFA is below this are ebb's */
    bool restart;     /* the previous frame was an entry point */
    bool cacheable;   /* every kept frame's slot holds its return address */
    int past;         /* frames walked after max was reached */
} capture_t;

static _Unwind_Reason_Code capture_step(struct _Unwind_Context *ctx, void *arg)
{
    capture_t *c = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (ip == 0)
        return _URC_END_OF_STACK;
    /* During _Unwind_Backtrace's callback the context's CFA is still that of
     * the frame below (the callee): the stack pointer of this frame at its
     * call. The frame that called ebb's outermost function sees exactly the
     * mark; everything deeper sees less. */
    if ((uintptr_t)_Unwind_GetCFA(ctx) < c->mark) {
        c->n = 0; /* still inside ebb */
        return _URC_NO_REASON;
    }
    if (c->restart) { /* everything so far was inside ebb */
        c->n = 0;
        c->restart = false;
        c->cacheable = false;
    }
    if (is_entry_point((uintptr_t)_Unwind_GetRegionStart(ctx))) {
        c->restart = true;
        return _URC_NO_REASON;
    }
    if (c->n < c->max) {
        /* The return address into this frame was pushed just below the
         * callee's CFA (x86-64); a frame where it is not (a signal frame)
         * makes the trace uncacheable. */
        uintptr_t slot = (uintptr_t)_Unwind_GetCFA(ctx) - sizeof(uintptr_t);
        if (*(const uintptr_t *)slot != ip)
            c->cacheable = false;
        c->slots[c->n] = slot;
        c->pcs[c->n++] = ip;
    }
    /* Keep walking a little past max: an entry point may still come. */
    return c->n >= c->max && ++c->past > 8 ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* ---------------------------------------------------------------------------
 * The capture cache. Unwinding costs microseconds; most allocations come from
 * a call site, and a call path, seen before. An entry remembers a trace by
 * where its frames' return addresses lay on the stack and what they were: the
 * first frame's slot (just below the mark) and value are the key, and a hit
 * re-reads every other slot and compares. Identical return addresses at the
 * identical stack addresses are the identical call chain, so a hit
 * returns the trace the unwinder would have found, without unwinding. An
 * entry serves only the thread that filled it (the same thread pointer means
 * the same stack: glibc keeps a thread's descriptor at the top of its stack),
 * so every slot read lies in the calling thread's own stack.
 * x86-64 only (elsewhere the return address is not kept at CFA - 8).
 *
 * Entries are written under cache_lock with a sequence count (odd while
 * written) and read without it: a reader that sees the count change, or odd,
 * treats the lookup as a miss.
 * ------------------------------------------------------------------------- */
#define CACHE_ENTRIES 2048

/* A trace recorded again (a cache hit): count it as trace_intern would. */
static void trace_count(uint32_t id);

typedef struct cache_entry_s {
    atomic_uint seq;
    uint32_t id;
    uintptr_t thread; /* whose stack the slots are in (thread_id_self) */
    uint8_t depth, max;
    uintptr_t ra[TRACE_DEPTH_MAX];
    uintptr_t slot[TRACE_DEPTH_MAX];
} cache_entry_t;

static cache_entry_t *cache;
static lock_t cache_lock = LOCK_INIT;

void trace_cache_init(void)
{
#if defined(__x86_64__)
    size_t bytes = (CACHE_ENTRIES * sizeof(cache_entry_t) + os_info.page_size - 1) &
                   ~(os_info.page_size - 1);
    cache = os_map_aligned(bytes, os_info.page_size, 0); /* NULL: no cache */
#endif
}

static size_t cache_index(uintptr_t slot, uintptr_t ra)
{
    uint64_t h = (slot ^ (ra * 0x9E3779B97F4A7C15ull)) * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 40) % CACHE_ENTRIES;
}

/* A hit's trace id, or 0. */
ebb_racy_reader static uint32_t cache_lookup(uintptr_t key_slot, int max)
{
    uintptr_t key_ra = *(const uintptr_t *)key_slot;
    cache_entry_t *e = &cache[cache_index(key_slot, key_ra)];
    unsigned seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (seq & 1)
        return 0;
    const volatile cache_entry_t *v = e;
    int depth = v->depth;
    if (v->max != max || depth == 0 || depth > max || v->slot[0] != key_slot ||
        v->ra[0] != key_ra || v->thread != thread_id_self())
        return 0;
    for (int k = 1; k < depth; k++)
        if (*(const uintptr_t *)v->slot[k] != v->ra[k])
            return 0;
    uint32_t id = v->id;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
        return 0;
    return id;
}

static void cache_store(const uintptr_t *pcs, const uintptr_t *slots, int n, int max, uint32_t id)
{
    cache_entry_t *e = &cache[cache_index(slots[0], pcs[0])];
    lock_acquire(&cache_lock);
    unsigned seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->depth = (uint8_t)n;
    e->max = (uint8_t)max;
    e->id = id;
    e->thread = thread_id_self();
    memcpy(e->ra, pcs, (size_t)n * sizeof pcs[0]);
    memcpy(e->slot, slots, (size_t)n * sizeof slots[0]);
    atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
    lock_release(&cache_lock);
}

uint32_t trace_capture_id(int max, uintptr_t mark)
{
    if (max <= 0)
        return 0;
    if (cache && mark != 0) {
        uint32_t id = cache_lookup(mark - sizeof(uintptr_t), max);
        if (id) {
            trace_count(id);
            return id;
        }
    }
    uintptr_t pcs[TRACE_DEPTH_MAX + 16], slots[TRACE_DEPTH_MAX + 16];
    capture_t c = {.pcs = pcs, .slots = slots, .n = 0, .mark = mark, .cacheable = true,
                   .max = max > TRACE_DEPTH_MAX ? TRACE_DEPTH_MAX : max};
    _Unwind_Backtrace(capture_step, &c);
    if (c.restart)
        c.n = 0;
    int n = c.n < max ? c.n : max;
    uint32_t id = trace_intern(pcs, n);
    if (id && cache && mark != 0 && c.cacheable && n > 0 && slots[0] == mark - sizeof(uintptr_t))
        cache_store(pcs, slots, n, max, id);
    return id;
}

/* ---------------------------------------------------------------------------
 * The registry
 * ------------------------------------------------------------------------- */
#define TRACE_BUCKETS   65536
#define TRACE_CHUNK     ((size_t)1 << 20)
#define TRACE_CHUNKS    1024 /* ids: chunk index << 20 | offset, so 1 GiB at most */

typedef struct trace_entry_s {
    uint32_t next; /* the next id in this bucket, 0 at the end */
    uint32_t hash;
    uint16_t len;  /* bytes of code below */
    uint8_t depth;
    uint8_t code[];
} trace_entry_t;

static lock_t registry_lock = LOCK_INIT;
static uint32_t buckets[TRACE_BUCKETS];
static uint8_t *chunks[TRACE_CHUNKS];
static size_t chunk_count, chunk_used;
static atomic_size_t registry_bytes;   /* entries stored (their chunks' used part) */
static atomic_size_t raw_bytes;        /* 8 bytes per frame of every trace interned */
static atomic_size_t traces_interned;

static size_t encode(const uintptr_t *pcs, int n, uint8_t *out)
{
    size_t len = 0;
    uintptr_t prev = 0;
    for (int i = 0; i < n; i++) {
        int64_t delta = (int64_t)(pcs[i] - prev);
        uint64_t z = ((uint64_t)delta << 1) ^ (uint64_t)(delta >> 63); /* zigzag */
        prev = pcs[i];
        do {
            uint8_t byte = z & 0x7f;
            z >>= 7;
            out[len++] = (uint8_t)(byte | (z ? 0x80 : 0));
        } while (z);
    }
    return len;
}

static int decode(const uint8_t *code, size_t len, int depth, uintptr_t *pcs, int max)
{
    size_t at = 0;
    uintptr_t prev = 0;
    int n = 0;
    while (n < depth && n < max && at < len) {
        uint64_t z = 0;
        unsigned shift = 0;
        while (at < len) {
            uint8_t byte = code[at++];
            z |= (uint64_t)(byte & 0x7f) << shift;
            shift += 7;
            if (!(byte & 0x80))
                break;
        }
        int64_t delta = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        prev += (uintptr_t)delta;
        pcs[n++] = prev;
    }
    return n;
}

static trace_entry_t *entry_of(uint32_t id)
{
    size_t chunk = id >> 20, off = id & (TRACE_CHUNK - 1);
    if (id == 0 || chunk >= chunk_count)
        return NULL;
    return (trace_entry_t *)(chunks[chunk] + off);
}

/* Room for `size` bytes (8-aligned); 0 when out of memory. Lock held. */
static uint32_t registry_reserve(size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if (chunk_count == 0 || chunk_used + size > TRACE_CHUNK) {
        if (chunk_count == TRACE_CHUNKS)
            return 0;
        uint8_t *c = os_map_aligned(TRACE_CHUNK, os_info.page_size, 0);
        if (c == NULL)
            return 0;
        chunks[chunk_count++] = c;
        chunk_used = 8; /* id 0 means "no trace" */
    }
    uint32_t id = (uint32_t)((chunk_count - 1) << 20 | chunk_used);
    chunk_used += size;
    atomic_fetch_add_explicit(&registry_bytes, size, memory_order_relaxed);
    return id;
}

uint32_t trace_intern(const uintptr_t *pcs, int n)
{
    if (n <= 0)
        return 0;
    uint8_t code[TRACE_DEPTH_MAX * 10];
    size_t len = encode(pcs, n, code);
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ code[i]) * 16777619u;
    atomic_fetch_add_explicit(&raw_bytes, (size_t)n * 8, memory_order_relaxed);
    atomic_fetch_add_explicit(&traces_interned, 1, memory_order_relaxed);
    lock_acquire(&registry_lock);
    uint32_t *head = &buckets[hash % TRACE_BUCKETS];
    for (uint32_t id = *head; id;) {
        trace_entry_t *e = entry_of(id);
        if (e->hash == hash && e->len == len && e->depth == n && memcmp(e->code, code, len) == 0) {
            lock_release(&registry_lock);
            return id;
        }
        id = e->next;
    }
    uint32_t id = registry_reserve(sizeof(trace_entry_t) + len);
    if (id) {
        trace_entry_t *e = entry_of(id);
        e->hash = hash;
        e->len = (uint16_t)len;
        e->depth = (uint8_t)n;
        memcpy(e->code, code, len);
        e->next = *head;
        *head = id;
    }
    lock_release(&registry_lock);
    return id;
}

ebb_racy_reader static void trace_count(uint32_t id)
{
    trace_entry_t *e = entry_of(id); /* ids are never freed: no lock needed */
    atomic_fetch_add_explicit(&raw_bytes, e ? (size_t)e->depth * 8 : 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&traces_interned, 1, memory_order_relaxed);
}

int trace_get(uint32_t id, uintptr_t *pcs, int max)
{
    lock_acquire(&registry_lock);
    trace_entry_t *e = entry_of(id);
    int n = e ? decode(e->code, e->len, e->depth, pcs, max) : 0;
    lock_release(&registry_lock);
    return n;
}

void trace_fork_lock(void)
{
    lock_acquire(&registry_lock);
}

void trace_fork_unlock(void)
{
    lock_release(&registry_lock);
}

void trace_registry_counts(size_t *stored, size_t *raw, size_t *traces)
{
    *stored = atomic_load_explicit(&registry_bytes, memory_order_relaxed);
    *raw = atomic_load_explicit(&raw_bytes, memory_order_relaxed);
    *traces = atomic_load_explicit(&traces_interned, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Symbolization
 * ------------------------------------------------------------------------- */
typedef struct module_s {
    uintptr_t pc;
    uintptr_t bias;
    char path[256];
    bool found;
} module_t;

static int module_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    module_t *m = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (m->pc >= start && m->pc < start + ph->p_memsz) {
            m->bias = info->dlpi_addr;
            const char *name = info->dlpi_name;
            if (name && name[0]) {
                size_t len = strlen(name);
                if (len >= sizeof m->path)
                    len = sizeof m->path - 1;
                memcpy(m->path, name, len);
                m->path[len] = '\0';
            } else { /* the main program: its real path (addr2line runs elsewhere) */
                ssize_t len = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
                m->path[len > 0 ? len : 0] = '\0';
            }
            m->found = true;
            return 1;
        }
    }
    return 0;
}

/* The function containing file address `vaddr` in the ELF file `path`. */
static bool elf_function(const char *path, uintptr_t vaddr, char *name, size_t cap, uintptr_t *offset)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool found = false;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(ElfW(Ehdr))) {
        size_t size = (size_t)st.st_size;
        const uint8_t *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f != MAP_FAILED) {
            const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)f;
            bool ok = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shoff != 0 &&
                      eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= size;
            const ElfW(Shdr) *sh = ok ? (const ElfW(Shdr) *)(f + eh->e_shoff) : NULL;
            /* .symtab first (static functions too), then .dynsym. */
            for (int pass = 0; ok && pass < 2 && !found; pass++) {
                uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
                for (int i = 0; i < eh->e_shnum && !found; i++) {
                    if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
                        continue;
                    const ElfW(Shdr) *strs = &sh[sh[i].sh_link];
                    if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size)
                        continue;
                    const ElfW(Sym) *syms = (const ElfW(Sym) *)(f + sh[i].sh_offset);
                    size_t count = sh[i].sh_size / sizeof(ElfW(Sym));
                    for (size_t k = 0; k < count; k++) {
                        const ElfW(Sym) *s = &syms[k];
                        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 ||
                            vaddr < s->st_value || vaddr >= s->st_value + (s->st_size ? s->st_size : 1) ||
                            s->st_name >= strs->sh_size)
                            continue;
                        const char *n = (const char *)(f + strs->sh_offset + s->st_name);
                        size_t len = strnlen(n, strs->sh_size - s->st_name);
                        if (len >= cap)
                            len = cap - 1;
                        memcpy(name, n, len);
                        name[len] = '\0';
                        *offset = vaddr - s->st_value;
                        found = true;
                        break;
                    }
                }
            }
            munmap((void *)f, size);
        }
    }
    close(fd);
    return found;
}

/* addr2line for up to 64 addresses of one module: "file:line" per address
 * into lines[i] (empty when unknown). No allocation: vfork + execve and a
 * pipe; nothing at all if /usr/bin/addr2line is missing. */
#define ADDR2LINE "/usr/bin/addr2line"
static void file_lines(const char *path, const uintptr_t *vaddrs, int n, char lines[][160])
{
    for (int i = 0; i < n; i++)
        lines[i][0] = '\0';
    if (n == 0 || access(ADDR2LINE, X_OK) != 0)
        return;
    char args[64][24];
    char *argv[64 + 5];
    int a = 0;
    argv[a++] = (char *)ADDR2LINE;
    argv[a++] = (char *)"-e";
    argv[a++] = (char *)path;
    for (int i = 0; i < n && i < 64; i++) {
        text_format_hex(args[i], vaddrs[i]);
        argv[a++] = args[i];
    }
    argv[a] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return;
    static char *const no_env[] = {NULL};
    pid_t pid = vfork();
    if (pid == 0) {
        dup2(fds[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execve(ADDR2LINE, argv, no_env);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return;
    }
    char buf[64 * 160];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof buf - 1)
            break;
    }
    close(fds[0]);
    waitpid(pid, NULL, 0);
    buf[got] = '\0';
    int line = 0;
    char *s = buf;
    while (line < n && *s) {
        char *end = strchr(s, '\n');
        if (end)
            *end = '\0';
        if (strncmp(s, "??", 2) != 0) {
            size_t len = strlen(s);
            if (len >= 160)
                len = 159;
            memcpy(lines[line], s, len);
            lines[line][len] = '\0';
        }
        line++;
        if (!end)
            break;
        s = end + 1;
    }
}

void trace_print(text_t *t, uint32_t id, const char *indent)
{
    uintptr_t pcs[TRACE_DEPTH_MAX];
    int n = trace_get(id, pcs, TRACE_DEPTH_MAX);
    if (n == 0) {
        text_add(t, indent);
        text_add(t, "(no stack trace)\n");
        return;
    }
    module_t mods[TRACE_DEPTH_MAX];
    uintptr_t vaddr[TRACE_DEPTH_MAX];
    for (int i = 0; i < n; i++) {
        memset(&mods[i], 0, sizeof mods[i]);
        mods[i].pc = pcs[i] - 1; /* a return address: the call is just before */
        dl_iterate_phdr(module_find_cb, &mods[i]);
        vaddr[i] = mods[i].pc - mods[i].bias;
    }
    /* file:line, one addr2line run per module. (Static: reports are
     * serialized by debug.c.) */
    static char lines[TRACE_DEPTH_MAX][160];
    memset(lines, 0, sizeof lines);
    bool done[TRACE_DEPTH_MAX] = {false};
    for (int i = 0; i < n; i++) {
        if (done[i] || !mods[i].found)
            continue;
        uintptr_t batch[TRACE_DEPTH_MAX];
        int which[TRACE_DEPTH_MAX], k = 0;
        for (int j = i; j < n; j++) {
            if (!done[j] && mods[j].found && strcmp(mods[j].path, mods[i].path) == 0) {
                batch[k] = vaddr[j];
                which[k++] = j;
                done[j] = true;
            }
        }
        char got[TRACE_DEPTH_MAX][160];
        file_lines(mods[i].path, batch, k, got);
        for (int j = 0; j < k; j++)
            memcpy(lines[which[j]], got[j], sizeof got[j]);
    }
    for (int i = 0; i < n; i++) {
        text_add(t, indent);
        text_add(t, "#");
        text_add_u64(t, (uint64_t)i, 0);
        text_add(t, " ");
        text_add_hex(t, pcs[i]);
        char name[128];
        uintptr_t off = 0;
        if (mods[i].found && elf_function(mods[i].path, vaddr[i], name, sizeof name, &off)) {
            text_add(t, " in ");
            text_add(t, name);
            text_add(t, "+");
            text_add_u64(t, off + 1, 0);
        }
        if (lines[i][0]) {
            text_add(t, " at ");
            text_add(t, lines[i]);
        }
        if (mods[i].found) {
            text_add(t, " (");
            text_add(t, mods[i].path);
            text_add(t, ")");
        }
        text_add(t, "\n");
    }
}
