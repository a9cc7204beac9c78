// SPDX-License-Identifier: GPL-2.0
/* softnet-stalls: finds the periods when a watched CPU did not run what
 * needed it, independently of any traffic: runqueue waits (a task runnable on
 * the CPU waited >= --threshold-us before it ran: the CPU was taken by someone
 * else, or the idle vCPU woke late) and gaps (a busy CPU gave no sign of life,
 * no timer expiry, clock sample or context switch, for longer than
 * --period-us + --threshold-us: the vCPU itself did not run). A perf
 * cpu-clock event per watched CPU keeps a timer firing there every period.
 * Each wait carries the hypervisor's share of it (the CPU's steal time).
 * stalls.bpf.c has the detectors.
 *
 * Events come through a BPF ring buffer that a thread drains every 20 ms
 * (the programs ask for no wake-up: no irq_work on the watched CPUs); "read"
 * on stdin answers every event since the start (up to --max-events) as one
 * JSON line. The attachments (tp_btf links, one perf event per watched CPU)
 * belong to this process: they go when it exits, kill -9 included. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../common/sn_util.h"
#include "stalls.h"
#include "stalls.skel.h"

#define DRAIN_MS 20
#define STR_(x) #x
#define STR(x) STR_(x)

struct opts {
	const char *cpus_arg;
	unsigned char watched[STALLS_MAX_CPUS];
	int ncpu, nwatched, cpu;
	__u64 period_us, threshold_us, max_events;
};

struct probe {
	struct stalls_bpf *skel;
	struct ring_buffer *rb;
	pthread_mutex_t mu;       /* ring buffer consumption and the event list */
	struct stall_event *ev;   /* every event kept, in arrival order */
	__u64 nev, max_events, seen;
	const struct opts *o;
	__u64 started_ns;
	volatile int stop;
};

static int on_event(void *ctx, void *data, size_t len)
{
	struct probe *p = ctx;

	if (len < sizeof(struct stall_event))
		return 0;
	p->seen++;
	if (p->nev < p->max_events)
		memcpy(&p->ev[p->nev++], data, sizeof(struct stall_event));
	return 0;
}

static void drain(struct probe *p)
{
	pthread_mutex_lock(&p->mu);
	if (ring_buffer__consume(p->rb) < 0)
		sn_die("read the ring buffer: %s", strerror(errno));
	pthread_mutex_unlock(&p->mu);
}

