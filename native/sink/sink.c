// SPDX-License-Identifier: GPL-2.0
/* softnet-sink: attaches the counting XDP program to the sink interface and
 * answers "read" on stdin with one JSON line of counters summed over CPUs.
 * The XDP attachment is a bpf_link owned by this process: it disappears when
 * the process exits for any reason, kill -9 included, so a crash cannot leave
 * a program on the interface. */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "../common/sn_util.h"
#include "sink.h"
#include "sink.skel.h"

static const char *const names[SINK_NCOUNTERS] = {
	[SINK_RX_TEST] = "rx_test_pkts",   [SINK_RX_WARMUP] = "rx_warmup_pkts",
	[SINK_RX_WINDOW] = "rx_window_pkts", [SINK_DUP] = "duplicate_pkts",
	[SINK_REORDER] = "reordered_pkts", [SINK_OUT_OF_RANGE] = "out_of_range_pkts",
	[SINK_LAT_SUM_NS] = "latency_sum_ns", [SINK_LAT_MAX_NS] = "latency_max_ns",
	[SINK_LAT_MIN_NS] = "latency_min_ns", [SINK_OTHER] = "other_pkts",
	[SINK_LAT_PKTS] = "latency_pkts", [SINK_LAT_NEGATIVE] = "latency_negative_pkts",
	[SINK_LAT_OVER_RANGE] = "latency_over_range_pkts",
};

struct reader {
	struct sink_bpf *skel;
	int ncpu;
	const volatile __u64 *exact; /* the mmapped exact map, or NULL */
};

/* The histogram as its non-empty buckets only: a trial fills a few hundred of
 * the thousands, and the raw trial keeps what is printed. */
static void print_hist(struct sink_bpf *skel, int ncpu)
{
	__u64 vals[ncpu];
	int hfd = bpf_map__fd(skel->maps.lat_hist), first = 1;

	printf("\"latency_hist\": {\"sub_bucket_bits\": %d, \"range_log2_ns\": %d, \"buckets\": [",
	       SINK_HIST_SUB_BITS, SINK_HIST_RANGE_LOG2);
	for (__u32 b = 0; b < SINK_HIST_BUCKETS; b++) {
		__u64 agg = 0;
		if (bpf_map_lookup_elem(hfd, &b, vals))
			sn_die("read histogram %u: %s", b, strerror(errno));
		for (int c = 0; c < ncpu; c++)
			agg += vals[c];
		if (agg) {
			printf("%s[%u, %llu]", first ? "" : ", ", b, (unsigned long long)agg);
			first = 0;
		}
	}
	printf("]}");
}

static void print_exact(const struct reader *r)
{
	__u64 taken = r->skel->bss->exact_next, n = r->skel->rodata->exact_n;
	__u64 kept = taken < n ? taken : n;

	/* a slot is taken before its delay is written: a read during traffic can
	 * see a 0 not yet filled in (a real delay is never 0 on one clock) */
	printf(", \"latency_exact_seen_pkts\": %llu, \"latency_exact_ns\": [", (unsigned long long)taken);
	for (__u64 i = 0; i < kept; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)r->exact[i]);
	printf("]");
}

static void print_counters(const struct reader *r)
{
	struct sink_bpf *skel = r->skel;
	int ncpu = r->ncpu;
	__u64 vals[ncpu];
	int cfd = bpf_map__fd(skel->maps.counters);

	printf("{");
	for (__u32 k = 0; k < SINK_NCOUNTERS; k++) {
		__u64 agg = 0;
		if (bpf_map_lookup_elem(cfd, &k, vals))
			sn_die("read counter %u: %s", k, strerror(errno));
		for (int c = 0; c < ncpu; c++) {
			if (k == SINK_LAT_MAX_NS)
				agg = vals[c] > agg ? vals[c] : agg;
			else if (k == SINK_LAT_MIN_NS)
				agg = vals[c] && (!agg || vals[c] < agg) ? vals[c] : agg;
			else
				agg += vals[c];
		}
		printf("\"%s\": %llu, ", names[k], (unsigned long long)agg);
		if (k == SINK_RX_TEST) { /* where the sink actually ran: placement evidence */
			printf("\"rx_test_pkts_per_cpu\": [");
			for (int c = 0; c < ncpu; c++)
				printf("%s%llu", c ? ", " : "", (unsigned long long)vals[c]);
			printf("], ");
		}
	}
	print_hist(skel, ncpu);
	if (r->exact)
		print_exact(r);
	printf("}\n");
	fflush(stdout);
}

