// SPDX-License-Identifier: GPL-2.0
/* softnet-profile: attaches the packet-path tracepoint programs (tp_btf) and
 * answers "read" on stdin with one JSON line of per-CPU aggregates. The
 * attachments are bpf_links owned by this process: they go when it exits,
 * kill -9 included. The first line names the kernel's drop reasons (enum
 * skb_drop_reason, read from the kernel's BTF).
 *
 * The once-per-packet programs (sn_pp_*: the stage clock's packet events and
 * kfree_skb) cost time on every packet (docs/reference/measurements.md has figures). With
 * --duty F < 1 a thread attaches them for F of every period (--period-ms,
 * default SAMPLE_PERIOD_MS) and detaches them for the rest; the stage
 * clock keeps only intervals inside one attached period (profile.h), and the
 * counters over those periods are summed apart ("sampled") so that user space
 * can scale the stages and measure their coverage over the same time.
 *
 * The other programs (softirq, interrupt, system vector, sched_switch,
 * napi_poll) run once per softirq, interrupt, switch or poll: at a low load
 * that is nearly once per packet too. With --base-duty B < 1 they are
 * attached for B of every period as well (the per-packet ones inside that
 * time) and their counters are the sums over those periods, with the time
 * they cover ("base_ns"): user space scales them to the window. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "../common/sn_util.h"
#include "profile.h"
#include "profile.skel.h"

static const char *const vec_names[PROF_NVEC] = { "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK",
						  "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU" };
static const char *const ctx_names[PROF_NCTX] = { "idle", "ksoftirqd", "napi_thread", "other_task" };
/* enum prof_event, in order */
static const char *const ev_names[PROF_NEV] = {
	"none", "softirq_rx", "softirq_tx", "softirq_exit", "thread_in", "thread_out", "ksoftirqd_in",
	"irq", "rx_irq", "irq_exit", "gro", "gro_exit", "rcv", "rcv_exit", "list", "list_exit", "netif_rx",
	"core", "fib", "queue", "enqueue", "dequeue", "start_xmit", "xmit", "napi_poll", "consume", "kfree",
	"sk_ready" };

static void print_drop_reasons(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int id = btf ? btf__find_by_name_kind(btf, "skb_drop_reason", BTF_KIND_ENUM) : -1;

	printf("\"drop_reasons\": {");
	if (id > 0) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_enum *e = btf_enum(t);
		for (int i = 0; i < btf_vlen(t); i++)
			printf("%s\"%d\": \"%s\"", i ? ", " : "", e[i].val, btf__name_by_offset(btf, e[i].name_off));
	}
	printf("}");
	btf__free(btf);
}

static void u64s(const char *name, const __u64 *v, int n)
{
	printf("\"%s\": [", name);
	for (int i = 0; i < n; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)v[i]);
	printf("]");
}

#define SAMPLE_PERIOD_MS 500
#define STR_(x) #x
#define STR(x) STR_(x)
#define SETTLE_MS 3
#define NSTAT (sizeof(struct prof_stats) / sizeof(__u64))

/* The programs attached together: the per-packet ones (sn_pp_*) or the rest;
 * when attached part of the time, their counters summed over those periods. */
struct tier {
	int per_packet;
	struct bpf_link *links[64];
	int nlinks;
	int on;                             /* attached now */
	__u64 since, ns;                    /* when the period in progress began; all periods' time */
	struct prof_stats *at_on, *sum;     /* per CPU: counters when it began; sums over the periods */
};

struct profiler {
	struct profile_bpf *skel;
	int ncpu;
	double duty, base_duty;
	long period_ms;
	pthread_mutex_t mu;      /* the sampler thread against reads */
	volatile int stop;
	struct tier pp, base;    /* base: only its sums count when base_duty < 1 */
};

/* The counters now (and the stage matrix if m), returning the instant. busy,
 * idle and NAPI-thread time are summed at context switches: the interval
 * still open on each CPU is added, so that two reads bracket exactly the time
 * between them (a NAPI kthread that never sleeps would otherwise show none). */
