/*
 * bench_thread_start.c — the first malloc of a new thread while many other
 * threads are alive: what a thread pool or a server that starts a thread per
 * connection pays when the allocator sets up a thread's heap.
 *
 *   bench_thread_start [ALIVE [STARTS]]
 *
 *   ALIVE   threads kept alive (each has allocated one block), default 3,000
 *   STARTS  threads started one after the other beside them, each timing its
 *           first malloc and free; default 201
 *
 * Prints the median and the minimum of the STARTS first-malloc times (us),
 * and as ms the whole loop of starts and joins.
 */
#define BENCH_PROG "bench_thread_start"
#include "bench_common.h"

static pthread_barrier_t alive_barrier;

static void *stay_alive(void *arg)
{
	(void)arg;
	char *p = xmalloc(32);
	p[0] = 1;
	pthread_barrier_wait(&alive_barrier); /* everyone has a heap */
	pthread_barrier_wait(&alive_barrier); /* the measurement is done */
	bench_sink += (uint64_t)p[0];
	free(p);
	return NULL;
}

static void *first_malloc(void *arg)
{
	double *took_us = arg;
	double t0 = now_ms();
	char *p = xmalloc(32);
	*took_us = (now_ms() - t0) * 1000.0;
	p[0] = 2;
	bench_sink += (uint64_t)p[0];
	free(p);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t alive = arg_u64(argc, argv, 1, 3000, "ALIVE");
	uint64_t starts = arg_u64(argc, argv, 2, 201, "STARTS");
	if (starts == 0)
		bench_die("STARTS must be at least 1");
	pthread_barrier_init(&alive_barrier, NULL, (unsigned)alive + 1);
	pthread_attr_t small;
	pthread_attr_init(&small);
	pthread_attr_setstacksize(&small, 64 * KIB);
	pthread_t *t = xmalloc(sizeof *t * (alive ? alive : 1));
	for (uint64_t i = 0; i < alive; i++)
		if (pthread_create(&t[i], &small, stay_alive, NULL) != 0)
			bench_die("could not start thread %" PRIu64 " of %" PRIu64, i + 1, alive);
	pthread_barrier_wait(&alive_barrier);

	double *took = xmalloc(sizeof *took * starts);
	double t0 = now_ms();
	for (uint64_t i = 0; i < starts; i++) {
		pthread_t s;
		bench_spawn(&s, first_malloc, &took[i]);
		pthread_join(s, NULL);
	}
	double ms = now_ms() - t0;
	qsort(took, starts, sizeof *took, by_value);

	pthread_barrier_wait(&alive_barrier);
	for (uint64_t i = 0; i < alive; i++)
		pthread_join(t[i], NULL);
	bench_result("thread_start", ms, "alive=%" PRIu64 " starts=%" PRIu64 " first_malloc_us=%.2f min_us=%.2f",
		     alive, starts, took[starts / 2], took[0]);
	free(took);
	free(t);
	return 0;
}
