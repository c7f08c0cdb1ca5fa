/*
 * bench_core.c — single-thread hot paths: malloc/free pairs of one size (one
 * size class), and of random sizes in a range.
 *
 *   bench_core pair SIZE [N]        N malloc(SIZE)/free pairs
 *   bench_core rand LO HI [N]       N pairs of uniform random sizes in [LO, HI]
 *   bench_core ring SIZE LIVE [N]   as pair, with a ring of LIVE blocks (1..1048576)
 *
 * Both keep a ring of PAIR_RING live blocks: each iteration allocates one block
 * and frees the oldest, so a new block is usually not the one just freed (no
 * degenerate same-pointer ping-pong) and the live set is small and hot. Each
 * block carries a tag byte at its start (and, for rand, at its end), checked
 * when it is freed PAIR_RING iterations later. One "op" is one malloc plus one
 * free. Defaults: N = 20,000,000 (pair), 10,000,000 (rand).
 *
 * The timed loops are noinline and named (bench_pair_loop, bench_rand_loop) so
 * bench/callgrind.sh can count exactly their instructions and their callees'.
 */
#define BENCH_PROG "bench_core"
#include "bench_common.h"

#define PAIR_N_DEFAULT 20000000ull
#define RAND_N_DEFAULT 10000000ull

/* Live blocks in the ring; a power of two (the slot is i & mask). */
#define PAIR_RING 64

/* One malloc and one free per iteration; the block of iteration i carries the
 * byte (uint8_t)i, checked when it is freed PAIR_RING iterations later. */
BENCH_NOINLINE uint64_t bench_pair_loop(unsigned char **ring, size_t size, uint64_t n)
{
	uint64_t check = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned slot = (unsigned)(i & (PAIR_RING - 1));
		unsigned char *p = malloc(size);
		if (bench_unlikely(p == NULL))
			bench_die("malloc(%zu) returned NULL", size);
		p[0] = (unsigned char)i;
		unsigned char *old = ring[slot];
		unsigned char want = (unsigned char)(i - PAIR_RING);
		if (bench_unlikely(old[0] != want))
			bench_corrupt("pair", i, old[0], want);
		check += old[0];
		free(old);
		ring[slot] = p;
	}
	return check;
}

/* As bench_pair_loop, with a random size per block; sizes[] remembers each live
 * block's size so its last byte can be checked too. */
BENCH_NOINLINE uint64_t bench_rand_loop(unsigned char **ring, size_t *sizes, size_t lo,
                                        size_t hi, uint64_t n)
{
	uint64_t state = bench_seed(0);
	uint64_t check = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned slot = (unsigned)(i & (PAIR_RING - 1));
		size_t size = between(&state, lo, hi);
		unsigned char *p = malloc(size);
		if (bench_unlikely(p == NULL))
			bench_die("malloc(%zu) returned NULL", size);
		unsigned char tag = (unsigned char)i;
		p[0] = tag;
		p[size - 1] = tag;
		unsigned char *old = ring[slot];
		unsigned char want = (unsigned char)(i - PAIR_RING);
		if (bench_unlikely(old[0] != want || old[sizes[slot] - 1] != want))
			bench_corrupt("rand", i, old[0], want);
		check += old[0];
		free(old);
		ring[slot] = p;
		sizes[slot] = size;
	}
	return check;
}

/* As bench_pair_loop with a ring of `live` blocks: the working set of a FIFO
 * that holds `live` blocks (`pair` is `ring SIZE 64`). Blocks of ring[k]
 * carry the byte of the iteration that allocated them, as in pair. */
BENCH_NOINLINE uint64_t bench_ring_loop(unsigned char **ring, size_t live, size_t size, uint64_t n)
{
	uint64_t check = 0;
	size_t slot = 0;
	for (uint64_t i = 0; i < n; i++) {
		unsigned char *p = malloc(size);
		if (bench_unlikely(p == NULL))
			bench_die("malloc(%zu) returned NULL", size);
		p[0] = (unsigned char)i;
		unsigned char *old = ring[slot];
		unsigned char want = (unsigned char)(i - live);
		if (bench_unlikely(old[0] != want))
			bench_corrupt("ring", i, old[0], want);
		check += old[0];
		free(old);
		ring[slot] = p;
		if (++slot == live)
			slot = 0;
	}
	return check;
}

