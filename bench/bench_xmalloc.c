/*
 * bench_xmalloc.c — producer/consumer: blocks allocated by some threads and
 * freed by others (in the style of xmalloc-test), the pattern of a pipeline
 * or a server that allocates a request in one thread and finishes it in
 * another.
 *
 *   bench_xmalloc PAIRS [N [MIN [MAX]]]
 *
 *   PAIRS    producer->consumer pairs, so 2 x PAIRS threads (default 1)
 *   N        blocks in all, split evenly over the pairs (default 8,000,000)
 *   MIN MAX  block sizes, uniform (default 8..512)
 *
 * A producer allocates its blocks, writes a tag into each and passes them to
 * its consumer through a ring; the consumer checks each tag and frees the
 * block. Every free is a cross-thread free. Time: from the first thread start
 * to the last join.
 *
 * The ring between one producer and one consumer:
 *   1. The producer writes the block and stores the pointer in
 *      slot[i % RING]. It publishes with a release store of head = i + 1 after
 *      every BATCH items, so a consumer that loads (acquire) head > i also sees
 *      the slot and the block's tag.
 *   2. The consumer, for each i below the head it saw, reads the slot, checks
 *      and frees the block, and publishes with a release store of tail = i + 1
 *      after every BATCH items, so its read of a slot happens before the
 *      producer reuses the slot.
 *   3. The producer reuses slot i % RING only once i - tail < RING, with tail
 *      loaded with acquire (pairs with 2).
 *   4. Before either side waits for the other, it publishes all it has done
 *      (head = i, resp. tail = i); otherwise each could wait for the other's
 *      unpublished part of a batch, for ever.
 * Batches, and caching the other side's index (reloaded only when the ring
 * looks full or empty), keep the ring's own cache-line traffic small, so the
 * time measured is the allocator's.
 */
#define BENCH_PROG "bench_xmalloc"
#include "bench_common.h"

#include <stdatomic.h>

#define RING  1024 /* both powers of two, BATCH < RING */
#define BATCH 32

struct pair {
	_Alignas(64) _Atomic uint64_t head; /* written by the producer only */
	_Alignas(64) _Atomic uint64_t tail; /* written by the consumer only */
	_Alignas(64) unsigned char *slot[RING];
	uint64_t n;        /* blocks this pair passes; never changes */
	size_t min, max;   /* never change */
	unsigned id;
	uint64_t check;    /* written by the consumer */
};

static inline unsigned char tag_of(uint64_t i)
{
	return (unsigned char)(i * 7 + 1);
}

static void *consumer_main(void *arg)
{
	struct pair *q = arg;
	uint64_t head_seen = 0, check = 0;
	unsigned spins = 0;
	for (uint64_t i = 0; i < q->n; i++) {
		if (i >= head_seen) {
			atomic_store_explicit(&q->tail, i, memory_order_release); /* step 4 */
			while ((head_seen = atomic_load_explicit(&q->head, memory_order_acquire)) <= i)
				spin_wait(&spins);
		}
		unsigned char *p = q->slot[i & (RING - 1)];
		if (bench_unlikely(p[0] != tag_of(i)))
			bench_corrupt("xmalloc", i, p[0], tag_of(i));
		check += p[0];
		free(p);
		if (((i + 1) & (BATCH - 1)) == 0)
			atomic_store_explicit(&q->tail, i + 1, memory_order_release);
	}
	q->check = check;
	return NULL;
}

static void *producer_main(void *arg)
{
	struct pair *q = arg;
	uint64_t rng = bench_seed(q->id);
	uint64_t tail_seen = 0;
	unsigned spins = 0;
	for (uint64_t i = 0; i < q->n; i++) {
		size_t size = between(&rng, q->min, q->max);
		unsigned char *p = xmalloc(size);
		p[0] = tag_of(i);
		p[size - 1] = 0;
		if (i - tail_seen >= RING) {
			atomic_store_explicit(&q->head, i, memory_order_release); /* step 4 */
			while (i - (tail_seen = atomic_load_explicit(&q->tail, memory_order_acquire)) >= RING)
				spin_wait(&spins);
		}
		q->slot[i & (RING - 1)] = p;
		if (((i + 1) & (BATCH - 1)) == 0)
			atomic_store_explicit(&q->head, i + 1, memory_order_release);
	}
	atomic_store_explicit(&q->head, q->n, memory_order_release);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_xmalloc PAIRS [N [MIN [MAX]]]\n"
	                "  (defaults: N 8000000 blocks in all, sizes 8..512)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 5)
		return usage();
	unsigned pairs = (unsigned)arg_u64(argc, argv, 1, 1, "PAIRS");
	uint64_t n = arg_u64(argc, argv, 2, 8000000, "N");
	size_t min = arg_u64(argc, argv, 3, 8, "MIN");
	size_t max = arg_u64(argc, argv, 4, 512, "MAX");
	if (pairs == 0 || pairs > 128 || n == 0 || min == 0 || max < min)
		return usage();

	struct pair *q = aligned_alloc(64, pairs * sizeof *q);
	pthread_t *t = xmalloc(2 * pairs * sizeof *t);
	if (q == NULL)
		bench_die("out of memory");
	for (unsigned k = 0; k < pairs; k++) {
		memset(&q[k], 0, sizeof q[k]);
		q[k].n = n / pairs;
		q[k].min = min;
		q[k].max = max;
		q[k].id = k;
	}

	double t0 = now_ms();
	for (unsigned k = 0; k < pairs; k++) {
		bench_spawn(&t[2 * k], consumer_main, &q[k]);
		bench_spawn(&t[2 * k + 1], producer_main, &q[k]);
	}
	for (unsigned k = 0; k < 2 * pairs; k++)
		pthread_join(t[k], NULL);
	double ms = now_ms() - t0;

	for (unsigned k = 0; k < pairs; k++)
		bench_sink += q[k].check;
	free(q);
	free(t);
	bench_result("xmalloc", ms, "pairs=%u n=%" PRIu64 " min=%zu max=%zu", pairs, n, min, max);
	return 0;
}