static __u64 read_maps(struct profiler *p, struct prof_stats *s, struct stage_matrix *m)
{
	struct cpu_state st[p->ncpu];
	__u32 k = 0;
	if (bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.stats), &k, s) ||
	    bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.state), &k, st) ||
	    (m && bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.stages), &k, m)))
		sn_die("read stats: %s", strerror(errno));
	__u64 now = sn_now_ns();
	for (int c = 0; c < p->ncpu; c++) {
		if (!st[c].last_switch || st[c].last_switch > now)
			continue;
		if (st[c].cur_idle)
			s[c].idle_ns += now - st[c].last_switch;
		else
			s[c].busy_ns += now - st[c].last_switch;
		if (st[c].clk == CLK_THREAD || (st[c].clk == CLK_SIRQ && st[c].clk_outer == CLK_THREAD))
			s[c].napi_thread_ns += now - st[c].last_switch;
	}
	return now;
}

/* acc += b - a, field by field (every field of prof_stats is a __u64 counter) */
static void add_delta(struct prof_stats *acc, const struct prof_stats *a, const struct prof_stats *b, int ncpu)
{
	for (int c = 0; c < ncpu; c++)
		for (size_t i = 0; i < NSTAT; i++)
			((__u64 *)&acc[c])[i] += ((const __u64 *)&b[c])[i] - ((const __u64 *)&a[c])[i];
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void attach_tier(struct profiler *p, struct tier *t)
{
	struct bpf_program *prog;

	t->nlinks = 0;
	bpf_object__for_each_program(prog, p->skel->obj)
		if ((strncmp(bpf_program__name(prog), "sn_pp_", 6) == 0) == t->per_packet && bpf_program__autoload(prog) &&
		    t->nlinks < 64) {
			t->links[t->nlinks] = bpf_program__attach(prog);
			if (!t->links[t->nlinks])
				sn_die("attach %s: %s", bpf_program__name(prog), strerror(errno));
			t->nlinks++;
		}
	/* Right after attaching, the CPUs process packets faster than the
	 * offered rate, as after a stall: let them catch up first
	 * (docs/reference/measurements.md). */
	nap_ms(SETTLE_MS);
}

static void detach_tier(struct tier *t)
{
	for (int i = 0; i < t->nlinks; i++)
		bpf_link__destroy(t->links[i]);
	t->nlinks = 0;
}

/* A period of the tier begins (on) or ends at instant t, the counters then being now. */
static void mark_period(struct profiler *p, struct tier *w, int on, const struct prof_stats *now, __u64 t)
{
	if (on) {
		memcpy(w->at_on, now, p->ncpu * sizeof(*now));
		w->since = t;
	} else {
		add_delta(w->sum, w->at_on, now, p->ncpu);
		w->ns += t - w->since;
	}
	w->on = on;
}

/* The tier's sums over its periods up to now (s: the counters now) into out; their time. */
static __u64 period_sums(struct profiler *p, const struct tier *w, const struct prof_stats *s, __u64 now,
			 struct prof_stats *out)
{
	memcpy(out, w->sum, p->ncpu * sizeof(*out));
	if (!w->on)
		return w->ns;
	add_delta(out, w->at_on, s, p->ncpu);
	return w->ns + now - w->since;
}

/* The base programs on or off (base_duty < 1). While they are off nothing
 * runs, so the per-CPU state is zeroed before they attach again: an exit
 * whose entry came before is then unmatched (lost, not guessed), and no
 * interval spans the time they were off. */
static void set_base(struct profiler *p, int on)
{
	struct prof_stats now[p->ncpu];

	if (on) {
		struct cpu_state zero[p->ncpu];
		__u32 k = 0;
		memset(zero, 0, sizeof(zero));
		if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.state), &k, zero, BPF_ANY))
			sn_die("reset the per-CPU state: %s", strerror(errno));
		attach_tier(p, &p->base);
	}
	mark_period(p, &p->base, on, now, read_maps(p, now, NULL));
	if (!on)
		detach_tier(&p->base);
}

