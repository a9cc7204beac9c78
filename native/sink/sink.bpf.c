// SPDX-License-Identifier: GPL-2.0
/* Counts softnet test frames on the sink interface and drops them. Loss,
 * duplicates and reordering come from sequence numbers: a bitmap with one bit
 * per expected sequence number finds duplicates exactly; a packet whose seq is
 * below the highest seen so far (in its stream: seq % streams, one per
 * generator with --streams) is reordered. Counters are per-CPU; the
 * highest-seq tracker is a plain global because one NAPI instance (one veth
 * queue) never runs on two CPUs at once. So is the timeline (--bin-pkts): the
 * largest delay per bin of bin_pkts sequence numbers, one lookup and one
 * compare per packet; user space maps it and the bitmap to find when packets
 * were lost (sink.c, "timeline").
 *
 * Test frames are UDP to ports SN_UDP_DPORT.. (--dst-ports), plain or inside
 * VXLAN (outer UDP to 4789, 8 B VXLAN header, inner Ethernet frame): a VXLAN
 * SUT encapsulates towards the sink. Window first copies are also counted per
 * flow (seq % flows, --flows) and per frame size (--mix: the size seq was sent
 * with, from the generator's table, whatever encapsulation added). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../common/sn_proto.h"
#include "sink.h"

const volatile __u64 warmup = 0;  /* seqs below this are warm-up */
const volatile __u64 nseq = 64;   /* expected seqs: bitmap size in bits */
const volatile __u32 exact_n = 0; /* --exact: delays kept one by one (0: none) */
const volatile __u64 bin_pkts = 0; /* --bin-pkts: seqs per timeline bin (0: no timeline) */
const volatile __u32 streams = 1;  /* --streams: generators whose seqs interleave (seq % streams) */
const volatile __u32 flows = 1;    /* --flows: per-flow counts (seq % flows) when > 1 */
const volatile __u32 dst_ports = 1; /* test frames go to SN_UDP_DPORT .. + dst_ports - 1 */
const volatile __u32 mix_n = 0;    /* --mix table length (0: no per-size counts) */
const volatile __u8 mix_class[SN_MIX_MAX_TABLE] = {}; /* seq % mix_n -> size class */

/* Window first copies per flow and per size class. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* resized by sink.c to --flows */
	__type(key, __u32);
	__type(value, __u64);
} flow_pkts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SN_MIX_MAX_SIZES);
	__type(key, __u32);
	__type(value, __u64);
} size_pkts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} lat_hist SEC(".maps");

/* Every delay, for checking the histogram against the truth (--exact). Shared
 * by all CPUs through one slot counter; user space maps it to read it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by sink.c to --exact before load */
	__type(key, __u32);
	__type(value, __u64);
} exact SEC(".maps");

__u64 exact_next = 0; /* slots taken in `exact` (may exceed exact_n) */

/* One bit per expected seq; user space maps it to list the lost ones. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by sink.c to nseq/64 before load */
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

/* The timeline: per bin of bin_pkts seqs (bin = seq / bin_pkts), the largest
 * one-way delay of a window packet (0: none arrived). Mapped by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by sink.c to ceil(nseq / bin_pkts) before load */
	__type(key, __u32);
	__type(value, __u64);
} bin_delay_max SEC(".maps");

/* Per stream: the highest seq seen + 1 (only [0] without --streams). */
__u64 max_seq_plus1[SINK_MAX_STREAMS] = {};