static void *drainer_main(void *arg)
{
	struct probe *p = arg;
	struct timespec ts = { 0, DRAIN_MS * 1000000L };

	while (!p->stop) {
		drain(p);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void print_cpus(const struct opts *o)
{
	printf("[");
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->watched[c])
			printf("%s%d", n++ ? ", " : "", c);
	printf("]");
}

static void print_read(void *arg)
{
	struct probe *p = arg;
	const struct opts *o = p->o;
	struct stall_cpu st[o->ncpu];
	__u64 lost = 0;

	drain(p);
	pthread_mutex_lock(&p->mu);
	for (__u32 c = 0; c < (__u32)o->ncpu; c++) {
		memset(&st[c], 0, sizeof(st[c]));
		if (o->watched[c] && bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.cpus), &c, &st[c]))
			sn_die("read CPU %u's counters: %s", c, strerror(errno));
		lost += st[c].lost;
	}
	printf("{\"period_ns\": %llu, \"threshold_ns\": %llu, \"cpus\": ", (unsigned long long)o->period_us * 1000,
	       (unsigned long long)o->threshold_us * 1000);
	print_cpus(o);
	printf(", \"started_ns\": %llu, \"monotonic_ns\": %llu, \"samples_per_cpu\": {",
	       (unsigned long long)p->started_ns, (unsigned long long)sn_now_ns());
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->watched[c])
			printf("%s\"%d\": %llu", n++ ? ", " : "", c, (unsigned long long)st[c].samples);
	printf("}, \"timers_per_cpu\": {");
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->watched[c])
			printf("%s\"%d\": %llu", n++ ? ", " : "", c, (unsigned long long)st[c].timers);
	printf("}, \"switches_per_cpu\": {");
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->watched[c])
			printf("%s\"%d\": %llu", n++ ? ", " : "", c, (unsigned long long)st[c].switches);
	printf("}, \"unseen_switches_per_cpu\": {");
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->watched[c])
			printf("%s\"%d\": %llu", n++ ? ", " : "", c, (unsigned long long)st[c].unseen);
	printf("}, \"lost_events\": %llu, \"events_seen\": %llu, \"events_truncated\": %s, \"stalls\": [",
	       (unsigned long long)lost, (unsigned long long)p->seen, p->seen > p->nev ? "true" : "false");
	for (__u64 i = 0; i < p->nev; i++) {
		const struct stall_event *e = &p->ev[i];
		printf("%s{\"cpu\": %u, \"kind\": \"%s\", \"start_ns\": %llu, \"end_ns\": %llu, \"pid\": %u, \"task\": ",
		       i ? ", " : "", e->cpu, e->kind == STALL_RUNQ ? "runq" : "gap", (unsigned long long)e->start_ns,
		       (unsigned long long)e->end_ns, e->pid);
		sn_print_json_string(e->task, STALLS_COMM_LEN);
		printf(", \"prio\": %d, \"by_pid\": %u, \"by\": ", e->prio, e->by_pid);
		sn_print_json_string(e->by, STALLS_COMM_LEN);
		printf(", \"by_policy\": %d, \"end_unseen\": %s, \"stolen_ns\": ", e->by_policy,
		       e->flags & STALL_END_UNSEEN ? "true" : "false");
		if (e->flags & STALL_STEAL_UNKNOWN)
			printf("null}");
		else
			printf("%llu}", (unsigned long long)e->stolen_ns);
	}
	printf("]}\n");
	fflush(stdout);
	pthread_mutex_unlock(&p->mu);
}

enum { OPT_CPUS = 256, OPT_PERIOD_US, OPT_THRESHOLD_US, OPT_CPU, OPT_MAX_EVENTS };

