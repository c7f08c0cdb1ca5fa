/*
 * bench_core.c — the core micro-benchmarks of ebb's benchmark suite.
 *
 * One program, three workloads chosen by argv, each timed with CLOCK_MONOTONIC
 * around its loop only (process start, allocator start-up and the final cleanup
 * are outside the timer):
 *
 *   bench_core pair SIZE [N]   single thread, N malloc/free pairs of SIZE bytes
 *   bench_core mixed [N]       single thread, N random-size replacements
 *   bench_core xthread [N]     two threads, N blocks allocated by one thread
 *                              and freed by the other
 *
 * The program calls plain malloc/free: it measures whatever allocator the
 * process has, so `LD_PRELOAD=build/libebb.so bench_core ...` measures ebb and
 * no preload measures glibc. bench/run_core.sh runs it against every allocator.
 *
 * Output is one line per run, `key=value` fields separated by spaces, e.g.
 *
 *   pair size=64 n=20000000 ms=301.234 ops_per_s=66393000 maxrss_kb=1776 malloc=libc.so.6
 *
 * where one "op" is one malloc plus one free, maxrss_kb is the process's peak
 * resident set (getrusage), and malloc= names the shared object that provides
 * `malloc` in this process, so a preload that silently failed is visible.
 *
 * Keeping the work alive: the file is compiled with -fno-builtin-malloc and
 * -fno-builtin-free, every block is written when allocated and read back
 * (and checked) before it is freed, and the checksums end in a volatile sink.
 * The checks also catch an allocator that hands out a live block twice: the
 * program then exits with status 3 and says where.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

/* Default iteration counts, sized for roughly 0.2-1 s per run on a 2-core VM. */
#define PAIR_N_DEFAULT    20000000ull
#define MIXED_N_DEFAULT   5000000ull
#define XTHREAD_N_DEFAULT 5000000ull

/* Live blocks in the `pair` ring. A power of two (the slot is i & mask). With a
 * ring, each new block is usually the one freed one iteration earlier, not the
 * one just freed, so the loop is not a degenerate same-pointer ping-pong. */
#define PAIR_RING 64

/* Slots in the `mixed` array: about 2.5 MB live at the default distribution. */
#define MIXED_SLOTS 1000

/* Capacity of the xthread hand-off ring, and how many items each side handles
 * between publications of its index; both powers of two, XT_BATCH < XT_RING. */
#define XT_RING  1024
#define XT_BATCH 32

/* The harness's checksums end here so no loop can be proven dead. */
static volatile uint64_t sink;

/* ---------------------------------------------------------------- helpers */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* xorshift64 (Marsaglia 13/7/17): deterministic, a few instructions, no libc. */
static inline uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/* A value in [0, n) from 32 random bits, by multiply-shift (no division, so the
 * harness adds the same few cycles under every allocator). */
static inline uint32_t below(uint32_t r, uint32_t n)
{
	return (uint32_t)(((uint64_t)r * n) >> 32);
}

static void die_oom(size_t size)
{
	fprintf(stderr, "bench_core: malloc(%zu) returned NULL\n", size);
	exit(2);
}

static void die_corrupt(const char *workload, uint64_t i, unsigned got, unsigned want)
{
	fprintf(stderr,
	        "bench_core: %s: block content changed while live at iteration %" PRIu64
	        " (byte 0x%02x, expected 0x%02x): the allocator handed out a live block\n",
	        workload, i, got, want);
	exit(3);
}

/* The file name (without directory) of the object that defines `malloc` for this
 * process: the first definition in global lookup order, i.e. a preload if any. */
static const char *malloc_provider(void)
{
	void *sym = dlsym(RTLD_DEFAULT, "malloc");
	Dl_info info;
	if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
		return "unknown";
	const char *slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

static long maxrss_kb(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_maxrss;
}

static void report(const char *workload, const char *extra, uint64_t n, double ms)
{
	double ops_per_s = ms > 0 ? (double)n / (ms / 1e3) : 0.0;
	printf("%s %sn=%" PRIu64 " ms=%.3f ops_per_s=%.0f maxrss_kb=%ld malloc=%s\n",
	       workload, extra, n, ms, ops_per_s, maxrss_kb(), malloc_provider());
}

/* ------------------------------------------------------------------- pair */

/* The timed loop of `pair` (noinline so bench/callgrind.sh can collect exactly
 * this function and what it calls). Each iteration allocates one block, then
 * frees the oldest of the PAIR_RING live blocks: one malloc and one free. The
 * block of iteration i carries the byte (uint8_t)i, checked when it is freed
 * PAIR_RING iterations later. */
NOINLINE uint64_t bench_pair_loop(unsigned char **ring, size_t size, uint64_t n)
{
	uint64_t check = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned slot = (unsigned)(i & (PAIR_RING - 1));
		unsigned char *p = malloc(size);
		if (__builtin_expect(p == NULL, 0))
			die_oom(size);
		p[0] = (unsigned char)i;
		unsigned char *old = ring[slot];
		unsigned char want = (unsigned char)(i - PAIR_RING);
		if (__builtin_expect(old[0] != want, 0))
			die_corrupt("pair", i, old[0], want);
		check += old[0];
		free(old);
		ring[slot] = p;
	}
	return check;
}

