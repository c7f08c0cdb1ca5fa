/*
 * bench_seeds.c — memory-return scenarios taken from the seed bug reports in
 * the project's shared seeds (see docs/memory-return.md): does an allocator
 * give freed memory back to the OS once the program goes idle, and how fast
 * does it run the work that leads there?
 *
 * One program, one scenario per run, chosen by argv:
 *
 *   bench_seeds big      [IDLE_S [ITERS [LIVE]]]  8 threads, 1-8 MiB blocks
 *   bench_seeds medium   [IDLE_S [ITERS [LIVE]]]  8 threads, 64-512 KiB blocks
 *   bench_seeds rev1k    [IDLE_S [N]]             N x 1 KiB, freed in reverse
 *   bench_seeds rev512k  [IDLE_S [N]]             N x 512 KiB, freed in reverse
 *   bench_seeds prodcons [IDLE_S [N]]             4 producers -> 4 consumers
 *   bench_seeds fastmm   [IDLE_S [ITERS]]         8 threads, malloc(1..70000)
 *
 * Every scenario: read the anonymous RSS at the start, restart the kernel's
 * high-water mark of the resident set, start a monitor thread that samples the
 * anonymous RSS every 5 ms, do the work, then let every worker thread block on a
 * condition variable (alive, making no allocator calls) for IDLE_S seconds and
 * read the anonymous RSS again ("after idle"). Only then are the workers
 * released and joined.
 *
 * Anonymous RSS is the "Anonymous:" line of /proc/self/smaps_rollup, read with
 * open/read into a stack buffer: the readings themselves allocate nothing.
 * The peak (rss_peak_kb) is the larger of the kernel's high-water mark less
 * the file pages (bench_common.h, anon_hwm_kb) and the largest sample. The
 * samples alone (rss_peak_sampled_kb) miss peaks: 8 runnable workers on 2 CPUs
 * starve the monitor for most of a 30 ms run.
 *
 * Output, one line (see bench_common.h, bench_result):
 *
 *   big phase_ms=812.345 rss_start_kb=1536 rss_peak_kb=331000
 *       rss_peak_sampled_kb=329000 rss_idle_kb=2048
 *       idle_s=10 ms=812.345 check=... maxrss_kb=... malloc=libebb.so
 *
 * ms is the work from its start until every worker is parked (thread creation
 * included, the idle wait excluded); phase_ms is the timed core of the work
 * (for rev1k/rev512k the allocation+memset loop plus the reverse free loop
 * alone; for the threaded scenarios the same as ms).
 */
#define BENCH_PROG "bench_seeds"
#include "bench_common.h"

#include <stdatomic.h>

/* ---------------------------------------------------------------- monitor */

static atomic_long peak_kb;
static atomic_bool monitor_stop;

static void note_rss(long kb)
{
	long old = atomic_load_explicit(&peak_kb, memory_order_relaxed);
	while (kb > old &&
	       !atomic_compare_exchange_weak_explicit(&peak_kb, &old, kb, memory_order_relaxed,
	                                              memory_order_relaxed))
		;
}

static void *monitor_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&monitor_stop, memory_order_relaxed)) {
		note_rss(anon_rss_kb());
		sleep_ms(5);
	}
	return NULL;
}

/* ---------------------------------------------------------------- parking */

/* Workers that finished their work wait here until released. `parked` counts
 * them so the main thread knows when all are blocked. */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;   /* workers wait */
static pthread_cond_t all_cv = PTHREAD_COND_INITIALIZER;    /* main waits */
static int parked;
static int released;

static void park(void)
{
	pthread_mutex_lock(&park_mu);
	parked++;
	pthread_cond_signal(&all_cv);
	while (!released)
		pthread_cond_wait(&park_cv, &park_mu);
	pthread_mutex_unlock(&park_mu);
}

static void wait_all_parked(int n)
{
	pthread_mutex_lock(&park_mu);
	while (parked < n)
		pthread_cond_wait(&all_cv, &park_mu);
	pthread_mutex_unlock(&park_mu);
}

static void release_all(void)
{
	pthread_mutex_lock(&park_mu);
	released = 1;
	pthread_cond_broadcast(&park_cv);
	pthread_mutex_unlock(&park_mu);
}

/* The parked workers, joined once released. */
static pthread_t *joinable;
static unsigned n_joinable;

/* ------------------------------------------------------ big and medium */

#define BLOCK_THREADS 8
#define MAX_LIVE 1024

struct block_args {
	unsigned id;
	size_t lo, hi;
	unsigned iters, live;
	uint64_t sum;
};