/* Fills the ring as if iterations -PAIR_RING..-1 had run, with blocks of lo. */
static void ring_fill(unsigned char **ring, size_t *sizes, size_t lo)
{
	for (unsigned k = 0; k < PAIR_RING; k++) {
		ring[k] = xmalloc(lo);
		sizes[k] = lo;
		ring[k][0] = (unsigned char)(k - PAIR_RING);
		ring[k][lo - 1] = (unsigned char)(k - PAIR_RING);
	}
}

static void ring_free(unsigned char **ring)
{
	for (unsigned k = 0; k < PAIR_RING; k++)
		free(ring[k]);
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: bench_core pair SIZE [N]    N malloc/free pairs of SIZE bytes (default N=%llu)\n"
	        "       bench_core rand LO HI [N]   N pairs of random sizes in [LO, HI] (default N=%llu)\n"
	        "       bench_core ring SIZE LIVE [N]  as pair, LIVE blocks live (1..1048576)\n"
	        "The allocator measured is the process's malloc: select it with LD_PRELOAD.\n",
	        PAIR_N_DEFAULT, RAND_N_DEFAULT);
	return 2;
}

int main(int argc, char **argv)
{
	static unsigned char *ring[PAIR_RING];
	static size_t sizes[PAIR_RING];

	if (argc >= 3 && strcmp(argv[1], "pair") == 0 && argc <= 4) {
		size_t size = arg_u64(argc, argv, 2, 0, "SIZE");
		uint64_t n = arg_u64(argc, argv, 3, PAIR_N_DEFAULT, "N");
		if (size == 0 || n == 0)
			return usage();
		ring_fill(ring, sizes, size);
		double t0 = now_ms();
		bench_sink = bench_pair_loop(ring, size, n);
		double ms = now_ms() - t0;
		ring_free(ring);
		bench_result("pair", ms, "size=%zu n=%" PRIu64, size, n);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "rand") == 0 && argc <= 5) {
		size_t lo = arg_u64(argc, argv, 2, 0, "LO");
		size_t hi = arg_u64(argc, argv, 3, 0, "HI");
		uint64_t n = arg_u64(argc, argv, 4, RAND_N_DEFAULT, "N");
		if (lo == 0 || hi < lo || n == 0)
			return usage();
		ring_fill(ring, sizes, lo);
		double t0 = now_ms();
		bench_sink = bench_rand_loop(ring, sizes, lo, hi, n);
		double ms = now_ms() - t0;
		ring_free(ring);
		bench_result("rand", ms, "lo=%zu hi=%zu n=%" PRIu64, lo, hi, n);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "ring") == 0 && argc <= 5) {
		size_t size = arg_u64(argc, argv, 2, 0, "SIZE");
		size_t live = arg_u64(argc, argv, 3, 0, "LIVE");
		uint64_t n = arg_u64(argc, argv, 4, PAIR_N_DEFAULT, "N");
		if (size == 0 || live == 0 || live > 1048576 || n == 0)
			return usage();
		unsigned char **blocks = xmalloc(live * sizeof *blocks);
		for (size_t k = 0; k < live; k++) {
			blocks[k] = xmalloc(size);
			blocks[k][0] = (unsigned char)(k - live);
		}
		double t0 = now_ms();
		bench_sink = bench_ring_loop(blocks, live, size, n);
		double ms = now_ms() - t0;
		for (size_t k = 0; k < live; k++)
			free(blocks[k]);
		free(blocks);
		bench_result("ring", ms, "size=%zu live=%zu n=%" PRIu64, size, live, n);
		return 0;
	}
	return usage();
}