static __always_inline void inc(__u32 idx, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += by;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* The log-linear bucket of a delay (sink.h); the caller keeps d < 2^RANGE_LOG2. */
static __always_inline __u32 hist_index(__u64 d)
{
	__u32 e = log2_u64(d | 1);
	__u32 shift = e > SINK_HIST_SUB_BITS ? e - SINK_HIST_SUB_BITS : 0;
	return (shift << SINK_HIST_SUB_BITS) + (__u32)(d >> shift);
}

static __always_inline void record_latency(__u64 seq, __u64 sent_ns)
{
	__u64 now = bpf_ktime_get_ns();
	if (sent_ns > now) {
		inc(SINK_LAT_NEGATIVE, 1);
		return;
	}
	__u64 d = now - sent_ns;
	inc(SINK_LAT_PKTS, 1);
	if (d >> SINK_HIST_RANGE_LOG2) {
		inc(SINK_LAT_OVER_RANGE, 1);
	} else {
		__u32 b = hist_index(d);
		__u64 *h = bpf_map_lookup_elem(&lat_hist, &b);
		if (h)
			*h += 1;
	}
	if (exact_n) {
		__u64 slot = __sync_fetch_and_add(&exact_next, 1);
		if (slot < exact_n) {
			__u32 k = slot;
			__u64 *x = bpf_map_lookup_elem(&exact, &k);
			if (x)
				*x = d;
		}
	}
	inc(SINK_LAT_SUM_NS, d);
	if (bin_pkts) {
		__u32 b = seq / bin_pkts; /* < 2^21: sink.c checks */
		__u64 *bm = bpf_map_lookup_elem(&bin_delay_max, &b);
		if (bm && d > *bm)
			*bm = d;
	}
	__u32 k = SINK_LAT_MAX_NS;
	__u64 *mx = bpf_map_lookup_elem(&counters, &k);
	if (mx && d > *mx)
		*mx = d;
	k = SINK_LAT_MIN_NS;
	__u64 *mn = bpf_map_lookup_elem(&counters, &k);
	if (mn && (*mn == 0 || d < *mn))
		*mn = d;
}

/* The UDP header of an Ethernet/IPv4 or IPv6/UDP frame, or 0. */
static __always_inline struct udphdr *udp_of(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct udphdr *udp;

	if ((void *)(eth + 1) > end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip6 + 1);
	} else {
		return 0;
	}
	if ((void *)(udp + 1) > end)
		return 0;
	return udp;
}

static __always_inline struct sn_payload *test_payload(void *data, void *end, int *vxlan)
{
	struct udphdr *udp = udp_of(data, end);

	if (!udp)
		return 0;
	if (udp->dest == bpf_htons(SN_VXLAN_PORT)) {
		__u8 *vx = (void *)(udp + 1);
		if ((void *)(vx + 8) > end || !(vx[0] & 0x08)) /* the I flag: a valid VNI */
			return 0;
		udp = udp_of(vx + 8, end);
		if (!udp)
			return 0;
		*vxlan = 1;
	}
	if ((__u16)(bpf_ntohs(udp->dest) - SN_UDP_DPORT) >= dst_ports)
		return 0;
	struct sn_payload *p = (void *)(udp + 1);
	if ((void *)(p + 1) > end)
		return 0;
	return p;
}

SEC("xdp")
int sn_sink(struct xdp_md *ctx)
{
	int vxlan = 0;
	struct sn_payload *p = test_payload((void *)(long)ctx->data, (void *)(long)ctx->data_end, &vxlan);
	if (!p) {
		inc(SINK_OTHER, 1);
		return XDP_PASS;
	}
	__u64 seq = bpf_be64_to_cpu(p->seq);
	inc(SINK_RX_TEST, 1);
	if (vxlan)
		inc(SINK_RX_VXLAN, 1);
	if (seq >= nseq) {
		inc(SINK_OUT_OF_RANGE, 1);
		return XDP_DROP;
	}
	__u32 word = seq >> 6;
	__u64 bit = 1ull << (seq & 63);
	__u64 *w = bpf_map_lookup_elem(&seen, &word);
	if (!w)
		return XDP_DROP;
	if (__sync_fetch_and_or(w, bit) & bit) {
		if (seq >= warmup)
			inc(SINK_DUP, 1);
		return XDP_DROP;
	}
	/* < streams <= SINK_MAX_STREAMS (a power of two; sink.c bounds --streams):
	 * the mask changes nothing but lets the verifier see the bound */
	__u32 stream = (streams > 1 ? (__u32)(seq % streams) : 0) & (SINK_MAX_STREAMS - 1);
	int reordered = seq + 1 < max_seq_plus1[stream];
	if (!reordered)
		max_seq_plus1[stream] = seq + 1;
	if (seq < warmup) {
		inc(SINK_RX_WARMUP, 1);
		return XDP_DROP;
	}
	inc(SINK_RX_WINDOW, 1);
	if (flows > 1) {
		__u32 f = seq % flows;
		__u64 *n = bpf_map_lookup_elem(&flow_pkts, &f);
		if (n)
			*n += 1;
	}
	if (mix_n) {
		__u32 c = mix_class[(seq % mix_n) & (SN_MIX_MAX_TABLE - 1)];
		__u64 *n = bpf_map_lookup_elem(&size_pkts, &c);
		if (n)
			*n += 1;
	}
	if (reordered)
		inc(SINK_REORDER, 1);
	record_latency(seq, bpf_be64_to_cpu(p->ts));
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