static int run_pair(size_t size, uint64_t n)
{
	static unsigned char *ring[PAIR_RING];
	if (size == 0) {
		fprintf(stderr, "bench_core: pair needs SIZE >= 1\n");
		return 2;
	}
	/* Fill the ring as if iterations -PAIR_RING..-1 had run. */
	for (unsigned k = 0; k < PAIR_RING; k++) {
		ring[k] = malloc(size);
		if (ring[k] == NULL)
			die_oom(size);
		ring[k][0] = (unsigned char)(k - PAIR_RING);
	}

	double t0 = now_ms();
	uint64_t check = bench_pair_loop(ring, size, n);
	double ms = now_ms() - t0;

	for (unsigned k = 0; k < PAIR_RING; k++)
		free(ring[k]);
	sink = check;

	char extra[48];
	snprintf(extra, sizeof extra, "size=%zu ", size);
	report("pair", extra, n, ms);
	return 0;
}

/* ------------------------------------------------------------------ mixed */

#define MIXED_SEED 0x9e3779b97f4a7c15ull

/* Size distribution of `mixed`: 15 of 16 requests are 8..1024 bytes (uniform),
 * 1 of 16 is 1025..65536 bytes (uniform). */
static inline size_t mixed_size(uint32_t r)
{
	if (r & 15)
		return 8 + below(r, 1024 - 8 + 1);
	return 1025 + below(r, 65536 - 1025 + 1);
}

/* The timed loop of `mixed`: each iteration picks a random slot, allocates a
 * block of random size for it, and frees the block the slot held (if any).
 * The first and last byte of each block carry the slot number, checked at
 * free time. */
NOINLINE uint64_t bench_mixed_loop(unsigned char **slots, size_t *sizes, uint64_t n)
{
	uint64_t state = MIXED_SEED;
	uint64_t check = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = xorshift64(&state);
		uint32_t slot = below((uint32_t)(r >> 32), MIXED_SLOTS);
		size_t size = mixed_size((uint32_t)r);
		unsigned char tag = (unsigned char)slot;

		unsigned char *p = malloc(size);
		if (__builtin_expect(p == NULL, 0))
			die_oom(size);
		p[0] = tag;
		p[size - 1] = tag;

		unsigned char *old = slots[slot];
		if (old != NULL) {
			size_t old_size = sizes[slot];
			if (__builtin_expect(old[0] != tag || old[old_size - 1] != tag, 0))
				die_corrupt("mixed", i, old[0] != tag ? old[0] : old[old_size - 1], tag);
			check += old[0];
			free(old);
		}
		slots[slot] = p;
		sizes[slot] = size;
	}
	return check;
}

static int run_mixed(uint64_t n)
{
	static unsigned char *slots[MIXED_SLOTS];
	static size_t sizes[MIXED_SLOTS];

	double t0 = now_ms();
	uint64_t check = bench_mixed_loop(slots, sizes, n);
	double ms = now_ms() - t0;

	for (unsigned k = 0; k < MIXED_SLOTS; k++)
		free(slots[k]);
	sink = check;
	report("mixed", "", n, ms);
	return 0;
}

/* ---------------------------------------------------------------- xthread */

/* Single-producer/single-consumer ring between the allocating (main) thread and
 * the freeing thread. Protocol:
 *   1. The producer writes the block (its first byte = (uint8_t)i) and stores
 *      the pointer in slot[i % XT_RING]. It publishes with a release store of
 *      head = i + 1 after every XT_BATCH items, so a consumer that loads (with
 *      acquire) head > i also sees the slot and the block's byte.
 *   2. The consumer, for each i < the head it has seen, reads the slot, checks
 *      and frees the block, and publishes with a release store of tail = i + 1
 *      after every XT_BATCH items, so its read of a slot happens before the
 *      producer reuses that slot.
 *   3. The producer reuses slot i % XT_RING only once i - tail < XT_RING, with
 *      tail loaded with acquire (pairs with 2).
 *   4. Before either side waits for the other, it first publishes all it has
 *      done (head = i, resp. tail = i); without this, each could wait for the
 *      other's unpublished part of a batch, for ever.
 * Publishing in batches and caching the other side's index (reloaded only when
 * the ring looks full or empty) keeps the ring's own cache-line traffic small
 * and steady, so the time measured is the allocator's: the blocks themselves
 * still move between the cores, as in any program that frees remotely. head
 * and tail sit on their own cache lines. */
static struct {
	_Alignas(64) _Atomic uint64_t head; /* written by the producer only */
	_Alignas(64) _Atomic uint64_t tail; /* written by the consumer only */
	_Alignas(64) unsigned char *slot[XT_RING];
	uint64_t n; /* set before the consumer starts; never changes after */
} xt;

