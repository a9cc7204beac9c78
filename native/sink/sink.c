// SPDX-License-Identifier: GPL-2.0
/* softnet-sink: attaches the counting XDP program to the sink interface and
 * answers "read" on stdin with one JSON line of counters summed over CPUs, and
 * "timeline SENT" with where in the sequence (so when, against the
 * generator's schedule) packets were lost and how long they waited.
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
	[SINK_LAT_OVER_RANGE] = "latency_over_range_pkts", [SINK_RX_VXLAN] = "rx_vxlan_pkts",
};

struct reader {
	struct sink_bpf *skel;
	int ncpu;
	const volatile __u64 *exact; /* the mmapped exact map, or NULL */
	const volatile __u64 *seen;  /* the mmapped bitmap of seqs seen */
	const volatile __u64 *bin_delay_max; /* the mmapped timeline, or NULL */
	__u64 count, warmup, bin_pkts;
	const char *xdp_mode; /* how the kernel attached the program: in every "read" too */
	__u32 flows;
	const struct sn_mix *mix; /* or NULL */
};

/* A per-CPU counter array's entry, summed over CPUs. */
static __u64 percpu_sum(int fd, __u32 k, int ncpu, const char *what)
{
	__u64 vals[ncpu], agg = 0;
	if (bpf_map_lookup_elem(fd, &k, vals))
		sn_die("read %s %u: %s", what, k, strerror(errno));
	for (int c = 0; c < ncpu; c++)
		agg += vals[c];
	return agg;
}

/* Window first copies per flow (--flows) and per frame size (--mix); the
 * window's frame bytes from the latter (sizes incl. FCS). */
static void print_shapes(const struct reader *r)
{
	if (r->flows > 1) {
		int fd = bpf_map__fd(r->skel->maps.flow_pkts);
		printf(", \"flows\": %u, \"flow_pkts\": [", r->flows);
		for (__u32 f = 0; f < r->flows; f++)
			printf("%s%llu", f ? "," : "", (unsigned long long)percpu_sum(fd, f, r->ncpu, "flow count"));
		printf("]");
	}
	if (r->mix) {
		int fd = bpf_map__fd(r->skel->maps.size_pkts);
		__u64 bytes = 0;
		printf(", \"mix\": \"%s\", \"size_pkts\": {", r->mix->text);
		for (__u32 c = 0; c < r->mix->n; c++) {
			__u64 n = percpu_sum(fd, c, r->ncpu, "size count");
			bytes += n * r->mix->size[c];
			printf("%s\"%u\": %llu", c ? ", " : "", r->mix->size[c], (unsigned long long)n);
		}
		printf("}, \"window_frame_bytes\": %llu", (unsigned long long)bytes);
	}
}

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
	printf("\"xdp_mode\": \"%s\", ", r->xdp_mode);
	print_hist(skel, ncpu);
	if (r->exact)
		print_exact(r);
	print_shapes(r);
	printf("}\n");
	fflush(stdout);
}

/* The first seq in [from, end) whose bit in the bitmap is `set`, or end. */
static __u64 find_bit(const volatile __u64 *bm, __u64 from, __u64 end, int set)
{
	while (from < end) {
		__u64 w = bm[from >> 6];
		if (!set)
			w = ~w;
		w &= ~0ull << (from & 63);
		if (w) {
			__u64 i = (from & ~63ull) + (__u64)__builtin_ctzll(w);
			return i < end ? i : end;
		}
		from = (from & ~63ull) + 64;
	}
	return end;
}

struct bin_loss {
	__u64 bin, lost;
};

/* One JSON line: the runs of unseen seqs in [warmup, sent) and the timeline
 * (README of this format: docs/explanation/generator.md, "Loss in time"). */