static void set_sampling(struct profiler *p, int on)
{
	struct prof_stats now[p->ncpu];

	if (on) /* attach first, then open the generation: no sampled interval misses a boundary */
		attach_tier(p, &p->pp);
	__u64 t = read_maps(p, now, NULL);
	p->skel->bss->sample_gen++;
	p->skel->bss->sampling = on;
	mark_period(p, &p->pp, on, now, t);
	if (!on)
		detach_tier(&p->pp);
}

static void locked(struct profiler *p, void (*set)(struct profiler *, int), int on)
{
	pthread_mutex_lock(&p->mu);
	set(p, on);
	pthread_mutex_unlock(&p->mu);
}

static void nap_unless_stopped(struct profiler *p, long ms)
{
	for (long t = 0; t < ms && !p->stop; t += 10) /* "quit" is answered within 10 ms */
		nap_ms(ms - t < 10 ? ms - t : 10);
}

/* Every period: the base programs on for base_duty of it (when < 1), the
 * per-packet ones for duty of it, inside that time. */
static void *sampler_main(void *arg)
{
	struct profiler *p = arg;
	long on_ms = p->duty > 0 ? (long)(p->duty * p->period_ms + 0.5) : 0;
	if (p->duty > 0 && on_ms < 1)
		on_ms = 1;
	long base_ms = p->base_duty < 1 ? (long)(p->base_duty * p->period_ms + 0.5) : on_ms;
	if (base_ms < on_ms)
		base_ms = on_ms;

	while (!p->stop) {
		if (p->base_duty < 1)
			locked(p, set_base, 1);
		if (on_ms) {
			locked(p, set_sampling, 1);
			nap_ms(on_ms);
			locked(p, set_sampling, 0);
		}
		if (p->base_duty < 1) {
			nap_unless_stopped(p, base_ms - on_ms);
			locked(p, set_base, 0);
		}
		nap_unless_stopped(p, p->period_ms - base_ms);
	}
	return NULL;
}

static void print_cpu(const struct prof_stats *s)
{
	printf("{\"softirq_ns\": {");
	for (int v = 0; v < PROF_NVEC; v++) {
		printf("%s\"%s\": {", v ? ", " : "", vec_names[v]);
		for (int x = 0; x < PROF_NCTX; x++)
			printf("%s\"%s\": [%llu, %llu]", x ? ", " : "", ctx_names[x],
			       (unsigned long long)s->softirq_ns[v][x], (unsigned long long)s->softirq_cnt[v][x]);
		printf("}");
	}
	printf("}, ");
#define F(f) printf("\"" #f "\": %llu, ", (unsigned long long)s->f)
	F(hardirq_ns); F(hardirq_cnt); F(sysvec_ns); F(sysvec_cnt); F(busy_ns); F(idle_ns); F(napi_thread_ns);
	F(hardirq_in_idle_ns); F(softirq_in_idle_ns); F(ctx_switches); F(napi_polls); F(napi_work);
	F(napi_budget_exhausted); F(rx_skbs); F(consumed_skbs); F(dropped_skbs); F(unmatched_exits); F(drop_keys_full);
	F(unseen_switches);
#undef F
	u64s("napi_work_hist", s->napi_work_hist, PROF_NAPI_BUCKETS);
}