static void read_cb(void *arg)
{
	print_counters(arg);
}

struct opts {
	const char *netns, *ifname;
	__u64 count, warmup, exact;
};

static const struct sn_option options[] = {
	SN_OPTION("netns", 'n', "NS", "run in network namespace NS (/run/netns/NS)"),
	SN_REQUIRED("ifname", 'i', "DEV", "count on interface DEV (an XDP program)"),
	/* one bit per expected packet: 2^33 bits = 1 GiB is the ceiling */
	SN_REQUIRED("count", 'c', "N", "packets expected (sequence numbers 0..N-1)"),
	SN_OPTION("warmup", 'w', "N", "sequence numbers below N are warm-up (default 0)"),
	SN_OPTION("exact", 'x', "N", "also keep the first N delays exactly, one by one"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-sink",
	.about = "Counts softnet test frames on an interface with XDP and drops them: loss,\n"
		 "duplicates, reordering and one-way delay, from sequence numbers and send times.",
	.footer = "Prints {\"ready\": ...} once attached, then one JSON line of counters for each\n"
		  "\"read\" line on stdin; \"quit\", end of input or SIGTERM detach and exit.",
	.options = options,
	.bpf = true,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case 'n': o->netns = val; break;
	case 'i': o->ifname = val; break;
	case 'c': o->count = sn_parse_u64("count", val, 1, 1ull << 33); break;
	case 'w': o->warmup = sn_parse_u64("warmup", val, 0, 1ull << 33); break;
	case 'x': o->exact = sn_parse_u64("exact", val, 0, SINK_EXACT_MAX); break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = {};
	sn_parse_args(&tool, argc, argv, on_option, &o);

	sn_die_with_parent();
	sn_catch_stop_signals();
	if (o.netns)
		sn_enter_netns(o.netns);
	unsigned ifindex = if_nametoindex(o.ifname);
	if (!ifindex)
		sn_die("--ifname: no interface '%s' in this namespace", o.ifname);

	struct sink_bpf *skel = sink_bpf__open();
	if (!skel)
		sn_die("open BPF object: %s", strerror(errno));
	skel->rodata->warmup = o.warmup;
	skel->rodata->nseq = o.count;
	bpf_map__set_max_entries(skel->maps.seen, (o.count + 63) / 64);
	skel->rodata->exact_n = o.exact;
	bpf_map__set_max_entries(skel->maps.exact, o.exact ? o.exact : 1);
	if (sink_bpf__load(skel))
		sn_die("load BPF program: %s", strerror(errno));
	struct bpf_link *link = bpf_program__attach_xdp(skel->progs.sn_sink, ifindex);
	if (!link)
		sn_die("attach XDP to %s: %s", o.ifname, strerror(errno));
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_prog_info info = {};
	__u32 ilen = sizeof(info);
	bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.sn_sink), &info, &ilen);
	printf("{\"ready\": true, \"prog_id\": %u, \"ncpu\": %d}\n", info.id, ncpu);
	fflush(stdout);

	struct reader r = { skel, ncpu, NULL };
	size_t exact_len = (o.exact ? o.exact : 1) * sizeof(__u64);
	if (o.exact) {
		void *m = mmap(NULL, exact_len, PROT_READ, MAP_SHARED, bpf_map__fd(skel->maps.exact), 0);
		if (m == MAP_FAILED)
			sn_die("mmap the exact-delay map: %s", strerror(errno));
		r.exact = m;
	}
	sn_serve_reads(read_cb, &r);
	if (r.exact)
		munmap((void *)r.exact, exact_len);
	bpf_link__destroy(link);
	sink_bpf__destroy(skel);
	return 0;
}
