/*
 * bench_common.h — what every benchmark program of the suite shares: the
 * clock, a deterministic random generator, argument parsing, failing loudly,
 * reading the process's RSS, and the one-line result every program prints.
 *
 * The programs are built like user programs: plain malloc/free, no link to ebb
 * (the allocator under test is chosen at run time with LD_PRELOAD), and with
 * -fno-builtin-malloc/free/calloc/realloc (bench/bench.mk) so the compiler
 * cannot fold away the allocations they measure. Every program also writes the
 * blocks it allocates, reads them back, and ends its checksums in bench_sink.
 *
 * The result line (bench_result) is `key=value` fields separated by spaces:
 *
 *   pair size=64 n=20000000 ms=301.234 check=... maxrss_kb=1776 malloc=libc.so.6
 *
 *   ms         the program's own CLOCK_MONOTONIC timing of its work (process
 *              start-up, exit and idle waits excluded); bench/run.sh reports it
 *   maxrss_kb  the process's peak resident set so far (getrusage)
 *   malloc     the file name of the object that provides `malloc`, so that a
 *              preload that silently failed shows
 *
 * Each program defines BENCH_PROG (its name, for messages) before including
 * this header. Everything here is static inline: a program uses what it needs.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef BENCH_PROG
#error "define BENCH_PROG (the program's name) before including bench_common.h"
#endif

#define BENCH_NOINLINE __attribute__((noinline))
#define bench_unlikely(x) __builtin_expect(!!(x), 0)

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

/* Checksums end here, so no loop that computes one can be proven dead. */
static volatile uint64_t bench_sink;

/* ---------------------------------------------------------------- failing */

__attribute__((format(printf, 1, 2), noreturn))
static inline void bench_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", BENCH_PROG);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* A block whose content changed while it was live means the allocator handed
 * it out twice (or overran a neighbour): exit 3, which the runner reports as a
 * failed run, never as a time. */
__attribute__((noreturn))
static inline void bench_corrupt(const char *where, uint64_t i, unsigned got, unsigned want)
{
	fprintf(stderr,
	        "%s: %s: block content changed while live at iteration %" PRIu64
	        " (byte 0x%02x, expected 0x%02x): the allocator handed out a live block\n",
	        BENCH_PROG, where, i, got, want);
	exit(3);
}

static inline void *xmalloc(size_t size)
{
	void *p = malloc(size);
	if (bench_unlikely(p == NULL))
		bench_die("malloc(%zu) returned NULL", size);
	return p;
}

static inline void *xrealloc(void *old, size_t size)
{
	void *p = realloc(old, size);
	if (bench_unlikely(p == NULL))
		bench_die("realloc(%zu) returned NULL", size);
	return p;
}

/* ------------------------------------------------------------ clock, rng */

static inline double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* xorshift64 (Marsaglia 13/7/17): deterministic, a few instructions, no libc,
 * so the harness adds the same few cycles under every allocator. The state
 * must not be 0. */
static inline uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/* A value in [0, n) from 32 random bits, by multiply-shift (no division). */
static inline uint32_t below(uint32_t r, uint32_t n)
{
	return (uint32_t)(((uint64_t)r * n) >> 32);
}

/* A value in [lo, hi], uniform, from the generator. */
static inline size_t between(uint64_t *state, size_t lo, size_t hi)
{
	uint32_t r = (uint32_t)(xorshift64(state) >> 32);
	return lo + (size_t)(((uint64_t)r * (hi - lo + 1)) >> 32);
}

/* A seed for stream `id` (thread, lane): distinct, never 0. */
static inline uint64_t bench_seed(uint64_t id)
{
	return 0x9e3779b97f4a7c15ull * (id + 1) ^ 0x2545f4914f6cdd1dull;
}

/* --------------------------------------------------------------- threads */

static inline void bench_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(t, NULL, fn, arg);
	if (err != 0)
		bench_die("pthread_create: %s", strerror(err));
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* One step of a busy wait. It gives the CPU away now and then, so that when
 * there are more threads than cores (4 threads on this 2-core machine is a
 * case the suite measures) the thread being waited for can run. */
