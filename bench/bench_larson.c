/*
 * bench_larson.c — a server simulation in the style of Larson and Krishnan's
 * benchmark: worker threads each keep a set of live blocks of random sizes and
 * keep replacing random ones, and the sets are handed from thread to thread.
 *
 *   bench_larson THREADS [OPS [ROUNDS [SLOTS [MIN [MAX]]]]]
 *
 *   THREADS  lanes running at once (default 2)
 *   OPS      replacements in all, split evenly over lanes and rounds
 *            (default 8,000,000)
 *   ROUNDS   threads per lane, one after the other (default 20)
 *   SLOTS    live blocks per lane (default 1000)
 *   MIN MAX  block sizes, uniform (default 8..1024)
 *
 * The main thread allocates each lane's initial blocks. A lane's thread does
 * its share of replacements (pick a random slot, check and free its block,
 * allocate a new one and tag it), then starts the lane's next thread and
 * exits; the successor inherits the slots, so it frees blocks allocated by a
 * thread that is gone (cross-thread frees into an exited thread's memory), and
 * a lane sees ROUNDS thread starts and exits. Time: from the first thread start
 * to the end of the last round of every lane; blocks still live at the end are
 * freed outside the timing.
 */
#define BENCH_PROG "bench_larson"
#include "bench_common.h"

#include <stdatomic.h>

struct lane {
	unsigned id;
	unsigned rounds_left;  /* written by the lane's current thread only */
	uint64_t ops;          /* replacements per round; never changes */
	size_t min, max;       /* never change */
	unsigned nslots;       /* never changes */
	unsigned char **slot;  /* owned by the lane's current thread */
	size_t *size;
	uint64_t rng;
	uint64_t check;
	pthread_t prev;        /* the thread that started this one; joined first */
	int has_prev;
	pthread_t last;        /* written by a lane thread when it starts its
	                        * successor: the newest thread, for main to join */
};

/* Lanes that finished their last round; main waits for all of them. */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static unsigned lanes_done;

/* The tag of a block: the low byte of its slot number plus its lane. */
static inline unsigned char tag_of(const struct lane *l, unsigned s)
{
	return (unsigned char)(s + l->id * 31u);
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	/* The predecessor wrote everything it did before it returned; joining it
	 * makes that visible here (and reaps it). */
	if (l->has_prev)
		pthread_join(l->prev, NULL);

	/* The loop works on locals: the lanes sit side by side in one array, and
	 * writing the generator's state there on every iteration would make the
	 * harness itself false-share a cache line between lanes. */
	uint64_t check = 0, rng = l->rng;
	unsigned char **slot = l->slot;
	size_t *slot_size = l->size;
	for (uint64_t i = 0; i < l->ops; i++) {
		uint32_t r = (uint32_t)(xorshift64(&rng) >> 32);
		unsigned s = below(r, l->nslots);
		unsigned char tag = tag_of(l, s);
		unsigned char *old = slot[s];
		if (bench_unlikely(old[0] != tag || old[slot_size[s] - 1] != tag))
			bench_corrupt("larson", i, old[0], tag);
		check += old[slot_size[s] - 1];
		free(old);
		size_t size = between(&rng, l->min, l->max);
		unsigned char *p = xmalloc(size);
		p[0] = tag;
		p[size - 1] = tag;
		slot[s] = p;
		slot_size[s] = size;
	}
	l->rng = rng;
	l->check += check;

	if (--l->rounds_left > 0) {
		pthread_t next;
		l->prev = pthread_self();
		l->has_prev = 1;
		bench_spawn(&next, lane_main, l);
		/* The successor joins us before it reads l->last; main reads it after
		 * the lane is done. */
		l->last = next;
		return NULL;
	}
	pthread_mutex_lock(&done_mu);
	lanes_done++;
	pthread_cond_signal(&done_cv);
	pthread_mutex_unlock(&done_mu);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_larson THREADS [OPS [ROUNDS [SLOTS [MIN [MAX]]]]]\n"
	                "  (defaults: OPS 8000000 in all, ROUNDS 20, SLOTS 1000, sizes 8..1024)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 7)
		return usage();
	unsigned threads = (unsigned)arg_u64(argc, argv, 1, 2, "THREADS");
	uint64_t ops = arg_u64(argc, argv, 2, 8000000, "OPS");
	unsigned rounds = (unsigned)arg_u64(argc, argv, 3, 20, "ROUNDS");
	unsigned nslots = (unsigned)arg_u64(argc, argv, 4, 1000, "SLOTS");
	size_t min = arg_u64(argc, argv, 5, 8, "MIN");
	size_t max = arg_u64(argc, argv, 6, 1024, "MAX");
	if (threads == 0 || threads > 256 || rounds == 0 || nslots == 0 || min == 0 || max < min)
		return usage();

	struct lane *lanes = calloc(threads, sizeof *lanes);
	if (lanes == NULL)
		bench_die("out of memory");
	for (unsigned t = 0; t < threads; t++) {
		struct lane *l = &lanes[t];
		*l = (struct lane){.id = t, .rounds_left = rounds, .ops = ops / threads / rounds,
		                   .min = min, .max = max, .nslots = nslots, .rng = bench_seed(t)};
		l->slot = xmalloc(nslots * sizeof *l->slot);
		l->size = xmalloc(nslots * sizeof *l->size);
		for (unsigned s = 0; s < nslots; s++) {
			l->size[s] = between(&l->rng, min, max);
			l->slot[s] = xmalloc(l->size[s]);
			l->slot[s][0] = l->slot[s][l->size[s] - 1] = tag_of(l, s);
		}
	}

	/* first[t] is main's own handle: a lane's first thread may already be
	 * writing lanes[t].last while pthread_create stores the handle. */
	pthread_t *first = xmalloc(threads * sizeof *first);
	double t0 = now_ms();
	for (unsigned t = 0; t < threads; t++)
		bench_spawn(&first[t], lane_main, &lanes[t]);
	pthread_mutex_lock(&done_mu);
	while (lanes_done < threads)
		pthread_cond_wait(&done_cv, &done_mu);
	pthread_mutex_unlock(&done_mu);
	double ms = now_ms() - t0;

	for (unsigned t = 0; t < threads; t++) {
		struct lane *l = &lanes[t];
		/* With one round the first thread is the last; otherwise its
		 * successor has joined it already. */
		pthread_join(rounds == 1 ? first[t] : l->last, NULL);
		for (unsigned s = 0; s < nslots; s++)
			free(l->slot[s]);
		free(l->slot);
		free(l->size);
		bench_sink += l->check;
	}
	free(lanes);
	free(first);
	bench_result("larson", ms, "threads=%u ops=%" PRIu64 " rounds=%u slots=%u min=%zu max=%zu",
	             threads, ops, rounds, nslots, min, max);
	return 0;
}
