/*
 * bench_waves.c — short-lived threads in waves: a server that starts a thread
 * per request, or a job runner that starts a batch of workers and joins them,
 * where each thread allocates blocks of every size, hands some to others
 * through a shared table, and exits. Memory a finished thread freed is only
 * cheap if the next wave reuses it; faulting fresh pages in for every wave
 * costs system time and peak RSS.
 *
 *   bench_waves [THREADS [WAVE [OPS]]]
 *
 *   THREADS  threads in all (default 2,000)
 *   WAVE     threads started together, then joined (default 200)
 *   OPS      operations per thread (default 300)
 *
 * Each operation, chosen at random: allocate a block and swap it into one of
 * 4,096 shared slots (the block it displaces, another thread's as a rule, is
 * checked and freed); allocate a block and keep it (at most 64 kept); or take
 * a kept block and either free it or realloc it to a new size. Sizes: 70% up
 * to 256 B, 25% up to 16 KiB, 4% up to 512 KiB, 1% up to 4 MiB; a block is
 * allocated by malloc, calloc, posix_memalign (64 B .. 2 KiB) or a realloc of
 * a smaller block, and filled with one byte, which every free, realloc and
 * swap checks. A thread frees what it kept before it exits; the shared slots
 * are freed at the end, outside the timing.
 *
 * Time: from the first thread start to the last join. Also printed: the
 * process's minor page faults in that time (minflt), the measure of memory
 * faulted in again.
 */
#define BENCH_PROG "bench_waves"
#include "bench_common.h"

#include <stdatomic.h>
#include <sys/resource.h>

#define SLOTS 4096
#define KEPT_MAX 64

static _Atomic(unsigned char *) slots[SLOTS];
static uint64_t ops_per_thread;

/* A block starts with its size; every byte after it holds one value. */
static size_t block_size(uint64_t *rng)
{
	unsigned r = (unsigned)between(rng, 0, 99);
	size_t hi = r < 70 ? 256 : r < 95 ? 16 * KIB : r < 99 ? 512 * KIB : 4 * MIB;
	return between(rng, 16, hi);
}

static void block_check(const unsigned char *p, uint64_t where)
{
	size_t n;
	memcpy(&n, p, sizeof n);
	for (size_t i = sizeof n + 1; i < n; i += 61)
		if (bench_unlikely(p[i] != p[sizeof n]))
			bench_corrupt("waves", where, p[i], p[sizeof n]);
	if (bench_unlikely(p[n - 1] != p[sizeof n]))
		bench_corrupt("waves", where, p[n - 1], p[sizeof n]);
}

static void block_fill(unsigned char *p, size_t n, unsigned char v)
{
	memcpy(p, &n, sizeof n);
	memset(p + sizeof n, v, n - sizeof n);
}

static unsigned char *block_new(uint64_t *rng)
{
	size_t n = block_size(rng);
	unsigned char *p = NULL;
	switch (between(rng, 0, 3)) {
	case 0:
		p = malloc(n);
		break;
	case 1:
		p = calloc(1, n);
		break;
	case 2:
		if (posix_memalign((void **)&p, (size_t)64 << between(rng, 0, 5), n) != 0)
			p = NULL;
		break;
	default:
		p = realloc(xmalloc(n / 2 + 8), n);
		break;
	}
	if (p == NULL)
		bench_die("allocation of %zu bytes failed", n);
	block_fill(p, n, (unsigned char)xorshift64(rng));
	return p;
}

static void *worker(void *arg)
{
	uint64_t rng = bench_seed((unsigned)(uintptr_t)arg);
	unsigned char *kept[KEPT_MAX];
	unsigned nkept = 0;
	for (uint64_t i = 0; i < ops_per_thread; i++) {
		unsigned op = (unsigned)between(&rng, 0, 2);
		if (op == 0) {
			unsigned char *old = atomic_exchange(&slots[between(&rng, 0, SLOTS - 1)], block_new(&rng));
			if (old) {
				block_check(old, i);
				free(old);
			}
		} else if (op == 1 && nkept < KEPT_MAX) {
			kept[nkept++] = block_new(&rng);
		} else if (nkept > 0) {
			unsigned k = (unsigned)between(&rng, 0, nkept - 1);
			block_check(kept[k], i);
			if (between(&rng, 0, 1)) {
				size_t n = block_size(&rng), old_n;
				memcpy(&old_n, kept[k], sizeof old_n);
				unsigned char v = kept[k][sizeof old_n];
				unsigned char *q = realloc(kept[k], n);
				if (q == NULL)
					bench_die("realloc to %zu bytes failed", n);
				if (bench_unlikely(q[sizeof old_n] != v || q[(old_n < n ? old_n : n) - 1] != v))
					bench_corrupt("waves realloc", i, q[sizeof old_n], v);
				block_fill(q, n, v);
				kept[k] = q;
			} else {
				free(kept[k]);
				kept[k] = kept[--nkept];
			}
		}
	}
	for (unsigned k = 0; k < nkept; k++) {
		block_check(kept[k], ops_per_thread);
		free(kept[k]);
	}
	return NULL;
}

static long minor_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

int main(int argc, char **argv)
{
	uint64_t threads = arg_u64(argc, argv, 1, 2000, "THREADS");
	uint64_t wave = arg_u64(argc, argv, 2, 200, "WAVE");
	ops_per_thread = arg_u64(argc, argv, 3, 300, "OPS");
	if (threads == 0 || wave == 0 || wave > 10000)
		bench_die("THREADS must be at least 1, WAVE 1..10000");
	pthread_t *t = xmalloc(sizeof *t * wave);
	long faults0 = minor_faults();
	double t0 = now_ms();
	for (uint64_t started = 0; started < threads; started += wave) {
		uint64_t n = threads - started < wave ? threads - started : wave;
		for (uint64_t j = 0; j < n; j++)
			bench_spawn(&t[j], worker, (void *)(uintptr_t)(started + j + 1));
		for (uint64_t j = 0; j < n; j++)
			pthread_join(t[j], NULL);
	}
	double ms = now_ms() - t0;
	long faults = minor_faults() - faults0;
	for (size_t i = 0; i < SLOTS; i++) {
		unsigned char *p = atomic_exchange(&slots[i], NULL);
		if (p) {
			block_check(p, i);
			free(p);
		}
	}
	free(t);
	bench_result("waves", ms, "threads=%" PRIu64 " wave=%" PRIu64 " ops=%" PRIu64 " minflt=%ld",
	             threads, wave, ops_per_thread, faults);
	return 0;
}
