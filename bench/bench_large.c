/*
 * bench_large.c — large blocks, 64 KiB .. 32 MiB: allocate, touch every page,
 * free. The path of buffers, images and arenas of other allocators, where an
 * allocator's choice between caching and unmapping costs page faults or RSS.
 *
 *   bench_large [N [LIVE [MIN_KIB [MAX_KIB]]]]
 *
 *   N        blocks (default 1000)
 *   LIVE     blocks live at once: each new block replaces the oldest
 *            (default 4)
 *   MIN_KIB MAX_KIB  size range in KiB, log-uniform (default 64..32768)
 *
 * Every page of every block is written once (one byte per 4 KiB), and those
 * bytes are checked before the block is freed.
 */
#define BENCH_PROG "bench_large"
#include "bench_common.h"

#define PAGE 4096

static int usage(void)
{
	fprintf(stderr, "usage: bench_large [N [LIVE [MIN_KIB [MAX_KIB]]]]  (defaults 1000, 4, 64, 32768)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc > 5)
		return usage();
	uint64_t n = arg_u64(argc, argv, 1, 1000, "N");
	unsigned live = (unsigned)arg_u64(argc, argv, 2, 4, "LIVE");
	size_t min = arg_u64(argc, argv, 3, 64, "MIN_KIB") * KIB;
	size_t max = arg_u64(argc, argv, 4, 32768, "MAX_KIB") * KIB;
	if (n == 0 || live == 0 || live > 1024 || min == 0 || max < min)
		return usage();

	unsigned char *ring[1024] = {0};
	size_t sizes[1024] = {0};
	uint64_t rng = bench_seed(3), check = 0;
	/* log2 of min and max, for the log-uniform choice of sizes. */
	unsigned lo2 = 63 - (unsigned)__builtin_clzll(min), hi2 = 63 - (unsigned)__builtin_clzll(max);

	double t0 = now_ms();
	for (uint64_t i = 0; i < n; i++) {
		unsigned slot = (unsigned)(i % live);
		if (ring[slot] != NULL) {
			unsigned char *old = ring[slot];
			unsigned char want = (unsigned char)(i - live);
			for (size_t off = 0; off < sizes[slot]; off += PAGE)
				if (bench_unlikely(old[off] != want))
					bench_corrupt("large", i, old[off], want);
			check += old[sizes[slot] - 1];
			free(old);
		}
		unsigned e = lo2 == hi2 ? lo2 : lo2 + (unsigned)between(&rng, 0, hi2 - lo2 - 1);
		size_t size = between(&rng, (size_t)1 << e, ((size_t)2 << e) - 1);
		if (size < min)
			size = min;
		if (size > max)
			size = max;
		unsigned char *p = xmalloc(size);
		for (size_t off = 0; off < size; off += PAGE)
			p[off] = (unsigned char)i;
		p[size - 1] = (unsigned char)i;
		ring[slot] = p;
		sizes[slot] = size;
	}
	double ms = now_ms() - t0;
	for (unsigned k = 0; k < live; k++)
		free(ring[k]);
	bench_sink = check;
	bench_result("large", ms, "n=%" PRIu64 " live=%u min_kib=%zu max_kib=%zu", n, live,
	             min / KIB, max / KIB);
	return 0;
}
