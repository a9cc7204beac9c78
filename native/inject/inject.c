// SPDX-License-Identifier: GPL-2.0
/* softnet-inject: takes one CPU away from everything else on purpose. A
 * SCHED_FIFO thread pinned to --cpu busy-spins --busy-ms every --every-ms on
 * an absolute CLOCK_MONOTONIC schedule (clock_nanosleep TIMER_ABSTIME, so
 * the schedule does not drift), keeping each stall's actual start and end.
 * While it spins, no SCHED_OTHER task (a NAPI kthread, ksoftirqd) runs on that
 * CPU: Linux's fair server lets them in only after long starvation.
 *
 * The main thread answers "read" on stdin with every stall so far; "quit",
 * end of input, SIGTERM or the death of the parent end the process, the
 * spinner with it: a CPU hog must never outlive softnet. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../common/sn_util.h"
#include "inject.h"

struct opts {
	int cpu, priority;
	double busy_ms, every_ms, delay_ms;
	int has_delay;
};

struct injector {
	const struct opts *o;
	unsigned long long busy_ns, period_ns, first_ns;
	struct inject_record *rec;
	atomic_ullong n;         /* stalls done; rec[0 .. min(n, max)) are complete */
	atomic_ullong missed;    /* scheduled stalls skipped: the spinner woke after the next one was due */
	pthread_mutex_t mu;      /* start-up handshake */
	pthread_cond_t cv;
	int state;               /* 0 starting, 1 running, -1 failed */
	char why[320];
};

static void fail(struct injector *in, const char *what, int err)
{
	pthread_mutex_lock(&in->mu);
	snprintf(in->why, sizeof(in->why), "%s: %s", what, strerror(err));
	in->state = -1;
	pthread_cond_signal(&in->cv);
	pthread_mutex_unlock(&in->mu);
}

static struct timespec ts_of(unsigned long long ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
}

static void *spinner_main(void *arg)
{
	struct injector *in = arg;
	const struct opts *o = in->o;
	cpu_set_t set;
	char what[200];

	CPU_ZERO(&set);
	CPU_SET(o->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		snprintf(what, sizeof(what), "pin to CPU %d (sched_setaffinity)", o->cpu);
		fail(in, what, errno);
		return NULL;
	}
	struct sched_param sp = { .sched_priority = o->priority };
	if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
		snprintf(what, sizeof(what),
			 "sched_setscheduler(SCHED_FIFO, %d) refused (needs root or CAP_SYS_NICE, an RLIMIT_RTPRIO "
			 "allowing it, and RT runtime in this cgroup)", o->priority);
		fail(in, what, errno);
		return NULL;
	}
	pthread_mutex_lock(&in->mu);
	in->state = 1;
	pthread_cond_signal(&in->cv);
	pthread_mutex_unlock(&in->mu);

	unsigned long long next = in->first_ns;
	for (;;) {
		struct timespec ts = ts_of(next);
		int err;
		while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
			;
		if (err)
			sn_die("clock_nanosleep: %s", strerror(err));
		unsigned long long cpu0 = sn_thread_cpu_ns();
		unsigned long long start = sn_now_ns(), end = start, until = start + in->busy_ns;
		while (end < until)
			end = sn_now_ns();
		unsigned long long cpu = sn_thread_cpu_ns() - cpu0;
		unsigned long long i = atomic_load_explicit(&in->n, memory_order_relaxed);
		if (i < INJECT_MAX_RECORDS)
			in->rec[i] = (struct inject_record){ start, end, cpu };
		atomic_store_explicit(&in->n, i + 1, memory_order_release); /* published after it is written */
		next += in->period_ns;
		while (next <= end) { /* woke too late for the next one: skip it, stay on the schedule */
			next += in->period_ns;
			atomic_fetch_add_explicit(&in->missed, 1, memory_order_relaxed);
		}
	}
	return NULL;
}

static void print_read(void *arg)
{
	struct injector *in = arg;
	unsigned long long n = atomic_load_explicit(&in->n, memory_order_acquire);
	unsigned long long kept = n < INJECT_MAX_RECORDS ? n : INJECT_MAX_RECORDS;

	printf("{\"cpu\": %d, \"priority\": %d, \"busy_ns\": %llu, \"period_ns\": %llu, \"first_ns\": %llu, "
	       "\"monotonic_ns\": %llu, \"stalls_total\": %llu, \"stalls_truncated\": %s, \"missed\": %llu, "
	       "\"stalls\": [",
	       in->o->cpu, in->o->priority, in->busy_ns, in->period_ns, in->first_ns, (unsigned long long)sn_now_ns(),
	       n, n > kept ? "true" : "false", (unsigned long long)atomic_load(&in->missed));
	for (unsigned long long i = 0; i < kept; i++)
		printf("%s[%llu, %llu]", i ? ", " : "", in->rec[i].start_ns, in->rec[i].end_ns);
	printf("], \"cpu_ns\": [");
	for (unsigned long long i = 0; i < kept; i++)
		printf("%s%llu", i ? ", " : "", in->rec[i].cpu_ns);
	printf("]}\n");
	fflush(stdout);
}