static void print_stats(struct profiler *p)
{
	int ncpu = p->ncpu;
	struct prof_stats s[ncpu], sampled[ncpu];
	struct stage_matrix *m = calloc(ncpu, sizeof(*m)); /* 10 KB per CPU: not on the stack */
	__u64 d[ncpu];

	if (!m)
		sn_die("out of memory");
	pthread_mutex_lock(&p->mu);
	__u64 now = read_maps(p, s, m);
	__u64 sampled_ns = period_sums(p, &p->pp, s, now, sampled), base_ns = 0;
	if (p->base_duty < 1) { /* the counters are the sums over the base periods */
		struct prof_stats at[ncpu];
		memcpy(at, s, sizeof(at));
		base_ns = period_sums(p, &p->base, at, now, s);
	}
	pthread_mutex_unlock(&p->mu);

	printf("{\"cpus\": [");
	for (int c = 0; c < ncpu; c++) {
		printf("%s", c ? ", " : "");
		print_cpu(&s[c]);
		/* the stage clock: the non-zero (from, to) pairs as [from, to, ns, count] */
		printf(", \"transitions\": [");
		int first = 1;
		for (int a = 0; a < PROF_NEV; a++)
			for (int b = 0; b < PROF_NEV; b++)
				if (m[c].cnt[a][b]) {
					printf("%s[%d, %d, %llu, %llu]", first ? "" : ", ", a, b,
					       (unsigned long long)m[c].ns[a][b], (unsigned long long)m[c].cnt[a][b]);
					first = 0;
				}
		printf("]}");
	}
	printf("], \"sampled_ns\": %llu, ", (unsigned long long)sampled_ns);
	if (p->base_duty < 1)
		printf("\"base_ns\": %llu, ", (unsigned long long)base_ns);
	printf("\"sampled_cpus\": [");
	for (int c = 0; c < ncpu; c++) {
		printf("%s", c ? ", " : "");
		print_cpu(&sampled[c]);
		printf("}");
	}
	printf("], \"drops\": [");
	int first = 1, fd = bpf_map__fd(p->skel->maps.drops);
	struct drop_key key, next, *prev = NULL;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		__u64 n = 0;
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, d))
			continue; /* deleted meanwhile: nothing deletes, but never trust a race */
		for (int c = 0; c < ncpu; c++)
			n += d[c];
		printf("%s[%u, %u, %u, %llu]", first ? "" : ", ", key.reason, key.ifindex, key.netns_ino,
		       (unsigned long long)n);
		first = 0;
	}
	printf("], \"monotonic_ns\": %llu}\n", (unsigned long long)now);
	fflush(stdout);
	free(m);
}

static void read_cb(void *arg)
{
	print_stats(arg);
}

enum { OPT_NO_PER_PACKET = 256, OPT_PERIOD_MS, OPT_CPU, OPT_BASE_DUTY };