static inline void spin_wait(unsigned *spins)
{
	if ((++*spins & 63) == 0)
		sched_yield();
	else
		cpu_relax();
}

/* -------------------------------------------------------------- arguments */

/* argv[i] as a non-negative decimal integer, or dflt when absent. Anything
 * else is a usage error, reported with the parameter's name. */
static inline uint64_t arg_u64(int argc, char **argv, int i, uint64_t dflt, const char *name)
{
	if (argc <= i)
		return dflt;
	const char *s = argv[i];
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || errno != 0 || *end != '\0')
		bench_die("%s must be a non-negative integer (got '%s'); run without arguments for usage",
		          name, s);
	return (uint64_t)v;
}

/* ------------------------------------------------------------ measurement */

/* The file name (without directory) of the object that defines `malloc` for
 * this process: the first definition in global lookup order, i.e. a preload if
 * there is one. */
static inline const char *malloc_provider(void)
{
	void *sym = dlsym(RTLD_DEFAULT, "malloc");
	Dl_info info;
	if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
		return "unknown";
	const char *slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

/* Peak resident set of this process so far, KiB. */
static inline long maxrss_kb(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_maxrss;
}

/* Reads a small /proc file into buf (NUL-terminated); returns its length or -1.
 * No stdio, no allocation. */
static inline long proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == size - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	return (long)len;
}

/* The number of KiB after `key` (which includes the leading "\n") in text;
 * -1 if absent. */
static inline long proc_kb(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	if (p == NULL)
		return -1;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	long kb = 0;
	while (*p >= '0' && *p <= '9')
		kb = kb * 10 + (*p++ - '0');
	return kb;
}

/* The anonymous RSS of this process in KiB (the "Anonymous:" line of
 * /proc/self/smaps_rollup: heap memory, without the program's and libraries'
 * file pages); -1 when it cannot be read. Safe to call from any thread at any
 * time: open, read and parse into a stack buffer, no stdio, no allocation. */
static inline long anon_rss_kb(void)
{
	char buf[4096];
	if (proc_read("/proc/self/smaps_rollup", buf, sizeof buf) <= 0)
		return -1;
	return proc_kb(buf, "\nAnonymous:");
}

/* The kernel's high-water mark of this process's resident set, restarted at
 * its current value. A sampling thread misses peaks that last less than its
 * period, and on a loaded machine it is starved exactly while the workers
 * run; the kernel records the high-water mark before every munmap or
 * MADV_DONTNEED, so it misses nothing. Returns false if the kernel refuses
 * (before Linux 4.0). */
static inline bool anon_hwm_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

/* The anonymous part of the high-water mark since anon_hwm_reset, in KiB:
 * VmHWM minus the file and shared-memory pages resident now. File pages only
 * grow during a run (libraries are loaded at start), so this is exact when
 * the file pages did not change since the peak, and an underestimate by the
 * file pages faulted in since otherwise. -1 if unreadable. */
static inline long anon_hwm_kb(void)
{
	char buf[4096];
	if (proc_read("/proc/self/status", buf, sizeof buf) <= 0)
		return -1;
	long hwm = proc_kb(buf, "\nVmHWM:");
	long file = proc_kb(buf, "\nRssFile:");
	long shmem = proc_kb(buf, "\nRssShmem:");
	if (hwm < 0 || file < 0 || shmem < 0)
		return -1;
	return hwm - file - shmem;
}

/* Prints the result line: the workload's name, its own fields (fmt, may be
 * ""), the time, the checksum, then maxrss_kb and malloc. */
__attribute__((format(printf, 3, 4)))
static inline void bench_result(const char *workload, double ms, const char *fmt, ...)
{
	printf("%s ", workload);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("%sms=%.3f check=%" PRIu64 " maxrss_kb=%ld malloc=%s\n", fmt[0] ? " " : "", ms,
	       (uint64_t)bench_sink, maxrss_kb(), malloc_provider());
	fflush(stdout);
}

#endif /* BENCH_COMMON_H */