enum { OPT_CPU = 256, OPT_BUSY_MS, OPT_EVERY_MS, OPT_PRIORITY, OPT_DELAY_MS };

static const struct sn_option options[] = {
	SN_REQUIRED("cpu", OPT_CPU, "N", "take CPU N"),
	SN_REQUIRED("busy-ms", OPT_BUSY_MS, "T", "spin T ms per stall, 0.1-100"),
	SN_REQUIRED("every-ms", OPT_EVERY_MS, "P", "one stall every P ms, 2T-60000"),
	SN_OPTION("priority", OPT_PRIORITY, "N", "SCHED_FIFO priority, 1-99 (default 50)"),
	SN_OPTION("delay-ms", OPT_DELAY_MS, "D", "first stall D ms after the start (default P)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-inject",
	.about = "A stall injector: a SCHED_FIFO thread pinned to one CPU busy-spins T ms\n"
		 "every P ms on an absolute schedule, so nothing else runs there meanwhile.",
	.footer = "Prints {\"ready\": ...} once it runs as SCHED_FIFO, then for each \"read\" line\n"
		  "on stdin one JSON line with every stall so far as [start_ns, end_ns]\n"
		  "(CLOCK_MONOTONIC); \"quit\", end of input, SIGTERM or the parent's death end it.",
	.options = options,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, CPU_SETSIZE - 1); break;
	case OPT_BUSY_MS: o->busy_ms = sn_parse_double("busy-ms", val, INJECT_MIN_BUSY_MS, INJECT_MAX_BUSY_MS); break;
	case OPT_EVERY_MS: o->every_ms = sn_parse_double("every-ms", val, 2 * INJECT_MIN_BUSY_MS, INJECT_MAX_EVERY_MS); break;
	case OPT_PRIORITY: o->priority = (int)sn_parse_u64("priority", val, 1, 99); break;
	case OPT_DELAY_MS: o->delay_ms = sn_parse_double("delay-ms", val, 0, 3600000); o->has_delay = 1; break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .priority = 50 };
	sn_parse_args(&tool, argc, argv, on_option, &o);
	if (o.every_ms < 2 * o.busy_ms)
		sn_usage_error("--every-ms: expected at least twice --busy-ms (%g ms), got '%g': the CPU must run "
			       "other work at least half the time", 2 * o.busy_ms, o.every_ms);
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && !CPU_ISSET(o.cpu, &allowed))
		sn_usage_error("--cpu: CPU %d is not usable here (offline, or outside this process's affinity)", o.cpu);
	sn_die_with_parent();
	sn_catch_stop_signals();

	struct injector in = { .o = &o, .busy_ns = (unsigned long long)(o.busy_ms * 1e6 + 0.5),
			       .period_ns = (unsigned long long)(o.every_ms * 1e6 + 0.5) };
	pthread_mutex_init(&in.mu, NULL);
	pthread_cond_init(&in.cv, NULL);
	in.rec = calloc(INJECT_MAX_RECORDS, sizeof(*in.rec)); /* pages touched only as stalls come */
	if (!in.rec)
		sn_die("out of memory");
	in.first_ns = sn_now_ns() + (unsigned long long)((o.has_delay ? o.delay_ms : o.every_ms) * 1e6 + 0.5);

	/* Stop signals must interrupt the main thread's stdin read, never land in the spinner. */
	sigset_t stop_sigs, old;
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
	pthread_t spinner;
	int err = pthread_create(&spinner, NULL, spinner_main, &in);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		sn_die("start the spinning thread: %s", strerror(err));
	pthread_mutex_lock(&in.mu);
	while (!in.state)
		pthread_cond_wait(&in.cv, &in.mu);
	pthread_mutex_unlock(&in.mu);
	if (in.state < 0)
		sn_die("%s", in.why);

	printf("{\"ready\": true, \"pid\": %d, \"cpu\": %d, \"priority\": %d, \"busy_ns\": %llu, \"period_ns\": %llu, "
	       "\"first_ns\": %llu}\n", (int)getpid(), o.cpu, o.priority, in.busy_ns, in.period_ns, in.first_ns);
	fflush(stdout);
	sn_serve_reads(print_read, &in);
	return 0; /* the spinner ends with the process */
}