static void *block_main(void *arg)
{
	struct block_args *a = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (a->id + 1);
	unsigned char *slot[MAX_LIVE] = {0};
	size_t slot_size[MAX_LIVE] = {0};
	uint64_t sum = 0;
	for (unsigned i = 0; i < a->iters; i++) {
		unsigned s = i % a->live;
		if (slot[s] != NULL) {
			sum += slot[s][slot_size[s] - 1];
			free(slot[s]);
		}
		size_t size = between(&rng, a->lo, a->hi);
		slot[s] = xmalloc(size);
		slot_size[s] = size;
		memset(slot[s], (int)(i & 0xff) | 1, size);
	}
	for (unsigned s = 0; s < a->live; s++) {
		if (slot[s] != NULL) {
			sum += slot[s][slot_size[s] - 1];
			free(slot[s]);
		}
	}
	a->sum = sum;
	park();
	return NULL;
}

static double run_blocks(size_t lo, size_t hi, unsigned iters, unsigned live)
{
	static struct block_args args[BLOCK_THREADS];
	static pthread_t t[BLOCK_THREADS];
	if (live == 0 || live > MAX_LIVE)
		bench_die("LIVE must be 1..1024");
	double t0 = now_ms();
	for (unsigned i = 0; i < BLOCK_THREADS; i++) {
		args[i] = (struct block_args){.id = i, .lo = lo, .hi = hi, .iters = iters, .live = live};
		bench_spawn(&t[i], block_main, &args[i]);
	}
	wait_all_parked(BLOCK_THREADS);
	double ms = now_ms() - t0;
	for (unsigned i = 0; i < BLOCK_THREADS; i++)
		bench_sink += args[i].sum;
	joinable = t;
	n_joinable = BLOCK_THREADS;
	return ms;
}

/* ------------------------------------------------------------- reverse */

static double run_reverse(size_t size, size_t n, double *phase_ms)
{
	unsigned char **p = xmalloc(n * sizeof *p);
	double t0 = now_ms();
	for (size_t i = 0; i < n; i++) {
		p[i] = xmalloc(size);
		memset(p[i], (int)(i & 0xff) | 1, size);
	}
	uint64_t sum = 0;
	for (size_t i = n; i-- > 0;) {
		sum += p[i][size - 1];
		free(p[i]);
	}
	double t1 = now_ms();
	bench_sink += sum;
	free(p);
	*phase_ms = t1 - t0;
	return now_ms() - t0;
}

/* ------------------------------------------------------------ prodcons */

#define PC_PAIRS 4
#define PC_RING  8192 /* per queue: 4 x 8192 x 256 B = 8 MiB live at most */

struct pc_queue {
	_Alignas(64) atomic_size_t head; /* next slot the consumer reads */
	_Alignas(64) atomic_size_t tail; /* next slot the producer writes */
	_Alignas(64) unsigned char *ring[PC_RING];
	size_t n;                        /* blocks this pair hands over */
	uint64_t sum;
};

static struct pc_queue pc_q[PC_PAIRS];

static void *producer_main(void *arg)
{
	struct pc_queue *q = arg;
	uint64_t rng = 0x2545f4914f6cdd1dull + (uint64_t)(q - pc_q);
	size_t tail = 0;
	for (size_t i = 0; i < q->n; i++) {
		size_t size = between(&rng, 16, 256);
		unsigned char *b = xmalloc(size);
		memset(b, (int)size, size); /* first byte: the size, low 8 bits */
		b[0] = (unsigned char)(size - 1);
		while (tail - atomic_load_explicit(&q->head, memory_order_acquire) >= PC_RING)
			sched_yield();
		q->ring[tail % PC_RING] = b;
		atomic_store_explicit(&q->tail, ++tail, memory_order_release);
	}
	park();
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct pc_queue *q = arg;
	size_t head = 0;
	uint64_t sum = 0;
	while (head < q->n) {
		size_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
		if (tail == head) {
			sched_yield();
			continue;
		}
		while (head < tail) {
			unsigned char *b = q->ring[head % PC_RING];
			sum += b[0];
			free(b);
			head++;
			if ((head & 63) == 0)
				atomic_store_explicit(&q->head, head, memory_order_release);
		}
		atomic_store_explicit(&q->head, head, memory_order_release);
	}
	q->sum = sum;
	park();
	return NULL;
}

static double run_prodcons(size_t n)
{
	static pthread_t t[2 * PC_PAIRS];
	double t0 = now_ms();
	for (unsigned i = 0; i < PC_PAIRS; i++) {
		pc_q[i].n = n / PC_PAIRS + (i < n % PC_PAIRS);
		bench_spawn(&t[2 * i], consumer_main, &pc_q[i]);
		bench_spawn(&t[2 * i + 1], producer_main, &pc_q[i]);
	}
	wait_all_parked(2 * PC_PAIRS);
	double ms = now_ms() - t0;
	for (unsigned i = 0; i < PC_PAIRS; i++)
		bench_sink += pc_q[i].sum;
	joinable = t;
	n_joinable = 2 * PC_PAIRS;
	return ms;
}

