// SPDX-License-Identifier: GPL-2.0
/* softnet-profile: attaches the packet-path tracepoint programs (tp_btf) and
 * answers "read" on stdin with one JSON line of per-CPU aggregates. The
 * attachments are bpf_links owned by this process: they go when it exits,
 * kill -9 included. The first line names the kernel's drop reasons (enum
 * skb_drop_reason, read from the kernel's BTF). */
#define _GNU_SOURCE
#include <errno.h>
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
	"core", "fib", "queue", "enqueue", "dequeue", "start_xmit", "xmit", "napi_poll", "consume", "kfree" };

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

static void print_stats(struct profile_bpf *skel, int ncpu)
{
	struct prof_stats s[ncpu];
	struct cpu_state st[ncpu];
	struct stage_matrix *m = calloc(ncpu, sizeof(*m)); /* 10 KB per CPU: not on the stack */
	__u64 d[ncpu];
	__u32 k = 0;

	if (!m)
		sn_die("out of memory");
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stats), &k, s) ||
	    bpf_map_lookup_elem(bpf_map__fd(skel->maps.state), &k, st) ||
	    bpf_map_lookup_elem(bpf_map__fd(skel->maps.stages), &k, m))
		sn_die("read stats: %s", strerror(errno));
	/* busy/idle are summed at context switches: add the interval still open
	 * on each CPU, so that two reads bracket exactly the time between them. */
	__u64 now = sn_now_ns();
	for (int c = 0; c < ncpu; c++) {
		if (!st[c].last_switch || st[c].last_switch > now)
			continue;
		if (st[c].cur_idle)
			s[c].idle_ns += now - st[c].last_switch;
		else
			s[c].busy_ns += now - st[c].last_switch;
		if (st[c].clk == CLK_THREAD || (st[c].clk == CLK_SIRQ && st[c].clk_outer == CLK_THREAD))
			s[c].napi_thread_ns += now - st[c].last_switch;
	}
	printf("{\"cpus\": [");
	for (int c = 0; c < ncpu; c++) {
		printf("%s{\"softirq_ns\": {", c ? ", " : "");
		for (int v = 0; v < PROF_NVEC; v++) {
			printf("%s\"%s\": {", v ? ", " : "", vec_names[v]);
			for (int x = 0; x < PROF_NCTX; x++)
				printf("%s\"%s\": [%llu, %llu]", x ? ", " : "", ctx_names[x],
				       (unsigned long long)s[c].softirq_ns[v][x], (unsigned long long)s[c].softirq_cnt[v][x]);
			printf("}");
		}
		printf("}, ");
#define F(f) printf("\"" #f "\": %llu, ", (unsigned long long)s[c].f)
		F(hardirq_ns); F(hardirq_cnt); F(sysvec_ns); F(sysvec_cnt); F(busy_ns); F(idle_ns); F(napi_thread_ns); F(hardirq_in_idle_ns); F(softirq_in_idle_ns);
		F(ctx_switches); F(napi_polls); F(napi_work); F(napi_budget_exhausted); F(rx_skbs);
		F(consumed_skbs); F(dropped_skbs); F(unmatched_exits); F(drop_keys_full);
#undef F
		u64s("napi_work_hist", s[c].napi_work_hist, PROF_NAPI_BUCKETS);
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
	printf("], \"drops\": [");
	int first = 1, fd = bpf_map__fd(skel->maps.drops);
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

struct reader {
	struct profile_bpf *skel;
	int ncpu;
};

static void read_cb(void *arg)
{
	struct reader *r = arg;
	print_stats(r->skel, r->ncpu);
}

int main(int argc, char **argv)
{
	/* --no-per-packet: leave out the tracepoints hit once per packet
	 * (netif_receive_skb, consume_skb, kfree_skb): cheaper, no drop reasons. */
	int per_packet = !(argc == 2 && !strcmp(argv[1], "--no-per-packet"));
	if (argc > 2 || (argc == 2 && per_packet))
		sn_die("usage: softnet-profile [--no-per-packet] (then \"read\" or \"quit\" lines on stdin)");
	sn_die_with_parent();
	sn_catch_stop_signals();

	libbpf_set_print(NULL);
	struct profile_bpf *skel = profile_bpf__open();
	if (!skel)
		sn_die("open BPF programs: %s", strerror(errno));
	/* The x86 system-vector tracepoints exist only there: left out elsewhere. */
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int has_sysvec = vmlinux && btf__find_by_name(vmlinux, "btf_trace_call_function_single_entry") > 0;
	btf__free(vmlinux);
	if (!has_sysvec) {
		struct bpf_program *p;
		bpf_object__for_each_program(p, skel->obj)
			if (!strncmp(bpf_program__name(p), "sn_sv_", 6))
				bpf_program__set_autoload(p, false);
	}
	if (!per_packet) {
		struct bpf_program *p;
		bpf_object__for_each_program(p, skel->obj)
			if (!strncmp(bpf_program__name(p), "sn_pp_", 6))
				bpf_program__set_autoload(p, false);
	}
	if (profile_bpf__load(skel))
		sn_die("load BPF programs: %s", strerror(errno));
	if (profile_bpf__attach(skel))
		sn_die("attach tracepoints (tp_btf): %s", strerror(errno));
	int ncpu = libbpf_num_possible_cpus();
	printf("{\"ready\": true, \"ncpu\": %d, \"plan\": \"tracepoints (tp_btf)%s%s\", ", ncpu,
	       has_sysvec ? "" : " without x86 system vectors", per_packet ? "" : " without per-packet ones");
	print_drop_reasons();
	printf(", \"events\": [");
	for (int e = 0; e < PROF_NEV; e++)
		printf("%s\"%s\"", e ? ", " : "", ev_names[e]);
	printf("]}\n");
	fflush(stdout);

	struct reader r = { skel, ncpu };
	sn_serve_reads(read_cb, &r);
	profile_bpf__destroy(skel);
	return 0;
}
