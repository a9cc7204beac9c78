#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include "sn_util.h"

void sn_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void sn_enter_netns(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		sn_die("netns %s: %s", name, strerror(errno));
	if (setns(fd, CLONE_NEWNET) < 0)
		sn_die("setns %s: %s", name, strerror(errno));
	close(fd);
}

void sn_die_with_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent) /* parent already gone before prctl took effect */
		raise(SIGTERM);
}

void sn_pin_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		sn_die("pin to cpu %d: %s", cpu, strerror(errno));
}

uint64_t sn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sn_parse_u64(const char *opt, const char *val, uint64_t min, uint64_t max)
{
	char *endp;
	errno = 0;
	unsigned long long v = strtoull(val, &endp, 10);
	if (errno || *endp || endp == val || val[0] == '-' || v < min || v > max)
		sn_die("--%s: expected an integer in [%llu, %llu], got '%s'", opt,
		       (unsigned long long)min, (unsigned long long)max, val);
	return v;
}

static void on_stop_signal(int sig) { (void)sig; }

void sn_catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal }; /* no SA_RESTART: unblocks fgets */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

void sn_serve_reads(void (*read)(void *), void *arg)
{
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "read", 4))
			read(arg);
		else if (!strncmp(line, "quit", 4))
			break;
	}
}