static void print_timeline(const struct reader *r, __u64 sent)
{
	__u64 first = r->warmup, n = r->bin_pkts, lost = 0, runs_total = 0, hist[64] = {};
	/* past SINK_TIMELINE_MAX_RUNS runs: the first half and the last half (a ring), so that
	 * both ends of the window (a reset, a recovery's last loss) stay known */
	const size_t head = SINK_TIMELINE_MAX_RUNS / 2, tail = SINK_TIMELINE_MAX_RUNS - head;
	__u64 (*runs)[2] = malloc(SINK_TIMELINE_MAX_RUNS * sizeof(*runs));
	size_t nruns = 0, nbins = 0, cap = 0;
	struct bin_loss *bins = NULL;

	if (!runs)
		sn_die("timeline: out of memory");
	for (__u64 a = find_bit(r->seen, first, sent, 0); a < sent; a = find_bit(r->seen, a, sent, 0)) {
		__u64 b = find_bit(r->seen, a, sent, 1), len = b - a; /* [a, b) unseen */
		lost += len;
		runs_total++;
		hist[63 - __builtin_clzll(len)]++;
		size_t slot = runs_total <= head ? runs_total - 1 : head + (runs_total - 1 - head) % tail;
		runs[slot][0] = a;
		runs[slot][1] = len;
		if (nruns < SINK_TIMELINE_MAX_RUNS)
			nruns++;
		for (__u64 bin = a / n; bin * n < b; bin++) { /* bins ascend: merge into the last */
			__u64 lo = bin * n > a ? bin * n : a, hi = (bin + 1) * n < b ? (bin + 1) * n : b;
			if (nbins && bins[nbins - 1].bin == bin) {
				bins[nbins - 1].lost += hi - lo;
				continue;
			}
			if (nbins == cap) {
				cap = cap ? 2 * cap : 1024;
				if (!(bins = realloc(bins, cap * sizeof(*bins))))
					sn_die("timeline: out of memory");
			}
			bins[nbins++] = (struct bin_loss){ bin, hi - lo };
		}
		a = b;
	}
	printf("{\"timeline\": {\"first_seq\": %llu, \"end_seq\": %llu, \"bin_pkts\": %llu, \"lost_pkts\": %llu, "
	       "\"runs_total\": %llu, \"runs\": [",
	       (unsigned long long)first, (unsigned long long)sent, (unsigned long long)n,
	       (unsigned long long)lost, (unsigned long long)runs_total);
	for (size_t i = 0; i < nruns; i++) {
		/* the ring's oldest run first: in order of sequence */
		size_t k = i < head || runs_total <= SINK_TIMELINE_MAX_RUNS ? i
			   : head + (runs_total - head + (i - head)) % tail;
		printf("%s[%llu, %llu]", i ? ", " : "", (unsigned long long)runs[k][0], (unsigned long long)runs[k][1]);
	}
	printf("], \"runs_truncated\": %s, ", runs_total > nruns ? "true" : "false");
	if (runs_total > nruns)
		printf("\"runs_head\": %zu, ", head);
	printf("\"run_length_hist\": [");
	for (int k = 0, any = 0; k < 64; k++)
		if (hist[k]) {
			printf("%s[%d, %llu]", any ? ", " : "", k, (unsigned long long)hist[k]);
			any = 1;
		}
	printf("], \"lost_per_bin\": [");
	for (size_t i = 0; i < nbins; i++)
		printf("%s[%llu, %llu]", i ? ", " : "", (unsigned long long)bins[i].bin, (unsigned long long)bins[i].lost);
	printf("], \"delay_max_ns_per_bin\": [");
	if (sent > first)
		for (__u64 bin = first / n; bin <= (sent - 1) / n; bin++)
			printf("%s%llu", bin > first / n ? "," : "", (unsigned long long)r->bin_delay_max[bin]);
	printf("]}}\n");
	fflush(stdout);
	free(runs);
	free(bins);
}

static void timeline_error(const char *why)
{
	printf("{\"timeline\": null, \"error\": \"%s\"}\n", why);
	fflush(stdout);
}