#define XT_SEED 0x2545f4914f6cdd1dull

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Busy-wait step; yields the CPU now and then so that on an oversubscribed
 * (noisy, 2-core) machine the other side can still run. */
static inline void spin_wait(unsigned *spins)
{
	if ((++*spins & 127) == 0)
		sched_yield();
	else
		cpu_relax();
}

NOINLINE void *bench_xthread_consumer(void *arg)
{
	(void)arg;
	uint64_t n = xt.n;
	uint64_t head_seen = 0;
	uint64_t check = 0;
	unsigned spins = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (i >= head_seen) {
			atomic_store_explicit(&xt.tail, i, memory_order_release); /* step 4 */
			for (;;) {
				head_seen = atomic_load_explicit(&xt.head, memory_order_acquire);
				if (i < head_seen)
					break;
				spin_wait(&spins);
			}
		}
		unsigned char *p = xt.slot[i & (XT_RING - 1)];
		unsigned char want = (unsigned char)i;
		if (__builtin_expect(p[0] != want, 0))
			die_corrupt("xthread", i, p[0], want);
		check += p[0];
		free(p);
		if (((i + 1) & (XT_BATCH - 1)) == 0)
			atomic_store_explicit(&xt.tail, i + 1, memory_order_release);
	}
	sink = check;
	return NULL;
}

/* Producer: N blocks of 8..512 bytes (uniform, deterministic). */
NOINLINE void bench_xthread_producer(uint64_t n)
{
	uint64_t state = XT_SEED;
	uint64_t tail_seen = 0;
	unsigned spins = 0;
	for (uint64_t i = 0; i < n; i++) {
		size_t size = 8 + below((uint32_t)xorshift64(&state), 512 - 8 + 1);
		unsigned char *p = malloc(size);
		if (__builtin_expect(p == NULL, 0))
			die_oom(size);
		p[0] = (unsigned char)i;
		if (i - tail_seen >= XT_RING) {
			atomic_store_explicit(&xt.head, i, memory_order_release); /* step 4 */
			for (;;) {
				tail_seen = atomic_load_explicit(&xt.tail, memory_order_acquire);
				if (i - tail_seen < XT_RING)
					break;
				spin_wait(&spins);
			}
		}
		xt.slot[i & (XT_RING - 1)] = p;
		if (((i + 1) & (XT_BATCH - 1)) == 0)
			atomic_store_explicit(&xt.head, i + 1, memory_order_release);
	}
	atomic_store_explicit(&xt.head, n, memory_order_release);
}

static int run_xthread(uint64_t n)
{
	pthread_t consumer;
	xt.n = n;
	atomic_store_explicit(&xt.head, 0, memory_order_relaxed);
	atomic_store_explicit(&xt.tail, 0, memory_order_relaxed);

	/* Thread creation is inside the timer: starting a second heap is part of
	 * what a cross-thread workload costs, and it is microseconds against N. */
	double t0 = now_ms();
	int err = pthread_create(&consumer, NULL, bench_xthread_consumer, NULL);
	if (err != 0) {
		fprintf(stderr, "bench_core: pthread_create: %s\n", strerror(err));
		return 2;
	}
	bench_xthread_producer(n);
	pthread_join(consumer, NULL);
	double ms = now_ms() - t0;

	report("xthread", "", n, ms);
	return 0;
}

/* ------------------------------------------------------------------- main */

static int usage(void)
{
	fprintf(stderr,
	        "usage: bench_core pair SIZE [N]   N malloc/free pairs of SIZE bytes (default N=%llu)\n"
	        "       bench_core mixed [N]       N random-size replacements, 8 B..64 KiB (default %llu)\n"
	        "       bench_core xthread [N]     N blocks malloc'd in one thread, freed in another (default %llu)\n"
	        "The allocator measured is the process's malloc: select it with LD_PRELOAD.\n",
	        PAIR_N_DEFAULT, MIXED_N_DEFAULT, XTHREAD_N_DEFAULT);
	return 2;
}

/* Parses a positive decimal count; 0 on error. */
static uint64_t parse_count(const char *s)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0')
		return 0;
	return (uint64_t)v;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *w = argv[1];

	if (strcmp(w, "pair") == 0) {
		if (argc < 3 || argc > 4)
			return usage();
		uint64_t size = parse_count(argv[2]);
		uint64_t n = argc == 4 ? parse_count(argv[3]) : PAIR_N_DEFAULT;
		if (size == 0 || n == 0)
			return usage();
		return run_pair((size_t)size, n);
	}
	if (strcmp(w, "mixed") == 0 || strcmp(w, "xthread") == 0) {
		if (argc > 3)
			return usage();
		uint64_t n = argc == 3 ? parse_count(argv[2])
		                       : (w[0] == 'm' ? MIXED_N_DEFAULT : XTHREAD_N_DEFAULT);
		if (n == 0)
			return usage();
		return w[0] == 'm' ? run_mixed(n) : run_xthread(n);
	}
	return usage();
}
