/*
 * measure.c — runs one command and measures it: wall time, peak RSS, CPU time,
 * and how much CPU other processes took meanwhile. The benchmark runner
 * (bench/lib.sh, bench_measure) runs every benchmark through it.
 *
 *   measure [-t TIMEOUT_S] -o RESULT_FILE -- COMMAND [ARGS...]
 *
 * The command inherits stdin/stdout/stderr and the environment (the runner
 * sets LD_PRELOAD with `env`, which execs the command in the same process).
 * It runs in its own process group; after TIMEOUT_S seconds the whole group is
 * killed (SIGKILL), so a compiler driver's children go too.
 *
 * RESULT_FILE gets one line of `key=value` fields:
 *
 *   wall_ms    from just before fork to wait4's return (CLOCK_MONOTONIC)
 *   maxrss_kb  peak RSS of the command, or of the largest of its descendants
 *              that it waited for (wait4's rusage: ru_maxrss)
 *   cpu_ms     user + system time of the command and its waited descendants
 *   other_pct  CPU time that other processes took while it ran, in % of one
 *              CPU: the machine's busy time (/proc/stat: user, nice, system,
 *              irq, softirq) minus the command's own cpu_ms, over wall_ms
 *   steal_pct  time the hypervisor took (steal), in % of one CPU
 *   status     exit:N, signal:N or timeout
 *
 * Why not hyperfine or GNU time: one run must give both its time and its peak
 * RSS, and the noise around that very run; hyperfine does not report RSS, and
 * time(1) does not see the rest of the machine.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;
static pid_t child;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
	kill(-child, SIGKILL);
}

/* Interrupted (^C reaches only our process group, not the command's): take the
 * command's group down too, then die of the same signal. */
static void on_interrupt(int sig)
{
	kill(-child, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Busy and steal ticks of the whole machine, from the first line of /proc/stat. */
static void cpu_ticks(unsigned long long *busy, unsigned long long *steal)
{
	unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
	                   st = 0;
	FILE *f = fopen("/proc/stat", "r");
	if (f != NULL) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
		           &iowait, &irq, &softirq, &st) != 8)
			user = nice = sys = irq = softirq = st = 0;
		fclose(f);
	}
	*busy = user + nice + sys + irq + softirq;
	*steal = st;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int usage(void)
{
	fprintf(stderr, "usage: measure [-t TIMEOUT_S] -o RESULT_FILE -- COMMAND [ARGS...]\n");
	return 125;
}

int main(int argc, char **argv)
{
	const char *out_path = NULL;
	unsigned timeout_s = 0;
	int opt;
	while ((opt = getopt(argc, argv, "+t:o:")) != -1) {
		if (opt == 't')
			timeout_s = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 'o')
			out_path = optarg;
		else
			return usage();
	}
	if (out_path == NULL || optind >= argc)
		return usage();
	char **cmd = &argv[optind];

	FILE *out = fopen(out_path, "w");
	if (out == NULL) {
		fprintf(stderr, "measure: %s: %s\n", out_path, strerror(errno));
		return 125;
	}
	long hz = sysconf(_SC_CLK_TCK);
	unsigned long long busy0, steal0, busy1, steal1;

	cpu_ticks(&busy0, &steal0);
	double t0 = now_ms();
	child = fork();
	if (child < 0) {
		fprintf(stderr, "measure: fork: %s\n", strerror(errno));
		return 125;
	}
	if (child == 0) {
		setpgid(0, 0);
		execvp(cmd[0], cmd);
		fprintf(stderr, "measure: %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	setpgid(child, child); /* also here: no race with the alarm's kill(-child) */
	signal(SIGINT, on_interrupt);
	signal(SIGTERM, on_interrupt);
	signal(SIGHUP, on_interrupt);
	if (timeout_s > 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sigaction(SIGALRM, &sa, NULL);
		alarm(timeout_s);
	}
	int status;
	struct rusage ru;
	pid_t r;
	while ((r = wait4(child, &status, 0, &ru)) < 0 && errno == EINTR)
		;
	double wall_ms = now_ms() - t0;
	alarm(0);
	cpu_ticks(&busy1, &steal1);
	if (r < 0) {
		fprintf(stderr, "measure: wait4: %s\n", strerror(errno));
		return 125;
	}

	double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	double busy_ms = (double)(busy1 - busy0) * 1e3 / (double)hz;
	double steal_ms = (double)(steal1 - steal0) * 1e3 / (double)hz;
	double other_pct = wall_ms > 0 ? 100.0 * (busy_ms - cpu_ms) / wall_ms : 0;
	if (other_pct < 0) /* tick granularity: the estimate is coarse on short runs */
		other_pct = 0;
	char st[32];
	if (timed_out)
		snprintf(st, sizeof st, "timeout");
	else if (WIFSIGNALED(status))
		snprintf(st, sizeof st, "signal:%d", WTERMSIG(status));
	else
		snprintf(st, sizeof st, "exit:%d", WEXITSTATUS(status));
	fprintf(out, "wall_ms=%.3f maxrss_kb=%ld cpu_ms=%.1f other_pct=%.1f steal_pct=%.1f status=%s\n",
	        wall_ms, ru.ru_maxrss, cpu_ms, other_pct,
	        wall_ms > 0 ? 100.0 * steal_ms / wall_ms : 0, st);
	fclose(out);
	return 0;
}
