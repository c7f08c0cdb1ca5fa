/*
 * bench_realloc.c — growth by realloc, the way real code grows strings and
 * arrays.
 *
 *   bench_realloc str [N [LIVE]]   strings grown by appends
 *   bench_realloc arr [N [LIVE]]   arrays grown by half their capacity
 *
 * str: LIVE strings (default 256) are built at once, each by appending pieces
 *   of 1..32 bytes, with a realloc to the exact new length for every append
 *   (as naive string builders do); a string that reaches its target length
 *   (random, 16 B..64 KiB, log-uniform) is freed and a new one started. N is
 *   the number of appends in all (default 5,000,000).
 * arr: LIVE arrays (default 16) of 8-byte elements, each grown by pushing one
 *   element at a time into a capacity that is multiplied by 1.5 when full
 *   (16 elements at first), up to a random target of 1K..1M elements
 *   (log-uniform, 8 KiB..8 MiB); then freed and restarted. N is the number of
 *   pushes in all (default 20,000,000). Large arrays exercise realloc of big
 *   blocks (mremap, or copy).
 *
 * Contents are written on every append/push and checked at the end of every
 * string/array, so a realloc that lost data is a failed run.
 */
#define BENCH_PROG "bench_realloc"
#include "bench_common.h"

/* A log-uniform size in [lo, hi]: 2^(uniform exponent), then uniform inside. */
static size_t log_uniform(uint64_t *rng, unsigned lo_log2, unsigned hi_log2)
{
	unsigned e = lo_log2 + (unsigned)between(rng, 0, hi_log2 - lo_log2 - 1);
	return between(rng, (size_t)1 << e, ((size_t)1 << (e + 1)) - 1);
}

struct str {
	char *p;
	size_t len, target;
};

static uint64_t run_str(uint64_t n, unsigned nlive)
{
	struct str *s = calloc(nlive, sizeof *s);
	if (s == NULL)
		bench_die("out of memory");
	uint64_t rng = bench_seed(1), check = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct str *x = &s[below((uint32_t)(xorshift64(&rng) >> 32), nlive)];
		if (x->target == 0)
			x->target = log_uniform(&rng, 4, 16);
		size_t piece = between(&rng, 1, 32);
		x->p = xrealloc(x->p, x->len + piece + 1);
		/* The byte at position k is always 'a' + k % 26: checkable at the end. */
		for (size_t k = x->len; k < x->len + piece; k++)
			x->p[k] = (char)('a' + k % 26);
		x->len += piece;
		x->p[x->len] = '\0';
		if (x->len >= x->target) {
			for (size_t k = 0; k < x->len; k += 97)
				if (bench_unlikely(x->p[k] != (char)('a' + k % 26)))
					bench_corrupt("str", i, (unsigned char)x->p[k], 'a' + k % 26);
			check += x->len;
			free(x->p);
			*x = (struct str){0};
		}
	}
	for (unsigned k = 0; k < nlive; k++)
		free(s[k].p);
	free(s);
	return check;
}

struct arr {
	uint64_t *p;
	size_t len, cap, target;
};

static uint64_t run_arr(uint64_t n, unsigned nlive)
{
	struct arr *a = calloc(nlive, sizeof *a);
	if (a == NULL)
		bench_die("out of memory");
	uint64_t rng = bench_seed(2), check = 0;
	unsigned cur = 0;
	for (uint64_t i = 0; i < n; i++) {
		/* Pushes come in runs of 64 to one array, as a loop filling it would. */
		if ((i & 63) == 0)
			cur = below((uint32_t)(xorshift64(&rng) >> 32), nlive);
		struct arr *x = &a[cur];
		if (x->target == 0)
			x->target = log_uniform(&rng, 10, 20);
		if (x->len == x->cap) {
			x->cap = x->cap ? x->cap + x->cap / 2 : 16;
			x->p = xrealloc(x->p, x->cap * sizeof *x->p);
		}
		x->p[x->len] = x->len * 3 + 1;
		x->len++;
		if (x->len >= x->target) {
			for (size_t k = 0; k < x->len; k += 1021)
				if (bench_unlikely(x->p[k] != k * 3 + 1))
					bench_corrupt("arr", i, (unsigned char)x->p[k], (unsigned char)(k * 3 + 1));
			check += x->len;
			free(x->p);
			*x = (struct arr){0};
		}
	}
	for (unsigned k = 0; k < nlive; k++)
		free(a[k].p);
	free(a);
	return check;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_realloc str [N [LIVE]]   (defaults 5000000 appends, 256 strings)\n"
	                "       bench_realloc arr [N [LIVE]]   (defaults 20000000 pushes, 16 arrays)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4)
		return usage();
	int str = strcmp(argv[1], "str") == 0;
	if (!str && strcmp(argv[1], "arr") != 0)
		return usage();
	uint64_t n = arg_u64(argc, argv, 2, str ? 5000000 : 20000000, "N");
	unsigned live = (unsigned)arg_u64(argc, argv, 3, str ? 256 : 16, "LIVE");
	if (n == 0 || live == 0)
		return usage();
	double t0 = now_ms();
	bench_sink = str ? run_str(n, live) : run_arr(n, live);
	double ms = now_ms() - t0;
	bench_result(str ? "realloc-str" : "realloc-arr", ms, "n=%" PRIu64 " live=%u", n, live);
	return 0;
}