static const struct sn_option options[] = {
	/* without the tracepoints hit once per packet: cheaper, but no stages and no drop reasons */
	SN_OPTION("no-per-packet", OPT_NO_PER_PACKET, NULL, "leave out the once-per-packet tracepoints"),
	SN_OPTION("duty", 'd', "F", "per-packet tracepoints' duty cycle, 0.01-1 (default 1)"),
	SN_OPTION("base-duty", OPT_BASE_DUTY, "B", "other tracepoints' duty cycle, 0.01-1, >= F (default 1)"),
	SN_OPTION("period-ms", OPT_PERIOD_MS, "N", "period of the duty cycles, 20-10000 ms (default "
		  STR(SAMPLE_PERIOD_MS) ")"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin this loader to CPU N (keep it off the SUT's CPUs)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-profile",
	.about = "Attaches BTF tracepoint programs (tp_btf) on the kernel's packet path and sums,\n"
		 "per CPU, softirq, interrupt, NAPI and stage times, and drops by reason.",
	.footer = "Prints {\"ready\": ...} once attached (the plan, drop reason and event names),\n"
		  "then one JSON line of per-CPU aggregates for each \"read\" line on stdin;\n"
		  "\"quit\", end of input or SIGTERM detach and exit.",
	.options = options,
	.bpf = true,
};

struct opts {
	int per_packet, cpu;
	double duty, base_duty;
	long period_ms;
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_NO_PER_PACKET: o->per_packet = 0; break;
	case 'd': o->duty = sn_parse_double("duty", val, 0.01, 1.0); break;
	case OPT_BASE_DUTY: o->base_duty = sn_parse_double("base-duty", val, 0.01, 1.0); break;
	case OPT_PERIOD_MS: o->period_ms = (long)sn_parse_u64("period-ms", val, 20, 10000); break;
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, 4095); break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .per_packet = 1, .cpu = -1, .duty = 1.0, .base_duty = 1.0, .period_ms = SAMPLE_PERIOD_MS };
	sn_parse_args(&tool, argc, argv, on_option, &o);
	if (o.per_packet && o.base_duty < o.duty)
		sn_die("--base-duty %g is below --duty %g: the per-packet events need the others attached", o.base_duty,
		       o.duty);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu); /* its threads too: the sampler's attach/detach work stays off the SUT */
	sn_die_with_parent();
	sn_catch_stop_signals();

	struct profile_bpf *skel = profile_bpf__open();
	if (!skel)
		sn_die("open BPF programs: %s", strerror(errno));
	/* The x86 system-vector tracepoints exist only there: left out elsewhere. */
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int has_sysvec = vmlinux && btf__find_by_name(vmlinux, "btf_trace_call_function_single_entry") > 0;
	/* sock:sk_data_ready (kernel 6.4+) closes the IP-to-transport stage of local delivery */
	int has_sk_ready = vmlinux && btf__find_by_name(vmlinux, "btf_trace_sk_data_ready") > 0;
	btf__free(vmlinux);
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj) {
		const char *name = bpf_program__name(prog);
		if ((!has_sysvec && !strncmp(name, "sn_sv_", 6)) || (!has_sk_ready && !strcmp(name, "sn_pp_sk_data_ready")) ||
		    (!o.per_packet && !strncmp(name, "sn_pp_", 6)))
			bpf_program__set_autoload(prog, false);
		else if (!strncmp(name, "sn_pp_", 6) || o.base_duty < 1)
			bpf_program__set_autoattach(prog, false); /* attached by set_sampling or set_base */
	}
	if (profile_bpf__load(skel))
		sn_die("load BPF programs: %s", strerror(errno));
	if (profile_bpf__attach(skel))
		sn_die("attach tracepoints (tp_btf): %s", strerror(errno));
	struct profiler p = { .skel = skel, .ncpu = libbpf_num_possible_cpus(), .duty = o.per_packet ? o.duty : 0,
			      .base_duty = o.base_duty, .period_ms = o.period_ms, .pp = { .per_packet = 1 } };
	pthread_mutex_init(&p.mu, NULL);
	struct tier *tiers[] = { &p.pp, &p.base };
	for (int i = 0; i < 2; i++) {
		struct tier *t = tiers[i];
		t->at_on = calloc(p.ncpu, sizeof(struct prof_stats));
		t->sum = calloc(p.ncpu, sizeof(struct prof_stats));
		if (!t->at_on || !t->sum)
			sn_die("out of memory");
	}
	pthread_t sampler;
	int threaded = (o.per_packet && o.duty < 1.0) || o.base_duty < 1.0;
	if (o.per_packet && !threaded)
		set_sampling(&p, 1); /* always on */
	if (threaded && pthread_create(&sampler, NULL, sampler_main, &p))
		sn_die("start the sampling thread: %s", strerror(errno));

	printf("{\"ready\": true, \"ncpu\": %d, \"plan\": \"tracepoints (tp_btf)%s%s\", \"duty\": %g, "
	       "\"base_duty\": %g, \"period_ms\": %ld, ", p.ncpu, has_sysvec ? "" : " without x86 system vectors",
	       o.per_packet ? "" : " without per-packet ones", p.duty, p.base_duty, p.period_ms);
	print_drop_reasons();
	printf(", \"events\": [");
	for (int e = 0; e < PROF_NEV; e++)
		printf("%s\"%s\"", e ? ", " : "", ev_names[e]);
	printf("]}\n");
	fflush(stdout);

	sn_serve_reads(read_cb, &p);
	if (threaded) {
		p.stop = 1;
		pthread_join(sampler, NULL);
	}
	if (p.pp.on)
		set_sampling(&p, 0);
	detach_tier(&p.base);
	profile_bpf__destroy(skel);
	return 0;
}