static const struct sn_option options[] = {
	SN_REQUIRED("cpus", OPT_CPUS, "LIST", "watch these CPUs, e.g. 0,1 or 0-3"),
	SN_OPTION("period-us", OPT_PERIOD_US, "N", "cpu-clock timer period, 100-100000 us (default " STR(STALLS_PERIOD_US) ")"),
	SN_OPTION("threshold-us", OPT_THRESHOLD_US, "N", "shortest stall reported, 10-10000000 us (default 200)"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin this tool's thread to CPU N (off the watched ones)"),
	SN_OPTION("max-events", OPT_MAX_EVENTS, "N", "stalls kept for reads, 1-10000000 (default 100000)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-stalls",
	.about = "Finds when watched CPUs did not run what needed them: runqueue waits\n"
		 "(tp_btf sched_wakeup/sched_switch), and gaps: a busy CPU silent (no timer,\n"
		 "clock sample or switch) for longer than a cpu-clock period plus the\n"
		 "threshold, when the vCPU itself did not run.",
	.footer = "Prints {\"ready\": ...} once attached, then for each \"read\" line on stdin one\n"
		  "JSON line with every stall since the start (CLOCK_MONOTONIC ns) and the\n"
		  "samples per CPU; \"quit\", end of input or SIGTERM detach and exit.",
	.options = options,
	.bpf = true,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_CPUS: o->cpus_arg = val; o->nwatched = sn_parse_cpus("cpus", val, o->watched, STALLS_MAX_CPUS, o->ncpu); break;
	case OPT_PERIOD_US: o->period_us = sn_parse_u64("period-us", val, 100, 100000); break;
	case OPT_THRESHOLD_US: o->threshold_us = sn_parse_u64("threshold-us", val, 10, 10000000); break;
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, STALLS_MAX_CPUS - 1); break;
	case OPT_MAX_EVENTS: o->max_events = sn_parse_u64("max-events", val, 1, 10000000); break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .cpu = -1, .period_us = STALLS_PERIOD_US, .threshold_us = 200, .max_events = 100000 };
	o.ncpu = libbpf_num_possible_cpus();
	if (o.ncpu <= 0)
		sn_die("count the CPUs: %s", strerror(-o.ncpu));
	sn_parse_args(&tool, argc, argv, on_option, &o);
	if (o.cpu >= o.ncpu)
		sn_usage_error("--cpu: CPU %d does not exist (this host has CPUs 0-%d)", o.cpu, o.ncpu - 1);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu); /* the drainer thread too */
	sn_die_with_parent();
	sn_catch_stop_signals();

	struct probe p = { .o = &o, .max_events = o.max_events };
	pthread_mutex_init(&p.mu, NULL);
	p.ev = calloc(o.max_events, sizeof(*p.ev)); /* pages are touched only as events come */
	if (!p.ev)
		sn_die("out of memory for %llu events", (unsigned long long)o.max_events);

	struct stalls_bpf *skel = stalls_bpf__open();
	if (!skel)
		sn_die("open BPF programs: %s", strerror(errno));
	memcpy((void *)skel->rodata->watched, o.watched, sizeof(o.watched));
	skel->rodata->period_ns = o.period_us * 1000;
	skel->rodata->threshold_ns = o.threshold_us * 1000;
	if (stalls_bpf__load(skel))
		sn_die("load BPF programs: %s", strerror(errno));
	p.skel = skel;
	/* the perf program is attached per CPU below; attach() takes the tracepoints */
	bpf_program__set_autoattach(skel->progs.sn_stall_tick, false);
	if (stalls_bpf__attach(skel))
		sn_die("attach the scheduler tracepoints (tp_btf): %s", strerror(errno));
	struct bpf_link *ticks[o.ncpu];
	memset(ticks, 0, sizeof(ticks));
	for (int c = 0; c < o.ncpu; c++) {
		if (!o.watched[c])
			continue;
		ticks[c] = sn_attach_cpu_clock(skel->progs.sn_stall_tick, c, o.period_us * 1000);
	}
	p.rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &p, NULL);
	if (!p.rb)
		sn_die("open the ring buffer: %s", strerror(errno));
	p.started_ns = sn_now_ns();

	/* Stop signals must reach the main thread (its blocking stdin read),
	 * not the drainer: the drainer blocks them. */
	sigset_t stop_sigs, old;
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
	pthread_t drainer;
	if (pthread_create(&drainer, NULL, drainer_main, &p))
		sn_die("start the drainer thread: %s", strerror(errno));
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	/* the field the programs read the steal time from (CONFIG_PARAVIRT_TIME_ACCOUNTING) */
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int has_steal = 0, rq_id = vmlinux ? btf__find_by_name_kind(vmlinux, "rq", BTF_KIND_STRUCT) : -1;
	if (rq_id > 0) {
		const struct btf_type *t = btf__type_by_id(vmlinux, rq_id);
		const struct btf_member *m = btf_members(t);
		for (int i = 0; i < btf_vlen(t); i++)
			if (!strcmp(btf__name_by_offset(vmlinux, m[i].name_off), "prev_steal_time_rq"))
				has_steal = 1;
	}
	btf__free(vmlinux);
	printf("{\"ready\": true, \"ncpu\": %d, \"cpus\": ", o.ncpu);
	print_cpus(&o);
	printf(", \"period_ns\": %llu, \"threshold_ns\": %llu, \"max_events\": %llu, \"started_ns\": %llu, "
	       "\"detectors\": [\"runq\", \"gap\"], \"steal_clock\": %s}\n",
	       (unsigned long long)o.period_us * 1000, (unsigned long long)o.threshold_us * 1000,
	       (unsigned long long)o.max_events, (unsigned long long)p.started_ns, has_steal ? "true" : "false");
	fflush(stdout);

	sn_serve_reads(print_read, &p);
	p.stop = 1;
	pthread_join(drainer, NULL);
	for (int c = 0; c < o.ncpu; c++)
		bpf_link__destroy(ticks[c]);
	ring_buffer__free(p.rb);
	stalls_bpf__destroy(skel);
	free(p.ev);
	return 0;
}