static void on_line(const char *line, void *arg)
{
	const struct reader *r = arg;
	if (!strcmp(line, "read")) {
		print_counters(r);
	} else if (!strncmp(line, "timeline", 8) && (line[8] == ' ' || !line[8])) {
		char *endp;
		errno = 0;
		unsigned long long sent = strtoull(line + 8, &endp, 10);
		if (!r->bin_pkts)
			timeline_error("started without --bin-pkts");
		else if (errno || endp == line + 8 || *endp || strchr(line, '-'))
			timeline_error("usage: timeline SENT (packets the generator sent, warm-up included)");
		else if (sent > r->count)
			timeline_error("SENT is beyond --count");
		else
			print_timeline(r, sent);
	}
}

struct opts {
	const char *netns, *ifname;
	__u64 count, warmup, exact, bin_pkts, streams, flows, dst_ports;
	int has_mix;
	struct sn_mix mix;
};

enum { OPT_STREAMS = 256, OPT_FLOWS, OPT_MIX, OPT_DST_PORTS };

static const struct sn_option options[] = {
	SN_OPTION("netns", 'n', "NS", "run in network namespace NS (/run/netns/NS)"),
	SN_REQUIRED("ifname", 'i', "DEV", "count on interface DEV (an XDP program)"),
	/* one bit per expected packet: 2^33 bits = 1 GiB is the ceiling */
	SN_REQUIRED("count", 'c', "N", "packets expected (sequence numbers 0..N-1)"),
	SN_OPTION("warmup", 'w', "N", "sequence numbers below N are warm-up (default 0)"),
	SN_OPTION("exact", 'x', "N", "also keep the first N delays exactly, one by one"),
	SN_OPTION("bin-pkts", 'b', "N", "timeline: largest delay per N seqs (default 0: off)"),
	SN_OPTION("streams", OPT_STREAMS, "N", "N generators: reordering per stream seq % N (default 1)"),
	SN_OPTION("flows", OPT_FLOWS, "F", "count window packets per flow seq % F (default 1: off)"),
	SN_OPTION("mix", OPT_MIX, "SIZES", "the generator's --mix: count window packets per size"),
	SN_OPTION("dst-ports", OPT_DST_PORTS, "N", "test frames go to UDP ports 7..7+N-1 (default 1)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-sink",
	.about = "Counts softnet test frames on an interface with XDP and drops them: loss,\n"
		 "duplicates, reordering and one-way delay, from sequence numbers and send times.",
	.footer = "Prints {\"ready\": ...} once attached, then one JSON line of counters for each\n"
		  "\"read\" line on stdin; \"quit\", end of input or SIGTERM detach and exit.\n"
		  "With --bin-pkts, \"timeline SENT\" prints one JSON line: the runs of sequence\n"
		  "numbers lost in [warmup, SENT) and the largest delay per bin.\n"
		  "Frames inside VXLAN (UDP port 4789) count too, and in rx_vxlan_pkts.",
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
	case 'b': o->bin_pkts = sn_parse_u64("bin-pkts", val, 0, 1ull << 33); break;
	case OPT_STREAMS: o->streams = sn_parse_u64("streams", val, 1, SINK_MAX_STREAMS); break;
	case OPT_FLOWS: o->flows = sn_parse_u64("flows", val, 1, SN_MAX_FLOWS); break;
	case OPT_DST_PORTS: o->dst_ports = sn_parse_u64("dst-ports", val, 1, SN_MAX_DST_PORTS); break;
	case OPT_MIX: sn_parse_mix("mix", val, &o->mix); o->has_mix = 1; break;
	}
}

/* How the kernel attached our program (id) to ifindex: "native" (the driver
 * runs it), "generic" (the kernel's fallback on the skb, for drivers without
 * XDP: much slower), "offload", or "unknown". */
