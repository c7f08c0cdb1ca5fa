/*
 * bench_frag.c — long-lived and short-lived objects mixed: the heap of a
 * long-running program, where survivors scattered among freed blocks keep
 * memory from being reused for other sizes or returned, and RSS creeps up.
 *
 *   bench_frag [ROUNDS [N [LIFE]]]
 *
 *   ROUNDS  rounds (default 40)
 *   N       blocks allocated per round (default 50,000)
 *   LIFE    rounds a long-lived block survives (default 8)
 *
 * Each round allocates N blocks whose sizes come from a band that moves from
 * round to round (16..128 B, 128..512 B, 512 B..2 KiB, 64..256 B, in turn), so
 * memory freed by one round is wanted for other sizes by the next. One block
 * in 16 is long-lived: it survives LIFE rounds; the others are freed, in random
 * order, at the end of their round. After every round the anonymous RSS is
 * sampled; the live bytes are known exactly.
 *
 * Result fields: rss_end_kb (anonymous RSS after the last round, while the
 * youngest long-lived blocks are still live), live_end_kb (their bytes),
 * rss_max_kb (largest per-round sample) and live_max_kb (largest live bytes at
 * a sample), so that RSS / live is the overhead.
 */
#define BENCH_PROG "bench_frag"
#include "bench_common.h"

struct block {
	unsigned char *p;
	size_t size;
};

/* The size band of round r: lo, hi bytes. */
static void band(unsigned r, size_t *lo, size_t *hi)
{
	static const size_t bands[][2] = {{16, 128}, {128, 512}, {512, 2048}, {64, 256}};
	*lo = bands[r % 4][0];
	*hi = bands[r % 4][1];
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_frag [ROUNDS [N [LIFE]]]  (defaults 40, 50000, 8)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc > 4)
		return usage();
	unsigned rounds = (unsigned)arg_u64(argc, argv, 1, 40, "ROUNDS");
	size_t n = arg_u64(argc, argv, 2, 50000, "N");
	unsigned life = (unsigned)arg_u64(argc, argv, 3, 8, "LIFE");
	if (rounds == 0 || n == 0 || life == 0)
		return usage();

	/* Long-lived blocks of the last `life` rounds: a ring of per-round arrays
	 * (room for n each: the 1-in-16 draw is random). */
	size_t per_round_long = n;
	struct block *longs = xmalloc((size_t)life * per_round_long * sizeof *longs);
	size_t *nlong = calloc(life, sizeof *nlong);
	struct block *shorts = xmalloc(n * sizeof *shorts);
	if (nlong == NULL)
		bench_die("out of memory");
	uint64_t rng = bench_seed(0), check = 0;
	size_t live = 0, live_max = 0;
	long rss_max = 0;

	double t0 = now_ms();
	for (unsigned r = 0; r < rounds; r++) {
		/* The long-lived blocks of round r - life die now. */
		struct block *old = &longs[(size_t)(r % life) * per_round_long];
		for (size_t k = 0; k < nlong[r % life]; k++) {
			check += old[k].p[old[k].size - 1];
			live -= old[k].size;
			free(old[k].p);
		}
		nlong[r % life] = 0;

		size_t lo, hi, nshort = 0;
		band(r, &lo, &hi);
		for (size_t i = 0; i < n; i++) {
			size_t size = between(&rng, lo, hi);
			unsigned char *p = xmalloc(size);
			memset(p, (int)(i & 0x7f) + 1, size);
			live += size;
			if ((xorshift64(&rng) & 15) == 0)
				old[nlong[r % life]++] = (struct block){p, size};
			else
				shorts[nshort++] = (struct block){p, size};
		}
		if (live > live_max)
			live_max = live;
		long rss = anon_rss_kb();
		if (rss > rss_max)
			rss_max = rss;
		/* The short-lived blocks die in random order (Fisher-Yates). */
		for (size_t i = nshort; i > 1; i--) {
			size_t j = below((uint32_t)(xorshift64(&rng) >> 32), (uint32_t)i);
			struct block b = shorts[j];
			shorts[j] = shorts[i - 1];
			shorts[i - 1] = b;
		}
		for (size_t i = 0; i < nshort; i++) {
			if (bench_unlikely(shorts[i].p[0] != shorts[i].p[shorts[i].size - 1]))
				bench_corrupt("frag", i, shorts[i].p[0], shorts[i].p[shorts[i].size - 1]);
			check += shorts[i].p[0];
			live -= shorts[i].size;
			free(shorts[i].p);
		}
	}
	double ms = now_ms() - t0;
	long rss_end = anon_rss_kb();
	bench_sink = check;

	for (unsigned k = 0; k < life; k++)
		for (size_t i = 0; i < nlong[k]; i++)
			free(longs[(size_t)k * per_round_long + i].p);
	free(longs);
	free(nlong);
	free(shorts);
	bench_result("frag", ms,
	             "rounds=%u n=%zu life=%u rss_end_kb=%ld live_end_kb=%zu rss_max_kb=%ld live_max_kb=%zu",
	             rounds, n, life, rss_end, live / 1024, rss_max, live_max / 1024);
	return 0;
}
