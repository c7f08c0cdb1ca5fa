/*
 * bench_thrash.c — false sharing induced by the allocator: small objects that
 * different threads write in a loop, and that the allocator may have placed in
 * one cache line (in the style of Hoard's cache-thrash and cache-scratch).
 *
 *   bench_thrash thrash|scratch THREADS [ITERS [WRITES [SIZE]]]
 *
 *   THREADS  worker threads (default 2)
 *   ITERS    object lifetimes in all, split evenly over the threads
 *            (default 200,000)
 *   WRITES   writes to every byte of an object during its lifetime (default 100)
 *   SIZE     object size in bytes (default 8)
 *
 * thrash (active false sharing): each thread repeatedly allocates an object,
 *   writes it WRITES times and frees it. An allocator that hands neighbouring
 *   small blocks to different threads makes their writes fight over a line.
 * scratch (passive false sharing): the main thread allocates one object per
 *   thread, back to back (so they share cache lines), and hands one to each
 *   thread; each thread writes its object, frees it (a cross-thread free), and
 *   then runs the thrash loop. An allocator that lets the freeing thread reuse
 *   the block it got from another thread keeps the threads on shared lines.
 *
 * The writes go through a volatile pointer so none is elided; their sum is
 * checked. Time: from the first thread start to the last join.
 */
#define BENCH_PROG "bench_thrash"
#include "bench_common.h"

struct worker {
	uint64_t iters;
	unsigned writes;
	size_t size;
	unsigned char *given; /* scratch: the object main allocated for us */
	uint64_t check;
	pthread_t thread;
};

/* Writes every byte of p `writes` times (each write depends on the last). */
static inline uint64_t hammer(volatile unsigned char *p, size_t size, unsigned writes)
{
	for (unsigned w = 0; w < writes; w++)
		for (size_t j = 0; j < size; j++)
			p[j] = (unsigned char)(p[j] + 1);
	uint64_t sum = 0;
	for (size_t j = 0; j < size; j++)
		sum += p[j];
	return sum;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t check = 0;
	if (w->given != NULL) {
		memset(w->given, 0, w->size);
		check += hammer(w->given, w->size, w->writes);
		free(w->given);
	}
	for (uint64_t i = 0; i < w->iters; i++) {
		unsigned char *p = xmalloc(w->size);
		memset(p, 0, w->size);
		uint64_t sum = hammer(p, w->size, w->writes);
		if (bench_unlikely(sum != (uint64_t)(unsigned char)w->writes * w->size))
			bench_corrupt("thrash", i, (unsigned)sum, (unsigned char)w->writes);
		check += sum;
		free(p);
	}
	w->check = check;
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_thrash thrash|scratch THREADS [ITERS [WRITES [SIZE]]]\n"
	                "  (defaults: ITERS 200000 in all, WRITES 100, SIZE 8)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 6)
		return usage();
	int scratch;
	if (strcmp(argv[1], "thrash") == 0)
		scratch = 0;
	else if (strcmp(argv[1], "scratch") == 0)
		scratch = 1;
	else
		return usage();
	unsigned threads = (unsigned)arg_u64(argc, argv, 2, 2, "THREADS");
	uint64_t iters = arg_u64(argc, argv, 3, 200000, "ITERS");
	unsigned writes = (unsigned)arg_u64(argc, argv, 4, 100, "WRITES");
	size_t size = arg_u64(argc, argv, 5, 8, "SIZE");
	if (threads == 0 || threads > 256 || iters == 0 || size == 0)
		return usage();

	struct worker *w = calloc(threads, sizeof *w);
	if (w == NULL)
		bench_die("out of memory");
	for (unsigned t = 0; t < threads; t++) {
		w[t] = (struct worker){.iters = iters / threads, .writes = writes, .size = size};
		if (scratch)
			w[t].given = xmalloc(size); /* back to back: neighbours in a line */
	}

	double t0 = now_ms();
	for (unsigned t = 0; t < threads; t++)
		bench_spawn(&w[t].thread, worker_main, &w[t]);
	for (unsigned t = 0; t < threads; t++)
		pthread_join(w[t].thread, NULL);
	double ms = now_ms() - t0;

	for (unsigned t = 0; t < threads; t++)
		bench_sink += w[t].check;
	free(w);
	bench_result(scratch ? "scratch" : "thrash", ms,
	             "threads=%u iters=%" PRIu64 " writes=%u size=%zu", threads, iters, writes, size);
	return 0;
}