/* -------------------------------------------------------------- fastmm */

#define FM_THREADS 8

struct fm_args {
	unsigned id, iters;
	uint64_t sum;
};

static void *fastmm_main(void *arg)
{
	struct fm_args *a = arg;
	uint64_t rng = 0xd1b54a32d192ed03ull * (a->id + 1);
	uint64_t sum = 0;
	for (unsigned i = 0; i < a->iters; i++) {
		size_t size = between(&rng, 1, 70000);
		unsigned char *b = xmalloc(size);
		memset(b, (int)(i & 0xff), size);
		sum += b[size - 1];
		free(b);
	}
	a->sum = sum;
	park();
	return NULL;
}

static double run_fastmm(unsigned iters)
{
	static struct fm_args args[FM_THREADS];
	static pthread_t t[FM_THREADS];
	double t0 = now_ms();
	for (unsigned i = 0; i < FM_THREADS; i++) {
		args[i] = (struct fm_args){.id = i, .iters = iters};
		bench_spawn(&t[i], fastmm_main, &args[i]);
	}
	wait_all_parked(FM_THREADS);
	double ms = now_ms() - t0;
	for (unsigned i = 0; i < FM_THREADS; i++)
		bench_sink += args[i].sum;
	joinable = t;
	n_joinable = FM_THREADS;
	return ms;
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr,
	        "usage: bench_seeds big|medium [IDLE_S [ITERS [LIVE]]]\n"
	        "       bench_seeds rev1k|rev512k|prodcons [IDLE_S [N]]\n"
	        "       bench_seeds fastmm [IDLE_S [ITERS]]\n");
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	const char *sc = argv[1];
	pthread_t mon;

	long start_kb = anon_rss_kb();
	if (start_kb < 0)
		bench_die("cannot read Anonymous: from /proc/self/smaps_rollup");
	atomic_store(&peak_kb, start_kb);
	bool have_hwm = anon_hwm_reset();
	bench_spawn(&mon, monitor_main, NULL);
	/* Worker threads are created inside the timed work (ms): their start-up
	 * is the same under every allocator. */

	unsigned long idle_s;
	double ms, phase_ms = -1;
	if (strcmp(sc, "big") == 0 || strcmp(sc, "medium") == 0) {
		int big = sc[0] == 'b';
		idle_s = arg_u64(argc, argv, 2, 10, "IDLE_S");
		unsigned long iters = arg_u64(argc, argv, 3, 100, "ITERS");
		unsigned long live = arg_u64(argc, argv, 4, 8, "LIVE");
		ms = big ? run_blocks(1 * MIB, 8 * MIB, (unsigned)iters, (unsigned)live)
		         : run_blocks(64 * KIB, 512 * KIB, (unsigned)iters, (unsigned)live);
	} else if (strcmp(sc, "rev1k") == 0) {
		idle_s = arg_u64(argc, argv, 2, 5, "IDLE_S");
		ms = run_reverse(1 * KIB, arg_u64(argc, argv, 3, 50000, "N"), &phase_ms);
	} else if (strcmp(sc, "rev512k") == 0) {
		idle_s = arg_u64(argc, argv, 2, 5, "IDLE_S");
		ms = run_reverse(512 * KIB, arg_u64(argc, argv, 3, 2000, "N"), &phase_ms);
	} else if (strcmp(sc, "prodcons") == 0) {
		idle_s = arg_u64(argc, argv, 2, 5, "IDLE_S");
		ms = run_prodcons(arg_u64(argc, argv, 3, 5000000, "N"));
	} else if (strcmp(sc, "fastmm") == 0) {
		idle_s = arg_u64(argc, argv, 2, 5, "IDLE_S");
		ms = run_fastmm((unsigned)arg_u64(argc, argv, 3, 30000, "ITERS"));
	} else {
		usage();
	}
	if (phase_ms < 0)
		phase_ms = ms;

	/* Every worker is parked (or, single-threaded, the work is over): idle. */
	note_rss(anon_rss_kb());
	long hwm_kb = have_hwm ? anon_hwm_kb() : -1;
	sleep_ms((long)idle_s * 1000);
	long idle_kb = anon_rss_kb();
	atomic_store(&monitor_stop, 1);
	pthread_join(mon, NULL);
	note_rss(idle_kb);
	long sampled_kb = atomic_load(&peak_kb);
	note_rss(hwm_kb);

	release_all();
	for (unsigned i = 0; i < n_joinable; i++)
		pthread_join(joinable[i], NULL);

	bench_result(sc, ms,
	             "phase_ms=%.3f rss_start_kb=%ld rss_peak_kb=%ld rss_peak_sampled_kb=%ld "
	             "rss_idle_kb=%ld idle_s=%lu",
	             phase_ms, start_kb, atomic_load(&peak_kb), sampled_kb, idle_kb, idle_s);
	return 0;
}