static const char *xdp_mode(unsigned ifindex, __u32 id)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	if (bpf_xdp_query(ifindex, 0, &q))
		return "unknown";
	if (q.drv_prog_id == id)
		return "native";
	if (q.skb_prog_id == id)
		return "generic";
	if (q.hw_prog_id == id)
		return "offload";
	return "unknown";
}

/* Maps a BPF_F_MMAPABLE array of n u64 read-only; exits on failure. */
static const volatile __u64 *map_u64s(struct bpf_map *map, __u64 n, const char *what)
{
	void *m = mmap(NULL, n * sizeof(__u64), PROT_READ, MAP_SHARED, bpf_map__fd(map), 0);
	if (m == MAP_FAILED)
		sn_die("mmap the %s map: %s", what, strerror(errno));
	return m;
}

int main(int argc, char **argv)
{
	struct opts o = { .streams = 1, .flows = 1, .dst_ports = 1 };
	sn_parse_args(&tool, argc, argv, on_option, &o);
	__u64 nbins = o.bin_pkts ? (o.count + o.bin_pkts - 1) / o.bin_pkts : 0;
	if (nbins > SINK_TIMELINE_MAX_BINS)
		sn_usage_error("--bin-pkts: %llu make %llu bins of --count %llu, at most %u (--bin-pkts %llu or more)",
			       (unsigned long long)o.bin_pkts, (unsigned long long)nbins, (unsigned long long)o.count,
			       SINK_TIMELINE_MAX_BINS,
			       (unsigned long long)((o.count + SINK_TIMELINE_MAX_BINS - 1) / SINK_TIMELINE_MAX_BINS));

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
	skel->rodata->bin_pkts = o.bin_pkts;
	skel->rodata->streams = o.streams;
	skel->rodata->flows = o.flows;
	skel->rodata->dst_ports = o.dst_ports;
	bpf_map__set_max_entries(skel->maps.flow_pkts, o.flows);
	if (o.has_mix) {
		skel->rodata->mix_n = o.mix.len;
		memcpy((void *)skel->rodata->mix_class, o.mix.table, o.mix.len);
	}
	bpf_map__set_max_entries(skel->maps.bin_delay_max, nbins ? nbins : 1);
	if (sink_bpf__load(skel))
		sn_die("load BPF program: %s", strerror(errno));
	struct bpf_link *link = bpf_program__attach_xdp(skel->progs.sn_sink, ifindex);
	if (!link)
		sn_die("attach XDP to %s: %s", o.ifname, strerror(errno));
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_prog_info info = {};
	__u32 ilen = sizeof(info);
	bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.sn_sink), &info, &ilen);
	const char *mode = xdp_mode(ifindex, info.id);
	printf("{\"ready\": true, \"prog_id\": %u, \"ncpu\": %d, \"xdp_mode\": \"%s\", \"streams\": %llu}\n",
	       info.id, ncpu, mode, (unsigned long long)o.streams);
	fflush(stdout);

	__u64 nwords = (o.count + 63) / 64;
	struct reader r = { .skel = skel, .ncpu = ncpu, .count = o.count, .warmup = o.warmup,
			    .bin_pkts = o.bin_pkts, .xdp_mode = mode, .flows = o.flows,
			    .mix = o.has_mix ? &o.mix : NULL };
	if (o.exact)
		r.exact = map_u64s(skel->maps.exact, o.exact, "exact-delay");
	r.seen = map_u64s(skel->maps.seen, nwords, "seen-bitmap");
	if (nbins)
		r.bin_delay_max = map_u64s(skel->maps.bin_delay_max, nbins, "timeline");
	sn_serve_lines(on_line, &r);
	if (r.exact)
		munmap((void *)r.exact, o.exact * sizeof(__u64));
	munmap((void *)r.seen, nwords * sizeof(__u64));
	if (r.bin_delay_max)
		munmap((void *)r.bin_delay_max, nbins * sizeof(__u64));
	bpf_link__destroy(link);
	sink_bpf__destroy(skel);
	return 0;
}
